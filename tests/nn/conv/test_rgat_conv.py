"""RGATConv against PyG's (float64): outputs, input and parameter gradients and attention weights over
mods, mechanisms, modes, decompositions, edge features and call forms; the refusals."""
from __future__ import annotations

import itertools

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, IN, E, R = 10, 8, 30, 4


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
    edge_type = torch.randint(0, R, (E,), generator=gen)
    edge_attr = torch.randn(E, edge_dim, dtype=torch.float64, generator=gen) if edge_dim else None
    return x, random_edges(N, E, seed), edge_type, edge_attr


def pair(**kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.RGATConv(IN, 4, R, **kwargs)
    with torch.no_grad():   # PyG leaves l2 uninitialized, and w at 1
        theirs.l2.uniform_(-0.5, 0.5)
        theirs.w.uniform_(0.5, 1.5)
    return theirs, loaded(theirs, U.RGATConv(IN, 4, R, **kwargs))


MODES = {"add": "additive-self-attention", "mul": "multiplicative-self-attention"}
CASES = list(itertools.product([None, "additive", "scaled", "f-additive", "f-scaled"],
                               ["within-relation", "across-relation"], ["add", "mul"]))


@pytest.mark.parametrize("mod,mechanism,mode", CASES)
def test_matches_pyg(mod, mechanism, mode):
    """Each mod, mechanism and mode; the decompositions, concat and edge features in turn."""
    case = CASES.index((mod, mechanism, mode))
    decomposition = [dict(), dict(num_bases=3), dict(num_blocks=2)][case % 3]
    edge_dim = 3 if case % 2 else None
    kwargs = dict(mod=mod, attention_mechanism=mechanism, attention_mode=MODES[mode], heads=2,
                  dim=1 if mode == "add" else 2, concat=bool(case % 4 < 2), edge_dim=edge_dim, **decomposition)
    theirs, ours = pair(**kwargs)
    x, edge_index, edge_type, edge_attr = data(edge_dim)
    assert_same(theirs, ours, x, edge_index, edge_type, edge_attr)
    out, (index, alpha) = ours(x, edge_index, edge_type, edge_attr, return_attention_weights=True)
    _, (_, reference) = theirs(x, edge_index, edge_type, edge_attr, return_attention_weights=True)
    assert index is edge_index
    torch.testing.assert_close(alpha, reference, **TOL)
    assert str(ours) == str(theirs) == "RGATConv(8, 4, heads=2)"


@pytest.mark.parametrize("kwargs", [dict(aggr="mean"), dict(aggr="max"), dict(flow="target_to_source"),
                                    dict(bias=False, concat=False), dict(negative_slope=0.4, edge_dim=1)])
def test_message_passing_arguments_match_pyg(kwargs):
    theirs, ours = pair(heads=2, **kwargs)
    x, edge_index, edge_type, edge_attr = data(kwargs.get("edge_dim"), seed=1)
    assert_same(theirs, ours, x, edge_index, edge_type, edge_attr)


def test_sparse_adjacencies_match_pyg():
    """The relation ids beside the adjacency (in its storage order) and the edge features as its
    values; or, without edge_type, the relation ids as its values."""
    torch_sparse = pytest.importorskip("torch_sparse")
    theirs, ours = pair(heads=2, edge_dim=3, mod="additive")
    x, edge_index, _, _ = data()
    edge_index = torch.unique(edge_index, dim=1)   # sorted by source, then target
    order = torch.argsort(edge_index[1] * N + edge_index[0])
    edge_index = edge_index[:, order]               # the adjacencies' storage order
    edge_type = torch.randint(0, R, (edge_index.shape[1],))
    edge_attr = torch.randn(edge_index.shape[1], 3, dtype=torch.float64)
    expected = theirs(x, edge_index, edge_type, edge_attr)
    coo = torch.sparse_coo_tensor(edge_index.flip(0), edge_attr, (N, N, 3)).coalesce()
    torch.testing.assert_close(assert_same(Bound(theirs, coo, edge_type), Bound(ours, coo, edge_type), x), expected,
                               **TOL)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, edge_attr, (N, N)).t()
    torch.testing.assert_close(assert_same(Bound(theirs, adj, edge_type), Bound(ours, adj, edge_type), x), expected,
                               **TOL)
    _, weighted = ours(x, adj, edge_type, return_attention_weights=True)
    _, reference = theirs(x, adj, edge_type, return_attention_weights=True)
    torch.testing.assert_close(weighted.to_dense(), reference.to_dense(), **TOL)
    # the ids as the values (PyG's SparseTensor path reads them as edge features too, and its torch
    # sparse path loses them: both fail there), as the edge_index form computes
    plain_theirs, plain_ours = pair(heads=2)
    expected, (_, reference) = plain_theirs(x, edge_index, edge_type, return_attention_weights=True)
    by_ids = torch_sparse.SparseTensor.from_edge_index(edge_index, edge_type, (N, N)).t()
    torch.testing.assert_close(plain_ours(x, by_ids), expected, **TOL)
    coo = torch.sparse_coo_tensor(edge_index.flip(0), edge_type, (N, N)).coalesce()
    out, (adj_alpha, alpha) = plain_ours(x, coo, return_attention_weights=True)
    torch.testing.assert_close(out, expected, **TOL)
    torch.testing.assert_close(alpha, reference, **TOL)
    assert torch.equal(adj_alpha.indices(), coo.indices()) and torch.equal(adj_alpha.values(), alpha)


