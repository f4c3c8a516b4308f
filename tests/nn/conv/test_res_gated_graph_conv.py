"""ResGatedGraphConv against PyG's (float64): outputs, input and parameter gradients over its options
and call forms (edge features, bipartite pairs, sparse adjacencies, static graphs), and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, IN, E = 10, 5, 30


class Bound(torch.nn.Module):
    """``conv(x, *fixed)``: a call whose adjacency stays out of assert_same's gradient checks."""

    def __init__(self, conv, *fixed):
        super().__init__()
        self.conv, self.fixed = conv, fixed

    def forward(self, x):
        return self.conv(x, *self.fixed)


def data(edge_dim=None, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, IN, dtype=torch.float64, generator=gen)
    edge_attr = torch.randn(E, edge_dim, dtype=torch.float64, generator=gen) if edge_dim else None
    return x, random_edges(N, E, seed), edge_attr


def pair(in_channels=IN, **kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.ResGatedGraphConv(in_channels, 4, **kwargs)
    return theirs, loaded(theirs, U.ResGatedGraphConv(in_channels, 4, **kwargs))


@pytest.mark.parametrize("edge_dim", [None, 3])
@pytest.mark.parametrize("root_weight", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_matches_pyg(edge_dim, root_weight, bias):
    theirs, ours = pair(edge_dim=edge_dim, root_weight=root_weight, bias=bias)
    x, edge_index, edge_attr = data(edge_dim)
    assert_same(theirs, ours, x, edge_index, edge_attr)
    assert str(ours) == str(theirs) == "ResGatedGraphConv(5, 4)"


@pytest.mark.parametrize("edge_dim", [None, 2])
def test_bipartite_pair_matches_pyg(edge_dim):
    theirs, ours = pair((IN, 7), edge_dim=edge_dim)
    x, _, edge_attr = data(edge_dim)
    assert_same(theirs, ours, (x, torch.randn(6, 7, dtype=torch.float64)), random_edges(N, E, 2, num_dst=6), edge_attr)
    assert str(ours) == str(theirs) == "ResGatedGraphConv((5, 7), 4)"


@pytest.mark.parametrize("kwargs", [dict(aggr="mean"), dict(aggr="max"), dict(flow="target_to_source"),
                                    dict(act=torch.nn.Tanh(), edge_dim=2)])
def test_message_passing_arguments_and_gates_match_pyg(kwargs):
    theirs, ours = pair(**kwargs)
    x, edge_index, edge_attr = data(kwargs.get("edge_dim"), seed=1)
    assert_same(theirs, ours, x, edge_index, edge_attr)


@pytest.mark.parametrize("act", [torch.nn.Sigmoid(), torch.nn.Softmax(dim=-1)])
def test_static_graph_matches_pyg(act):
    """x of shape [B, N, F] (PyG's node_dim=-2); the gate sees each feature set's channels."""
    theirs, ours = pair(act=act, aggr="mean")
    x = torch.randn(3, N, IN, dtype=torch.float64)
    assert_same(theirs, ours, x, random_edges(N, E))


def test_sparse_adjacencies_match_pyg():
    torch_sparse = pytest.importorskip("torch_sparse")
    theirs, ours = pair(edge_dim=3)
    x, edge_index, _ = data()
    edge_index = torch.unique(edge_index, dim=1)
    edge_attr = torch.randn(edge_index.shape[1], 3, dtype=torch.float64)
    expected = theirs(x, edge_index, edge_attr)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, edge_attr, (N, N)).t()
    torch.testing.assert_close(assert_same(Bound(theirs, adj), Bound(ours, adj), x), expected, **TOL)
    csr = torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t().to_torch_sparse_csr_tensor()
    order = torch.argsort(edge_index[1] * N + edge_index[0])   # the CSR's storage order
    torch.testing.assert_close(assert_same(Bound(theirs, csr, edge_attr[order]), Bound(ours, csr, edge_attr[order]), x),
                               expected, **TOL)


def test_graph_form_lazy_and_empty_graph():
    theirs, ours = pair()
    x, edge_index, _ = data()
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=N), x), theirs(x, edge_index), **TOL)
    lazy = U.ResGatedGraphConv(-1, 4).double()
    assert lazy(x, edge_index).shape == (N, 4)
    lazy.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(lazy(x, edge_index), theirs(x, edge_index), **TOL)
    assert_same(theirs, ours, x, torch.empty(2, 0, dtype=torch.long))


def test_refusals():
    x, edge_index, edge_attr = data(3)
    x, edge_attr = x.float(), edge_attr.float()
    with pytest.raises(ValueError, match="without edge_dim"):
        U.ResGatedGraphConv(IN, 4)(x, edge_index, edge_attr)
    with pytest.raises(ValueError, match="edge_dim=3 but got no edge_attr"):
        U.ResGatedGraphConv(IN, 4, edge_dim=3)(x, edge_index)
    with pytest.raises(ValueError, match="edge_dim=2"):
        U.ResGatedGraphConv(IN, 4, edge_dim=2)(x, edge_index, edge_attr)
    with pytest.raises(ValueError, match="give in_channels"):
        U.ResGatedGraphConv(-1, 4, edge_dim=2)
    with pytest.raises(ValueError, match="callable"):
        U.ResGatedGraphConv(IN, 4, act=None)
    with pytest.raises(ValueError, match="static graph"):
        U.ResGatedGraphConv(IN, 4, edge_dim=3)(torch.randn(2, N, IN), edge_index, edge_attr)
    with pytest.raises(ValueError, match="features"):
        U.ResGatedGraphConv(IN, 4)(torch.randn(N, IN + 1), edge_index)
