"""LGConv against PyG's in float64 (outputs and input gradients) with and without the
normalization, over PyG's call forms, flow and static graphs."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse")

N, E, F = 9, 30, 5


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("flow", ["source_to_target", "target_to_source"])
def test_matches_pyg(normalize, flow):
    theirs, ours = pyg_nn.LGConv(normalize, flow=flow), U.LGConv(normalize, flow=flow)
    assert str(ours) == str(theirs) == "LGConv()"
    edge_index = random_edges(N, E)  # duplicates and self-loops
    weight = torch.rand(E, dtype=torch.float64) + 0.1
    x = torch.randn(N, F, dtype=torch.float64)
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, edge_index, weight)
    assert_same(theirs, ours, torch.randn(2, N, F, dtype=torch.float64), edge_index, weight)  # static graph
    if flow == "source_to_target":   # (PyG refuses target_to_source with a SparseTensor)
        adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, N)).t()
        assert_same(theirs, ours, x, adj)
        assert_same(theirs, ours, x, adj.coalesce().to_torch_sparse_csr_tensor())
        torch.testing.assert_close(ours(x, adj.to_torch_sparse_coo_tensor()),
                                   theirs(x, adj.to_torch_sparse_coo_tensor()), **TOL)


def test_graph_form_and_errors():
    edge_index, x = random_edges(N, E), torch.randn(N, F)
    torch.testing.assert_close(U.LGConv()(unigraph.Graph(edge_index, num_nodes=N), x), U.LGConv()(x, edge_index))
    with pytest.raises(ValueError, match="not a \\(source, destination\\) pair"):
        U.LGConv()((x, x), edge_index)
    with pytest.raises(ValueError, match="edge_weight has 3 rows but the graph has 30 edges"):
        U.LGConv()(x, edge_index, torch.rand(3))
