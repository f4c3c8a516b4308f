"""unigraph/group_reduce.py: rows reduced into groups. Values equal torch's scatter_reduce; the
max/min gradient is each group's gradient split evenly among its rows equal to the extreme (the
rule of torch.amax on a dense tensor, the reference here, one group at a time), including where
the extreme is 0, which torch's scatter_reduce backward gets wrong; NaN rows share a NaN extreme's
gradient; double backward, half precision, vmap and the layers that use it."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from unigraph.group_reduce import group_reduce

TORCH = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}


def torch_values(x, index, groups, reduce):
    expanded = index.view((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
    return x.new_zeros((groups,) + x.shape[1:]).scatter_reduce(0, expanded, x.detach(), TORCH[reduce],
                                                               include_self=False)


def dense_reference(x, index, groups, reduce, grad):
    """Each group's own torch.amax / amin / sum / mean of a dense tensor, and its gradient."""
    leaf = x.detach().clone().requires_grad_()
    rows = [leaf[index == g] for g in range(groups)]
    reduce_dense = {"max": torch.amax, "min": torch.amin, "sum": torch.sum, "mean": torch.mean}[reduce]
    outs = [reduce_dense(r, dim=0) if r.shape[0] else leaf.new_zeros(leaf.shape[1:]) for r in rows]
    out = torch.stack(outs)
    if not out.requires_grad:   # no rows at all
        return out, torch.zeros_like(leaf)
    (grad_x,) = torch.autograd.grad(out, leaf, grad, allow_unused=True)
    return out, grad_x if grad_x is not None else torch.zeros_like(leaf)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_values_equal_torchs_and_gradients_the_dense_rule(reduce, dtype):
    gen = torch.Generator().manual_seed(1)
    index = torch.randint(0, 9, (40,), generator=gen)   # some groups empty
    x = torch.randn(40, 5, generator=gen, dtype=dtype).requires_grad_()
    out = group_reduce(x, index, 11, reduce)
    assert torch.equal(out, torch_values(x, index, 11, reduce))
    grad = torch.randn(out.shape, generator=gen, dtype=dtype)
    expected_out, expected = dense_reference(x, index, 11, reduce, grad)
    torch.testing.assert_close(out, expected_out)
    torch.testing.assert_close(torch.autograd.grad(out, x, grad)[0], expected)


@pytest.mark.parametrize("reduce", ["max", "min"])
def test_an_extreme_of_zero_gives_its_rows_the_whole_gradient(reduce):
    """torch 2.13's scatter_reduce backward counts the zeroed output among the ties: a lone row
    equal to 0 got half its gradient, k tied zeros 1/(k+1) each."""
    x = torch.tensor([[0.0], [3.0 if reduce == "max" else -3.0], [-1.0 if reduce == "max" else 1.0], [0.0], [0.0]],
                     requires_grad=True)
    index = torch.tensor([0, 1, 0, 2, 2])
    out = group_reduce(x, index, 4, reduce)
    assert out.flatten().tolist() == [0.0, x[1].item(), 0.0, 0.0]
    assert torch.autograd.grad(out.sum(), x)[0].flatten().tolist() == [1.0, 1.0, 0.0, 0.5, 0.5]
    plain = torch_values(x, index, 4, reduce)
    assert torch.equal(plain, out.detach())


def test_a_nan_extreme_is_shared_by_its_nan_rows():
    nan = float("nan")
    x = torch.tensor([[nan, 1.0], [3.0, 1.0], [nan, 2.0], [1.0, 0.0]], requires_grad=True)
    out = group_reduce(x, torch.tensor([0, 0, 0, 1]), 2, "max")
    assert torch.isnan(out[0, 0]) and out[0, 1] == 2.0 and out[1].tolist() == [1.0, 0.0]
    grad = torch.autograd.grad(out.sum(), x)[0]
    assert grad.tolist() == [[0.5, 0.0], [0.0, 0.0], [0.5, 1.0], [1.0, 1.0]]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_ties_anywhere_match_the_dense_rule(data):
    """Values drawn from a few numbers (0 and its neighbours, infinities): ties are the rule."""
    rows = data.draw(st.integers(0, 30))
    groups = data.draw(st.integers(1, 8))
    pool = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, float("inf"), float("-inf")])
    x = torch.tensor(data.draw(st.lists(st.lists(pool, min_size=3, max_size=3), min_size=rows, max_size=rows)),
                     dtype=torch.float64).view(rows, 3).requires_grad_()
    index = torch.tensor(data.draw(st.lists(st.integers(0, groups - 1), min_size=rows, max_size=rows)),
                         dtype=torch.int64)
    reduce = data.draw(st.sampled_from(["max", "min"]))
    out = group_reduce(x, index, groups, reduce)
    grad = torch.rand(out.shape, dtype=torch.float64) + 0.5
    expected_out, expected = dense_reference(x, index, groups, reduce, grad)
    assert torch.equal(out, expected_out)
    assert torch.equal(torch.autograd.grad(out, x, grad)[0], expected)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_twice_differentiable(reduce):
    index = torch.tensor([0, 0, 1, 1, 1, 3])
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda t: group_reduce(t, index, 4, reduce), (x,))
    torch.autograd.gradgradcheck(lambda t: group_reduce(t, index, 4, reduce), (x,))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduce", ["mean", "max"])
