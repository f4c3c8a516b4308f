"""APPNP against PyG's in float64 (outputs and input gradients) over its options and PyG's call
forms; edge dropout drawn as PyG's (the same masks from the same seed); the cached normalization
per form (PyG's ``_cached_edge_index`` / ``_cached_adj_t``), which answers only for the same graph
and weights."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL, assert_same, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse")

N, E, F = 9, 30, 5


@pytest.mark.parametrize("K", [0, 1, 3])
@pytest.mark.parametrize("normalize, add_self_loops", [(True, True), (True, False), (False, True)])
def test_matches_pyg(K, normalize, add_self_loops):
    theirs = pyg_nn.APPNP(K, alpha=0.2, normalize=normalize, add_self_loops=add_self_loops)
    ours = U.APPNP(K, alpha=0.2, normalize=normalize, add_self_loops=add_self_loops)
    assert str(ours) == str(theirs) == f"APPNP(K={K}, alpha=0.2)"
    edge_index = random_edges(N, E)  # duplicates and self-loops
    weight = torch.rand(E, dtype=torch.float64) + 0.1
    x = torch.randn(N, F, dtype=torch.float64)
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, edge_index, weight)
    assert_same(theirs, ours, torch.randn(2, N, F, dtype=torch.float64), edge_index, weight)  # static graph
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, N)).t()
    assert_same(theirs, ours, x, adj)
    assert_same(theirs, ours, x, torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t())
    # (coalesced: PyG's backward fails for duplicate CSR entries without self-loops)
    assert_same(theirs, ours, x, adj.coalesce().to_torch_sparse_csr_tensor())


def test_flow():
    theirs, ours = pyg_nn.APPNP(2, 0.1, flow="target_to_source"), U.APPNP(2, 0.1, flow="target_to_source")
    assert_same(theirs, ours, torch.randn(N, F, dtype=torch.float64), random_edges(N, E),
                torch.rand(E, dtype=torch.float64))


@pytest.mark.parametrize("normalize", [True, False])
def test_edge_dropout_draws_as_pyg(normalize):
    """Training with dropout: the same masks from the same seed (PyG drops the already dropped
    weights again at each step: so does this layer), values and gradients."""
    theirs, ours = pyg_nn.APPNP(3, 0.1, dropout=0.4, normalize=normalize), U.APPNP(3, 0.1, dropout=0.4,
                                                                                   normalize=normalize)
    edge_index, weight = random_edges(N, E), torch.rand(E, dtype=torch.float64)
    x = torch.randn(N, F, dtype=torch.float64, requires_grad=True)
    w1, w2 = weight.clone().requires_grad_(), weight.clone().requires_grad_()
    torch.manual_seed(5)
    expected = theirs(x, edge_index, w1)
    torch.manual_seed(5)
    out = ours(x, edge_index, w2)
    torch.testing.assert_close(out, expected, **TOL)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(w2.grad, w1.grad, **TOL)
    ours.eval()
    theirs.eval()
    torch.testing.assert_close(ours(x, edge_index, weight), theirs(x, edge_index, weight), **TOL)


def test_dropout_of_every_edge_leaves_the_teleport_term():
    x = torch.randn(N, F)
    conv = U.APPNP(K=2, alpha=0.1, dropout=1.0)
    torch.testing.assert_close(conv(x, random_edges(N, E)), 0.1 * x)
    torch.testing.assert_close(U.APPNP(K=2, alpha=0.1, dropout=1.0, normalize=False)(x, random_edges(N, E)), 0.1 * x)


def test_cache_per_form_answers_only_for_the_same_graph_and_weights():
    """PyG would reuse the first graph's normalization for any later graph: here another graph or
    other weights are normalized again (and cached instead)."""
    conv, plain = U.APPNP(2, 0.1, cached=True), U.APPNP(2, 0.1)
    edge_index, weight = random_edges(N, E), torch.rand(E, dtype=torch.float64)
    x = torch.randn(N, F, dtype=torch.float64)
    assert conv._cached_edge_index is None and conv._cached_adj_t is None
    first = conv(x, edge_index, weight)
    cached_index, cached_weight = conv._cached_edge_index
    assert cached_index.shape == (2, cached_weight.numel()) and conv._cached_adj_t is None
    torch.testing.assert_close(conv(x, edge_index, weight), first, **TOL)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, N)).t()
    torch.testing.assert_close(conv(x, adj), plain(x, adj), **TOL)
    assert conv._cached_adj_t is not None and conv._cached_edge_index is not None   # one per form
    weight.mul_(2)                                                   # written in place
    torch.testing.assert_close(conv(x, edge_index, weight), plain(x, edge_index, weight), **TOL)
    other = random_edges(N, E, seed=4)
    torch.testing.assert_close(conv(x, other), plain(x, other), **TOL)
    conv._cached_adj_t = None
    assert conv._cached_adj_t is None and conv._cached_edge_index is not None
    conv.reset_parameters()
    assert conv._cached_edge_index is None and conv._cached_adj_t is None


def test_errors():
    with pytest.raises(ValueError, match="dropout must be in \\[0, 1\\]"):
        U.APPNP(2, 0.1, dropout=1.5)
    with pytest.raises(ValueError, match="K \\(the number of hops\\)"):
        U.APPNP(-1, 0.1)
    non_square = torch_sparse.SparseTensor.from_edge_index(random_edges(N, 10, num_dst=4), sparse_sizes=(N, 4)).t()
    with pytest.raises(ValueError, match="needs a square adjacency"):
        U.APPNP(2, 0.1)(torch.randn(N, F), non_square)
