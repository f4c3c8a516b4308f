"""PNAConv against PyG's (same weights: every aggregator and scaler, towers, edge features,
float64 forward and backward), and the degree histogram."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
torch_sparse = pytest.importorskip("torch_sparse", reason="SparseTensor inputs need torch_sparse")

N, IN, OUT = 12, 8, 6
AGGREGATORS = ["sum", "mean", "min", "max", "var", "std"]
SCALERS = ["identity", "amplification", "attenuation", "linear", "inverse_linear"]


@pytest.mark.parametrize("kwargs", [dict(), dict(edge_dim=3, towers=2, pre_layers=2, post_layers=2),
                                    dict(towers=2, divide_input=True, act="tanh", train_norm=True)])
def test_pna_conv_matches_pyg(kwargs):
    torch.manual_seed(0)
    deg = torch.tensor([1, 2, 5, 3, 1])
    theirs = pyg_nn.PNAConv(IN, OUT, AGGREGATORS, SCALERS, deg, **kwargs)
    ours = loaded(theirs, U.PNAConv(IN, OUT, AGGREGATORS, SCALERS, deg, **kwargs))
    assert str(ours) == str(theirs)
    edge_index = random_edges(N, 40)  # some nodes without in-edges: min/max/std of nothing is 0
    x = torch.randn(N, IN, dtype=torch.float64)
    args = (x, edge_index)
    if kwargs.get("edge_dim"):
        edge_attr = torch.randn(40, 3, dtype=torch.float64)
        args += (edge_attr,)
        unique = torch.unique(edge_index, dim=1)
        values = torch.randn(unique.shape[1], 3, dtype=torch.float64)
        adj = torch_sparse.SparseTensor.from_edge_index(unique, values, (N, N)).t()
        torch.testing.assert_close(ours(x, adj), ours(x, unique, values), **TOL)
    assert_same(theirs, ours, *args)


def test_degree_histogram():
    from torch_geometric.data import Data
    graphs = [Data(num_nodes=5, edge_index=torch.tensor([[0, 0, 0, 1, 1, 2, 3], [1, 2, 3, 2, 0, 0, 0]])),
              Data(num_nodes=4, edge_index=torch.tensor([[0, 1], [1, 1]]))]
    expected = pyg_nn.PNAConv.get_degree_histogram(graphs)
    assert torch.equal(U.PNAConv.get_degree_histogram(graphs), expected)


def test_arguments_checked():
    deg = torch.tensor([1, 2])
    with pytest.raises(ValueError, match="divisible by towers=4"):
        U.PNAConv(IN, 6, ["sum"], ["identity"], deg, towers=4)
    with pytest.raises(ValueError, match="unknown scaler 'double'"):
        U.PNAConv(IN, OUT, ["sum"], ["double"], deg)
    with pytest.raises(ValueError, match="built without edge_dim"):
        U.PNAConv(IN, OUT, ["sum"], ["identity"], deg)(torch.randn(3, IN), random_edges(3, 4), torch.randn(4, 2))


def test_static_graph_is_each_feature_set_alone():
    """``[B, N, F]`` with one graph and edge features (given, or a SparseTensor's values) comes out
    ``[B, N, F_out]``, each feature set alone. (PyG 2.8's PNAConv reads such x as ``B * N`` nodes,
    only the first ``N`` of them with edges, and returns ``[B * N, F_out]``.)"""
    from pyg_compare import assert_static_is_each_copy
    torch.manual_seed(0)
    conv = U.PNAConv(IN, OUT, AGGREGATORS, SCALERS, torch.tensor([1, 2, 5, 3, 1]), edge_dim=3, towers=2).double()
    edge_index = torch.unique(random_edges(N, 40), dim=1)
    edge_attr = torch.randn(edge_index.shape[1], 3, dtype=torch.float64)
    x = torch.randn(3, N, IN, dtype=torch.float64)
    out = assert_static_is_each_copy(conv, x, edge_index, edge_attr=edge_attr)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, edge_attr, (N, N)).t()
    torch.testing.assert_close(conv(x, adj), out.detach(), **TOL)


def test_flow_target_to_source_matches_pyg():
    torch.manual_seed(0)
    theirs = pyg_nn.PNAConv(IN, OUT, AGGREGATORS, SCALERS, torch.tensor([1, 2, 5, 3, 1]), edge_dim=3,
                            flow="target_to_source")
    ours = loaded(theirs, U.PNAConv(IN, OUT, AGGREGATORS, SCALERS, torch.tensor([1, 2, 5, 3, 1]), edge_dim=3,
                                    flow="target_to_source"))
    x, edge_index = torch.randn(N, IN, dtype=torch.float64), random_edges(N, 40)
    assert_same(theirs, ours, x, edge_index, torch.randn(40, 3, dtype=torch.float64))
