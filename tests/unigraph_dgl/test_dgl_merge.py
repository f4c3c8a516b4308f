"""dgl.merge (unigraph/dgl/merge.py) against DGL's: the same edges, node counts and features for
homogeneous graphs and heterographs, later graphs' node rows replacing earlier ones; where DGL
2.1 drops or crashes on an edge feature not every graph has, the missing edges get zeros; mixed
types, feature shapes or an empty list are refused by name; inputs are unchanged and gradients
reach the features merged."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl

GEN = torch.Generator().manual_seed(0)
FEATURES = {k: torch.randn(6, 3, generator=GEN) for k in ("a1", "b1", "a2", "b2")}
EDGE_FEATURES = [torch.randn(2, 3, generator=GEN), torch.randn(3, 3, generator=GEN)]


def hetero_pair(lib):
    g1 = lib.heterograph({("a", "to", "b"): ([0, 1], [1, 0]), ("b", "back", "a"): ([1], [0])})
    g1.nodes["a"].data["nh"] = FEATURES["a1"][:2]
    g1.nodes["b"].data["nh"] = FEATURES["b1"][:2]
    g1.edges["to"].data["eh"] = EDGE_FEATURES[0]
    g1.edges["back"].data["eh"] = EDGE_FEATURES[0][:1]
    g2 = lib.heterograph({("a", "to", "b"): ([1, 2, 3], [2, 3, 5]), ("b", "back", "a"): ([4, 0], [1, 3])})
    g2.nodes["a"].data["nh"] = FEATURES["a2"][:4]
    g2.nodes["b"].data["nh"] = FEATURES["b2"]
    g2.edges["to"].data["eh"] = EDGE_FEATURES[1]
    g2.edges["back"].data["eh"] = EDGE_FEATURES[1][:2]
    g2.add_nodes(2, ntype="a")
    return [g1, g2]


def homo_triple(lib):
    g = lib.graph(([0, 1], [2, 3]))
    g.ndata["x"] = torch.zeros(4)
    h = lib.graph(([1, 2], [0, 4]))
    h.ndata["x"] = torch.ones(5)
    k = lib.graph(([3], [3]), num_nodes=7)
    k.ndata["x"] = torch.full((7,), 2.0)
    for graph, n in ((g, 2), (h, 2), (k, 1)):
        graph.edata["w"] = torch.arange(float(n))
    return [g, h, k]


@pytest.mark.parametrize("build", [homo_triple, hetero_pair])
def test_merge_equals_dgl(dgl, build):
    ours, theirs = udgl.merge(build(udgl)), dgl.merge(build(dgl))
    assert ours.ntypes == theirs.ntypes and ours.canonical_etypes == theirs.canonical_etypes
    for ntype in theirs.ntypes:
        assert ours.num_nodes(ntype) == theirs.num_nodes(ntype)
        assert set(ours.nodes[ntype].data.keys()) == set(theirs.nodes[ntype].data.keys())
        for key, value in theirs.nodes[ntype].data.items():
            torch.testing.assert_close(ours.nodes[ntype].data[key], value, rtol=0, atol=0)
    for etype in theirs.canonical_etypes:
        for mine, peer in zip(ours.edges(etype=etype), theirs.edges(etype=etype)):
            assert torch.equal(mine, peer)
        for key, value in theirs.edges[etype].data.items():
            torch.testing.assert_close(ours.edges[etype].data[key], value, rtol=0, atol=0)


def test_inputs_unchanged_and_gradients_reach_the_features():
    graphs = homo_triple(udgl)
    before = [(g.num_nodes(), g.num_edges(), g.ndata["x"].clone()) for g in graphs]
    x = torch.ones(5, requires_grad=True)
    graphs[1].ndata["x"] = x * 3
    merged = udgl.merge(graphs)
    assert [(g.num_nodes(), g.num_edges()) for g in graphs] == [b[:2] for b in before]
    assert torch.equal(graphs[0].ndata["x"], before[0][2])
    merged.ndata["x"].sum().backward()   # every row from the third graph (7 nodes): none of x's reach the sum
    assert x.grad is None or not x.grad.any()
    x.grad = None
    graphs[2].ndata.pop("x")
    graphs[1].ndata["x"] = x * 3
    udgl.merge(graphs).ndata["x"].sum().backward()
    assert torch.equal(x.grad, torch.full((5,), 3.0))


def test_features_not_every_graph_has():
    g, h = udgl.graph(([0], [1])), udgl.graph(([1, 1], [0, 2]))
    g.edata["only_first"] = torch.tensor([[5.0, 6.0]])
    h.edata["only_second"] = torch.tensor([1.0, 2.0])
    h.ndata["y"] = torch.tensor([7, 8, 9])
    merged = udgl.merge([g, h])
    assert torch.equal(merged.edata["only_first"], torch.tensor([[5.0, 6.0], [0.0, 0.0], [0.0, 0.0]]))
    assert torch.equal(merged.edata["only_second"], torch.tensor([0.0, 1.0, 2.0]))
    assert torch.equal(merged.ndata["y"], torch.tensor([7, 8, 9]))


def test_refusals():
    with pytest.raises(udgl.DGLError, match="cannot be empty"):
        udgl.merge([])
    g, h = udgl.graph(([0], [1])), udgl.heterograph({("a", "to", "b"): ([0], [1])})
    with pytest.raises(udgl.DGLError, match="graph 1 has node types"):
        udgl.merge([g, h])
    g2 = udgl.graph(([0], [1]))
    g.ndata["x"], g2.ndata["x"] = torch.zeros(2, 3), torch.zeros(2, 4)
    with pytest.raises(udgl.DGLError, match="'x' is torch.float32 \\[4\\] per row in graph 1"):
        udgl.merge([g, g2])
