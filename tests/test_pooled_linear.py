"""Dense projections on pooled memory (``unigraph/nn/pooled_linear.py``) are ``F.linear``: the
same values bit for bit, the same gradients, double backward, in-place use of the output, the
fallbacks; and SAGEConv's one product with both weights equals the two-product form."""
from __future__ import annotations


import pytest
import torch
import torch.nn.functional as F

import unigraph
from unigraph.kernels.cpu import alloc
from unigraph.nn import pooled_linear


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("with_bias", [True, False])
def test_values_and_gradients_are_f_linear_bit_for_bit(poisoned_output_pool, dtype, with_bias):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(300, 17, generator=gen, dtype=dtype)
    x[4, 2] = float("nan")
    w = torch.randn(9, 17, generator=gen, dtype=dtype)
    b = torch.randn(9, generator=gen, dtype=dtype) if with_bias else None
    g = torch.randn(300, 9, generator=gen, dtype=dtype)
    results = []
    for fn in (pooled_linear.linear, F.linear):
        leaves = [t.clone().requires_grad_() for t in (x, w) + ((b,) if with_bias else ())]
        y = fn(*leaves) if with_bias else fn(*leaves, None)
        y.backward(g)
        results.append([y.detach()] + [t.grad for t in leaves])
    assert poisoned_output_pool.stats["new"] > 0       # the pooled path ran
    for a, e in zip(*results):
        torch.testing.assert_close(a, e, rtol=0, atol=0, equal_nan=True)


