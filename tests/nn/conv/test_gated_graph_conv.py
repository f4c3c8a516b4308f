"""GatedGraphConv against PyG's (float64): outputs, input and parameter gradients over its options and
call forms (edge weights, sparse adjacencies with and without values), and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, IN, OUT, E = 10, 4, 6, 30


class Bound(torch.nn.Module):
    """``conv(x, *fixed)``: a call whose adjacency stays out of assert_same's gradient checks."""

    def __init__(self, conv, *fixed):
        super().__init__()
        self.conv, self.fixed = conv, fixed

    def forward(self, x):
        return self.conv(x, *self.fixed)


def data(width=IN, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, width, dtype=torch.float64, generator=gen)
    return x, random_edges(N, E, seed), torch.rand(E, dtype=torch.float64, generator=gen)


def pair(**kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.GatedGraphConv(OUT, 3, **kwargs)
    return theirs, loaded(theirs, U.GatedGraphConv(OUT, 3, **kwargs))


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("width", [IN, OUT])
def test_matches_pyg(aggr, weighted, width):
    theirs, ours = pair(aggr=aggr)
    x, edge_index, weight = data(width)
    assert_same(theirs, ours, x, edge_index, weight if weighted else None)
    assert str(ours) == str(theirs) == "GatedGraphConv(6, num_layers=3)"


@pytest.mark.parametrize("kwargs", [dict(bias=False), dict(flow="target_to_source"), dict(aggr="softmax")])
def test_other_arguments_match_pyg(kwargs):
    theirs, ours = pair(**kwargs)
    x, edge_index, weight = data(seed=1)
    assert_same(theirs, ours, x, edge_index, weight)


def test_sparse_adjacencies_match_pyg():
    """Their values are the edge weights."""
    torch_sparse = pytest.importorskip("torch_sparse")
    theirs, ours = pair()
    x, edge_index, _ = data()
    edge_index = torch.unique(edge_index, dim=1)
    weight = torch.rand(edge_index.shape[1], dtype=torch.float64)
    for values in (None, weight):
        expected = theirs(x, edge_index, values)
        adj = torch_sparse.SparseTensor.from_edge_index(edge_index, values, (N, N)).t()
        torch.testing.assert_close(assert_same(Bound(theirs, adj), Bound(ours, adj), x), expected, **TOL)
        csr = (adj if values is not None else adj.fill_value(1.0, dtype=torch.float64)).to_torch_sparse_csr_tensor()
        torch.testing.assert_close(assert_same(Bound(theirs, csr), Bound(ours, csr), x), expected, **TOL)
    g = unigraph.Graph(edge_index, num_nodes=N)
    torch.testing.assert_close(ours(g, x, weight), theirs(x, edge_index, weight), **TOL)


def test_empty_graph_matches_pyg():
    theirs, ours = pair()
    x, _, _ = data()
    assert_same(theirs, ours, x, torch.empty(2, 0, dtype=torch.long))


def test_refusals():
    x, edge_index, weight = data()
    x, weight = x.float(), weight.float()
    with pytest.raises(ValueError, match="may not be larger than out_channels"):
        U.GatedGraphConv(IN - 1, 2)(x, edge_index)
    with pytest.raises(ValueError, match="pair"):
        U.GatedGraphConv(OUT, 2)((x, x), edge_index)
    with pytest.raises(ValueError, match="square graph"):
        block = unigraph.Graph(random_edges(N, E, num_dst=4), num_src_nodes=N, num_dst_nodes=4)
        U.GatedGraphConv(OUT, 2)(block, x)
    with pytest.raises(ValueError, match="edge_weight"):
        U.GatedGraphConv(OUT, 2)(x, edge_index, weight[:-1])
    with pytest.raises(ValueError, match="static graphs"):
        U.GatedGraphConv(OUT, 2)(torch.randn(2, N, IN), edge_index)
    with pytest.raises(ValueError, match="num_layers"):
        U.GatedGraphConv(OUT, 0)
