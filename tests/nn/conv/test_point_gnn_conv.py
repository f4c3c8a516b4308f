"""PointGNNConv against PyG's (float64): outputs, input and parameter gradients and batch norm's
running statistics (its MLPs run on one row per edge) over aggregations, flow and call forms, the
repr, and the refusals."""
from __future__ import annotations

import copy

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, F = 10, 6


def data(seed=0):
    """Unique random edges in a random order (a max over two equal messages splits PyG's gradient,
    unigraph's goes to the first)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, F, dtype=torch.float64, generator=gen)
    pos = torch.randn(N, 3, dtype=torch.float64, generator=gen)
    edges = torch.unique(random_edges(N, 35, seed), dim=1)
    return x, pos, edges[:, torch.randperm(edges.shape[1], generator=gen)].contiguous()


def pair(**kwargs):
    torch.manual_seed(0)
    mlps = dict(mlp_h=pyg_nn.MLP([F, 8, 3]), mlp_f=pyg_nn.MLP([3 + F, 8, F]), mlp_g=pyg_nn.MLP([F, 8, F]))
    theirs = pyg_nn.PointGNNConv(**mlps, **kwargs)
    return theirs, loaded(theirs, U.PointGNNConv(**copy.deepcopy(mlps), **kwargs))


def assert_same_state(theirs, ours):
    for name, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], value, **TOL, msg=name)


@pytest.mark.parametrize("training", [True, False])
def test_matches_pyg(training):
    theirs, ours = pair()
    theirs.train(training), ours.train(training)
    x, pos, edge_index = data()
    assert_same(theirs, ours, x, pos, edge_index)
    assert_same_state(theirs, ours)   # the batch norms' running statistics, from the same rows
    assert str(ours) == str(theirs) == ("PointGNNConv(\n  mlp_h=MLP(6, 8, 3),\n  mlp_f=MLP(9, 8, 6),\n"
                                        "  mlp_g=MLP(6, 8, 6),\n)")


@pytest.mark.parametrize("kwargs", [dict(aggr="mean"), dict(aggr="add"), dict(flow="target_to_source")])
def test_message_passing_arguments_match_pyg(kwargs):
    theirs, ours = pair(**kwargs)
    x, pos, edge_index = data(1)
    assert_same(theirs, ours, x, pos, edge_index)


def test_sparse_adjacencies_and_graph_object_match_pyg():
    torch_sparse = pytest.importorskip("torch_sparse")
    from torch_geometric import EdgeIndex
    from torch_geometric.utils import to_torch_csc_tensor
    theirs, ours = pair()
    theirs.eval(), ours.eval()   # (each call then sees the same batch norm statistics)
    x, pos, edge_index = data(2)
    expected = assert_same(theirs, ours, x, pos, edge_index)
    for adj in (to_torch_csc_tensor(edge_index, size=(N, N)).t(),
                torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t(),
                EdgeIndex(edge_index, sparse_size=(N, N))):
        torch.testing.assert_close(assert_same(theirs, ours, x, pos, adj), expected, **TOL)
    torch.testing.assert_close(ours(x, pos, unigraph.Graph(edge_index, num_nodes=N)), expected, **TOL)


def test_nodes_without_in_edges_keep_their_features_plus_g_of_zero():
    _, ours = pair()
    ours.eval()
    x, pos, _ = data(3)
    out = ours(x, pos, torch.tensor([[0, 1], [2, 2]]))
    zero = ours.mlp_g(torch.zeros(1, F, dtype=torch.float64))
    torch.testing.assert_close(out[3:], x[3:] + zero, **TOL)


def test_refusals():
    _, ours = pair()
    x, pos, edge_index = data(4)
    with pytest.raises(TypeError, match="no source/destination pairs"):
        ours(x, (pos, pos[:5]), edge_index)
    with pytest.raises(ValueError, match="square graph"):
        ours(x, pos, unigraph.Graph(random_edges(N, 5, 0, num_dst=4), num_src_nodes=N, num_dst_nodes=4))
    with pytest.raises(ValueError, match="x has 8 rows but the graph has 10"):
        ours(x[:8], pos, edge_index)
    with pytest.raises(TypeError, match="mlp_g must be a callable network"):
        U.PointGNNConv(ours.mlp_h, ours.mlp_f, None)