def test_gradcheck_and_double_backward(poisoned_output_pool):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(6, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(pooled_linear._PooledLinear.apply, (x, w, b))
    assert torch.autograd.gradgradcheck(pooled_linear._PooledLinear.apply, (x, w, b))


def test_forward_mode_ad_is_f_linears(poisoned_output_pool):
    import torch.autograd.forward_ad as fwAD
    gen = torch.Generator().manual_seed(3)
    x, w, b = (torch.randn(*s, generator=gen, dtype=torch.float64) for s in ((7, 4), (3, 4), (3,)))
    tangents = [torch.randn_like(t) for t in (x, w, b)]
    for which in ([0], [1], [0, 1, 2]):
        results = []
        for fn in (pooled_linear.linear, F.linear):
            with fwAD.dual_level():
                args = [fwAD.make_dual(t, tangents[i]) if i in which else t for i, t in enumerate((x, w, b))]
                results.append(fwAD.unpack_dual(fn(*args)).tangent)
        torch.testing.assert_close(results[0], results[1])


def test_the_output_can_be_changed_in_place(poisoned_output_pool):
    x = torch.randn(50, 8, requires_grad=True)
    w = torch.randn(6, 8, requires_grad=True)
    agg, wl = torch.randn(50, 5), torch.randn(6, 5, requires_grad=True)
    y = pooled_linear.linear(x, w).addmm_(agg, wl.t())     # SAGEConv's root term accumulates in place
    y.square().sum().backward()
    expected = (x.detach() @ w.detach().t() + agg @ wl.detach().t())
    torch.testing.assert_close(x.grad, 2 * expected @ w.detach())
    torch.testing.assert_close(wl.grad, (2 * expected).t() @ agg)


def test_fallbacks_take_f_linear(monkeypatch):
    monkeypatch.setattr(alloc, "MIN_BYTES", 0)
    x, w = torch.randn(10, 4), torch.randn(3, 4)
    assert pooled_linear._worth_pooling(x, w, None)
    assert not pooled_linear._worth_pooling(x[None], w, None)                      # not 2-D
    assert not pooled_linear._worth_pooling(x.half(), w.half(), None)              # half precision
    assert not pooled_linear._worth_pooling(x, w.double(), None)                   # mixed dtypes
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not pooled_linear._worth_pooling(x, w, None)
    monkeypatch.setattr(alloc, "_POOL", alloc._Pool(0))
    assert not pooled_linear._worth_pooling(x, w, None)                            # pool off
    with pytest.raises(RuntimeError):                                              # F.linear's own error
        pooled_linear.linear(x, torch.randn(3, 5))


def test_small_outputs_are_not_pooled():
    x, w = torch.randn(10, 4), torch.randn(3, 4)
    assert not pooled_linear._worth_pooling(x, w, None)


def test_vmap_takes_f_linear(monkeypatch):
    monkeypatch.setattr(alloc, "MIN_BYTES", 0)
    x, w = torch.randn(5, 10, 4), torch.randn(3, 4)
    got = torch.vmap(lambda xi: pooled_linear.linear(xi, w))(x)
    torch.testing.assert_close(got, x @ w.t())


# --------------------------------------------------------------------------- gradients zero past a prefix
N_ROWS = 2 * pooled_linear.MIN_LIVE_ROWS_CHECK


def _grads(fn, x, w, b, upstream, create_graph=False):
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    y = fn(*leaves)
    return [y.detach()] + list(torch.autograd.grad(y, leaves, upstream, create_graph=create_graph))


def _prefix_case(dtype, live, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x, w, b = (torch.randn(*s, generator=gen, dtype=dtype) for s in ((N_ROWS, 13), (7, 13), (7,)))
    upstream = torch.randn(N_ROWS, 7, generator=gen, dtype=dtype)
    upstream[live:] = 0          # a NeighborLoader batch's loss on out[:batch_size], through the layers above
    return x, w, b, upstream


def _spy(monkeypatch):
    seen = []
    real = pooled_linear.live_rows
    monkeypatch.setattr(pooled_linear, "live_rows", lambda g: seen.append(real(g)) or seen[-1])
    return seen


def _same(mine, theirs, dtype):
    tol = 1e-6 if dtype == torch.float32 else 1e-13   # measured bit for bit; BLAS does not promise it
    for a, e in zip(mine, theirs):
        torch.testing.assert_close(a, e, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("live", [0, 1, 999, N_ROWS // 2])
def test_a_gradient_zero_past_a_prefix_gives_f_linears_gradients_over_that_prefix(poisoned_output_pool, monkeypatch,
                                                                                  dtype, live):
    x, w, b, upstream = _prefix_case(dtype, live)
    seen = _spy(monkeypatch)
    mine = _grads(pooled_linear.linear, x, w, b, upstream)
    assert seen == [live]                          # the products ran over `live` rows (poisoned pool: the rest written)
    _same(mine, _grads(F.linear, x, w, b, upstream), dtype)
    assert not mine[1][live:].any()                # x's rows past the prefix: zeros


@pytest.mark.parametrize("where", ["x past the prefix", "the weight"])
@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_non_finite_inputs_past_the_prefix_take_the_full_product_and_its_nan(poisoned_output_pool, where, value):
    x, w, b, upstream = _prefix_case(torch.float64, 300, seed=1)
    if where == "the weight":
        w[2, 3] = value                            # 0 * inf in g W: x's gradient rows past the prefix are NaN there
    else:
        x[N_ROWS - 1, 4] = value                   # 0 * inf in g^T x: W's gradient column 4 is NaN there
    mine, theirs = _grads(pooled_linear.linear, x, w, b, upstream), _grads(F.linear, x, w, b, upstream)
    _same(mine, theirs, torch.float64)
    assert (mine[1] if where == "the weight" else mine[2]).isnan().any()


@pytest.mark.parametrize("case", ["last row live", "last 64th live", "second half live", "NaN past the prefix",
                                  "too few rows"])
def test_gradients_the_prefix_cannot_cover_take_the_full_product(poisoned_output_pool, monkeypatch, case):
    x, w, b, upstream = _prefix_case(torch.float64, 300, seed=2)
    if case == "last row live":
        upstream[-1, 0] = 1e-300
    elif case == "last 64th live":
        upstream[N_ROWS - 5, 3] = 2.0
    elif case == "second half live":
        upstream[N_ROWS // 2 + 1, 6] = -1.0
    elif case == "NaN past the prefix":
        upstream[N_ROWS - 3, 1] = float("nan")     # NaN is not zero: the row is live
    else:
        x, upstream = x[:pooled_linear.MIN_LIVE_ROWS_CHECK - 1], upstream[:pooled_linear.MIN_LIVE_ROWS_CHECK - 1]
    seen = _spy(monkeypatch)
    mine = _grads(pooled_linear.linear, x, w, b, upstream)
    assert seen == [None]
    _same(mine, _grads(F.linear, x, w, b, upstream), torch.float64)


def test_create_graph_keeps_differentiable_products_over_every_row(poisoned_output_pool, monkeypatch):
    x, w, b, upstream = _prefix_case(torch.float64, 200, seed=3)
    seen = _spy(monkeypatch)
    mine = _grads(pooled_linear.linear, x, w, b, upstream, create_graph=True)
    assert seen == [] and mine[1].requires_grad and mine[2].requires_grad   # (b's gradient is a constant here)
    _same(mine, _grads(F.linear, x, w, b, upstream, create_graph=True), torch.float64)


# --------------------------------------------------------------------------- SAGEConv's fused product
@pytest.mark.parametrize("aggr", ["mean", "sum"])
@pytest.mark.parametrize("bias", [True, False])
def test_sage_one_product_equals_two(aggr, bias):
    """in > out with the same tensor as source and destination: one product with [W_1; W_2]; with
    a different (equal-valued) destination tensor: the two-product form. Same values, same grads."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(2)
    g = unigraph.Graph(torch.randint(0, 40, (2, 200), generator=gen), num_nodes=45)   # some isolated
    conv = unigraph.nn.SAGEConv(16, 5, aggr=aggr, bias=bias)
    x = torch.randn(45, 16, generator=gen)
    runs = []
    for same in (True, False):
        conv.zero_grad()
        xs = x.clone().requires_grad_()
        xd = xs if same else xs * 1.0      # a different tensor object: the two-product branch
        out = conv._one_aggregation(g, xs, xd)
        out.backward(torch.ones_like(out) * torch.arange(5.0))
        runs.append((out.detach(), xs.grad, [p.grad.clone() for p in conv.parameters() if p.grad is not None]))
    torch.testing.assert_close(runs[0][0], runs[1][0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(runs[0][1], runs[1][1], rtol=1e-5, atol=1e-5)
    for a, b in zip(runs[0][2], runs[1][2]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    # and the dense formula
    deg = torch.zeros(45).index_add_(0, g.edge_index[1], torch.ones(200))
    agg = torch.zeros(45, 16).index_add_(0, g.edge_index[1], x[g.edge_index[0]])
    if aggr == "mean":
        agg = agg / deg.clamp(min=1)[:, None]
    expected = agg @ conv.lin_l.weight.t() + x @ conv.lin_r.weight.t()
    if bias:
        expected = expected + conv.lin_l.bias
    torch.testing.assert_close(runs[0][0], expected.detach(), rtol=1e-5, atol=1e-5)
