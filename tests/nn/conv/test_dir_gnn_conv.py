"""DirGNNConv against PyG's: values and gradients (float64) wrapping unigraph's layers and PyG's own,
with and without the root weight; the sparse adjacencies and the graph form (which PyG's wrapper
does not take) against PyG on the edge_index; the kept reversal; PyG's repr and state_dict; the
refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")
SparseTensor = pytest.importorskip("torch_sparse").SparseTensor

LAYERS = [("SAGEConv", {}), ("GCNConv", {}), ("GATConv", dict(heads=2, concat=False)), ("GraphConv", {})]


def inputs():
    edge_index = random_edges(7, 20)
    return torch.randn(7, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1)), edge_index


@pytest.mark.parametrize("layer, options", LAYERS)
@pytest.mark.parametrize("alpha, root_weight", [(0.5, True), (0.2, False)])
def test_wrapping_unigraphs_layers_equals_pygs(layer, options, alpha, root_weight):
    torch.manual_seed(0)
    theirs = pyg_nn.DirGNNConv(getattr(pyg_nn, layer)(6, 4, **options), alpha, root_weight)
    ours = loaded(theirs, U.DirGNNConv(getattr(U, layer)(6, 4, **options), alpha, root_weight))
    assert str(ours) == str(theirs)
    x, edge_index = inputs()
    expected = assert_same(theirs, ours, x, edge_index)
    theirs.zero_grad()
    ours.zero_grad()
    # the sparse adjacencies and the graph form, against PyG's on the edge_index
    assert_same(theirs, ours, x, edge_index, ours_args=(x, SparseTensor.from_edge_index(edge_index, None, (7, 7)).t()))
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=7), x), expected, **TOL)


def test_wrapping_pygs_own_layer():
    torch.manual_seed(0)
    theirs = pyg_nn.DirGNNConv(pyg_nn.SAGEConv(6, 4, aggr="max"))
    ours = loaded(theirs, U.DirGNNConv(pyg_nn.SAGEConv(6, 4, aggr="max")))
    assert str(ours) == str(theirs) == "DirGNNConv(SAGEConv(6, 4, aggr=max), alpha=0.5)"
    assert_same(theirs, ours, *inputs())


def test_copies_drop_self_loops_and_root_weight():
    ours = U.DirGNNConv(U.GCNConv(6, 4))
    assert ours.conv_in.add_self_loops is False and ours.conv_out.add_self_loops is False
    ours = U.DirGNNConv(U.SAGEConv(6, 4))
    assert ours.conv_in.root_weight is False and ours.conv_out.root_weight is False
    assert ours.conv_in is not ours.conv_out


def test_static_graph_equals_pygs():
    torch.manual_seed(0)
    theirs = pyg_nn.DirGNNConv(pyg_nn.SAGEConv(6, 4))
    ours = loaded(theirs, U.DirGNNConv(U.SAGEConv(6, 4)))
    x, edge_index = inputs()
    assert assert_same(theirs, ours, torch.stack([x, 2 * x, -x]), edge_index).shape == (3, 7, 4)


def test_reversal_is_kept_while_the_edge_index_is_unchanged():
    torch.manual_seed(0)
    theirs = pyg_nn.DirGNNConv(pyg_nn.GraphConv(6, 4))
    ours = loaded(theirs, U.DirGNNConv(U.GraphConv(6, 4)))
    x, edge_index = inputs()
    ours(x, edge_index)
    kept = ours._reverse_adjacency(edge_index)
    assert ours._reverse_adjacency(edge_index) is kept
    edge_index[0, 0] = (edge_index[0, 0] + 1) % 7   # changed in place: reversed again
    assert ours._reverse_adjacency(edge_index) is not kept
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index), **TOL)


def test_refusals():
    class NoWidths(torch.nn.Module):
        def forward(self, x, edge_index):
            return x

        def reset_parameters(self):
            pass

    with pytest.raises(ValueError, match="conv.in_channels and conv.out_channels"):
        U.DirGNNConv(NoWidths())
    assert U.DirGNNConv(NoWidths(), root_weight=False).lin is None
    with pytest.raises(TypeError, match="alpha must be a number"):
        U.DirGNNConv(U.GCNConv(6, 4), alpha="half")
    with pytest.raises(TypeError, match="wraps a layer"):
        U.DirGNNConv(lambda x, e: x)
    with pytest.raises(ValueError, match=r"edge_index of shape \[2, E\]"):
        U.DirGNNConv(U.GCNConv(6, 4))(torch.randn(7, 6), torch.zeros(3, 5, dtype=torch.long))