def test_half_precision_keeps_its_dtype_and_counts_exactly(dtype, reduce):
    """3,000 tied rows in one group: a float16 count stops at 2,048 (the gradient is counted in
    float32, then rounded once)."""
    x = torch.zeros(3000, 2, dtype=dtype, requires_grad=True)
    out = group_reduce(x, torch.zeros(3000, dtype=torch.int64), 1, reduce)
    assert out.dtype == dtype
    grad = torch.autograd.grad(out.sum(), x)[0]
    assert grad.dtype == dtype
    assert torch.equal(grad, torch.full_like(grad, 1 / 3000))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("shape", [(), (3,)])
def test_half_precision_sums_in_float32_and_rounds_once(dtype, reduce, shape):
    """A group of 3,000 rows (a hub), 1-D rows too: torch's ``index_add`` of a 1-D float16 tensor
    accumulates in float16 and its sum of ones stops at 2,048 (bfloat16's at 256); here sums and
    means run in float32 and are rounded once, the float64 result rounded to the dtype."""
    gen = torch.Generator().manual_seed(4)
    index = torch.cat([torch.zeros(3000, dtype=torch.int64), torch.arange(1, 5)])
    x = (torch.rand((3004,) + shape, generator=gen, dtype=torch.float64) + 0.5).to(dtype).requires_grad_()
    out = group_reduce(x, index, 5, reduce)
    expected = group_reduce(x.detach().double(), index, 5, reduce).to(dtype)
    assert out.dtype == dtype and torch.equal(out, expected)
    upstream = torch.rand(out.shape, generator=gen, dtype=torch.float64).to(dtype)
    (grad,) = torch.autograd.grad(out, x, upstream)
    (want,) = torch.autograd.grad(group_reduce(x.double(), index, 5, reduce), x, upstream.double())
    assert grad.dtype == dtype
    torch.testing.assert_close(grad, want.to(dtype), rtol=0, atol=0)


def test_under_vmap_and_without_grad():
    index = torch.tensor([0, 2, 2, 1])
    batch = torch.randn(3, 4, 2)
    mapped = torch.func.vmap(lambda t: group_reduce(t, index, 3, "max"))(batch)
    assert torch.equal(mapped, torch.stack([group_reduce(t, index, 3, "max") for t in batch]))
    with torch.no_grad():
        assert group_reduce(batch[0].requires_grad_(), index, 3, "max").grad_fn is None


def test_complex_sums_and_means():
    x = torch.randn(5, 2, dtype=torch.complex64, requires_grad=True)
    index = torch.tensor([0, 0, 1, 1, 1])
    mean = group_reduce(x, index, 3, "mean")
    assert mean.dtype == torch.complex64
    torch.testing.assert_close(mean, torch.stack([x[:2].mean(0), x[2:].mean(0), torch.zeros(2, dtype=x.dtype)]))
    torch.testing.assert_close(group_reduce(x, index, 3, "sum")[1], x[2:].sum(0))


def test_integers_keep_torchs_arithmetic_and_a_bad_name_is_refused():
    x = torch.tensor([[3], [4], [7]])
    assert group_reduce(x, torch.tensor([0, 0, 1]), 2, "mean").tolist() == [[3], [7]]
    with pytest.raises(ValueError, match="reduce must be one of"):
        group_reduce(x.float(), torch.tensor([0, 0, 1]), 2, "prod")


def test_the_users_get_the_whole_gradient_at_zero():
    """The aggregation modules, GAT's self-loop edge features (fill_value='max') and
    to_undirected's merged edge data: a maximum of exactly 0 passes its whole gradient."""
    import unigraph
    from unigraph.nn import GATConv, MaxAggregation
    x = torch.tensor([[0.0], [-2.0], [5.0]], requires_grad=True)
    out = MaxAggregation()(x, torch.tensor([0, 0, 1]), dim_size=2)
    assert torch.autograd.grad(out.sum(), x)[0].flatten().tolist() == [1.0, 0.0, 1.0]

    torch.manual_seed(0)
    edge_index = torch.tensor([[1, 2], [0, 0]])          # node 0's incoming edges, features 0 and -1
    features = torch.randn(3, 2)
    conv = GATConv(2, 2, edge_dim=1, fill_value="max")
    twin = GATConv(2, 2, edge_dim=1, add_self_loops=False)   # the loops written out, their features by torch.amax
    twin.load_state_dict(conv.state_dict())
    edge_attr = torch.tensor([[0.0], [-1.0]], requires_grad=True)
    conv(features, edge_index, edge_attr).sum().backward()
    twin_attr = edge_attr.detach().clone().requires_grad_()
    loops = torch.stack([torch.amax(twin_attr, dim=0), twin_attr.new_zeros(1), twin_attr.new_zeros(1)])
    twin(features, torch.cat([edge_index, torch.arange(3).repeat(2, 1)], 1), torch.cat([twin_attr, loops])).sum().backward()
    torch.testing.assert_close(edge_attr.grad, twin_attr.grad)

    g = unigraph.Graph(torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    weight = torch.tensor([0.0, -1.0], requires_grad=True)
    g.edata["w"] = weight
    merged = g.to_undirected(reduce="max").edata["w"]
    assert merged.tolist() == [0.0, 0.0]
    assert torch.autograd.grad(merged.sum(), weight)[0].tolist() == [2.0, 0.0]
