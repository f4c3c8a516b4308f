"""GeneralConv against PyG's: values and gradients (float64) over its options (heads, undirected
messages, additive and dot-product attention, edge features, the skip projection, l2
normalization, aggregations), its call forms, PyG's repr and state_dict, and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
SparseTensor = pytest.importorskip("torch_sparse").SparseTensor

OPTIONS = [
    dict(),
    dict(skip_linear=True),
    dict(directed_msg=False),
    dict(heads=3),
    dict(attention=True),
    dict(heads=3, attention=True),
    dict(heads=3, attention=True, attention_type="dot_product"),
    dict(heads=2, attention=True, attention_type="dot_product", directed_msg=False),
    dict(heads=2, attention=True, directed_msg=False, aggr="max"),
    dict(l2_normalize=True, aggr="mean", bias=False),
]


def pair(*args, seed: int = 0, **options):
    torch.manual_seed(seed)
    theirs = pyg_nn.GeneralConv(*args, **options)
    return theirs, loaded(theirs, U.GeneralConv(*args, **options))


def inputs(num_nodes: int = 8, num_edges: int = 24, width: int = 6, edge_dim: int = 4):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(num_nodes, width, dtype=torch.float64, generator=gen)
    edge_attr = torch.randn(num_edges, edge_dim, dtype=torch.float64, generator=gen)
    return x, random_edges(num_nodes, num_edges), edge_attr


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("out_channels", [6, 5])
def test_options_equal_pygs(options, out_channels):
    x, edge_index, edge_attr = inputs()
    theirs, ours = pair(6, out_channels, **options)
    assert str(ours) == str(theirs) == f"GeneralConv(6, {out_channels})"
    assert_same(theirs, ours, x, edge_index)
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, None, (8, 8)).t())
    theirs, ours = pair(6, out_channels, in_edge_channels=4, **options)
    assert_same(theirs, ours, x, edge_index, edge_attr)
    # a SparseTensor's values are the edge features
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, edge_attr, (8, 8)).t())


def test_other_call_forms_equal_pygs():
    x, edge_index, edge_attr = inputs()
    theirs, ours = pair(6, 5, in_edge_channels=4, heads=2, attention=True)
    expected = assert_same(theirs, ours, x, edge_index, edge_attr, size=(8, 8))
    g = unigraph.Graph(edge_index, num_nodes=8)
    torch.testing.assert_close(ours(g, x, edge_attr), expected, **TOL)
    theirs, ours = pair(6, 5, heads=2, attention=True, flow="target_to_source")
    assert_same(theirs, ours, x, edge_index)


def test_bipartite_pair_equals_pygs():
    theirs, ours = pair((6, 3), 5, heads=2, attention=True)
    x_src = torch.randn(9, 6, dtype=torch.float64)
    x_dst = torch.randn(4, 3, dtype=torch.float64)
    edge_index = random_edges(9, 20, num_dst=4)
    assert assert_same(theirs, ours, (x_src, x_dst), edge_index).shape == (4, 5)
    assert_same(theirs, ours, (x_src, x_dst), SparseTensor.from_edge_index(edge_index, None, (9, 4)).t())


def test_lazy_width():
    torch.manual_seed(0)
    conv = U.GeneralConv(-1, 5, directed_msg=False)
    x, edge_index, _ = inputs()
    assert conv(x.float(), edge_index).shape == (8, 5)
    assert conv.lin_msg.weight.shape == (5, 6)


def test_refusals():
    x, edge_index, edge_attr = inputs()
    x, edge_attr = x.float(), edge_attr.float()
    with pytest.raises(ValueError, match="attention_type must be one of"):
        U.GeneralConv(6, 5, attention=True, attention_type="cosine")
    with pytest.raises(ValueError, match="heads must be a positive int"):
        U.GeneralConv(6, 5, heads=0)
    with pytest.raises(ValueError, match="built without in_edge_channels"):
        U.GeneralConv(6, 5)(x, edge_index, edge_attr)
    with pytest.raises(ValueError, match="edge_attr with 4 features"):
        U.GeneralConv(6, 5, in_edge_channels=4)(x, edge_index, edge_attr[:, :3])
    with pytest.raises(ValueError, match="skip connection"):
        U.GeneralConv((6, 3), 5)((x, None), random_edges(8, 10, num_dst=3), size=(8, 3))
    with pytest.raises(ValueError, match="projected by the source's maps"):
        U.GeneralConv((6, 3), 5, directed_msg=False)((x, x[:3, :3]), random_edges(8, 10, num_dst=3))
    with pytest.raises(ValueError, match="static graphs"):
        U.GeneralConv(6, 5)(x.expand(2, -1, -1), edge_index)
