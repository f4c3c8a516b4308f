"""TransformerConv against PyG's (float64): outputs, input and parameter gradients over its options
and call forms, the attention weights in each return form, and the refusals."""
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


def pair(**kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.TransformerConv(IN, 4, **kwargs)
    return theirs, loaded(theirs, U.TransformerConv(IN, 4, **kwargs))


@pytest.mark.parametrize("edge_dim", [None, 3])
@pytest.mark.parametrize("concat", [True, False])
@pytest.mark.parametrize("beta,root_weight", [(False, True), (True, True), (True, False), (False, False)])
def test_matches_pyg(edge_dim, concat, beta, root_weight):
    theirs, ours = pair(heads=3, concat=concat, beta=beta, edge_dim=edge_dim, root_weight=root_weight)
    x, edge_index, edge_attr = data(edge_dim)
    assert_same(theirs, ours, x, edge_index, edge_attr)
    assert str(ours) == str(theirs) == "TransformerConv(5, 4, heads=3)"


@pytest.mark.parametrize("kwargs", [dict(aggr="mean"), dict(aggr="max"), dict(flow="target_to_source"),
                                    dict(bias=False, heads=2)])
def test_message_passing_arguments_match_pyg(kwargs):
    theirs, ours = pair(edge_dim=2, **kwargs)
    x, edge_index, edge_attr = data(2)
    assert_same(theirs, ours, x, edge_index, edge_attr)


def test_bipartite_pair_matches_pyg():
    torch.manual_seed(0)
    theirs = pyg_nn.TransformerConv((IN, 7), 4, heads=2, beta=True, edge_dim=2)
    ours = loaded(theirs, U.TransformerConv((IN, 7), 4, heads=2, beta=True, edge_dim=2))
    x_dst = torch.randn(6, 7, dtype=torch.float64)
    x, _, edge_attr = data(2)
    edge_index = random_edges(N, E, 1, num_dst=6)
    assert_same(theirs, ours, (x, x_dst), edge_index, edge_attr)
    assert str(ours) == str(theirs) == "TransformerConv((5, 7), 4, heads=2)"


def test_sparse_adjacencies_match_pyg():
    """A torch sparse adj_t with edge_attr in its storage order, and a SparseTensor holding the
    edge features as its values (no duplicates: an adjacency merges them)."""
    torch_sparse = pytest.importorskip("torch_sparse")
    theirs, ours = pair(heads=2, edge_dim=3)
    x, edge_index, _ = data()
    edge_index = torch.unique(edge_index, dim=1)
    edge_attr = torch.randn(edge_index.shape[1], 3, dtype=torch.float64)
    expected = theirs(x, edge_index, edge_attr)
    csr = torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t().to_torch_sparse_csr_tensor()
    order = torch.argsort(edge_index[1] * N + edge_index[0])   # the CSR's storage order
    assert_same(Bound(theirs, csr, edge_attr[order]), Bound(ours, csr, edge_attr[order]), x)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, edge_attr, (N, N)).t()
    torch.testing.assert_close(assert_same(Bound(theirs, adj), Bound(ours, adj), x), expected, **TOL)


def test_attention_weights_in_each_form():
    torch_sparse = pytest.importorskip("torch_sparse")
    theirs, ours = pair(heads=2)
    x, edge_index, _ = data()
    out, (index, alpha) = ours(x, edge_index, return_attention_weights=True)
    expected, (_, reference) = theirs(x, edge_index, return_attention_weights=True)
    assert index is edge_index
    torch.testing.assert_close(out, expected, **TOL)
    torch.testing.assert_close(alpha, reference, **TOL)
    torch.testing.assert_close(torch.zeros(N, 2, dtype=alpha.dtype).index_add_(0, edge_index[1], alpha)[edge_index[1]],
                               torch.ones(E, 2, dtype=alpha.dtype), **TOL)
    # any bool asks for them, as in PyG
    assert isinstance(ours(x, edge_index, return_attention_weights=False), tuple)
    unique = torch.unique(edge_index, dim=1)
    adj = torch_sparse.SparseTensor.from_edge_index(unique, sparse_sizes=(N, N)).t()
    _, weighted = ours(x, adj, return_attention_weights=True)
    _, reference = theirs(x, adj, return_attention_weights=True)
    torch.testing.assert_close(weighted.to_dense(), reference.to_dense(), **TOL)
    csr = adj.to_torch_sparse_csr_tensor()
    _, (given, alpha) = ours(x, csr, return_attention_weights=True)
    assert given is csr and alpha.shape == (unique.shape[1], 2)


def test_graph_form_and_lazy_in_channels():
    theirs, ours = pair(heads=2, edge_dim=2)
    x, edge_index, edge_attr = data(2)
    g = unigraph.Graph(edge_index, num_nodes=N)
    torch.testing.assert_close(ours(g, x, edge_attr), theirs(x, edge_index, edge_attr), **TOL)
    lazy = U.TransformerConv(-1, 4, heads=2, edge_dim=2).double()
    assert lazy(x, edge_index, edge_attr).shape == (N, 8)
    lazy.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(lazy(x, edge_index, edge_attr), theirs(x, edge_index, edge_attr), **TOL)


def test_empty_graph_matches_pyg():
    theirs, ours = pair(heads=2, beta=True)
    x, _, _ = data()
    assert_same(theirs, ours, x, torch.empty(2, 0, dtype=torch.long))


def test_attention_dropout():
    """Dropout acts on the attention weights in training only; the weights returned are the
    softmax before it (as in PyG)."""
    torch.manual_seed(0)
    conv = U.TransformerConv(IN, 4, heads=2, dropout=0.5).double()
    x, edge_index, _ = data()
    conv.eval()
    evaluated = conv(x, edge_index)
    conv.train()
    torch.manual_seed(1)
    first, (_, alpha) = conv(x, edge_index, return_attention_weights=True)
    torch.manual_seed(1)
    torch.testing.assert_close(conv(x, edge_index), first, **TOL)
    assert not torch.allclose(first, evaluated)
    sums = torch.zeros(N, 2, dtype=alpha.dtype).index_add_(0, edge_index[1], alpha)
    torch.testing.assert_close(sums[edge_index[1]], torch.ones(E, 2, dtype=alpha.dtype), **TOL)


def test_refusals():
    x, edge_index, edge_attr = data(3)
    with pytest.raises(ValueError, match="without edge_dim"):
        U.TransformerConv(IN, 4)(x.float(), edge_index, edge_attr.float())
    with pytest.raises(ValueError, match="edge_dim=3 but got no edge_attr"):
        U.TransformerConv(IN, 4, edge_dim=3)(x.float(), edge_index)
    with pytest.raises(ValueError, match=r"edge_dim=2\], got \[30, 3\]"):
        U.TransformerConv(IN, 4, edge_dim=2)(x.float(), edge_index, edge_attr.float())
    with pytest.raises(ValueError, match="static graphs"):
        U.TransformerConv(IN, 4)(torch.randn(2, N, IN), edge_index)
    with pytest.raises(ValueError, match="heads"):
        U.TransformerConv(IN, 4, heads=0)
    with pytest.raises(ValueError, match="dropout"):
        U.TransformerConv(IN, 4, dropout=1.5)
    with pytest.raises(ValueError, match="features"):
        U.TransformerConv(IN, 4)(torch.randn(N, IN + 1), edge_index)
    adj = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(E), (N, N)).coalesce()
    with pytest.raises(ValueError, match="target_to_source"):
        U.TransformerConv(IN, 4, flow="target_to_source")(x.float(), adj)