def test_graph_form_and_empty_graph_match_pyg():
    theirs, ours = pair(heads=2, mod="scaled")
    x, edge_index, edge_type, _ = data()
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=N), x, edge_type),
                               theirs(x, edge_index, edge_type), **TOL)
    assert_same(theirs, ours, x, torch.empty(2, 0, dtype=torch.long), torch.empty(0, dtype=torch.long))


def test_attention_dropout():
    torch.manual_seed(0)
    conv = U.RGATConv(IN, 4, R, heads=2, dropout=0.5).double()
    x, edge_index, edge_type, _ = data()
    evaluated = conv.eval()(x, edge_index, edge_type)
    conv.train()
    torch.manual_seed(2)
    out, (_, alpha) = conv(x, edge_index, edge_type, return_attention_weights=True)
    torch.manual_seed(2)
    torch.testing.assert_close(conv(x, edge_index, edge_type), out, **TOL)
    assert not torch.allclose(out, evaluated)
    _, (_, undropped) = conv.eval()(x, edge_index, edge_type, return_attention_weights=True)
    torch.testing.assert_close(alpha, undropped, **TOL)


def test_refusals():
    x, edge_index, edge_type, edge_attr = data(3)
    x, edge_attr = x.float(), edge_attr.float()
    with pytest.raises(ValueError, match="mod must be one of"):
        U.RGATConv(IN, 4, R, mod="multiplied")
    with pytest.raises(ValueError, match="attention_mechanism"):
        U.RGATConv(IN, 4, R, attention_mechanism="between-relation")
    with pytest.raises(ValueError, match="needs dim=1"):
        U.RGATConv(IN, 4, R, dim=2)
    with pytest.raises(ValueError, match="mod=None"):
        U.RGATConv(IN, 4, R, mod="scaled", dropout=0.2)
    with pytest.raises(ValueError, match="exclude each other"):
        U.RGATConv(IN, 4, R, num_bases=2, num_blocks=2)
    with pytest.raises(ValueError, match="multiples of num_blocks"):
        U.RGATConv(IN, 4, R, num_blocks=3)
    with pytest.raises(ValueError, match="needs edge_type"):
        U.RGATConv(IN, 4, R)(x, edge_index)
    with pytest.raises(ValueError, match=r"outside \[0, 4\)"):
        U.RGATConv(IN, 4, R)(x, edge_index, edge_type + R)
    with pytest.raises(ValueError, match="integer relation id"):
        U.RGATConv(IN, 4, R)(x, edge_index, edge_type.float())
    with pytest.raises(ValueError, match="without edge_dim"):
        U.RGATConv(IN, 4, R)(x, edge_index, edge_type, edge_attr)
    with pytest.raises(TypeError, match="floating-point"):
        U.RGATConv(IN, 4, R)(torch.randint(0, 3, (N, IN)), edge_index, edge_type)
    with pytest.raises(ValueError, match="static graphs"):
        U.RGATConv(IN, 4, R)(torch.randn(2, N, IN), edge_index, edge_type)
