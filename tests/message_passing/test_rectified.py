"""``MessagePassing.propagate`` on GINEConv's message, ``(x_j + e).relu()`` (``rectified.py``): where
the small-graph rule takes the call, the message and its sum or mean run in one COO pass
(``native_lane.run_add_relu``); the result and gradients equal the message run as written and
the fused path; only the exact program is recognized, and every operand the pass cannot take,
a backend named, a graph above the bound, ``fuse=False`` or a transform leave it to the ordinary
paths (a functorch transform or autocast too: ``native_lane._transformed``, as for its other
calls)."""
from __future__ import annotations

from unittest import mock

import pytest
import torch

import unigraph
from unigraph.backends import small_graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.base import _RECTIFIED
from unigraph.message_passing.rectified import rectified_input
from unigraph.message_passing.tracing import CONST, E, U, V

pytest.importorskip("numba")
from unigraph.ops import small_graph_lane  # noqa: E402


class EdgeAddReLU(MessagePassing):
    def forward(self, g, x, e):
        return self.propagate(g, x=x, e=e)

    def message(self, x_j, e):
        return (x_j + e).relu()


def _trace(message, domains):
    from unigraph.message_passing.base import _trace_message
    return _trace_message(message, [(name, domain, torch.empty(0)) for name, domain in domains])


@pytest.mark.parametrize("message", [lambda x_j, e: (x_j + e).relu(), lambda x_j, e: (e + x_j).relu(),
                                     lambda x_j, e: x_j.add(e).relu()])
def test_the_form_is_recognized_in_either_order(message):
    assert rectified_input(_trace(message, [("x_j", U), ("e", E)])) == ("x_j", "e")


@pytest.mark.parametrize("message, domains", [
    (lambda x_j, e: (x_j + e).relu_(), [("x_j", U), ("e", E)]),            # in place
    (lambda x_j, e: x_j.add(e, alpha=2).relu(), [("x_j", U), ("e", E)]),    # not a plain sum
    (lambda x_j, e: (x_j * e).relu(), [("x_j", U), ("e", E)]),
    (lambda x_j, e: (x_j + e).tanh(), [("x_j", U), ("e", E)]),
    (lambda x_j, e: (x_j + e).relu() * 2, [("x_j", U), ("e", E)]),          # something after the relu
    (lambda x_j, e: (x_j + 1).relu(), [("x_j", U), ("e", E)]),
    (lambda x_j, x_i: (x_j + x_i).relu(), [("x_j", U), ("x_i", V)]),        # destination, not edge
    (lambda x_j, e: (x_j + e).relu(), [("x_j", U), ("e", CONST)]),
    (lambda x_j, e: (e + e).relu(), [("x_j", U), ("e", E)]),
])
def test_anything_else_is_not_the_form(message, domains):
    assert rectified_input(_trace(message, domains)) == ()


def inputs(edges=300, nodes=60, width=8, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, nodes, (2, edges), generator=gen)
    edge_index[1] %= nodes - 5                                   # 5 rows without in-edges
    g = unigraph.Graph(edge_index, num_nodes=nodes)
    x = torch.randn(nodes, width, generator=gen, dtype=dtype).round(decimals=1).requires_grad_()
    e = torch.randn(edges, width, generator=gen, dtype=dtype).round(decimals=1).requires_grad_()
    return g, x, e


@pytest.fixture
def passes():
    """The one-pass kernel's calls inside the test."""
    calls = []

    def counted(src, dst, u, e, num_dst, inner=small_graph_lane._add_relu):
        calls.append((src.numel(), u.shape[1]))
        return inner(src, dst, u, e, num_dst)
    with mock.patch.object(small_graph_lane, "_add_relu", counted):
        yield calls


def _as_written(layer, g, x, e):
    layer.fuse = False
    try:
        return layer(g, x, e)
    finally:
        layer.fuse = True


@pytest.mark.parametrize("aggr", ["sum", "mean"])
def test_one_pass_equals_the_message_as_written_and_the_fused_path(passes, monkeypatch, aggr):
    """Rounded features make terms exactly 0 (relu's edge: value and gradient) and ties; a NaN and
    infinities; rows without in-edges. Values and gradients as torch's own ops give them."""
    g, x, e = inputs()
    with torch.no_grad():
        x[3, 2], e[10, 1], e[11, 4], x[7, 0] = float("nan"), float("inf"), float("-inf"), float("inf")
        e[12, 0] = -x[g.src[12], 0]                                 # exactly 0: relu's gradient is 0 there
    layer = EdgeAddReLU(aggr=aggr)
    out = layer(g, x, e)
    assert passes == [(300, 8)] and not g.has_memo("in_csr")
    plan = layer.explain()
    assert plan.fused and plan.reasons == [_RECTIFIED] and "u_add_e" in plan.primitive_calls()[0]
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype)
    grads = torch.autograd.grad(out, (x, e), upstream)
    plain = _as_written(layer, g, x, e)
    assert torch.equal(out.nan_to_num(7.0), plain.nan_to_num(7.0))
    for mine, theirs in zip(grads, torch.autograd.grad(plain, (x, e), upstream)):
        assert torch.equal(mine.nan_to_num(7.0), theirs.nan_to_num(7.0))
    monkeypatch.setattr(small_graph, "SMALL_WORK", 0)
    monkeypatch.setattr(small_graph, "FRESH_WORK", 0)
    fused = layer(g, x, e)                                           # the interpreter's g-SDDMM, ReLU, g-SpMM
    assert layer.explain().mode == "g-SDDMM" and len(passes) == 1
    torch.testing.assert_close(out, fused, rtol=1e-12, atol=1e-12, equal_nan=True)
    for mine, theirs in zip(grads, torch.autograd.grad(fused, (x, e), upstream)):
        torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_gineconv_takes_it_on_a_new_edge_index_and_trains_as_with_the_rule_off(passes, no_small_graph_rule_later):
    gen = torch.Generator().manual_seed(4)
    edge_index, x, edge_attr = torch.randint(0, 50, (2, 400), generator=gen), torch.randn(50, 16), torch.randn(400, 3)
    torch.manual_seed(0)
    conv = unigraph.nn.GINEConv(torch.nn.Linear(16, 16), edge_dim=3, train_eps=True)
    out = conv(x, edge_index.clone(), edge_attr)
    assert passes == [(400, 16)] and conv.explain().reasons == [_RECTIFIED]
    grads = torch.autograd.grad(out.square().sum(), list(conv.parameters()))
    no_small_graph_rule_later()
    again = conv(x, edge_index.clone(), edge_attr)
    assert len(passes) == 1
    torch.testing.assert_close(out, again)
    torch.testing.assert_close(grads, torch.autograd.grad(again.square().sum(), list(conv.parameters())))


