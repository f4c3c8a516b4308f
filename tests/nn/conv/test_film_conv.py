"""FiLMConv against PyG's: values and gradients (float64) for one and several relations, over its
options (aggregation, activation, a user network), its call forms (edge_index with edge_type,
SparseTensor and torch sparse adjacencies holding the relation ids, pairs, the graph form), PyG's
repr and state_dict, and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
SparseTensor = pytest.importorskip("torch_sparse").SparseTensor


def pair(*args, seed: int = 0, **options):
    torch.manual_seed(seed)
    theirs = pyg_nn.FiLMConv(*args, **options)
    return theirs, loaded(theirs, U.FiLMConv(*args, **options))


def inputs(num_nodes: int = 8, num_edges: int = 30, width: int = 6, relations: int = 3):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(num_nodes, width, dtype=torch.float64, generator=gen)
    edge_type = torch.randint(0, relations, (num_edges,), generator=gen)
    return x, random_edges(num_nodes, num_edges), edge_type


@pytest.mark.parametrize("relations", [1, 3])
@pytest.mark.parametrize("options", [
    dict(), dict(aggr="add"), dict(aggr="max", act=None), dict(act=torch.nn.Tanh()),
    dict(nn=torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 10))),
])
def test_options_equal_pygs(relations, options):
    theirs, ours = pair(6, 5, num_relations=relations, **options)
    assert str(ours) == str(theirs) == f"FiLMConv(6, 5, num_relations={relations})"
    x, edge_index, edge_type = inputs(relations=relations)
    extra = (edge_type,) if relations > 1 else ()
    assert_same(theirs, ours, x, edge_index, *extra)
    # a SparseTensor holds the relation ids as its values
    adj = SparseTensor.from_edge_index(edge_index, edge_type if relations > 1 else None, (8, 8)).t()
    assert_same(theirs, ours, x, adj)


def test_other_call_forms_equal_pygs():
    theirs, ours = pair(6, 5, num_relations=3)
    x, edge_index, edge_type = inputs()
    expected = assert_same(theirs, ours, x, edge_index, edge_type)
    g = unigraph.Graph(edge_index, num_nodes=8)
    torch.testing.assert_close(ours(g, x, edge_type), expected, **TOL)
    # a torch sparse adjacency with the ids as values, in its storage order (PyG takes no such form)
    adj = torch.sparse_coo_tensor(edge_index.flip(0), edge_type, (8, 8))   # uncoalesced: the edges' order
    torch.testing.assert_close(ours(x, adj), expected, **TOL)
    # one relation: every edge belongs to it, whatever a sparse adjacency's values are
    theirs, ours = pair(6, 5)
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, edge_type, (8, 8)).t())
    theirs, ours = pair(6, 5, num_relations=3, flow="target_to_source")
    assert_same(theirs, ours, x, edge_index, edge_type)


@pytest.mark.parametrize("relations", [1, 2])
def test_bipartite_pair_equals_pygs(relations):
    theirs, ours = pair((6, 4), 5, num_relations=relations)
    x_src = torch.randn(9, 6, dtype=torch.float64)
    x_dst = torch.randn(4, 4, dtype=torch.float64)
    edge_index = random_edges(9, 20, num_dst=4)
    edge_type = torch.randint(0, relations, (20,))
    extra = (edge_type,) if relations > 1 else ()
    assert assert_same(theirs, ours, (x_src, x_dst), edge_index, *extra).shape == (4, 5)
    adj = SparseTensor.from_edge_index(edge_index, edge_type if relations > 1 else None, (9, 4)).t()
    assert_same(theirs, ours, (x_src, x_dst), adj)


def test_lazy_width():
    conv = U.FiLMConv(-1, 5, num_relations=2)
    x, edge_index, edge_type = inputs(relations=2)
    assert conv(x.float(), edge_index, edge_type).shape == (8, 5)
    assert conv.films[1].weight.shape == (10, 6)


def test_refusals():
    x, edge_index, edge_type = inputs()
    x = x.float()
    with pytest.raises(ValueError, match="num_relations must be a positive int"):
        U.FiLMConv(6, 5, num_relations=0)
    conv = U.FiLMConv(6, 5, num_relations=3)
    with pytest.raises(ValueError, match="needs edge_type"):
        conv(x, edge_index)
    with pytest.raises(ValueError, match="relation id 3, outside 0..2"):
        conv(x, edge_index, edge_type + 1)
    with pytest.raises(TypeError, match="integer relation ids"):
        conv(x, edge_index, edge_type.float())
    with pytest.raises(ValueError, match=r"shape \[30\]"):
        conv(x, edge_index, edge_type[:5])
    with pytest.raises(ValueError, match="destination features"):
        U.FiLMConv((6, 4), 5)((x, None), random_edges(8, 10, num_dst=3))
    with pytest.raises(ValueError, match="2 \\* out_channels=10"):
        U.FiLMConv(6, 5, nn=torch.nn.Linear(6, 7))(x, edge_index)
    with pytest.raises(ValueError, match="static graphs"):
        conv(x.expand(2, -1, -1), edge_index, edge_type)
