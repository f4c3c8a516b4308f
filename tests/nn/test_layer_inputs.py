"""unigraph/nn/layer_inputs.py: a given edge_attr beside a sparse adjacency follows the adjacency's
storage order, as PyG's propagate reads it, for the layers conditioned on edge features (NNConv,
CGConv, GMMConv): equal to PyG's layer in a SparseTensor and in torch COO/CSR forms."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import assert_same, loaded

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse", reason="SparseTensor inputs need torch_sparse")

LAYERS = {"NNConv": lambda m: m.NNConv(5, 2, torch.nn.Linear(3, 10)), "CGConv": lambda m: m.CGConv(5, 3),
          "GMMConv": lambda m: m.GMMConv(5, 2, dim=3, kernel_size=2)}


@pytest.mark.parametrize("form", ["SparseTensor", "torch COO", "torch CSR"])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_edge_attr_beside_a_sparse_adjacency_follows_its_storage_order(name, form):
    edge_index = torch.tensor([[0, 1, 1, 2, 3, 2, 0], [1, 0, 2, 3, 2, 2, 3]])
    gen = torch.Generator().manual_seed(0)
    edge_attr = torch.randn(7, 3, dtype=torch.float64, generator=gen)   # rows in the adjacency's storage order
    x = torch.randn(4, 5, dtype=torch.float64, generator=gen)
    adj = torch_sparse.SparseTensor(row=edge_index[1], col=edge_index[0], sparse_sizes=(4, 4))
    coo = adj.to_torch_sparse_coo_tensor().coalesce()
    adj = {"SparseTensor": adj, "torch COO": coo, "torch CSR": coo.to_sparse_csr()}[form]
    torch.manual_seed(1)
    theirs = LAYERS[name](pyg_nn)
    ours = loaded(theirs, LAYERS[name](U))
    if form == "SparseTensor":
        assert_same(theirs, ours, x, adj, edge_attr)
    else:   # (PyG's layers write into a torch sparse leaf that requires grad: compare outputs)
        torch.testing.assert_close(ours(x, adj, edge_attr), theirs(x, adj, edge_attr), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("make, setting", [
    (lambda: U.GATConv(6, 4, heads=2, edge_dim=3), "edge_dim"),
    (lambda: U.GeneralConv(6, 4, in_edge_channels=3), "in_edge_channels"),
    (lambda: U.CGConv(6, dim=3), "dim"),
])
def test_edge_features_of_the_wrong_width_are_named_as_edge_features(make, setting):
    """The error names edge rows and the layer's setting for their width, not nodes and in_channels."""
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    with pytest.raises(ValueError, match=rf"edge_attr with 3 features \(its {setting}\), got 5"):
        make()(torch.randn(3, 6), edge_index, torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"edge_attr of shape \[num_edges, 3\]"):
        make()(torch.randn(3, 6), edge_index, torch.randn(3, 3, 1))
