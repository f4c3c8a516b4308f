"""SimpleConv against PyG's in float64 (outputs and input gradients) over aggregations (names, a
list, a module) x combine_root, PyG's call forms (duplicate entries read as PyG's messages see
them, self-loops per form), pairs and ``size``, static graphs; the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL, assert_same, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse")

N, E, F = 9, 30, 5
AGGRS = ["sum", "mean", "max", ["mean", "max"]]


def _combinations(roots):
    # several aggregations widen the output: combine_root="sum" is refused there (test_errors)
    return [(aggr, root) for aggr in AGGRS for root in roots if not (isinstance(aggr, list) and root == "sum")]


@pytest.mark.parametrize("aggr, combine_root", _combinations([None, "sum", "cat", "self_loop"]))
def test_matches_pyg(aggr, combine_root):
    theirs, ours = pyg_nn.SimpleConv(aggr, combine_root), U.SimpleConv(aggr, combine_root)
    assert str(ours) == str(theirs) == "SimpleConv()"
    edge_index = random_edges(N, E)  # duplicates and self-loops
    weight = torch.rand(E, dtype=torch.float64) + 0.1
    x = torch.randn(N, F, dtype=torch.float64)
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, edge_index, weight)
    assert_same(theirs, ours, x, edge_index, size=(N, N))
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, N)).t()   # duplicates kept
    assert_same(theirs, ours, x, adj)
    assert_same(theirs, ours, x, torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t())
    csr = adj.to_torch_sparse_csr_tensor()   # duplicates kept: PyG counts each entry
    torch.testing.assert_close(ours(x, csr), theirs(x, csr), **TOL)
    if isinstance(aggr, str):   # (PyG reads an uncoalesced COO's entries only for a fused aggregation)
        coo = torch.sparse_coo_tensor(torch.stack([edge_index[1], edge_index[0]]), weight, (N, N))
        torch.testing.assert_close(ours(x, coo), theirs(x, coo), **TOL)   # (PyG coalesces it: duplicates summed)


@pytest.mark.parametrize("aggr, combine_root", _combinations([None, "sum", "cat", "self_loop"]))
def test_static_graph(aggr, combine_root):
    """[B, N, F] is B calls on [N, F]; without self-loops also PyG's (which adds self-loops to the
    first B nodes only: it counts the nodes in dimension 0)."""
    if isinstance(aggr, list):
        return
    theirs, ours = pyg_nn.SimpleConv(aggr, combine_root), U.SimpleConv(aggr, combine_root)
    edge_index, weight = random_edges(N, E), torch.rand(E, dtype=torch.float64)
    x = torch.randn(3, N, F, dtype=torch.float64)
    if combine_root != "self_loop":
        assert_same(theirs, ours, x, edge_index, weight)
    torch.testing.assert_close(ours(x, edge_index, weight), torch.stack([ours(x[b], edge_index, weight)
                                                                          for b in range(3)]), **TOL)


@pytest.mark.parametrize("aggr, combine_root", _combinations([None, "sum", "cat"]))
def test_bipartite_matches_pyg(aggr, combine_root):
    theirs, ours = pyg_nn.SimpleConv(aggr, combine_root), U.SimpleConv(aggr, combine_root)
    edge_index = random_edges(N, E, num_dst=4)
    x, x_dst = torch.randn(N, F, dtype=torch.float64), torch.randn(4, F, dtype=torch.float64)
    weight = torch.rand(E, dtype=torch.float64)
    assert_same(theirs, ours, (x, x_dst), edge_index, weight)
    assert_same(theirs, ours, (x, None), edge_index)
    assert_same(theirs, ours, (x, x_dst), edge_index, size=(N, 4))
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, weight, (N, 4)).t()
    assert_same(theirs, ours, (x, x_dst), adj)


def test_aggregation_module_and_flow():
    from torch_geometric.nn.aggr import SoftmaxAggregation as Theirs
    from unigraph.nn.aggr import SoftmaxAggregation as Ours
    theirs, ours = pyg_nn.SimpleConv(Theirs(t=0.5), "cat"), U.SimpleConv(Ours(t=0.5), "cat")
    x, edge_index = torch.randn(N, F, dtype=torch.float64), random_edges(N, E)
    assert_same(theirs, ours, x, edge_index)
    theirs, ours = pyg_nn.SimpleConv("mean", flow="target_to_source"), U.SimpleConv("mean", flow="target_to_source")
    assert_same(theirs, ours, x, edge_index, torch.rand(E, dtype=torch.float64))


def test_errors():
    x, edge_index = torch.randn(N, F), random_edges(N, E)
    with pytest.raises(ValueError, match="combine_root must be"):
        U.SimpleConv("sum", "mul")
    with pytest.raises(ValueError, match="cannot run bipartite message passing"):
        U.SimpleConv("sum", "self_loop")((x, x[:4]), random_edges(N, E, num_dst=4))
    with pytest.raises(ValueError, match="must be as wide"):
        U.SimpleConv(["mean", "max"], "sum")(x, edge_index)
    with pytest.raises(ValueError, match="with an aggregation module pass \\[N, F\\]"):
        U.SimpleConv(["mean", "max"])(torch.randn(2, N, F), edge_index)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, torch.rand(E), (N, N)).t()
    with pytest.raises(ValueError, match="edge weights twice"):
        U.SimpleConv()(x, adj, torch.rand(E))
