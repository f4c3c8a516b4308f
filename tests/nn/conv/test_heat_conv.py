"""HEATConv against PyG's: values and gradients (inputs and parameters, float64) over heads,
concat, root_weight, bias, slope, aggregations (an aggregation module too), flow, a SparseTensor
with the edge features as values, the graph form, lazy widths; repr and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, E, IN, OUT = 9, 28, 6, 5
SIZES = dict(num_node_types=3, num_edge_types=4, edge_type_emb_dim=3, edge_dim=2, edge_attr_emb_dim=4)


def pair(in_channels=IN, seed=0, **options):
    torch.manual_seed(seed)
    theirs = pyg_nn.HEATConv(in_channels, OUT, **SIZES, **options)
    ours = U.HEATConv(in_channels, OUT, **SIZES, **options)
    if in_channels != -1:
        ours = loaded(theirs, ours)
    return theirs, ours


def inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(N, IN, dtype=torch.float64, generator=gen)
    edge_index = random_edges(N, E, seed=seed)
    node_type = torch.randint(0, 3, (N,), generator=gen)
    node_type[:3] = torch.tensor([0, 1, 2])
    edge_type = torch.randint(0, 4, (E,), generator=gen)
    edge_attr = torch.randn(E, 2, dtype=torch.float64, generator=gen)
    return x, edge_index, node_type, edge_type, edge_attr


@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("concat", [True, False])
@pytest.mark.parametrize("root_weight", [True, False])
def test_heads_concat_root_equal_pygs(heads, concat, root_weight):
    theirs, ours = pair(heads=heads, concat=concat, root_weight=root_weight)
    out = assert_same(theirs, ours, *inputs())
    assert out.shape == (N, heads * OUT if concat else OUT)


@pytest.mark.parametrize("options", [dict(bias=False), dict(negative_slope=0.05), dict(aggr="mean"),
                                     dict(aggr="max"), dict(aggr="softmax"), dict(flow="target_to_source")])
def test_options_equal_pygs(options):
    theirs, ours = pair(heads=2, **options)
    assert_same(theirs, ours, *inputs(1))


def test_sparse_tensor_equals_pygs():
    """The SparseTensor's values are the edge features and edge_type follows its storage order."""
    from torch_sparse import SparseTensor
    theirs, ours = pair(heads=2)
    x, edge_index, node_type, edge_type, edge_attr = inputs(2)
    adj = SparseTensor.from_edge_index(edge_index, edge_attr, (N, N)).t()
    order = torch.argsort(edge_index[1] * N + edge_index[0], stable=True)   # (the storage order)
    assert_same(theirs, ours, x, adj, node_type, edge_type[order])


def test_graph_form_lazy_widths_and_dropout():
    x, edge_index, node_type, edge_type, edge_attr = inputs(3)
    theirs, ours = pair(heads=2)
    expected = ours(x, edge_index, node_type, edge_type, edge_attr)
    g = unigraph.Graph(edge_index, num_nodes=N)
    torch.testing.assert_close(ours(g, x, node_type, edge_type, edge_attr), expected, **TOL)
    theirs, ours = pair(-1, heads=2)
    theirs.double()(x, edge_index, node_type, edge_type, edge_attr)
    ours.double().load_state_dict(theirs.state_dict())   # a lazy weight sized from the state_dict
    assert_same(theirs, ours, x, edge_index, node_type, edge_type, edge_attr)
    lazy = U.HEATConv(-1, OUT, **SIZES).double()
    assert lazy(x, edge_index, node_type, edge_type, edge_attr).shape == (N, OUT)
    assert lazy.hetero_lin.weight.shape == (3, IN, OUT)
    assert str(lazy) == "HEATConv(-1, 5, heads=1)"
    dropped = loaded(theirs, U.HEATConv(IN, OUT, **SIZES, heads=2, dropout=0.5))
    torch.testing.assert_close(dropped.eval()(x, edge_index, node_type, edge_type, edge_attr),
                               theirs.eval()(x, edge_index, node_type, edge_type, edge_attr), **TOL)
    assert dropped.train()(x, edge_index, node_type, edge_type, edge_attr).shape == (N, 2 * OUT)


def test_repr_and_refusals():
    assert str(U.HEATConv(8, 16, **SIZES, heads=2)) == str(pyg_nn.HEATConv(8, 16, **SIZES, heads=2))
    assert str(U.HEATConv(8, 16, **SIZES, heads=2)) == "HEATConv(8, 16, heads=2)"
    x, edge_index, node_type, edge_type, edge_attr = inputs()
    conv = U.HEATConv(IN, OUT, **SIZES).double()
    with pytest.raises(ValueError, match="edge_attr"):
        conv(x, edge_index, node_type, edge_type)
    with pytest.raises(ValueError, match=r"node_type must be in \[0, 3\)"):
        conv(x, edge_index, node_type + 1, edge_type, edge_attr)
    with pytest.raises(ValueError, match="one edge_type per edge"):
        conv(x, edge_index, node_type, edge_type[:-1], edge_attr)
    with pytest.raises(TypeError, match="int64"):
        conv(x, edge_index, node_type.float(), edge_type, edge_attr)
    with pytest.raises(ValueError, match="6 features"):
        conv(x[:, :4], edge_index, node_type, edge_type, edge_attr)
    with pytest.raises(ValueError, match="edge_dim=2"):
        conv(x, edge_index, node_type, edge_type, edge_attr[:, :1].repeat(1, 3))
    with pytest.raises(ValueError, match="edge_dim"):
        U.HEATConv(IN, OUT, **{**SIZES, "edge_dim": -1})
    with pytest.raises(ValueError, match="one tensor"):
        conv((x, x), edge_index, node_type, edge_type, edge_attr)
