"""FeaStConv against PyG's: values and gradients (float64) over its options and call forms (the
head scores projected per node equal PyG's per-edge u(x_j - x_i)), self-loops replaced, the lazy
width, PyG's repr and state_dict, and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")


def pair(seed: int = 0, **options):
    torch.manual_seed(seed)
    theirs = pyg_nn.FeaStConv(4, 6, **options)
    ours = loaded(theirs, U.FeaStConv(4, 6, **options))
    return theirs, ours


def inputs(num_nodes: int = 9, num_edges: int = 30):
    edge_index = torch.cat([random_edges(num_nodes, num_edges), torch.tensor([[1, 1, 4], [1, 1, 4]])], 1)
    return torch.randn(num_nodes, 4, dtype=torch.float64), edge_index


@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("add_self_loops", [True, False])
@pytest.mark.parametrize("aggr", ["mean", "add", "max"])
@pytest.mark.parametrize("bias", [True, False])
def test_options_equal_pygs(heads, add_self_loops, aggr, bias):
    theirs, ours = pair(heads=heads, add_self_loops=add_self_loops, aggr=aggr, bias=bias)
    assert_same(theirs, ours, *inputs())


def test_bipartite_and_flow_equal_pygs():
    theirs, ours = pair(heads=2)
    x_src, x_dst = torch.randn(8, 4, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    edge_index = random_edges(8, 25, num_dst=5)
    assert assert_same(theirs, ours, (x_src, x_dst), edge_index).shape == (5, 6)
    theirs, ours = pair(heads=2, flow="target_to_source")
    assert_same(theirs, ours, *inputs())


@pytest.mark.parametrize("add_self_loops", [True, False])
def test_sparse_adjacencies_graph_form_and_empty_graph(add_self_loops):
    from torch_sparse import SparseTensor
    theirs, ours = pair(heads=2, add_self_loops=add_self_loops)
    x, edge_index = inputs()
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, sparse_sizes=(9, 9)).t())
    csr = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.shape[1], dtype=torch.float64), (9, 9),
                                  check_invariants=True).coalesce().to_sparse_csr()
    assert_same(theirs, ours, x, csr)
    x_dst = torch.randn(5, 4, dtype=torch.float64)
    block = SparseTensor.from_edge_index(random_edges(9, 20, num_dst=5), sparse_sizes=(9, 5)).t()
    assert_same(theirs, ours, (x, x_dst), block)
    expected = theirs(x, edge_index)
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=9), x), expected, **TOL)
    empty = torch.zeros(2, 0, dtype=torch.long)
    if add_self_loops:
        assert_same(theirs, ours, x, empty)
    else:   # (PyG's message cannot view zero messages by -1 heads; every node gets the bias alone)
        torch.testing.assert_close(ours(x, empty), ours.bias.expand(9, 6), **TOL)


def test_lazy_width_equals_pygs():
    torch.manual_seed(0)
    theirs, ours = pyg_nn.FeaStConv(-1, 6, heads=2).double(), U.FeaStConv(-1, 6, heads=2).double()
    assert str(ours) == str(theirs) == "FeaStConv(-1, 6, heads=2)"
    x, edge_index = inputs()
    theirs(x, edge_index), ours(x, edge_index)   # each sized and initialized
    assert_same(theirs, loaded(theirs, ours), x, edge_index)


def test_repr_and_state_dict():
    theirs, ours = pair(heads=2)
    assert str(ours) == str(theirs) == "FeaStConv(4, 6, heads=2)"
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_refusals():
    _, ours = pair()
    x, edge_index = inputs()
    with pytest.raises(ValueError, match="x with 4 features"):
        ours(torch.randn(9, 5, dtype=torch.float64), edge_index)
    with pytest.raises(ValueError, match="destination features"):
        ours((x, None), edge_index)
    with pytest.raises(ValueError, match="in_channels must be an int"):
        U.FeaStConv((4, 4), 6)
    with pytest.raises(ValueError, match="heads"):
        U.FeaStConv(4, 6, heads=0)
