"""SSGConv against PyG's in float64 (outputs, input and parameter gradients) over its options and
PyG's call forms, and its cache (``_cached_h``): it answers only for the same inputs."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse")

N, E, IN, OUT = 9, 30, 5, 4


@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("alpha", [0.0, 0.3])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_matches_pyg(K, alpha, add_self_loops):
    torch.manual_seed(0)
    theirs = pyg_nn.SSGConv(IN, OUT, alpha=alpha, K=K, add_self_loops=add_self_loops)
    ours = loaded(theirs, U.SSGConv(IN, OUT, alpha=alpha, K=K, add_self_loops=add_self_loops))
    assert str(ours) == str(theirs) == f"SSGConv({IN}, {OUT}, K={K}, alpha={alpha})"
    edge_index = random_edges(N, E)  # duplicates and self-loops
    weight = torch.rand(E, dtype=torch.float64) + 0.1
    x = torch.randn(N, IN, dtype=torch.float64)
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, edge_index, weight)
    assert_same(theirs, ours, torch.randn(2, N, IN, dtype=torch.float64), edge_index)  # static graph
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, N)).t()
    assert_same(theirs, ours, x, adj)
    # (coalesced: PyG's backward fails for duplicate CSR entries without self-loops)
    assert_same(theirs, ours, x, adj.coalesce().to_torch_sparse_csr_tensor())
    torch.testing.assert_close(ours(x, adj.to_torch_sparse_coo_tensor()), theirs(x, adj.to_torch_sparse_coo_tensor()),
                               **TOL)


def test_bias_free_and_flow():
    torch.manual_seed(0)
    theirs = pyg_nn.SSGConv(IN, OUT, alpha=0.2, K=2, bias=False, flow="target_to_source")
    ours = loaded(theirs, U.SSGConv(IN, OUT, alpha=0.2, K=2, bias=False, flow="target_to_source"))
    assert_same(theirs, ours, torch.randn(N, IN, dtype=torch.float64), random_edges(N, E),
                torch.rand(E, dtype=torch.float64))


def test_cache_answers_only_for_the_same_inputs():
    torch.manual_seed(0)
    conv = U.SSGConv(IN, OUT, alpha=0.1, K=2, cached=True).double()
    plain = U.SSGConv(IN, OUT, alpha=0.1, K=2).double()
    plain.load_state_dict(conv.state_dict())
    edge_index = random_edges(N, E)
    x = torch.randn(N, IN, dtype=torch.float64)
    first = conv(x, edge_index)
    assert conv._cached_h is not None
    torch.testing.assert_close(conv(x, edge_index), first, **TOL)
    conv.alpha = plain.alpha = 0.5           # a setting read at call time
    torch.testing.assert_close(conv(x, edge_index), plain(x, edge_index), **TOL)
    other = random_edges(N, E, seed=3)
    torch.testing.assert_close(conv(x, other), plain(x, other), **TOL)
    x.mul_(2)
    torch.testing.assert_close(conv(x, other), plain(x, other), **TOL)
    conv._cached_h = None
    assert conv._cached_h is None
    conv(x, other)
    conv.reset_parameters()
    assert conv._cached_h is None


def test_errors():
    with pytest.raises(ValueError, match="K \\(the number of hops\\)"):
        U.SSGConv(IN, OUT, alpha=0.1, K=0)   # (PyG divides by K)
    with pytest.raises(ValueError, match="alpha must be a number"):
        U.SSGConv(IN, OUT, alpha="0.1")
    with pytest.raises(ValueError, match="not a \\(source, destination\\) pair"):
        U.SSGConv(IN, OUT, alpha=0.1)((torch.randn(N, IN), torch.randn(N, IN)), random_edges(N, E))
