"""PointTransformerConv against PyG's (float64): outputs, input and parameter gradients over its
options (networks, self-loops, aggregations, flow, lazy widths) and call forms (edge_index,
EdgeIndex, sparse adj_t, (source, destination) pairs, a graph object), and the refusals."""
from __future__ import annotations

import pytest
import torch
from torch.nn import Linear, ReLU, Sequential

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, N_DST, IN, IN_DST, OUT = 9, 5, 4, 3, 6


def data(seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, IN, dtype=torch.float64, generator=gen)
    pos = torch.randn(N, 3, dtype=torch.float64, generator=gen)
    return x, pos, random_edges(N, 30, seed)   # (duplicates and self-loops: a sum has no ties to split)


def networks(kind):
    if kind == "default":
        return None, None
    pos_nn = Sequential(Linear(3, 8), ReLU(), Linear(8, OUT))
    attn_nn = Sequential(Linear(OUT, 8), ReLU(), Linear(8, OUT if kind == "both" else 1))
    return pos_nn, attn_nn


def pair(in_channels=IN, kind="default", **kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.PointTransformerConv(in_channels, OUT, *networks(kind), **kwargs)
    return theirs, loaded(theirs, U.PointTransformerConv(in_channels, OUT, *networks(kind), **kwargs))


@pytest.mark.parametrize("kind", ["default", "both", "scalar_attention"])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_matches_pyg(kind, add_self_loops):
    theirs, ours = pair(kind=kind, add_self_loops=add_self_loops)
    x, pos, edge_index = data()
    assert_same(theirs, ours, x, pos, edge_index)
    assert str(ours) == str(theirs) == f"PointTransformerConv({IN}, {OUT})"


@pytest.mark.parametrize("kwargs", [dict(aggr="mean"), dict(aggr="max"), dict(flow="target_to_source")])
def test_message_passing_arguments_match_pyg(kwargs):
    theirs, ours = pair(kind="both", **kwargs)
    x, pos, edge_index = data(1)
    if kwargs.get("aggr") == "max":   # no duplicate edges: equal messages would tie
        edge_index = torch.unique(edge_index, dim=1)
    assert_same(theirs, ours, x, pos, edge_index)


def test_sparse_adjacencies_and_graph_object_match_pyg():
    torch_sparse = pytest.importorskip("torch_sparse")
    from torch_geometric import EdgeIndex
    from torch_geometric.utils import to_torch_csc_tensor
    theirs, ours = pair(kind="both")
    x, pos, edge_index = data(2)
    edge_index = torch.unique(edge_index, dim=1)   # (an adjacency merges duplicates)
    expected = assert_same(theirs, ours, x, pos, edge_index)
    for adj in (to_torch_csc_tensor(edge_index, size=(N, N)).t(),
                torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t(),
                EdgeIndex(edge_index.contiguous(), sparse_size=(N, N))):
        torch.testing.assert_close(assert_same(theirs, ours, x, pos, adj), expected, **TOL)
    torch.testing.assert_close(ours(x, pos, unigraph.Graph(edge_index, num_nodes=N)), expected, **TOL)


@pytest.mark.parametrize("add_self_loops", [True, False])
def test_bipartite_pair_matches_pyg(add_self_loops):
    torch_sparse = pytest.importorskip("torch_sparse")
    from torch_geometric.utils import to_torch_csc_tensor
    theirs, ours = pair((IN, IN_DST), kind="both", add_self_loops=add_self_loops)
    assert str(ours) == str(theirs) == f"PointTransformerConv(({IN}, {IN_DST}), {OUT})"
    x, pos, _ = data(3)
    gen = torch.Generator().manual_seed(3)
    x_dst = torch.randn(N_DST, IN_DST, dtype=torch.float64, generator=gen)
    pos_dst = torch.randn(N_DST, 3, dtype=torch.float64, generator=gen)
    edge_index = torch.unique(random_edges(N, 25, 3, num_dst=N_DST), dim=1)
    expected = assert_same(theirs, ours, (x, x_dst), (pos, pos_dst), edge_index)
    assert expected.shape == (N_DST, OUT)
    for adj in (to_torch_csc_tensor(edge_index, size=(N, N_DST)).t(),
                torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N_DST)).t()):
        torch.testing.assert_close(assert_same(theirs, ours, (x, x_dst), (pos, pos_dst), adj), expected, **TOL)


def test_lazy_in_channels_match_pyg():
    x, pos, edge_index = data(4)
    theirs, ours = pyg_nn.PointTransformerConv(-1, OUT).double(), U.PointTransformerConv(-1, OUT).double()
    theirs(x, pos, edge_index)
    ours(x, pos, edge_index)
    assert ours.lin.weight.shape == (OUT, IN)
    loaded(theirs, ours)
    assert_same(theirs, ours, x, pos, edge_index)
    assert str(ours) == str(theirs) == f"PointTransformerConv(-1, {OUT})"


def test_rows_without_in_edges_get_zero():
    _, ours = pair(add_self_loops=False)
    x, pos, _ = data(5)
    out = ours(x, pos, torch.tensor([[0, 1], [2, 2]]))
    assert out.shape == (N, OUT) and not out[torch.arange(N) != 2].any()


def test_refusals():
    _, ours = pair()
    x, pos, edge_index = data(6)
    with pytest.raises(ValueError, match="in_channels must be"):
        U.PointTransformerConv(0, OUT)
    with pytest.raises(ValueError, match="out_channels must be a positive int"):
        U.PointTransformerConv(IN, 0)
    with pytest.raises(ValueError, match=f"{IN} features"):
        ours(x[:, :2], pos, edge_index)
    with pytest.raises(ValueError, match="x has 8 rows but the graph has 9"):   # (the node count comes from pos)
        ours(x[:8], pos, edge_index)
    with pytest.raises(TypeError, match="attn_nn must be a callable"):
        U.PointTransformerConv(IN, OUT, attn_nn=1)
    with pytest.raises(TypeError, match="destination"):
        ours((x, None), pos, edge_index)
