"""SignedConv against PyG's (float64): outputs, input and parameter gradients for both layer kinds
(first_aggr), over bias, aggregations, flow, lazy widths and call forms (edge_index, torch sparse
adj_t whose values weight the messages, SparseTensor whose values are ignored, pairs, a graph
object); the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, N_DST, IN, OUT = 10, 6, 4, 3


def edges(seed, num_dst=None):
    """Unique random edges in a random order (max: no ties to split; adjacencies: nothing merged)."""
    gen = torch.Generator().manual_seed(seed)
    found = torch.unique(random_edges(N, 30, seed, num_dst=num_dst), dim=1)
    return found[:, torch.randperm(found.shape[1], generator=gen)].contiguous()


def data(first_aggr, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, IN if first_aggr else 2 * IN, dtype=torch.float64, generator=gen)
    return x, edges(seed), edges(seed + 100)


def pair(first_aggr, in_channels=IN, **kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.SignedConv(in_channels, OUT, first_aggr=first_aggr, **kwargs)
    ours = U.SignedConv(in_channels, OUT, first_aggr=first_aggr, **kwargs)
    return theirs, (loaded(theirs, ours) if in_channels != -1 else ours)


@pytest.mark.parametrize("first_aggr", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_matches_pyg(first_aggr, bias):
    theirs, ours = pair(first_aggr, bias=bias)
    x, pos_edges, neg_edges = data(first_aggr)
    out = assert_same(theirs, ours, x, pos_edges, neg_edges)
    assert out.shape == (N, 2 * OUT)
    assert str(ours) == str(theirs) == f"SignedConv({IN}, {OUT}, first_aggr={first_aggr})"


@pytest.mark.parametrize("first_aggr", [True, False])
@pytest.mark.parametrize("kwargs", [dict(aggr="add"), dict(aggr="max"), dict(flow="target_to_source")])
def test_message_passing_arguments_match_pyg(first_aggr, kwargs):
    theirs, ours = pair(first_aggr, **kwargs)
    assert_same(theirs, ours, *data(first_aggr, 1))


@pytest.mark.parametrize("first_aggr", [True, False])
def test_pair_matches_pyg(first_aggr):
    theirs, ours = pair(first_aggr)
    x, _, _ = data(first_aggr, 2)
    x_dst = torch.randn(N_DST, x.shape[1], dtype=torch.float64)
    out = assert_same(theirs, ours, (x, x_dst), edges(2, N_DST), edges(3, N_DST))
    assert out.shape == (N_DST, 2 * OUT)


@pytest.mark.parametrize("first_aggr", [True, False])
@pytest.mark.parametrize("aggr", ["mean", "add", "max"])
def test_sparse_adjacencies_match_pyg(first_aggr, aggr):
    """A torch sparse adj_t's values weight the messages (PyG's spmm multiplies by them); a
    SparseTensor's are dropped (PyG's set_value(None))."""
    torch_sparse = pytest.importorskip("torch_sparse")
    from torch_geometric.utils import to_torch_csr_tensor
    theirs, ours = pair(first_aggr, aggr=aggr)
    x, pos_edges, neg_edges = data(first_aggr, 4)
    unweighted = assert_same(theirs, ours, x, pos_edges, neg_edges)
    adjacencies = []
    for index in (pos_edges, neg_edges):
        weight = torch.rand(index.shape[1], dtype=torch.float64) + 0.5
        adjacencies.append((to_torch_csr_tensor(index.flip(0), weight, size=(N, N)),
                            torch_sparse.SparseTensor.from_edge_index(index, weight, sparse_sizes=(N, N)).t()))
    (pos_csr, pos_st), (neg_csr, neg_st) = adjacencies
    torch.testing.assert_close(assert_same(theirs, ours, x, pos_st, neg_st), unweighted, **TOL)
    weighted = assert_same(theirs, ours, x, pos_csr, neg_csr)
    assert not torch.allclose(weighted, unweighted)
    graph = unigraph.Graph(pos_edges, num_nodes=N)
    torch.testing.assert_close(ours(x, graph, unigraph.Graph(neg_edges, num_nodes=N)), unweighted, **TOL)


def test_bipartite_sparse_adjacencies_match_pyg():
    torch_sparse = pytest.importorskip("torch_sparse")
    from torch_geometric.utils import to_torch_csc_tensor
    theirs, ours = pair(True)
    x, _, _ = data(True, 5)
    x_dst = x[:N_DST]
    pos_edges, neg_edges = edges(5, N_DST), edges(6, N_DST)
    expected = assert_same(theirs, ours, (x, x_dst), pos_edges, neg_edges)
    ones = lambda e: torch.ones(e.shape[1], dtype=torch.float64)   # noqa: E731 (PyG's spmm needs x's dtype)
    for make in (lambda e: to_torch_csc_tensor(e, ones(e), size=(N, N_DST)).t(),
                 lambda e: torch_sparse.SparseTensor.from_edge_index(e, sparse_sizes=(N, N_DST)).t()):
        out = assert_same(theirs, ours, (x, x_dst), make(pos_edges), make(neg_edges))
        torch.testing.assert_close(out, expected, **TOL)


def test_lazy_in_channels_match_pyg():
    theirs, ours = pair(True, -1)
    x, pos_edges, neg_edges = data(True, 7)
    theirs.double()(x, pos_edges, neg_edges)
    ours.double()(x, pos_edges, neg_edges)
    assert ours.lin_pos_l.weight.shape == (OUT, IN)
    assert_same(theirs, loaded(theirs, ours), x, pos_edges, neg_edges)


def test_refusals():
    x, pos_edges, neg_edges = data(False, 8)
    _, ours = pair(False)
    with pytest.raises(ValueError, match=f"{2 * IN} features"):
        ours(x[:, :IN], pos_edges, neg_edges)
    with pytest.raises(ValueError, match="first_aggr=True"):
        U.SignedConv(-1, OUT, first_aggr=False)
    with pytest.raises(ValueError, match="neg_edge_index.*index"):
        ours(x, pos_edges, torch.tensor([[0], [N]]))
    with pytest.raises(ValueError, match="destination features"):
        ours((x, None), pos_edges, neg_edges)
    from torch_geometric.utils import to_torch_csc_tensor
    adj = to_torch_csc_tensor(pos_edges, size=(N, N)).t()
    with pytest.raises(ValueError, match="target_to_source"):
        pair(False, flow="target_to_source")[1](x, adj, adj)
    with pytest.raises(ValueError, match="static graphs"):
        ours(x.unsqueeze(0).expand(2, -1, -1), pos_edges, neg_edges)
