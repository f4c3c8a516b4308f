"""dgl.reorder_graph (unigraph/dgl/reorder.py) against DGL's: the same edges, features and stored
original ids for every node and edge ordering, on a random graph with parallel edges; bad
permutations refused by name."""
from __future__ import annotations

import pytest
import scipy.sparse as sp
import torch

import unigraph.dgl as udgl

MATRIX = sp.random(40, 40, density=0.08, random_state=0)
NODES = torch.randperm(40, generator=torch.Generator().manual_seed(1))
EDGES = torch.randperm(MATRIX.nnz, generator=torch.Generator().manual_seed(2))


def build(lib):
    src = torch.from_numpy(MATRIX.row).long()
    dst = torch.from_numpy(MATRIX.col).long()
    g = lib.graph((torch.cat([src, src[:5]]), torch.cat([dst, dst[:5]])), num_nodes=40)   # 5 parallel edges
    g.ndata["x"] = torch.randn(40, 3, generator=torch.Generator().manual_seed(3))
    g.edata["w"] = torch.arange(float(g.num_edges()))
    return g


@pytest.mark.parametrize("nodes", [None, "rcmk", "custom"])
@pytest.mark.parametrize("edges", ["src", "dst", "custom"])
def test_reorder_graph_equals_dgl(dgl, nodes, edges):
    config = {"nodes_perm": NODES, "edges_perm": torch.cat([EDGES, torch.arange(MATRIX.nnz, MATRIX.nnz + 5)])}
    a = udgl.reorder_graph(build(udgl), nodes, edges, permute_config=config)
    b = dgl.reorder_graph(build(dgl), nodes, edges, permute_config=config)
    for x, y in zip(a.edges(), b.edges()):
        assert torch.equal(x, y)
    assert torch.equal(a.ndata["x"], b.ndata["x"]) and torch.equal(a.edata["w"], b.edata["w"])
    assert torch.equal(a.ndata[udgl.NID], b.ndata[dgl.NID]) and torch.equal(a.edata[udgl.EID], b.edata[dgl.EID])
    plain = udgl.reorder_graph(build(udgl), nodes, edges, store_ids=False, permute_config=config)
    assert udgl.NID not in plain.ndata and udgl.EID not in plain.edata


def test_reorder_graph_refuses_what_it_cannot_do_exactly():
    g = build(udgl)
    with pytest.raises(udgl.DGLError, match="not a permutation"):
        udgl.reorder_graph(g, "custom", permute_config={"nodes_perm": torch.zeros(40, dtype=torch.long)})
    with pytest.raises(udgl.DGLError, match=f"permutation of {g.num_edges()} ids"):
        udgl.reorder_graph(g, edge_permute_algo="custom", permute_config={"edges_perm": torch.arange(3)})
    with pytest.raises(udgl.DGLError, match="needs permute_config"):
        udgl.reorder_graph(g, "custom")
    with pytest.raises(udgl.DGLError, match="metis"):
        udgl.reorder_graph(g, "metis", permute_config={"k": 2})
    with pytest.raises(udgl.DGLError, match="edge_permute_algo"):
        udgl.reorder_graph(g, edge_permute_algo="random")
