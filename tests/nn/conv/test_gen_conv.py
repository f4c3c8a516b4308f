"""GENConv against PyG's: values and gradients (float64) over its aggregations and options, every
call form (edge_index, size, SparseTensor, torch sparse with edge features, pairs, the graph form),
the lazy widths, PyG's repr and state_dict, and the refusals."""
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
    theirs = pyg_nn.GENConv(*args, **options)
    return theirs, loaded(theirs, U.GENConv(*args, **options))


def inputs(num_nodes: int = 8, num_edges: int = 24, width: int = 6, edge_dim: int = 3):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(num_nodes, width, dtype=torch.float64, generator=gen)
    edge_attr = torch.randn(num_edges, edge_dim, dtype=torch.float64, generator=gen)
    return x, random_edges(num_nodes, num_edges), edge_attr


@pytest.mark.parametrize("aggr", ["softmax", "powermean", ["softmax", "powermean"], "add", "mean", "max",
                                  "softmax_sg", "power"])
def test_aggregations_equal_pygs(aggr):
    theirs, ours = pair(6, 8, aggr, edge_dim=3, t=0.7, p=1.5)
    assert str(ours) == str(theirs)
    x, edge_index, edge_attr = inputs()
    assert_same(theirs, ours, x, edge_index, edge_attr)


@pytest.mark.parametrize("options", [
    dict(msg_norm=True, learn_msg_scale=True, bias=True),
    dict(learn_t=True, t=0.5, norm="layer", num_layers=3, expansion=3),
    dict(aggr="powermean", learn_p=True, p=2.0, norm="instance"),
    dict(norm=None, num_layers=1, eps=1e-3),
])
def test_options_equal_pygs(options):
    theirs, ours = pair(6, 8, edge_dim=3, **options)
    x, edge_index, edge_attr = inputs()
    assert_same(theirs, ours, x, edge_index, edge_attr)
    ours.reset_parameters()
    if options.get("msg_norm"):
        assert ours.msg_norm.scale.detach().item() == 1.0


def test_edge_features_as_wide_as_the_output_need_no_projection():
    theirs, ours = pair(6, 3)   # edge_dim None: edge_attr is out_channels wide
    assert not hasattr(ours, "lin_edge")
    x, edge_index, edge_attr = inputs()
    assert_same(theirs, ours, x, edge_index, edge_attr)
    assert_same(theirs, ours, x, edge_index)


def test_call_forms_equal_pygs():
    theirs, ours = pair(6, 8, edge_dim=3, msg_norm=True)
    x, edge_index, edge_attr = inputs()
    expected = assert_same(theirs, ours, x, edge_index, edge_attr, size=(8, 8))
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, edge_attr, (8, 8)).t())
    assert_same(theirs, ours, x, SparseTensor.from_edge_index(edge_index, None, (8, 8)).t())
    # a torch sparse adjacency's [E, D] values are the edge features (not a gradient leaf here)
    adj = torch.sparse_coo_tensor(edge_index.flip(0), edge_attr, (8, 8, 3)).coalesce()
    torch.testing.assert_close(ours(x, adj), theirs(x, adj), **TOL)
    # one value per entry is an edge weight, which GENConv does not read
    weights = torch.sparse_coo_tensor(edge_index.flip(0), torch.rand(24, dtype=torch.float64), (8, 8)).coalesce()
    torch.testing.assert_close(ours(x, weights), theirs(x, weights), **TOL)
    g = unigraph.Graph(edge_index, num_nodes=8)
    torch.testing.assert_close(ours(g, x, edge_attr), expected, **TOL)


def test_bipartite_forms_equal_pygs():
    theirs, ours = pair((5, 7), 8, msg_norm=True)
    x_src = torch.randn(9, 5, dtype=torch.float64)
    x_dst = torch.randn(4, 7, dtype=torch.float64)
    edge_index = random_edges(9, 20, num_dst=4)
    assert assert_same(theirs, ours, (x_src, x_dst), edge_index).shape == (4, 8)
    assert_same(theirs, ours, (x_src, x_dst), SparseTensor.from_edge_index(edge_index, None, (9, 4)).t())
    theirs, ours = pair((5, 7), 8)
    assert_same(theirs, ours, (x_src, None), edge_index, size=(9, 4))


def test_flow_target_to_source_equals_pygs():
    theirs, ours = pair(6, 8, edge_dim=3, flow="target_to_source")
    assert_same(theirs, ours, *inputs())


def test_lazy_widths_then_pygs_weights():
    torch.manual_seed(0)
    theirs = pyg_nn.GENConv((-1, -1), 8, edge_dim=-1).double()
    ours = U.GENConv((-1, -1), 8, edge_dim=-1).double()
    assert str(ours) == str(theirs) == "GENConv((-1, -1), 8, aggr=softmax)"
    x, edge_index, edge_attr = inputs()
    theirs((x, x), edge_index, edge_attr)
    assert ours((x, x), edge_index, edge_attr).shape == (8, 8)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    assert_same(theirs, ours, (x, x), edge_index, edge_attr)


def test_refusals():
    x, edge_index, edge_attr = inputs()
    x, edge_attr = x.float(), edge_attr.float()
    with pytest.raises(ValueError, match="norm must be one of"):
        U.GENConv(6, 8, norm="group")
    with pytest.raises(ValueError, match="num_layers must be a positive int"):
        U.GENConv(6, 8, num_layers=0)
    with pytest.raises(ValueError, match="edge_attr with 8 features"):
        U.GENConv(6, 8)(x, edge_index, edge_attr)
    with pytest.raises(ValueError, match="edge_attr with 3 features"):
        U.GENConv(6, 8, edge_dim=3)(x, edge_index, edge_attr[:, :2])
    with pytest.raises(ValueError, match=r"edge_attr of shape \[num_edges, D\]"):
        U.GENConv(6, 8, edge_dim=3)(x, edge_index, edge_attr[:, 0])
    with pytest.raises(ValueError, match="x with 6 features"):
        U.GENConv(6, 8)(x[:, :5], edge_index)
    with pytest.raises(ValueError, match="destination features"):
        U.GENConv(6, 8, msg_norm=True)((x, None), random_edges(8, 10, num_dst=3), size=(8, 3))
    with pytest.raises(ValueError, match="static graphs"):
        U.GENConv(6, 8)(x.expand(2, -1, -1), edge_index)
