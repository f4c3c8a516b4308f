"""ARMAConv against PyG's in float64 (outputs, input and parameter gradients) over stacks, layers,
shared weights, activation, bias, PyG's call forms (a torch sparse adjacency, where PyG's fails,
against PyG on the same graph), static graphs, dropout drawn as PyG's, lazy widths."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse")

N, E, IN, OUT = 9, 30, 5, 4


@pytest.mark.parametrize("num_stacks, num_layers", [(1, 1), (3, 1), (2, 3)])
@pytest.mark.parametrize("shared_weights", [True, False])
@pytest.mark.parametrize("act, bias", [("relu", True), (None, False)])
def test_matches_pyg(num_stacks, num_layers, shared_weights, act, bias):
    torch.manual_seed(0)
    kwargs = dict(num_stacks=num_stacks, num_layers=num_layers, shared_weights=shared_weights, bias=bias,
                  act=torch.nn.ReLU() if act else None)
    theirs = pyg_nn.ARMAConv(IN, OUT, **kwargs)
    ours = loaded(theirs, U.ARMAConv(IN, OUT, **kwargs))
    assert str(ours) == str(theirs) == f"ARMAConv({IN}, {OUT}, num_stacks={num_stacks}, num_layers={num_layers})"
    edge_index = random_edges(N, E)  # duplicates and self-loops
    weight = torch.rand(E, dtype=torch.float64) + 0.1
    x = torch.randn(N, IN, dtype=torch.float64)
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, edge_index, weight)
    assert_same(theirs, ours, torch.randn(2, N, IN, dtype=torch.float64), edge_index, weight)  # static graph
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, N)).t().coalesce()
    assert_same(theirs, ours, x, adj)
    # PyG's ARMAConv fails on a torch sparse adjacency (its [K, N, F] features have no torch sparse
    # product): ours equals PyG's on the same graph as an edge_index
    dst, src, value = adj.coo()
    expected = theirs(x, torch.stack([src, dst]), value)
    for form in (adj.to_torch_sparse_csr_tensor(), adj.to_torch_sparse_coo_tensor()):
        torch.testing.assert_close(ours(x, form), expected, **TOL)


def test_dropout_draws_as_pyg_and_flow():
    torch.manual_seed(0)
    theirs = pyg_nn.ARMAConv(IN, OUT, num_stacks=2, num_layers=2, dropout=0.5, flow="target_to_source")
    ours = loaded(theirs, U.ARMAConv(IN, OUT, num_stacks=2, num_layers=2, dropout=0.5, flow="target_to_source"))
    x, edge_index = torch.randn(N, IN, dtype=torch.float64), random_edges(N, E)
    torch.manual_seed(3)
    expected = theirs(x, edge_index)
    torch.manual_seed(3)
    torch.testing.assert_close(ours(x, edge_index), expected, **TOL)
    theirs.eval()
    ours.eval()
    assert_same(theirs, ours, x, edge_index)


def test_lazy_in_channels():
    torch.manual_seed(0)
    theirs, ours = pyg_nn.ARMAConv(-1, OUT, num_stacks=2, num_layers=3), U.ARMAConv(-1, OUT, num_stacks=2, num_layers=3)
    assert str(ours) == str(theirs) == f"ARMAConv(-1, {OUT}, num_stacks=2, num_layers=3)"
    x, edge_index = torch.randn(N, IN), random_edges(N, E)
    assert ours(x, edge_index).shape == (N, OUT) and ours.root_weight.shape == (3, 2, IN, OUT)
    theirs(x, edge_index)
    assert_same(theirs, loaded(theirs, ours), x.double(), edge_index)
    fresh = U.ARMAConv(-1, OUT, num_stacks=2, num_layers=3).double()   # a lazy layer takes the saved shapes
    fresh.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(fresh(x.double(), edge_index), theirs(x.double(), edge_index), **TOL)


def test_errors():
    conv = U.ARMAConv(IN, OUT)
    with pytest.raises(ValueError, match="5 features"):
        conv(torch.randn(N, 3), random_edges(N, E))
    with pytest.raises(ValueError, match="num_stacks must be a positive int"):
        U.ARMAConv(IN, OUT, num_stacks=0)
    with pytest.raises(ValueError, match="dropout must be in \\[0, 1\\]"):
        U.ARMAConv(IN, OUT, dropout=-0.1)
    with pytest.raises(ValueError, match="in_channels must be a positive int"):
        U.ARMAConv(0, OUT)
