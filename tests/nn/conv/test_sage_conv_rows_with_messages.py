"""SAGEConv's product over only the rows that have in-edges (``sage_conv.rows_with_messages``):
a PyG NeighborLoader-style batch (the last hop's nodes numbered last, without in-edges) gives the
dense formula's values and gradients in float64; inf weights, non-finite gradients, hooks that
make those rows non-zero and an edge_index changed in place between calls all fall back or
re-check, and still give the reference."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from unigraph import Graph
from unigraph.nn import pooled_linear, sage_conv

REAL = sage_conv.rows_with_messages
N, IN, OUT, WITH_EDGES = 40, 3, 5, 12   # IN < OUT: aggregate first, then project


@pytest.fixture(autouse=True)
def small_products_skip_rows_too(monkeypatch):
    """These graphs are small: the skip is taken at any size here (production: MIN_SKIP_WORK)."""
    monkeypatch.setattr(sage_conv, "MIN_SKIP_WORK", 0)


def batch_edges(seed: int = 0) -> torch.Tensor:
    """Edges into nodes 0..WITH_EDGES-1 only, from anywhere (as a 2-hop NeighborLoader batch)."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, N, (90,), generator=gen)
    dst = torch.randint(0, WITH_EDGES, (90,), generator=gen)
    dst[0] = WITH_EDGES - 1
    return torch.stack([src, dst])


def reference(conv: U.SAGEConv, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    adjacency = torch.zeros(N, N, dtype=x.dtype)
    adjacency.index_put_((edge_index[1], edge_index[0]), torch.ones(edge_index.shape[1], dtype=x.dtype),
                         accumulate=True)
    mean = adjacency / adjacency.sum(1, keepdim=True).clamp(min=1)
    return x @ conv.lin_r.weight.t() + conv.lin_l.bias + (mean @ x) @ conv.lin_l.weight.t()


def grads(conv, x, out, upstream):
    return torch.autograd.grad(out, [x, conv.lin_l.weight, conv.lin_r.weight, conv.lin_l.bias], upstream,
                               retain_graph=True)


def check(conv, x, edge_index, upstream, taken: bool, monkeypatch, dense: bool = True):
    """The fast path (when ``taken``) against the plain path (``rows_with_messages`` answering None)
    and, with ``dense``, against the dense formula: values and the gradients of x, W_l, W_r, b."""
    calls = []
    monkeypatch.setattr(sage_conv, "rows_with_messages", lambda *a: calls.append(REAL(*a)) or calls[-1])
    out = conv(x, edge_index)
    assert (calls[-1] is not None) == taken
    monkeypatch.setattr(sage_conv, "rows_with_messages", lambda *a: None)
    plain = conv(x, edge_index)
    expected = [plain] + ([reference(conv, x, edge_index)] if dense else [])
    for other in expected:
        torch.testing.assert_close(out, other, rtol=1e-12, atol=1e-12, equal_nan=True)
        for mine, theirs in zip(grads(conv, x, out, upstream), grads(conv, x, other, upstream)):
            torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12, equal_nan=True)
    return out


def make(seed=0):
    torch.manual_seed(seed)
    conv = U.SAGEConv(IN, OUT).double()
    torch.nn.init.normal_(conv.lin_l.bias)
    return conv, torch.randn(N, IN, dtype=torch.float64, requires_grad=True)


def test_rows_without_in_edges_skipped_exactly(monkeypatch):
    conv, x = make()
    upstream = torch.randn(N, OUT, dtype=torch.float64)
    check(conv, x, batch_edges(), upstream, True, monkeypatch)
    # only the seeds' rows carry a loss, as in the benchmark's out[:batch_size]
    check(conv, x, batch_edges(), upstream * (torch.arange(N) < 4).unsqueeze(1), True, monkeypatch)
    # every row has an in-edge: the plain path
    check(conv, x, torch.cat([batch_edges(), torch.stack([torch.arange(N), torch.arange(N)])], 1), upstream,
          False, monkeypatch)


def test_non_finite_weights_and_gradients_propagate_as_in_the_full_product(monkeypatch):
    conv, x = make(1)
    upstream = torch.randn(N, OUT, dtype=torch.float64)
    upstream[N - 1, 2] = float("nan")           # a row without in-edges: W_l's gradient is NaN in the full product
    check(conv, x, batch_edges(1), upstream, True, monkeypatch, dense=False)   # (the dense A^T spreads NaN to x)
    w_grad = grads(conv, x, conv(x, batch_edges(1)), upstream)[1]
    assert w_grad.isnan().any()
    with torch.no_grad():
        conv.lin_l.weight[1, 0] = float("inf")  # 0 * inf: NaN in the full product
    out = check(conv, x, batch_edges(1), torch.randn(N, OUT, dtype=torch.float64), False, monkeypatch, dense=False)
    assert out[WITH_EDGES:, 1].isnan().all()       # rows without in-edges: 0 * inf


@pytest.mark.parametrize("case", ["+inf and -inf", "finite, summing past the largest float"])
def test_gradients_the_one_pass_check_cannot_vouch_for_take_the_full_product(monkeypatch, case):
    """The backward's check of the skipped rows' gradient is one sum (``unigraph.finite``): +inf and
    -inf there sum to NaN (not finite: the full product, NaN as there), and finite values whose sum
    overflows read as not finite too (the full product again: equal, only slower)."""
    conv, x = make(6)
    upstream = torch.randn(N, OUT, dtype=torch.float64)
    if case == "+inf and -inf":
        upstream[N - 1, 0], upstream[N - 2, 0] = float("inf"), float("-inf")
    else:
        upstream[WITH_EDGES:] = torch.finfo(torch.float64).max / 2
    seen = []
    real = pooled_linear.all_finite   # (the backward's product over rows reads it there)
    monkeypatch.setattr(pooled_linear, "all_finite", lambda *t: seen.append(real(*t)) or seen[-1])
    check(conv, x, batch_edges(6), upstream, True, monkeypatch, dense=False)
    assert seen and not seen[-1]                # the backward's check: the full product ran
    w_grad = grads(conv, x, conv(x, batch_edges(6)), upstream)[1]
    assert w_grad.isnan().any() == (case == "+inf and -inf")


