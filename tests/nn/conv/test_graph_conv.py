"""GraphConv: PyG's EdgeIndex (its sparse_size sets the node counts), static graphs, PyG's repr."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")


def test_edge_index_sparse_size_sets_the_destinations():
    from torch_geometric import EdgeIndex
    torch.manual_seed(0)
    theirs = pyg_nn.GraphConv((5, 3), 4)
    ours = loaded(theirs, U.GraphConv((5, 3), 4))
    assert str(ours) == str(theirs) == "GraphConv((5, 3), 4)"
    edge_index = random_edges(6, 15, num_dst=2)
    edge_index = edge_index[:, edge_index[1].argsort(stable=True)]  # sort_order="col" promises it
    x = torch.randn(6, 5, dtype=torch.float64)
    weight = torch.rand(15, dtype=torch.float64)
    for args in ((x, None), EdgeIndex(edge_index, sparse_size=(6, 2))), ((x, None), EdgeIndex(
            edge_index, sort_order="col", sparse_size=(6, 2)), weight):
        out = assert_same(theirs, ours, *args)
        assert out.shape == (2, 4)
    with pytest.raises(ValueError, match="contradicts the EdgeIndex's sparse_size"):
        ours((x, None), EdgeIndex(edge_index, sparse_size=(6, 2)), size=(6, 3))


def test_static_graph():
    torch.manual_seed(0)
    theirs = pyg_nn.GraphConv(5, 4, aggr="mean")
    ours = loaded(theirs, U.GraphConv(5, 4, aggr="mean"))
    x, edge_index = torch.randn(3, 7, 5, dtype=torch.float64), random_edges(7, 20)
    out = assert_same(theirs, ours, x, edge_index)
    torch.testing.assert_close(out, torch.stack([ours(x[b], edge_index) for b in range(3)]), **TOL)


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("form", ["x", "pair", "pair without destination features", "weighted"])
def test_the_root_term_accumulating_the_aggregations_product_equals_pygs(aggr, bias, form):
    """The root term ``x_dst W_1^T + b`` is computed first and the aggregation's product is added
    into it in place (one ``addmm_``): PyG's values and gradients (inputs and every parameter),
    with and without the bias, for a single tensor, a pair, a pair without destination features
    (no root term) and edge weights; widths that do not narrow, so the product runs after the
    aggregation."""
    torch.manual_seed(0)
    theirs = pyg_nn.GraphConv(4, 6, aggr=aggr, bias=bias)
    ours = loaded(theirs, U.GraphConv(4, 6, aggr=aggr, bias=bias))
    edge_index = random_edges(9, 30)
    x = torch.randn(9, 4, dtype=torch.float64)
    args = {"x": (x, edge_index), "pair": ((x, x[:9]), edge_index),
            "pair without destination features": ((x, None), edge_index),
            "weighted": (x, edge_index, torch.rand(30, dtype=torch.float64))}[form]
    assert_same(theirs, ours, *args)
