"""``MessagePassing.propagate`` on a small graph under ``auto``: a message that is not one g-SpMM
runs as written (the eager path) and its messages are summed by torch's ``index_add_`` (the
native lane's ``copy_e``), with no CSR built; the result equals the fused path's (the small-graph
rule off); above the bound, or with a backend named, the fused path runs as before."""
from __future__ import annotations

import pytest
import torch

import unigraph
from unigraph.backends import small_graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.base import _SMALL_EAGER

pytest.importorskip("numba")


class EdgeAddReLU(MessagePassing):
    """GINEConv's message: ``relu(x_j + e)``."""

    def forward(self, g, x, e):
        return self.propagate(g, x=x, e=e)

    def message(self, x_j, e):
        return (x_j + e).relu()


def inputs(edges=300, nodes=60, width=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    g = unigraph.Graph(torch.randint(0, nodes, (2, edges), generator=gen), num_nodes=nodes)
    x = torch.randn(nodes, width, generator=gen, dtype=torch.float64, requires_grad=True)
    e = torch.randn(edges, width, generator=gen, dtype=torch.float64, requires_grad=True)
    return g, x, e


@pytest.mark.parametrize("aggr", ["sum", "mean", "max"])
def test_small_graphs_run_the_message_as_written_and_equal_the_fused_path(monkeypatch, aggr):
    g, x, e = inputs()
    layer = EdgeAddReLU(aggr=aggr)
    out = layer(g, x, e)
    assert layer.explain().mode == "eager" and layer.explain().reasons == [_SMALL_EAGER]
    if aggr != "max":
        assert not g.has_memo("in_csr")   # the sum needs none
    grads = torch.autograd.grad(out.square().sum(), (x, e))
    monkeypatch.setattr(small_graph, "SMALL_WORK", 0)
    monkeypatch.setattr(small_graph, "FRESH_WORK", 0)
    fused = layer(g, x, e)
    assert layer.explain().mode == "g-SDDMM"   # the interpreter ran it (a g-SDDMM, the ReLU, a g-SpMM)
    torch.testing.assert_close(out, fused, rtol=1e-12, atol=1e-12)
    for mine, theirs in zip(grads, torch.autograd.grad(fused.square().sum(), (x, e))):
        torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)


def test_above_the_bound_or_with_a_backend_named_the_fused_path_runs(monkeypatch):
    g, x, e = inputs()
    layer = EdgeAddReLU()
    monkeypatch.setattr(small_graph, "SMALL_WORK", 300 * 8 * torch.get_num_threads() - 1)
    monkeypatch.setattr(small_graph, "FRESH_WORK", 0)
    layer(g, x, e)
    assert layer.explain().mode == "g-SDDMM"   # the interpreter ran it (a g-SDDMM, the ReLU, a g-SpMM)
    monkeypatch.undo()
    with unigraph.use_backend("numba"):
        layer(g, x, e)
    assert layer.explain().mode == "g-SDDMM"   # the interpreter ran it (a g-SDDMM, the ReLU, a g-SpMM)