@pytest.fixture
def no_small_graph_rule_later(monkeypatch):
    """Turns the small-graph rule off when called (``conftest.no_small_graph_rule``'s settings)."""
    def off():
        for name, value in (("SMALL_WORK", 0), ("FRESH_WORK", 0), ("CSR_FREE_EDGES", -1), ("TINY_WORK", -1)):
            monkeypatch.setattr(small_graph, name, value)
    return off


def test_gradcheck_and_gradgradcheck(passes):
    g, x, e = inputs(edges=40, nodes=12, width=3)
    with torch.no_grad():
        x.add_(0.05)   # (no term within eps of relu's kink)
    layer = EdgeAddReLU()
    assert torch.autograd.gradcheck(lambda a, b: layer(g, a, b), (x, e), eps=1e-6, atol=1e-5)
    assert torch.autograd.gradgradcheck(lambda a, b: layer(g, a, b), (x, e), eps=1e-6, atol=1e-5)
    assert passes


@pytest.mark.parametrize("needs", ["x", "e", "neither"])
def test_each_gradient_only_where_asked_and_no_grad(passes, needs):
    g, x, e = inputs()
    x, e = x.detach().requires_grad_(needs == "x"), e.detach().requires_grad_(needs == "e")
    layer = EdgeAddReLU()
    out = layer(g, x, e)
    plain = _as_written(layer, g, x, e)
    assert torch.equal(out, plain) and out.requires_grad == (needs != "neither")
    if needs != "neither":
        leaf = x if needs == "x" else e
        assert torch.equal(torch.autograd.grad(out.sum(), leaf)[0], torch.autograd.grad(plain.sum(), leaf)[0])
    with torch.no_grad():
        assert torch.equal(layer(g, x, e), plain)
    assert len(passes) == 2


@pytest.mark.parametrize("change", ["float32 nodes", "edge column", "3-d nodes", "named backend", "above the bound",
                                    "max"])
def test_what_the_pass_cannot_take_runs_the_ordinary_way(passes, monkeypatch, change):
    g, x, e = inputs()
    layer = EdgeAddReLU(aggr="max" if change == "max" else "sum", node_dim=0)   # (nodes in dim 0 for 3-d)
    if change == "float32 nodes":
        x = x.detach().float().requires_grad_()
    elif change == "edge column":
        e = e[:, :1].detach().requires_grad_()
    elif change == "3-d nodes":
        x, e = x.detach().view(60, 2, 4).requires_grad_(), e.detach().view(300, 2, 4).requires_grad_()
    elif change == "above the bound":
        monkeypatch.setattr(small_graph, "SMALL_WORK", 300 * 8 * torch.get_num_threads() - 1)
        monkeypatch.setattr(small_graph, "FRESH_WORK", 0)
    if change == "named backend":
        with unigraph.use_backend("numba"):
            out = layer(g, x, e)
    else:
        out = layer(g, x, e)
    assert passes == []
    plain = _as_written(layer, g, x, e)
    torch.testing.assert_close(out, plain, rtol=1e-12, atol=1e-6)


def test_edge_values_changed_in_place_after_the_forward_are_refused(passes):
    g, x, e = inputs()
    e2 = e * 1   # (a non-leaf, so that it may be changed in place)
    out = EdgeAddReLU()(g, x, e2)
    with torch.no_grad():
        e2.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    assert len(passes) == 1


def test_the_same_bits_at_every_thread_count_and_on_poisoned_pooled_memory(poisoned_output_pool):
    """Threads own destination rows (forward) and source rows (the nodes' gradient): every thread
    count gives the one-thread bits; every element of the outputs is written (the pool hands out
    NaN-filled memory)."""
    g, x, e = inputs(edges=5000, nodes=300, width=33, dtype=torch.float32)
    upstream = torch.randn(300, 33, generator=torch.Generator().manual_seed(2))
    before = torch.get_num_threads()
    runs = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            out = small_graph_lane.add_relu(g.src, g.dst, x, e, 300, True)
            runs.append((out, *torch.autograd.grad(out, (x, e), upstream)))
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(*runs))
    expected = torch.zeros(300, 33).index_add_(0, g.dst, (x[g.src] + e).relu())
    torch.testing.assert_close(runs[0][0], expected)
