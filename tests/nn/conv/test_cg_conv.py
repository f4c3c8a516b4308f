"""CGConv against PyG's: values and gradients (float64) over its options and call forms (the
split projection of [x_i, x_j, e] equals PyG's concatenation), PyG's repr and state_dict, and
the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")


def pair(channels=4, seed: int = 0, **options):
    torch.manual_seed(seed)
    theirs = pyg_nn.CGConv(channels, **options)
    ours = loaded(theirs, U.CGConv(channels, **options))
    return theirs, ours


def inputs(num_nodes: int = 9, num_edges: int = 30, width: int = 4, edge_dim: int = 3):
    x = torch.randn(num_nodes, width, dtype=torch.float64)
    return x, random_edges(num_nodes, num_edges), torch.randn(num_edges, edge_dim, dtype=torch.float64)


@pytest.mark.parametrize("aggr", ["add", "mean", "max", "softmax"])
@pytest.mark.parametrize("dim", [0, 3])
@pytest.mark.parametrize("bias", [True, False])
def test_options_equal_pygs(aggr, dim, bias):
    theirs, ours = pair(dim=dim, aggr=aggr, bias=bias)
    x, edge_index, edge_attr = inputs()
    assert_same(theirs, ours, x, edge_index, *((edge_attr,) if dim else ()))


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_equals_pygs(training):
    theirs, ours = pair(dim=3, batch_norm=True)
    theirs.train(training), ours.train(training)
    x, edge_index, edge_attr = inputs()
    if not training:   # running statistics that are not the initial ones
        for module in (theirs, ours):
            module.bn.running_mean.uniform_(-1, 1, generator=torch.Generator().manual_seed(3))
            module.bn.running_var.uniform_(0.5, 2, generator=torch.Generator().manual_seed(4))
    assert_same(theirs, ours, x, edge_index, edge_attr)
    torch.testing.assert_close(ours.bn.running_mean, theirs.bn.running_mean, **TOL)


def test_flow_target_to_source_equals_pygs():
    theirs, ours = pair(dim=3, flow="target_to_source")
    assert_same(theirs, ours, *inputs())


def test_bipartite_equals_pygs():
    theirs, ours = pair((4, 6), dim=3)
    x_src, x_dst = torch.randn(7, 4, dtype=torch.float64), torch.randn(3, 6, dtype=torch.float64)
    edge_index, edge_attr = random_edges(7, 20, num_dst=3), torch.randn(20, 3, dtype=torch.float64)
    out = assert_same(theirs, ours, (x_src, x_dst), edge_index, edge_attr)
    assert out.shape == (3, 6)


def test_sparse_adjacencies_equal_pygs():
    """Without edge features a torch sparse adjacency's scalar values are not read; a
    SparseTensor's or a COO adjacency's [E, D] values are the edge features."""
    from torch_sparse import SparseTensor
    x, edge_index, edge_attr = inputs()
    theirs, ours = pair()
    csr = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(30, dtype=torch.float64), (9, 9),
                                  check_invariants=True).coalesce()
    assert_same(theirs, ours, x, csr.to_sparse_csr())
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, sparse_sizes=(9, 9)).t())
    theirs, ours = pair(dim=3)
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, edge_attr, (9, 9)).t())
    coo = torch.sparse_coo_tensor(edge_index.flip(0), edge_attr, (9, 9, 3), check_invariants=True).coalesce()
    assert_same(theirs, ours, x, coo)


def test_graph_form_and_empty_graph():
    theirs, ours = pair(dim=3)
    x, edge_index, edge_attr = inputs()
    expected = theirs(x, edge_index, edge_attr)
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=9), x, edge_attr), expected, **TOL)
    assert_same(theirs, ours, x, torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, 3, dtype=torch.float64))


def test_repr_and_state_dict():
    for channels, dim in ((8, 0), ((8, 16), 3)):
        theirs, ours = pair(channels, dim=dim, batch_norm=True)
        assert str(ours) == str(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())


def test_refusals():
    _, ours = pair(dim=3)
    x, edge_index, edge_attr = inputs()
    with pytest.raises(ValueError, match=r"dim=3\) needs edge_attr"):
        ours(x, edge_index)
    with pytest.raises(ValueError, match="edge_attr with 3 features"):
        ours(x, edge_index, edge_attr[:, :2])
    with pytest.raises(ValueError, match="destination features"):
        ours((x, None), edge_index, edge_attr)
    _, plain = pair()
    with pytest.raises(ValueError, match="built with dim=0"):
        plain(x, edge_index, edge_attr)
    with pytest.raises(ValueError, match="x with 4 features"):
        plain(torch.randn(9, 5, dtype=torch.float64), edge_index)
    with pytest.raises(ValueError, match="dim must be an int >= 0"):
        U.CGConv(4, dim=-1)
    with pytest.raises(ValueError, match="in_channels"):
        U.CGConv(-1)
