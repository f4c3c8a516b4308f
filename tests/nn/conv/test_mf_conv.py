"""MFConv against PyG's: values and gradients (float64) over its options and call forms, degrees
above max_degree and degrees no node has (zero gradients there, as PyG's), the lazy width, PyG's
repr and state_dict, and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")


def pair(in_channels=4, seed: int = 0, **options):
    torch.manual_seed(seed)
    theirs = pyg_nn.MFConv(in_channels, 6, **options)
    ours = loaded(theirs, U.MFConv(in_channels, 6, **options))
    return theirs, ours


def inputs(num_nodes: int = 12, num_edges: int = 40):
    return torch.randn(num_nodes, 4, dtype=torch.float64), random_edges(num_nodes, num_edges)


@pytest.mark.parametrize("max_degree", [0, 2, 10])
@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
@pytest.mark.parametrize("bias", [True, False])
def test_options_equal_pygs(max_degree, aggr, bias):
    theirs, ours = pair(max_degree=max_degree, aggr=aggr, bias=bias)
    x, edge_index = inputs()
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, edge_index, size=(12, 12))


def test_bipartite_and_flow_equal_pygs():
    theirs, ours = pair((4, 7), max_degree=3)
    x_src, x_dst = torch.randn(8, 4, dtype=torch.float64), torch.randn(5, 7, dtype=torch.float64)
    edge_index = random_edges(8, 25, num_dst=5)
    assert assert_same(theirs, ours, (x_src, x_dst), edge_index).shape == (5, 6)
    assert_same(theirs, ours, (x_src, x_dst), edge_index, (8, 5))
    assert_same(theirs, ours, (x_src, None), edge_index, (8, 5))
    theirs, ours = pair(flow="target_to_source", max_degree=4)
    assert_same(theirs, ours, *inputs())


def test_sparse_tensor_graph_form_and_empty_graph():
    """A SparseTensor's values are not read (PyG drops them); the degree counts its entries."""
    from torch_sparse import SparseTensor
    theirs, ours = pair(max_degree=4)
    x, edge_index = inputs()
    weights = torch.rand(edge_index.shape[1], dtype=torch.float64)
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, weights, (12, 12)).t())
    expected = theirs(x, edge_index)
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=12), x), expected, **TOL)
    csr = torch.sparse_coo_tensor(edge_index.flip(0), weights, (12, 12), check_invariants=True).coalesce()
    unique = torch.stack([csr.indices()[1], csr.indices()[0]])   # PyG's MFConv cannot take a torch sparse adjacency
    torch.testing.assert_close(ours(x, csr.to_sparse_csr()), theirs(x, unique), **TOL)
    assert_same(theirs, ours, x, torch.zeros(2, 0, dtype=torch.long))


@pytest.mark.parametrize("in_channels", [-1, (-1, -1)])
def test_lazy_width_equals_pygs(in_channels):
    torch.manual_seed(0)
    theirs = pyg_nn.MFConv(in_channels, 6, max_degree=3).double()
    ours = U.MFConv(in_channels, 6, max_degree=3).double()
    assert str(ours) == str(theirs)
    x, edge_index = inputs()
    x = (x, torch.randn(12, 5, dtype=torch.float64)) if in_channels != -1 else x
    theirs(x, edge_index), ours(x, edge_index)   # each sized and initialized
    assert_same(theirs, loaded(theirs, ours), x, edge_index)


def test_repr_and_state_dict():
    theirs, ours = pair((4, 7), max_degree=2)
    assert str(ours) == str(theirs) == "MFConv((4, 7), 6)"
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_refusals():
    _, ours = pair()
    x, edge_index = inputs()
    with pytest.raises(ValueError, match="x with 4 features"):
        ours(torch.randn(12, 5, dtype=torch.float64), edge_index)
    with pytest.raises(ValueError, match="max_degree"):
        U.MFConv(4, 6, max_degree=-1)
    with pytest.raises(ValueError, match="in_channels"):
        U.MFConv(0, 6)
