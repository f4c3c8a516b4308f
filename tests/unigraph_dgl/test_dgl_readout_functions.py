"""dgl.readout_nodes / sum / mean / max, softmax, broadcast and topk over nodes and edges
(unigraph/dgl/readout.py) against DGL's on a batch of graphs, with weights; DGL's own test file
(tests/python/common/test_readout.py) runs in the DGL table. A graph without nodes in the batch:
ours reads 0 for it, where DGL's top-k padding moves another graph's rows in."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl


def batched(lib, empty: bool = False):
    graphs = [lib.graph(([0, 1], [1, 2]), num_nodes=3), lib.graph(([0, 1, 2, 3], [1, 2, 3, 0]), num_nodes=5)]
    if empty:
        graphs.insert(1, lib.graph(([], []), num_nodes=0))
    g = lib.batch(graphs)
    gen = torch.Generator().manual_seed(0)
    g.ndata["h"], g.ndata["w"] = torch.randn(8, 4, generator=gen), torch.rand(8, 1, generator=gen)
    g.edata["e"] = torch.randn(6, 3, generator=gen)
    return g


@pytest.mark.parametrize("kind", ["nodes", "edges"])
def test_reductions_softmax_broadcast_equal_dgl(dgl, kind):
    ours, theirs = batched(udgl), batched(dgl)
    feat, weight = ("h", "w") if kind == "nodes" else ("e", None)
    for op in ("sum", "mean", "max"):
        a = getattr(udgl, f"{op}_{kind}")(ours, feat, weight)
        b = getattr(dgl, f"{op}_{kind}")(theirs, feat, weight)
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(getattr(udgl, f"readout_{kind}")(ours, feat, op="min"),
                               getattr(dgl, f"readout_{kind}")(theirs, feat, op="min"))
    torch.testing.assert_close(getattr(udgl, f"softmax_{kind}")(ours, feat), getattr(dgl, f"softmax_{kind}")(theirs, feat))
    per_graph = torch.arange(6.0).view(2, 3)
    torch.testing.assert_close(getattr(udgl, f"broadcast_{kind}")(ours, per_graph),
                               getattr(dgl, f"broadcast_{kind}")(theirs, per_graph))


@pytest.mark.parametrize("options", [dict(k=4), dict(k=2, sortby=1), dict(k=4, descending=False), dict(k=6)])
def test_topk_equals_dgl(dgl, options):
    for kind, feat in (("nodes", "h"), ("edges", "e")):
        a = getattr(udgl, f"topk_{kind}")(batched(udgl), feat, **options)
        b = getattr(dgl, f"topk_{kind}")(batched(dgl), feat, **options)
        for x, y in zip(a, b):
            assert torch.equal(x, y)


def test_empty_graph_reads_zero_and_errors_are_named():
    g = batched(udgl, empty=True)
    values, _ = udgl.topk_nodes(g, "h", 2)
    assert not values[1].any()   # the graph without nodes: zeros (DGL 2.1 moves a neighbour's rows in)
    assert not udgl.sum_nodes(g, "h")[1].any() and not udgl.max_nodes(g, "h")[1].any()
    with pytest.raises(udgl.DGLError, match="no feature 'x'"):
        udgl.sum_nodes(g, "x")
    with pytest.raises(udgl.DGLError, match="op must be one of"):
        udgl.readout_nodes(g, "h", op="prod")
    with pytest.raises(udgl.DGLError, match="2 rows for a batch of 3"):
        udgl.broadcast_nodes(g, torch.ones(2, 1))
