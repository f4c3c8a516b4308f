"""NNConv against PyG's: values and gradients (float64) over its options and call forms, PyG's
repr and state_dict, the lazy width, and the refusals."""
from __future__ import annotations

import copy

import pytest
import torch
from torch.nn import Linear, ReLU, Sequential

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")


def edge_net(in_channels: int, out_channels: int, edge_dim: int = 3) -> Sequential:
    return Sequential(Linear(edge_dim, 8), ReLU(), Linear(8, in_channels * out_channels))


def pair(seed: int = 0, **options):
    torch.manual_seed(seed)
    in_channels = options.pop("in_channels", 4)
    source = in_channels if isinstance(in_channels, int) else in_channels[0]
    net = edge_net(source, 5)
    theirs = pyg_nn.NNConv(in_channels, 5, net, **options)
    ours = loaded(theirs, U.NNConv(in_channels, 5, net, **options))
    return theirs, ours


def inputs(num_nodes: int = 9, num_edges: int = 30, width: int = 4, edge_dim: int = 3):
    x = torch.randn(num_nodes, width, dtype=torch.float64)
    return x, random_edges(num_nodes, num_edges), torch.randn(num_edges, edge_dim, dtype=torch.float64)


@pytest.mark.parametrize("aggr", ["add", "mean", "max", "softmax"])
@pytest.mark.parametrize("root_weight", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_options_equal_pygs(aggr, root_weight, bias):
    theirs, ours = pair(aggr=aggr, root_weight=root_weight, bias=bias)
    x, edge_index, edge_attr = inputs()
    assert_same(theirs, ours, x, edge_index, edge_attr)
    assert_same(theirs, ours, x, edge_index, edge_attr, size=(9, 9))


def test_flow_target_to_source_equals_pygs():
    theirs, ours = pair(flow="target_to_source")
    assert_same(theirs, ours, *inputs())


def test_bipartite_forms_equal_pygs():
    theirs, ours = pair(in_channels=(4, 6))
    x_src = torch.randn(7, 4, dtype=torch.float64)
    x_dst = torch.randn(3, 6, dtype=torch.float64)
    edge_index, edge_attr = random_edges(7, 20, num_dst=3), torch.randn(20, 3, dtype=torch.float64)
    out = assert_same(theirs, ours, (x_src, x_dst), edge_index, edge_attr)
    assert out.shape == (3, 5)
    assert_same(theirs, ours, (x_src, x_dst), edge_index, edge_attr, (7, 3))
    assert_same(theirs, ours, (x_src, None), edge_index, edge_attr, (7, 3))


def test_sparse_adjacencies_carry_the_edge_features_as_pyg_reads_them():
    """A SparseTensor's values and a torch COO adjacency's [E, D] values are the edge features,
    in the adjacency's storage order."""
    from torch_sparse import SparseTensor
    theirs, ours = pair()
    x, edge_index, edge_attr = inputs()
    adj = SparseTensor.from_edge_index(edge_index, edge_attr, (9, 9)).t()
    assert_same(theirs, ours, x, adj)
    coo = torch.sparse_coo_tensor(edge_index.flip(0), edge_attr, (9, 9, 3), check_invariants=True).coalesce()
    assert_same(theirs, ours, x, coo)


def test_edge_index_object_and_graph_form():
    from torch_geometric import EdgeIndex
    theirs, ours = pair()
    x, edge_index, edge_attr = inputs()
    assert_same(theirs, ours, x, EdgeIndex(edge_index, sparse_size=(9, 9)), edge_attr)
    g = unigraph.Graph(edge_index, num_nodes=9)
    expected = theirs(x, edge_index, edge_attr)
    torch.testing.assert_close(ours(g, x, edge_attr), expected, **TOL)


def test_empty_graph():
    theirs, ours = pair()
    x = torch.randn(4, 4, dtype=torch.float64)
    assert_same(theirs, ours, x, torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, 3, dtype=torch.float64))


def test_repr_state_dict_and_alias():
    theirs, ours = pair(in_channels=(4, 6), aggr="mean")
    assert str(ours) == str(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert U.nn_conv.ECConv is U.NNConv


def test_lazy_in_channels_is_sized_on_the_first_call():
    """PyG's NNConv(-1) cannot run (its message views by -1 twice); ours sizes itself."""
    torch.manual_seed(0)
    ours = U.NNConv(-1, 5, edge_net(4, 5)).double()
    assert str(ours) == "NNConv(-1, 5, aggr=add, nn=" + str(ours.nn) + ")"
    x, edge_index, edge_attr = inputs()
    net_state = {k: v.clone() for k, v in ours.nn.state_dict().items()}
    out = ours(x, edge_index, edge_attr)
    assert out.shape == (9, 5) and ours.lin.weight.shape == (5, 4)
    # the user's network is not re-initialized by the sizing
    for key, value in ours.nn.state_dict().items():
        assert torch.equal(value, net_state[key])
    theirs = pyg_nn.NNConv(4, 5, copy.deepcopy(ours.nn)).double()   # (PyG's constructor resets its nn)
    theirs.load_state_dict(ours.state_dict())
    torch.testing.assert_close(out, theirs(x, edge_index, edge_attr), **TOL)


def test_refusals():
    _, ours = pair()
    x, edge_index, edge_attr = inputs()
    with pytest.raises(ValueError, match="needs edge_attr"):
        ours(x, edge_index)
    with pytest.raises(ValueError, match="x with 4 features"):
        ours(torch.randn(9, 3, dtype=torch.float64), edge_index, edge_attr)
    with pytest.raises(ValueError, match="edge_attr has 29 rows"):
        ours(x, edge_index, edge_attr[:29])
    with pytest.raises(TypeError, match="floating point"):
        ours(x, edge_index, edge_attr.long())
    wrong = U.NNConv(4, 5, edge_net(4, 4)).double()
    with pytest.raises(ValueError, match=r"in_channels \* out_channels=20"):
        wrong(x, edge_index, edge_attr)
    with pytest.raises(TypeError, match="callable network"):
        U.NNConv(4, 5, nn=3)
    with pytest.raises(ValueError, match="out_channels"):
        U.NNConv(4, 0, edge_net(4, 5))
