"""WLConvContinuous against PyG's: values and input gradients (float64) with and without edge
weights, for (x_src, x_dst) and (x_src, None) pairs, every adjacency form and the graph form;
PyG's repr; the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")


def pair():
    return pyg_nn.WLConvContinuous(), U.WLConvContinuous()


def features(rows: int, width: int = 5, seed: int = 0):
    return torch.randn(rows, width, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("weighted", [False, True])
def test_homogeneous_equals_pygs(weighted):
    x, edge_index = features(9), random_edges(9, 30)
    edge_index[:, :3] = torch.tensor([[4, 4, 4], [4, 4, 2]])   # a self-loop, a repeated edge
    weights = (torch.rand(30, dtype=torch.float64) + 0.1,) if weighted else ()
    assert_same(*pair(), x, edge_index, *weights)


def test_isolated_and_zero_degree_nodes_equal_pygs():
    """Nodes without in-edges: half of themselves, as PyG; so is a node whose weights sum to 0
    (whose weights then get NaN gradients in both, from the derivative of 1 / 0)."""
    x, edge_index = features(6), torch.tensor([[0, 1, 2, 3], [1, 1, 3, 3]])
    assert_same(*pair(), x, edge_index, torch.tensor([0.5, 0.25, 1.0, 2.0], dtype=torch.float64))
    theirs, ours = pair()
    weights = torch.tensor([0.5, 0.25, 1.0, -1.0], dtype=torch.float64, requires_grad=True)
    their_weights = weights.detach().clone().requires_grad_()
    out, expected = ours(x, edge_index, weights), theirs(x, edge_index, their_weights)
    torch.testing.assert_close(out, expected, **TOL)
    torch.testing.assert_close(out[3], 0.5 * x[3], **TOL)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(weights.grad, their_weights.grad, equal_nan=True, **TOL)


@pytest.mark.parametrize("weighted", [False, True])
def test_bipartite_pairs_equal_pygs(weighted):
    x_src, x_dst, edge_index = features(7), features(4, seed=1), random_edges(7, 16, num_dst=4)
    weights = (torch.rand(16, dtype=torch.float64),) if weighted else ()
    out = assert_same(*pair(), (x_src, x_dst), edge_index, *weights)
    assert out.shape == (4, 5)
    theirs, ours = pair()
    expected = theirs((x_src, None), edge_index, *weights, size=(7, 4))
    torch.testing.assert_close(ours((x_src, None), edge_index, *weights, size=(7, 4)), expected, **TOL)


def test_sparse_adjacencies_equal_pygs():
    """A sparse adjacency's values are the weights (PyG reads a SparseTensor's; its torch sparse
    path reads them in the sum but not in the degree, so ours is compared with the edge_index form)."""
    from torch_sparse import SparseTensor
    x_src, x_dst = features(7), features(4, seed=1)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 6], [0, 0, 1, 1, 3, 3]])
    weights = torch.rand(6, dtype=torch.float64) + 0.5
    adj = SparseTensor.from_edge_index(edge_index, weights, (7, 4))
    assert_same(*pair(), (x_src, x_dst), adj.t())
    assert_same(*pair(), (x_src, None), adj.t())
    ours = U.WLConvContinuous()
    expected = ours((x_src, x_dst), edge_index, weights)
    csr = torch.sparse_coo_tensor(edge_index.flip(0), weights, (4, 7)).coalesce().to_sparse_csr()
    torch.testing.assert_close(ours((x_src, x_dst), csr), expected, **TOL)


def test_graph_form_equals_edge_index_form():
    x, edge_index = features(8), random_edges(8, 20, seed=2)
    ours = U.WLConvContinuous()
    expected = ours(x, edge_index)
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=8), x), expected, **TOL)
    empty = ours(x, torch.empty(2, 0, dtype=torch.long))
    torch.testing.assert_close(empty, 0.5 * x, **TOL)


def test_repr_and_refusals():
    assert str(U.WLConvContinuous()) == str(pyg_nn.WLConvContinuous()) == "WLConvContinuous()"
    x, edge_index = features(5), random_edges(5, 8)
    with pytest.raises(TypeError, match="aggr"):
        U.WLConvContinuous(aggr="mean")
    with pytest.raises(ValueError, match="target_to_source"):
        U.WLConvContinuous(flow="target_to_source")
    with pytest.raises(ValueError, match="edge_weight"):
        U.WLConvContinuous()(x, edge_index, torch.ones(8, 2, dtype=torch.float64))
    with pytest.raises(TypeError, match="edge_weight"):
        U.WLConvContinuous()(x, edge_index, torch.ones(8, dtype=torch.long))
    with pytest.raises(ValueError, match=r"x of shape"):
        U.WLConvContinuous()(x.view(5, 5, 1), edge_index)
    with pytest.raises(ValueError, match="width"):
        U.WLConvContinuous()((x, features(5, 3)), edge_index)
