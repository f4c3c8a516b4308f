"""PPFConv against PyG's (float64): outputs, input and parameter gradients (positions and normals
included) over its options and call forms; the self-loops' zero vectors; the refusals."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn import Linear, ReLU, Sequential

import unigraph
import unigraph.nn as U
from unigraph.nn.ppf_conv import point_pair_features
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, N_DST, IN, OUT = 9, 5, 4, 6


def loop_free_edges(num_src, num_edges, seed, num_dst=None):
    """Unique random edges without self-loops, in a random order: no exact ties under max (PyG's
    scatter_reduce splits a tie's gradient, unigraph's goes to the first)."""
    edges = torch.unique(random_edges(num_src, num_edges, seed, num_dst=num_dst), dim=1)
    if num_dst is None:
        edges = edges[:, edges[0] != edges[1]]
    order = torch.randperm(edges.shape[1], generator=torch.Generator().manual_seed(seed))
    return edges[:, order].contiguous()


def points(rows, gen):
    return torch.randn(rows, 3, dtype=torch.float64, generator=gen), \
        F.normalize(torch.randn(rows, 3, dtype=torch.float64, generator=gen), dim=-1)


def data(seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, IN, dtype=torch.float64, generator=gen)
    return (x, *points(N, gen), loop_free_edges(N, 30, seed))


def networks(with_local=True, with_global=True, features=True):
    width = (IN if features else 0) + 4
    local_nn = Sequential(Linear(width, 8), ReLU(), Linear(8, OUT)) if with_local else None
    global_nn = Sequential(Linear(OUT if with_local else width, 5)) if with_global else None
    return local_nn, global_nn


def pair(with_local=True, with_global=True, features=True, **kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.PPFConv(*networks(with_local, with_global, features), **kwargs)
    return theirs, loaded(theirs, U.PPFConv(*networks(with_local, with_global, features), **kwargs))


@pytest.mark.parametrize("with_local,with_global", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("features", [True, False])
def test_matches_pyg_without_self_loops(with_local, with_global, features):
    theirs, ours = pair(with_local, with_global, features, add_self_loops=False)
    x, pos, normal, edge_index = data()
    assert_same(theirs, ours, x if features else None, pos, normal, edge_index)
    assert str(ours) == str(theirs)


@pytest.mark.parametrize("kwargs", [dict(aggr="mean"), dict(aggr="add"), dict(flow="target_to_source")])
def test_message_passing_arguments_match_pyg(kwargs):
    theirs, ours = pair(with_global=False, add_self_loops=False, **kwargs)
    x, pos, normal, edge_index = data(1)
    assert_same(theirs, ours, x, pos, normal, edge_index)


@pytest.mark.parametrize("features", [True, False])
def test_self_loops_match_pyg(features):
    """With the self-loops (the default): d_ii = 0, whose angles are 0 with a zero gradient."""
    theirs, ours = pair(features=features)
    x, pos, normal, edge_index = data(2)
    assert_same(theirs, ours, x if features else None, pos, normal, edge_index)


def test_zero_vector_angles_match_pyg():
    """d_ii = 0: every angle with it is atan2(0, 0) = 0 (also for a normal with no positive
    component, whose products with d are -0), with a zero gradient."""
    from torch_geometric.nn.conv.ppf_conv import point_pair_features as pyg_features
    pos = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    normal = torch.tensor([[0.6, -0.8, 0.0], [-0.6, -0.8, -0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    ours = point_pair_features(pos, pos, normal, normal)
    torch.testing.assert_close(ours, pyg_features(pos, pos, normal, normal), **TOL)
    assert not ours[:, :3].any()
    ours.sum().backward()
    assert not pos.grad.any()


def test_sparse_adjacencies_and_graph_object_match_pyg():
    torch_sparse = pytest.importorskip("torch_sparse")
    from torch_geometric.utils import to_torch_csc_tensor
    theirs, ours = pair()
    x, pos, normal, edge_index = data(3)
    expected = assert_same(theirs, ours, x, pos, normal, edge_index)
    for adj in (to_torch_csc_tensor(edge_index, size=(N, N)).t(),
                torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t()):
        out = assert_same(theirs, ours, x, pos, normal, adj)
        torch.testing.assert_close(out, expected, **TOL)
    graph = unigraph.Graph(edge_index, num_nodes=N)
    torch.testing.assert_close(ours(x, pos, normal, graph), expected, **TOL)


def test_bipartite_matches_pyg():
    torch_sparse = pytest.importorskip("torch_sparse")
    from torch_geometric.utils import to_torch_csc_tensor
    gen = torch.Generator().manual_seed(4)
    x, pos, normal, _ = data(4)
    pos_dst, normal_dst = points(N_DST, gen)
    edge_index = loop_free_edges(N, 25, 4, num_dst=N_DST)
    theirs, ours = pair(add_self_loops=False)
    expected = assert_same(theirs, ours, x, (pos, pos_dst), (normal, normal_dst), edge_index)
    assert expected.shape == (N_DST, 5)
    theirs, ours = pair()
    pos, normal = (pos, pos_dst), (normal, normal_dst)
    expected = assert_same(theirs, ours, x, pos, normal, edge_index)
    assert_same(theirs, ours, (x, None), pos, normal, edge_index)
    for adj in (to_torch_csc_tensor(edge_index, size=(N, N_DST)).t(),
                torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N_DST)).t()):
        torch.testing.assert_close(assert_same(theirs, ours, x, pos, normal, adj),
                                   expected, **TOL)


def test_refusals():
    x, pos, normal, edge_index = data(5)
    conv = U.PPFConv(networks()[0])
    with pytest.raises(ValueError, match="only 5 source nodes"):   # PyG: an index error
        conv(x[:5], (pos[:5], pos), (normal[:5], normal), random_edges(5, 8, 0, num_dst=N))
    with pytest.raises(ValueError, match="3-D pos"):
        conv(x, pos[:, :2], normal, edge_index)
    with pytest.raises(ValueError, match="normal.* 8 rows"):
        conv(x, pos, normal[:8], edge_index)
    with pytest.raises(TypeError, match="global_nn must be a callable"):
        U.PPFConv(global_nn="mlp")
