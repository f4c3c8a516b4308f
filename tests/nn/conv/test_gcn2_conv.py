"""GCN2Conv against PyG's in float64 (outputs, gradients of x, x_0, the edge weights and the
weights) over its options and PyG's call forms; its graph form ``conv(g, x, x_0)``; the cached
normalization per form; the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse")

N, E, C = 9, 30, 5


@pytest.mark.parametrize("shared_weights", [True, False])
@pytest.mark.parametrize("theta, layer", [(None, None), (0.5, 3)])
@pytest.mark.parametrize("normalize, add_self_loops", [(True, True), (True, False), (False, True)])
def test_matches_pyg(shared_weights, theta, layer, normalize, add_self_loops):
    torch.manual_seed(0)
    kwargs = dict(theta=theta, layer=layer, shared_weights=shared_weights, normalize=normalize,
                  add_self_loops=add_self_loops)
    theirs = pyg_nn.GCN2Conv(C, alpha=0.2, **kwargs)
    ours = loaded(theirs, U.GCN2Conv(C, alpha=0.2, **kwargs))
    assert str(ours) == str(theirs)
    edge_index = random_edges(N, E)  # duplicates and self-loops
    weight = torch.rand(E, dtype=torch.float64) + 0.1
    x, x_0 = torch.randn(N, C, dtype=torch.float64), torch.randn(N, C, dtype=torch.float64)
    assert_same(theirs, ours, x, x_0, edge_index)
    assert_same(theirs, ours, x, x_0, edge_index, weight)
    assert_same(theirs, ours, x, torch.randn(N + 3, C, dtype=torch.float64), edge_index)   # x_0 cut to N rows
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, N)).t()
    assert_same(theirs, ours, x, x_0, adj)
    assert_same(theirs, ours, x, x_0, adj.coalesce().to_torch_sparse_csr_tensor())


def test_graph_form_and_flow():
    torch.manual_seed(0)
    theirs = pyg_nn.GCN2Conv(C, alpha=0.1, flow="target_to_source")
    ours = loaded(theirs, U.GCN2Conv(C, alpha=0.1, flow="target_to_source"))
    edge_index, weight = random_edges(N, E), torch.rand(E, dtype=torch.float64)
    x, x_0 = torch.randn(N, C, dtype=torch.float64), torch.randn(N, C, dtype=torch.float64)
    assert_same(theirs, ours, x, x_0, edge_index, weight)
    ours.flow = "source_to_target"
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=N), x, x_0, weight),
                               ours(x, x_0, edge_index, weight), **TOL)


def test_cache_answers_only_for_the_same_graph_and_weights():
    conv = U.GCN2Conv(C, alpha=0.1).double()
    conv.cached = True   # (read at call time, as PyG's tests set it)
    plain = U.GCN2Conv(C, alpha=0.1).double()
    plain.load_state_dict(conv.state_dict())
    edge_index, weight = random_edges(N, E), torch.rand(E, dtype=torch.float64)
    x, x_0 = torch.randn(N, C, dtype=torch.float64), torch.randn(N, C, dtype=torch.float64)
    conv(x, x_0, edge_index, weight)
    assert conv._cached_edge_index is not None and conv._cached_adj_t is None
    for args in ((edge_index, weight), (edge_index, weight * 2), (random_edges(N, E, seed=5),)):
        torch.testing.assert_close(conv(x, x_0, *args), plain(x, x_0, *args), **TOL)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t()
    conv(x, x_0, adj)
    assert conv._cached_adj_t is not None
    torch.testing.assert_close(conv(x, x_0, adj), plain(x, x_0, adj), **TOL)
    conv.reset_parameters()
    assert conv._cached_edge_index is None and conv._cached_adj_t is None


def test_errors():
    conv = U.GCN2Conv(C, alpha=0.1)
    x, edge_index = torch.randn(N, C), random_edges(N, E)
    with pytest.raises(ValueError, match="theta and layer together"):
        U.GCN2Conv(C, alpha=0.1, theta=0.5)
    with pytest.raises(ValueError, match="x_0 of shape \\[num_nodes \\(at least 9\\), 5\\]"):
        conv(x, torch.randn(N - 1, C), edge_index)
    with pytest.raises(ValueError, match="5 features"):
        conv(torch.randn(N, 3), torch.randn(N, 3), edge_index)
    with pytest.raises(ValueError, match="expects x of shape \\[num_nodes, F\\]"):
        conv(torch.randn(2, N, C), torch.randn(N, C), edge_index)   # (PyG's addmm fails on [B, N, F] too)
    with pytest.raises(ValueError, match="channels must be a positive int"):
        U.GCN2Conv(-1, alpha=0.1)
