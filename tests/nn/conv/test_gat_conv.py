"""GATConv / GATv2Conv: asking for the attention weights does not change the output, PyG's
refusal of a SparseTensor with edge features and self-loops, a SparseTensor's values as the edge
features otherwise."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse", reason="SparseTensor inputs need torch_sparse")

N, IN = 12, 6


@pytest.mark.parametrize("cls", [U.GATConv, U.GATv2Conv])
def test_return_attention_weights_leaves_the_output_bit_for_bit(cls):
    torch.manual_seed(0)
    conv = cls(IN, 4, heads=3, edge_dim=2)
    x, edge_index, edge_attr = torch.randn(N, IN), random_edges(N, 40), torch.randn(40, 2)
    out = conv(x, edge_index, edge_attr)
    with_weights, (looped, alpha) = conv(x, edge_index, edge_attr, return_attention_weights=True)
    assert torch.equal(with_weights, out)
    assert alpha.shape == (looped.shape[1], 3)
    sums = torch.zeros(N, 3).index_add_(0, looped[1], alpha)
    torch.testing.assert_close(sums, torch.ones(N, 3))


@pytest.mark.parametrize("cls", ["GATConv", "GATv2Conv"])
def test_sparse_tensor_with_edge_features(cls):
    torch.manual_seed(0)
    edge_index = torch.unique(random_edges(N, 40), dim=1)  # an adjacency holds no duplicates
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    edge_attr = torch.randn(edge_index.shape[1], 2, dtype=torch.float64)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, edge_attr, (N, N))
    with pytest.raises(NotImplementedError, match="add_self_loops"):
        getattr(U, cls)(IN, 4, heads=2, edge_dim=2)(torch.randn(N, IN), adj.t().float())
    theirs = getattr(pyg_nn, cls)(IN, 4, heads=2, edge_dim=2, add_self_loops=False)
    ours = loaded(theirs, getattr(U, cls)(IN, 4, heads=2, edge_dim=2, add_self_loops=False))
    x = torch.randn(N, IN, dtype=torch.float64)
    expected = assert_same(theirs, ours, x, adj.t())  # the SparseTensor's values are the edge features
    by_index = ours(x, edge_index, edge_attr)
    torch.testing.assert_close(expected, by_index, **TOL)
    # one value per edge: with edge_dim=1 it is that edge's single feature, as in the edge_index form
    # (PyG 2.8's SparseTensor path gives another result here than its own edge_index form)
    weights = torch.rand(edge_index.shape[1], dtype=torch.float64)
    ours = getattr(U, cls)(IN, 4, edge_dim=1, add_self_loops=False).double()
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weights, (N, N)).t()
    torch.testing.assert_close(ours(x, adj), ours(x, edge_index, weights), **TOL)


def test_values_ignored_without_edge_dim_as_in_pyg():
    torch.manual_seed(0)
    edge_index = torch.unique(random_edges(N, 30), dim=1)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, torch.rand(edge_index.shape[1]), (N, N))
    conv = U.GATConv(IN, 4)
    x = torch.randn(N, IN)
    torch.testing.assert_close(conv(x, adj.t()), conv(x, edge_index), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("cls", ["GATConv", "GATv2Conv"])
def test_static_graph_refused_by_name_as_pyg_does(cls):
    with pytest.raises(ValueError, match="does not take static graphs"):
        getattr(U, cls)(IN, 4)(torch.randn(2, N, IN), random_edges(N, 20))
