"""DNAConv against PyG's: values and gradients (inputs and parameters, float64) over heads,
groups, bias, the normalization options, aggregations, flow and every adjacency form (each with
PyG's own self-loop rule), the cache, repr and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, LAYERS, CHANNELS, E = 9, 3, 8, 26


def pair(channels=CHANNELS, seed=0, **options):
    torch.manual_seed(seed)
    theirs = pyg_nn.DNAConv(channels, **options)
    ours = loaded(theirs, U.DNAConv(channels, **options))
    return theirs, ours


def inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, LAYERS, CHANNELS, dtype=torch.float64, generator=gen)
    edge_index = random_edges(N, E, seed=seed)
    edge_index[:, :3] = torch.tensor([[2, 2, 5], [2, 2, 5]])   # self-loops, one of them repeated
    weights = torch.rand(E, dtype=torch.float64, generator=gen) + 0.1
    return x, edge_index, weights


@pytest.mark.parametrize("heads,groups", [(1, 1), (2, 4), (4, 2), (8, 8)])
@pytest.mark.parametrize("bias", [True, False])
def test_heads_groups_bias_equal_pygs(heads, groups, bias):
    theirs, ours = pair(heads=heads, groups=groups, bias=bias)
    x, edge_index, weights = inputs()
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, edge_index, weights)


@pytest.mark.parametrize("options", [dict(add_self_loops=False), dict(normalize=False),
                                     dict(aggr="mean"), dict(aggr="max"), dict(flow="target_to_source")])
def test_options_equal_pygs(options):
    theirs, ours = pair(heads=2, groups=2, **options)
    x, edge_index, weights = inputs(1)
    if not options.get("normalize", True):   # (PyG needs weights without the normalization)
        assert_same(theirs, ours, x, edge_index, weights)
        return
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, edge_index, weights)


@pytest.mark.parametrize("add_self_loops", [True, False])
def test_sparse_adjacencies_equal_pygs(add_self_loops):
    """A SparseTensor's loops get weight 1, a torch sparse adjacency's get 1 more: PyG's rules."""
    from torch_sparse import SparseTensor
    theirs, ours = pair(heads=2, add_self_loops=add_self_loops)
    x, edge_index, weights = inputs(2)
    edge_index = torch.unique(edge_index, dim=1)   # one stored entry per edge: the same graph in every form
    weights = weights[: edge_index.shape[1]]
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, weights, (N, N)).t())
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t())
    adj = torch.sparse_coo_tensor(edge_index.flip(0), weights, (N, N)).coalesce()
    assert_same(theirs, ours, x, adj.to_sparse_csr())
    torch.testing.assert_close(ours(x, adj), theirs(x, adj), **TOL)   # (COO values cannot be leaves in PyG)


def test_graph_form_cache_and_dropout():
    theirs, ours = pair(heads=2, cached=True)
    x, edge_index, weights = inputs(3)
    expected = theirs(x, edge_index, weights)
    torch.testing.assert_close(ours(x, edge_index, weights), expected, **TOL)
    assert ours._cached_edge_index is not None and ours._cached_adj_t is None
    torch.testing.assert_close(ours(x, edge_index, weights * 2.0), expected, **TOL)   # the cached normalization
    ours.reset_parameters()
    assert ours._cached_edge_index is None
    plain = loaded(theirs, U.DNAConv(CHANNELS, heads=2))
    g = unigraph.Graph(edge_index, num_nodes=N)
    torch.testing.assert_close(plain(g, x), plain(x, edge_index), **TOL)
    dropped = loaded(theirs, U.DNAConv(CHANNELS, heads=2, dropout=0.5))
    torch.testing.assert_close(dropped.eval()(x, edge_index), plain(x, edge_index), **TOL)
    torch.manual_seed(0)
    out = dropped.train()(x, edge_index)
    assert out.shape == (N, CHANNELS) and not torch.allclose(out, plain(x, edge_index))
    no_edges = torch.empty(2, 0, dtype=torch.long)   # self-loops only
    theirs.cached, theirs._cached_edge_index = False, None   # (PyG's cache would answer with the first graph's)
    torch.testing.assert_close(plain(x, no_edges), theirs(x, no_edges), **TOL)


def test_repr_and_refusals():
    assert str(U.DNAConv(32, heads=4, groups=8)) == str(pyg_nn.DNAConv(32, heads=4, groups=8))
    assert str(U.DNAConv(32, heads=4, groups=8)) == "DNAConv(32, heads=4, groups=8)"
    x, edge_index, _ = inputs()
    with pytest.raises(ValueError, match="divisible by heads"):
        U.DNAConv(8, heads=3)
    with pytest.raises(ValueError, match="divisible by groups"):
        U.DNAConv(8, groups=3)
    with pytest.raises(ValueError, match="divide the other"):
        U.DNAConv(12, heads=4, groups=6)
    with pytest.raises(ValueError, match="dropout"):
        U.DNAConv(8, dropout=1.5)
    with pytest.raises(ValueError, match=r"\[num_nodes, num_layers, 8\]"):
        U.DNAConv(8)(x[:, 0], edge_index)
    with pytest.raises(ValueError, match=r"\[num_nodes, num_layers, 8\]"):
        U.DNAConv(8)(torch.randn(N, 2, 4, dtype=torch.float64), edge_index)
    with pytest.raises(ValueError, match="square"):
        U.DNAConv(8)(x, torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 2]]), torch.ones(2), (3, N)))
    with pytest.raises(ValueError, match="edge_weight"):
        U.DNAConv(8)(x, edge_index, torch.ones(E + 1, dtype=torch.float64))
