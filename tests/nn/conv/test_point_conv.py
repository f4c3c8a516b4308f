"""PointNetConv against PyG's (float64): outputs, input and parameter gradients over its options
(networks or none, features or none, self-loops, aggregations, flow) and call forms (edge_index,
EdgeIndex, torch sparse and SparseTensor adj_t, bipartite positions, a graph object), batch norm's
running statistics, and the refusals."""
from __future__ import annotations

import pytest
import torch
from torch.nn import BatchNorm1d, Linear, ReLU, Sequential

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, N_DST, IN, OUT = 9, 5, 4, 6


def unique_edges(num_src, num_edges, seed, num_dst=None):
    """Random edges without duplicates: a max over two equal messages splits PyG's gradient
    (scatter_reduce) where unigraph's goes to the first, so the comparisons avoid exact ties."""
    edges = torch.unique(random_edges(num_src, num_edges, seed, num_dst=num_dst), dim=1)
    order = torch.randperm(edges.shape[1], generator=torch.Generator().manual_seed(seed))
    return edges[:, order].contiguous()   # (unique sorts them: back to a random order)


def data(seed=0, features=True):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, IN, dtype=torch.float64, generator=gen) if features else None
    pos = torch.randn(N, 3, dtype=torch.float64, generator=gen)
    return x, pos, unique_edges(N, 30, seed)


def networks(with_local=True, with_global=True, features=True):
    width = (IN if features else 0) + 3
    local_nn = Sequential(Linear(width, 8), ReLU(), Linear(8, OUT)) if with_local else None
    global_nn = Sequential(Linear(OUT if with_local else width, 5)) if with_global else None
    return local_nn, global_nn


def pair(with_local=True, with_global=True, features=True, **kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.PointNetConv(*networks(with_local, with_global, features), **kwargs)
    torch.manual_seed(1)
    return theirs, loaded(theirs, U.PointNetConv(*networks(with_local, with_global, features), **kwargs))


@pytest.mark.parametrize("with_local,with_global", [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("features", [True, False])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_matches_pyg(with_local, with_global, features, add_self_loops):
    theirs, ours = pair(with_local, with_global, features, add_self_loops=add_self_loops)
    x, pos, edge_index = data(features=features)
    assert_same(theirs, ours, x, pos, edge_index)
    assert str(ours) == str(theirs)


@pytest.mark.parametrize("kwargs", [dict(aggr="mean"), dict(aggr="add"), dict(aggr="min"),
                                    dict(flow="target_to_source"), dict(aggr=["mean", "max"])])
def test_message_passing_arguments_match_pyg(kwargs):
    theirs, ours = pair(with_global=False, **kwargs)
    x, pos, edge_index = data(1)
    assert_same(theirs, ours, x, pos, edge_index)


def test_existing_self_loops_are_replaced_and_kept_without_add_self_loops():
    x, pos, edge_index = data(2)
    looped = torch.cat([edge_index, torch.tensor([[0, 3, 3], [0, 3, 3]])], dim=1)   # one loop twice
    for add_self_loops in (True, False):
        theirs, ours = pair(add_self_loops=add_self_loops, aggr="add")
        assert_same(theirs, ours, x, pos, looped)


def test_sparse_adjacencies_and_edge_index_match_pyg():
    torch_sparse = pytest.importorskip("torch_sparse")
    from torch_geometric import EdgeIndex
    from torch_geometric.utils import to_torch_csc_tensor
    theirs, ours = pair()
    x, pos, edge_index = data(3)
    expected = assert_same(theirs, ours, x, pos, edge_index)
    for adj in (to_torch_csc_tensor(edge_index, size=(N, N)).t(),
                torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t(),
                EdgeIndex(edge_index, sparse_size=(N, N))):
        out = assert_same(theirs, ours, x, pos, adj)
        torch.testing.assert_close(out, expected, **TOL)


def test_bipartite_positions_match_pyg():
    """Positions as a pair make the graph bipartite; x alone, (x, None), a sparse adj_t [N_dst, N]."""
    torch_sparse = pytest.importorskip("torch_sparse")
    from torch_geometric.utils import to_torch_csc_tensor
    x, pos, _ = data(4)
    pos_dst = torch.randn(N_DST, 3, dtype=torch.float64)
    edge_index = unique_edges(N, 25, 4, num_dst=N_DST)
    for add_self_loops in (True, False):
        theirs, ours = pair(add_self_loops=add_self_loops)
        expected = assert_same(theirs, ours, x, (pos, pos_dst), edge_index)
        assert expected.shape == (N_DST, 5)
        assert_same(theirs, ours, (x, None), (pos, pos_dst), edge_index)
        for adj in (to_torch_csc_tensor(edge_index, size=(N, N_DST)).t(),
                    torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N_DST)).t()):
            torch.testing.assert_close(assert_same(theirs, ours, x, (pos, pos_dst), adj), expected, **TOL)


def test_graph_object_form_is_the_edge_index_form():
    theirs, ours = pair()
    x, pos, edge_index = data(5)
    expected = ours(x, pos, edge_index)
    torch.testing.assert_close(ours(x, pos, unigraph.Graph(edge_index, num_nodes=N)), expected, **TOL)


def test_batch_norm_sees_the_edges_as_in_pyg():
    """The local network runs once per edge: its batch norm's running statistics (training) and
    its output (eval) equal PyG's."""
    def make():
        return Sequential(Linear(IN + 3, 8), BatchNorm1d(8), ReLU(), Linear(8, OUT))
    torch.manual_seed(0)
    theirs = pyg_nn.PointNetConv(make())
    ours = loaded(theirs, U.PointNetConv(make()))
    x, pos, edge_index = data(6)
    assert_same(theirs, ours, x, pos, edge_index)
    for name, buffer in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], buffer, **TOL, msg=name)
    theirs.eval(), ours.eval()
    assert_same(theirs, ours, x, pos, edge_index)


def test_refusals():
    x, pos, edge_index = data(7)
    conv = U.PointNetConv(networks()[0])
    with pytest.raises(TypeError, match="local_nn must be a callable"):
        U.PointNetConv(local_nn=3)
    with pytest.raises(ValueError, match="x .* 8 rows but the graph has 9"):
        conv(x[:8], pos, edge_index)
    with pytest.raises(ValueError, match="pos .*floating-point"):
        conv(x, pos.long(), edge_index)
    with pytest.raises(ValueError, match="differ in width"):
        conv(x, (pos, torch.randn(N_DST, 2, dtype=torch.float64)), random_edges(N, 5, 0, num_dst=N_DST))
    with pytest.raises(ValueError, match="edge_index|graph has"):
        conv(x, pos, torch.tensor([[0, 1], [2, N + 3]]))
    with pytest.raises(ValueError, match="target_to_source"):
        U.PointNetConv(flow="target_to_source")(None, (pos, pos[:N_DST]), random_edges(N, 5, 0, num_dst=N_DST))
    from torch_geometric.utils import to_torch_csc_tensor
    with pytest.raises(ValueError, match="target_to_source.*sparse"):
        U.PointNetConv(flow="target_to_source")(None, pos, to_torch_csc_tensor(edge_index, size=(N, N)).t())