def test_an_update_hook_that_fills_the_rows_is_seen(monkeypatch):
    class Shifted(U.SAGEConv):
        def update(self, aggr_out):
            return aggr_out + 1.0

    torch.manual_seed(2)
    conv = Shifted(IN, OUT).double()
    x = torch.randn(N, IN, dtype=torch.float64, requires_grad=True)
    out = conv(x, batch_edges(2))
    expected = reference(conv, x, batch_edges(2)) + conv.lin_l.weight.sum(1)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


def test_an_update_hook_with_a_zero_initialised_parameter_keeps_its_gradient(monkeypatch):
    # rows without in-edges are 0 + 0 = 0 (the check on values passes) yet depend on the parameter:
    # the skipped rows' product would drop their share of its gradient; hooks keep the full product
    class WithExtraBias(U.SAGEConv):
        def __init__(self, *args):
            super().__init__(*args)
            self.extra = torch.nn.Parameter(torch.zeros(IN, dtype=torch.float64))

        def update(self, aggr_out):
            return aggr_out + self.extra

    torch.manual_seed(5)
    conv = WithExtraBias(IN, OUT).double()
    x = torch.randn(N, IN, dtype=torch.float64, requires_grad=True)
    calls = []
    monkeypatch.setattr(sage_conv, "rows_with_messages", lambda *a: calls.append(a) or REAL(*a))
    out = conv(x, batch_edges(5))
    (grad,) = torch.autograd.grad(out.sum(), conv.extra)
    torch.testing.assert_close(grad, conv.lin_l.weight.sum(0) * N, rtol=1e-12, atol=1e-12)
    assert not calls                                # not even asked: the hooks are not the defaults


def test_edge_index_changed_in_place_between_calls(monkeypatch):
    conv, x = make(3)
    edge_index = batch_edges(3)
    upstream = torch.randn(N, OUT, dtype=torch.float64)
    check(conv, x, edge_index, upstream, True, monkeypatch)
    edge_index[1, 5] = N - 1                    # now the last node has an in-edge: R = N
    check(conv, x, edge_index, upstream, False, monkeypatch)
    edge_index[1, 5] = 20                       # R = 21 again, through the same tensor
    check(conv, x, edge_index, upstream, True, monkeypatch)


def test_gradcheck_and_double_backward():
    conv, x = make(4)
    g = batch_edges(4)
    assert sage_conv.rows_with_messages(Graph(g, N), torch.zeros(N, IN), conv.lin_l.weight) == WITH_EDGES

    def f(root, aggregated, weight):   # the Function alone, on an aggregation zero from WITH_EDGES on
        zeros = aggregated.new_zeros(N - WITH_EDGES, IN)
        return sage_conv._AddProjectedRows.apply(root * 1, torch.cat([aggregated, zeros]), weight, WITH_EDGES)
    inputs = (torch.randn(N, OUT, dtype=torch.float64, requires_grad=True),
              torch.randn(WITH_EDGES, IN, dtype=torch.float64, requires_grad=True),
              torch.randn(OUT, IN, dtype=torch.float64, requires_grad=True))
    torch.autograd.gradcheck(f, inputs)
    torch.autograd.gradgradcheck(f, inputs)
    torch.autograd.gradgradcheck(lambda x: conv(x, g).square(), (x,))


@pytest.mark.parametrize("edges", [batch_edges(1), torch.tensor([[3], [0]]), torch.zeros(2, 0, dtype=torch.int64)])
def test_the_last_row_with_edges_is_the_same_with_and_without_a_csr(edges):
    """A graph of the small-graph rule has no in-CSR: ``R`` comes from the largest destination
    index then, without building one, and equals the in-CSR's answer."""
    plain = Graph(edges, num_nodes=N)
    without = sage_conv._last_row_with_edges(plain)
    assert not plain.has_memo("in_csr")
    with_csr = Graph(edges, num_nodes=N)
    with_csr.in_csr()
    assert without == sage_conv._last_row_with_edges(with_csr) == (int(edges[1].max()) + 1 if edges.numel() else 0)


def test_off_the_cpu_nothing_is_read():
    """Off the CPU the row skip is not taken and nothing is read from the graph (each read there
    makes the host wait for the device): an aggregation on the meta device stands for a GPU's."""
    conv, _ = make(5)
    g = Graph(batch_edges(5), N)
    assert sage_conv.rows_with_messages(g, torch.zeros(N, IN, device="meta"), conv.lin_l.weight) is None
    assert not g.has_memo(("unigraph.nn", "rows_with_in_edges"))
    assert sage_conv.rows_with_messages(g, torch.zeros(N, IN), conv.lin_l.weight) == WITH_EDGES


def test_a_product_too_small_to_gain_is_not_shortened(monkeypatch):
    """Below MIN_SKIP_WORK the checks would cost more than the rows save: the full product."""
    conv, x = make(7)
    monkeypatch.setattr(sage_conv, "MIN_SKIP_WORK", N * IN * OUT + 1)
    check(conv, x, batch_edges(7), torch.randn(N, OUT, dtype=torch.float64), False, monkeypatch)
    monkeypatch.setattr(sage_conv, "MIN_SKIP_WORK", N * IN * OUT)
    check(conv, x, batch_edges(7), torch.randn(N, OUT, dtype=torch.float64), True, monkeypatch)
