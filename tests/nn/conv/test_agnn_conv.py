"""AGNNConv against PyG's (float64): outputs, input and parameter gradients over its options and
call forms, and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, F, E = 10, 6, 30


def data(seed=0):
    x = torch.randn(N, F, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return x, random_edges(N, E, seed)   # (with self-loops and duplicates)


def pair(**kwargs):
    theirs = pyg_nn.AGNNConv(**kwargs)
    ours = loaded(theirs, U.AGNNConv(**kwargs))
    if theirs.requires_grad:   # a beta away from its initial 1
        with torch.no_grad():
            theirs.beta.fill_(0.7)
            ours.beta.fill_(0.7)
    return theirs, ours


@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_matches_pyg(requires_grad, add_self_loops):
    theirs, ours = pair(requires_grad=requires_grad, add_self_loops=add_self_loops)
    x, edge_index = data()
    assert_same(theirs, ours, x, edge_index)
    assert str(ours) == str(theirs) == "AGNNConv()"
    assert ("beta" in dict(ours.named_parameters())) == requires_grad
    assert set(ours.state_dict()) == {"beta"}


@pytest.mark.parametrize("kwargs", [dict(aggr="mean"), dict(aggr="max"), dict(flow="target_to_source")])
def test_message_passing_arguments_match_pyg(kwargs):
    theirs, ours = pair(**kwargs)
    x, edge_index = data(1)
    assert_same(theirs, ours, x, edge_index)


def test_call_forms_match_pyg():
    torch_sparse = pytest.importorskip("torch_sparse")
    theirs, ours = pair()
    x, edge_index = data()
    edge_index = torch.unique(edge_index, dim=1)   # an adjacency holds no duplicates
    expected = theirs(x, edge_index)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, torch.rand(edge_index.shape[1]), (N, N)).t()
    torch.testing.assert_close(ours(x, adj), expected, **TOL)   # (values ignored, as in PyG)
    torch.testing.assert_close(ours(x, adj.to_torch_sparse_csr_tensor()), expected, **TOL)
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=N), x), expected, **TOL)


def test_empty_graph_and_isolated_nodes_match_pyg():
    theirs, ours = pair(add_self_loops=False)
    x, _ = data()
    assert_same(theirs, ours, x, torch.tensor([[0, 1], [2, 2]]))
    assert_same(theirs, ours, x, torch.empty(2, 0, dtype=torch.long))


def test_refusals():
    x, edge_index = data()
    with pytest.raises(ValueError, match="static graphs"):
        U.AGNNConv()(torch.randn(2, N, F), edge_index)
    with pytest.raises(ValueError, match="out-of-range"):
        U.AGNNConv()(torch.randn(N - 1, F), edge_index)
    with pytest.raises(ValueError, match="9 rows but the graph has 10 nodes"):
        U.AGNNConv()(unigraph.Graph(edge_index, num_nodes=N), torch.randn(N - 1, F))
    with pytest.raises(ValueError, match="the same F"):
        U.AGNNConv()((torch.randn(N, F), torch.randn(N, F + 1)), edge_index)
