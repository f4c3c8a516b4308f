"""ClusterGCNConv against PyG's in float64 (outputs, input and parameter gradients) over
diag_lambda, self-loops and PyG's call forms (a SparseTensor's values summed for the degree, as
PyG's), static graphs and lazy widths. PyG counts degrees in the default dtype, so the comparisons
run with float64 as the default."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse")

N, E, IN, OUT = 9, 30, 5, 4


@pytest.fixture(autouse=True)
def float64_default():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


@pytest.mark.parametrize("diag_lambda", [0.0, 0.7])
@pytest.mark.parametrize("bias", [True, False])
def test_matches_pyg(diag_lambda, bias):
    torch.manual_seed(0)
    theirs = pyg_nn.ClusterGCNConv(IN, OUT, diag_lambda=diag_lambda, bias=bias)
    ours = loaded(theirs, U.ClusterGCNConv(IN, OUT, diag_lambda=diag_lambda, bias=bias))
    assert str(ours) == str(theirs) == f"ClusterGCNConv({IN}, {OUT}, diag_lambda={diag_lambda})"
    edge_index = random_edges(N, E)  # duplicates and self-loops
    x = torch.randn(N, IN)
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, torch.randn(2, N, IN), edge_index)   # static graph
    weight = torch.rand(E) + 0.1
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, N)).t()
    assert_same(theirs, ours, x, adj)   # (the values set the degrees, as PyG's torch_sparse.sum)
    # without values PyG's torch_sparse.sum counts the entries in float32 (its weights are rounded there)
    plain = torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t()
    torch.testing.assert_close(ours(x, plain), theirs(x, plain), rtol=1e-6, atol=1e-7)
    csr = torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t().coalesce()
    for form in (csr.to_torch_sparse_csr_tensor(), csr.to_torch_sparse_coo_tensor()):
        torch.testing.assert_close(ours(x, form), theirs(x, form), **TOL)


def test_without_added_self_loops():
    """PyG adds diag_lambda / d_i to the k-th self-loop by position: defined where the graph has one
    loop per node in node order (there it matches); on other graphs PyG fails and this layer adds
    it to each loop's own node."""
    torch.manual_seed(0)
    theirs = pyg_nn.ClusterGCNConv(IN, OUT, diag_lambda=0.5, add_self_loops=False, flow="target_to_source")
    ours = loaded(theirs, U.ClusterGCNConv(IN, OUT, diag_lambda=0.5, add_self_loops=False, flow="target_to_source"))
    loops = torch.arange(N).repeat(2, 1)
    edge_index = torch.cat([random_edges(N, E)[:, :20], loops], 1)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    edge_index = torch.cat([edge_index, loops], 1)
    assert_same(theirs, ours, torch.randn(N, IN), edge_index)
    x, shuffled = torch.randn(N, IN), edge_index[:, torch.randperm(edge_index.shape[1])]
    torch.testing.assert_close(ours(x, shuffled), ours(x, edge_index), **TOL)


def test_lazy_in_channels_and_errors():
    ours = U.ClusterGCNConv(-1, OUT)
    x, edge_index = torch.randn(N, IN), random_edges(N, E)
    assert ours(x, edge_index).shape == (N, OUT)
    theirs = pyg_nn.ClusterGCNConv(IN, OUT)
    assert_same(theirs, loaded(theirs, ours), x, edge_index)
    with pytest.raises(ValueError, match="diag_lambda must be a number"):
        U.ClusterGCNConv(IN, OUT, diag_lambda=None)
    with pytest.raises(ValueError, match="needs a square adjacency"):
        ours(x, torch_sparse.SparseTensor.from_edge_index(random_edges(N, 10, num_dst=4), sparse_sizes=(N, 4)).t())
