"""ChebConv against PyG's in float64 (outputs, input gradients, edge weights' included through
the default lambda_max, parameter gradients) over K, the normalizations, lambda_max (a number,
a tensor, one per graph with a batch vector), flow, static graphs; the sparse forms PyG's layer
lacks against PyG on the same (coalesced) graph; the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse")

N, E, IN, OUT = 9, 30, 5, 4


def _pair(K, normalization="sym", **kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.ChebConv(IN, OUT, K, normalization=normalization, **kwargs)
    return theirs, loaded(theirs, U.ChebConv(IN, OUT, K, normalization=normalization, **kwargs))


@pytest.mark.parametrize("K", [1, 2, 4])
@pytest.mark.parametrize("normalization", ["sym", "rw", None])
def test_matches_pyg(K, normalization):
    theirs, ours = _pair(K, normalization)
    assert str(ours) == str(theirs) == f"ChebConv({IN}, {OUT}, K={K}, normalization={normalization})"
    edge_index = random_edges(N, E)  # duplicates and self-loops (the Laplacian drops the loops)
    weight = torch.rand(E, dtype=torch.float64) + 0.1
    x = torch.randn(N, IN, dtype=torch.float64)
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, edge_index, weight)   # (the weights' gradient passes through lambda_max too)
    assert_same(theirs, ours, x, edge_index, weight, lambda_max=3.0)
    assert_same(theirs, ours, x, edge_index, weight, None, torch.tensor(2.5, dtype=torch.float64))
    assert_same(theirs, ours, torch.randn(2, N, IN, dtype=torch.float64), edge_index, weight)  # static graph


def test_lambda_max_per_graph_with_batch():
    theirs, ours = _pair(3)
    edge_index = torch.cat([random_edges(4, 10, seed=1), random_edges(5, 12, seed=2) + 4], 1)
    batch = torch.tensor([0] * 4 + [1] * 5)
    x, weight = torch.randn(N, IN, dtype=torch.float64), torch.rand(22, dtype=torch.float64)
    assert_same(theirs, ours, x, edge_index, weight, batch)
    assert_same(theirs, ours, x, edge_index, weight, batch, torch.tensor([2.0, 3.0], dtype=torch.float64))
    assert_same(theirs, ours, x, edge_index, None, batch, torch.tensor([1.5], dtype=torch.float64))


def test_flow_and_bias():
    theirs, ours = _pair(3, "rw", bias=False, flow="target_to_source")
    x, edge_index = torch.randn(N, IN, dtype=torch.float64), random_edges(N, E)
    assert_same(theirs, ours, x, edge_index, torch.rand(E, dtype=torch.float64))


def test_sparse_forms_equal_pyg_on_the_coalesced_graph():
    """PyG's ChebConv takes an edge_index only; a sparse adjacency's values are the edge weights."""
    theirs, ours = _pair(3)
    adj = torch_sparse.SparseTensor.from_edge_index(random_edges(N, E), torch.rand(E, dtype=torch.float64),
                                                    (N, N)).t().coalesce()
    dst, src, weight = adj.coo()
    x = torch.randn(N, IN, dtype=torch.float64)
    expected = theirs(x, torch.stack([src, dst]), weight)
    for form in (adj, adj.to_torch_sparse_csr_tensor(), adj.to_torch_sparse_coo_tensor()):
        torch.testing.assert_close(ours(x, form), expected, **TOL)


def test_lazy_in_channels():
    ours = U.ChebConv(-1, OUT, K=3)
    x, edge_index = torch.randn(N, IN), random_edges(N, E)
    assert str(ours) == f"ChebConv(-1, {OUT}, K=3, normalization=sym)"
    assert ours(x, edge_index).shape == (N, OUT)
    theirs = pyg_nn.ChebConv(IN, OUT, K=3)
    assert_same(theirs, loaded(theirs, ours), x.double(), edge_index)


def test_errors():
    conv = U.ChebConv(IN, OUT, K=2)
    x, edge_index = torch.randn(N, IN), random_edges(N, E)
    with pytest.raises(ValueError, match="no batch vector"):
        conv(x, edge_index, lambda_max=torch.tensor([2.0, 3.0]))
    with pytest.raises(ValueError, match="batch holds graph ids outside"):
        conv(x, edge_index, batch=torch.full((N,), 2), lambda_max=torch.tensor([2.0, 3.0]))
    with pytest.raises(ValueError, match="batch must be an integer tensor"):
        conv(x, edge_index, batch=torch.zeros(N), lambda_max=torch.tensor([2.0, 3.0]))
    with pytest.raises(TypeError, match="lambda_max must be a number or a tensor"):
        conv(x, edge_index, lambda_max="2")
    with pytest.raises(ValueError, match="normalization must be None, 'sym' or 'rw'"):
        U.ChebConv(IN, OUT, K=2, normalization="both")
    with pytest.raises(ValueError, match="K \\(the number of hops\\) must be an int >= 1"):
        U.ChebConv(IN, OUT, K=0)
    with pytest.raises(ValueError, match="needs a square adjacency"):
        conv(x, torch_sparse.SparseTensor.from_edge_index(random_edges(N, 10, num_dst=4), sparse_sizes=(N, 4)).t())
