"""``MessagePassing.propagate`` on a small graph under ``auto``: a message whose fused plan
materializes per-edge tensors anyway runs as written (the eager path) from its second call on, its
messages summed by torch's ``index_add_`` (the native lane's ``copy_e``), with no CSR built; the
result equals the fused path's (the small-graph rule off); a message fused whole, a graph above the
bound, or a backend named keep the fused path."""
from __future__ import annotations

import pytest
import torch

import unigraph
from unigraph.backends import small_graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.base import _SMALL_EAGER

pytest.importorskip("numba")


class EdgeAddTanh(MessagePassing):
    """A message the fused path materializes (its tanh is per edge); GINEConv's ``relu(x_j + e)`` has a
    one-pass form of its own (``test_rectified.py``)."""

    def forward(self, g, x, e):
        return self.propagate(g, x=x, e=e)

    def message(self, x_j, e):
        return (x_j + e).tanh()


class GlobalTanh(EdgeAddTanh):
    """The same message reading a global (``torch.tanh``): traced on every call, never cached; the
    rule learns by its inputs' structure instead."""

    def message(self, x_j, e):
        return torch.tanh(x_j + e)


def inputs(edges=300, nodes=60, width=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    g = unigraph.Graph(torch.randint(0, nodes, (2, edges), generator=gen), num_nodes=nodes)
    x = torch.randn(nodes, width, generator=gen, dtype=torch.float64, requires_grad=True)
    e = torch.randn(edges, width, generator=gen, dtype=torch.float64, requires_grad=True)
    return g, x, e


@pytest.mark.parametrize("layer_class", [EdgeAddTanh, GlobalTanh])
@pytest.mark.parametrize("aggr", ["sum", "mean", "max"])
def test_small_graphs_run_the_message_as_written_and_equal_the_fused_path(monkeypatch, aggr, layer_class):
    g, x, e = inputs()
    layer = layer_class(aggr=aggr)
    layer(g, x, e)                                           # the first call: the fused path finds it materializes
    assert layer.explain().mode == "g-SDDMM"
    fresh = unigraph.Graph(g.edge_index.clone(), num_nodes=g.num_nodes)   # the next batch's graph
    out = layer(fresh, x, e)
    assert layer.explain().mode == "eager" and layer.explain().reasons == [_SMALL_EAGER]
    assert not fresh.has_memo("in_csr")   # the aggregation needs none (index_add_, or the COO max)
    grads = torch.autograd.grad(out.square().sum(), (x, e))
    monkeypatch.setattr(small_graph, "SMALL_WORK", 0)
    monkeypatch.setattr(small_graph, "FRESH_WORK", 0)
    fused = layer(g, x, e)
    assert layer.explain().mode == "g-SDDMM"   # the interpreter ran it (a g-SDDMM, the ReLU, a g-SpMM)
    torch.testing.assert_close(out, fused, rtol=1e-12, atol=1e-12)
    for mine, theirs in zip(grads, torch.autograd.grad(fused.square().sum(), (x, e))):
        torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)


class Tempered(MessagePassing):
    """A message the interpreter fuses whole (no per-edge tensor)."""

    def forward(self, g, x, w):
        return self.propagate(g, x=x, w=w)

    def message(self, x_i, x_j, w):
        return torch.tanh(x_j / 2.0) * w.view(-1, 1) - x_i


def test_a_message_fused_whole_keeps_the_fused_path_on_small_graphs():
    g, x, _ = inputs()
    layer = Tempered()
    for _ in range(2):
        layer(g, x, torch.rand(g.num_edges, dtype=torch.float64))
        assert layer.explain().fused


def test_above_the_bound_or_with_a_backend_named_the_fused_path_runs(monkeypatch):
    g, x, e = inputs()
    layer = EdgeAddTanh()
    layer(g, x, e)   # (the first call learns that its fused plan materializes)
    monkeypatch.setattr(small_graph, "SMALL_WORK", 300 * 8 * torch.get_num_threads() - 1)
    monkeypatch.setattr(small_graph, "FRESH_WORK", 0)
    layer(g, x, e)
    assert layer.explain().mode == "g-SDDMM"   # the interpreter ran it (a g-SDDMM, the ReLU, a g-SpMM)
    monkeypatch.undo()
    with unigraph.use_backend("numba"):
        layer(g, x, e)
    assert layer.explain().mode == "g-SDDMM"   # the interpreter ran it (a g-SDDMM, the ReLU, a g-SpMM)
