"""GMMConv against PyG's: values and gradients (float64) over its options (shared and separate
Gaussians, root weight, bias, aggregations) and call forms, the lazy width, PyG's repr and
state_dict, and the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")


def pair(in_channels=4, seed: int = 0, **options):
    torch.manual_seed(seed)
    options.setdefault("dim", 3)
    options.setdefault("kernel_size", 5)
    theirs = pyg_nn.GMMConv(in_channels, 6, **options)
    ours = loaded(theirs, U.GMMConv(in_channels, 6, **options))
    return theirs, ours


def inputs(num_nodes: int = 9, num_edges: int = 30, width: int = 4, dim: int = 3):
    x = torch.randn(num_nodes, width, dtype=torch.float64)
    return x, random_edges(num_nodes, num_edges), torch.rand(num_edges, dim, dtype=torch.float64)


@pytest.mark.parametrize("separate_gaussians", [False, True])
@pytest.mark.parametrize("aggr", ["mean", "add", "max", "softmax"])
@pytest.mark.parametrize("bias", [True, False])
def test_options_equal_pygs(separate_gaussians, aggr, bias):
    theirs, ours = pair(separate_gaussians=separate_gaussians, aggr=aggr, bias=bias)
    x, edge_index, edge_attr = inputs()
    assert_same(theirs, ours, x, edge_index, edge_attr)
    assert_same(theirs, ours, x, edge_index, edge_attr, size=(9, 9))


@pytest.mark.parametrize("separate_gaussians", [False, True])
def test_without_root_weight_equals_pygs_without_destination_features(separate_gaussians):
    """PyG's GMMConv(root_weight=False) reads an attribute it never set when the destination
    features are given (an AttributeError); without them it computes the layer, which ours
    computes in both forms."""
    theirs, ours = pair(separate_gaussians=separate_gaussians, root_weight=False)
    x, edge_index, edge_attr = inputs()
    expected = assert_same(theirs, ours, (x, None), edge_index, edge_attr, (9, 9))
    torch.testing.assert_close(ours(x, edge_index, edge_attr), expected, **TOL)


@pytest.mark.parametrize("separate_gaussians", [False, True])
def test_bipartite_and_flow_equal_pygs(separate_gaussians):
    theirs, ours = pair((4, 7), separate_gaussians=separate_gaussians)
    x_src, x_dst = torch.randn(8, 4, dtype=torch.float64), torch.randn(3, 7, dtype=torch.float64)
    edge_index, edge_attr = random_edges(8, 20, num_dst=3), torch.rand(20, 3, dtype=torch.float64)
    assert assert_same(theirs, ours, (x_src, x_dst), edge_index, edge_attr).shape == (3, 6)
    assert_same(theirs, ours, (x_src, None), edge_index, edge_attr, (8, 3))
    theirs, ours = pair(separate_gaussians=separate_gaussians, flow="target_to_source")
    assert_same(theirs, ours, *inputs())


def test_one_dimensional_pseudo_coordinates():
    theirs, ours = pair(dim=1, kernel_size=3)
    x, edge_index, edge_attr = inputs(dim=1)
    assert_same(theirs, ours, x, edge_index, edge_attr)


def test_sparse_adjacencies_graph_form_and_empty_graph():
    from torch_sparse import SparseTensor
    theirs, ours = pair()
    x, edge_index, edge_attr = inputs()
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, edge_attr, (9, 9)).t())
    coo = torch.sparse_coo_tensor(edge_index.flip(0), edge_attr, (9, 9, 3), check_invariants=True).coalesce()
    assert_same(theirs, ours, x, coo)
    expected = theirs(x, edge_index, edge_attr)
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=9), x, edge_attr), expected, **TOL)
    assert_same(theirs, ours, x, torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, 3, dtype=torch.float64))


@pytest.mark.parametrize("separate_gaussians", [False, True])
@pytest.mark.parametrize("in_channels", [-1, (-1, -1)])
def test_lazy_widths_equal_pygs(separate_gaussians, in_channels):
    torch.manual_seed(0)
    theirs = pyg_nn.GMMConv(in_channels, 6, dim=3, kernel_size=4, separate_gaussians=separate_gaussians).double()
    ours = U.GMMConv(in_channels, 6, dim=3, kernel_size=4, separate_gaussians=separate_gaussians).double()
    assert str(ours) == str(theirs)
    x, edge_index, edge_attr = inputs(width=4)
    x = (x, torch.randn(9, 5, dtype=torch.float64)) if in_channels != -1 else x
    theirs(x, edge_index, edge_attr), ours(x, edge_index, edge_attr)   # each sized and initialized
    for name, parameter in theirs.named_parameters():
        assert ours.get_parameter(name).shape == parameter.shape, name
    assert_same(theirs, loaded(theirs, ours), x, edge_index, edge_attr)


def test_repr_and_state_dict():
    theirs, ours = pair((4, 7), separate_gaussians=True)
    assert str(ours) == str(theirs) == "GMMConv((4, 7), 6, dim=3)"
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_refusals():
    _, ours = pair()
    x, edge_index, edge_attr = inputs()
    with pytest.raises(ValueError, match="needs edge_attr"):
        ours(x, edge_index)
    with pytest.raises(ValueError, match="edge_attr with 3 features"):
        ours(x, edge_index, edge_attr[:, :2])
    with pytest.raises(ValueError, match="x with 4 features"):
        ours(torch.randn(9, 5, dtype=torch.float64), edge_index, edge_attr)
    for bad in ({"dim": 0}, {"kernel_size": 0}, {"kernel_size": 2.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            U.GMMConv(4, 6, **{"dim": 3, "kernel_size": 5, **bad})
