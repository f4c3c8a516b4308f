"""TAGConv against PyG's in float64 (outputs, input and parameter gradients) over its options
and PyG's call forms, static graphs and lazy widths."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse")

N, E, IN, OUT = 9, 30, 5, 4


@pytest.mark.parametrize("K", [0, 1, 3])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_matches_pyg(K, normalize, bias):
    torch.manual_seed(0)
    theirs = pyg_nn.TAGConv(IN, OUT, K=K, normalize=normalize, bias=bias)
    ours = loaded(theirs, U.TAGConv(IN, OUT, K=K, normalize=normalize, bias=bias))
    assert str(ours) == str(theirs) == f"TAGConv({IN}, {OUT}, K={K})"
    edge_index = random_edges(N, E)  # duplicates and self-loops
    weight = torch.rand(E, dtype=torch.float64) + 0.1
    x = torch.randn(N, IN, dtype=torch.float64)
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, edge_index, weight)
    assert_same(theirs, ours, torch.randn(3, N, IN, dtype=torch.float64), edge_index, weight)  # static graph
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, N)).t()
    assert_same(theirs, ours, x, adj)
    assert_same(theirs, ours, x, adj.coalesce().to_torch_sparse_csr_tensor())
    torch.testing.assert_close(ours(x, adj.to_torch_sparse_coo_tensor()), theirs(x, adj.to_torch_sparse_coo_tensor()),
                               **TOL)


def test_flow_and_lazy_in_channels():
    torch.manual_seed(0)
    theirs = pyg_nn.TAGConv(IN, OUT, K=2, flow="target_to_source")
    ours = loaded(theirs, U.TAGConv(IN, OUT, K=2, flow="target_to_source"))
    x, edge_index = torch.randn(N, IN, dtype=torch.float64), random_edges(N, E)
    assert_same(theirs, ours, x, edge_index, torch.rand(E, dtype=torch.float64))
    # PyG's own lazy TAGConv fails on its first call (lin.forward skips the hook that sizes it): ours
    # is sized by its first call, then takes a PyG state_dict
    ours = U.TAGConv(-1, OUT)
    assert str(ours) == f"TAGConv(-1, {OUT}, K=3)"
    assert ours(x.float(), edge_index).shape == (N, OUT) and ours.lins[3].weight.shape == (OUT, IN)
    theirs = pyg_nn.TAGConv(IN, OUT)
    assert_same(theirs, loaded(theirs, ours), x, edge_index)


def test_errors():
    with pytest.raises(ValueError, match="K \\(the number of hops\\)"):
        U.TAGConv(IN, OUT, K=-1)
    with pytest.raises(ValueError, match="out_channels must be a positive int"):
        U.TAGConv(IN, 0)
    with pytest.raises(ValueError, match="5 features"):
        U.TAGConv(IN, OUT)(torch.randn(N, 3), random_edges(N, E))
    with pytest.raises(ValueError, match="x has 4 rows but the graph has 9 nodes"):
        U.TAGConv(IN, OUT)(torch.randn(4, IN), torch_sparse.SparseTensor.from_edge_index(
            random_edges(N, E), sparse_sizes=(N, N)).t())
