"""unigraph.dgl.nn's layers against the real DGL's: the same parameter names (a DGL state_dict
loads), the same outputs and gradients in float64 (eval mode), on a graph with self-loops, on a
block, with edge weights; and DGL's default initialization."""
from __future__ import annotations

import math

import pytest
import torch

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn
from dgl_compare import compare, our_graphs


@pytest.mark.parametrize("norm, out_feats, edge_weight", [("both", 3, False), ("right", 7, True), ("left", 3, True),
                                                        ("none", 7, False)])
def test_graph_conv(dgl, norm, out_feats, edge_weight):  # out 3 < in 5: W before the aggregation; 7: after
    compare(dgl, lambda nn: nn.GraphConv(5, out_feats, norm=norm, activation=torch.tanh), edge_weight=edge_weight)


@pytest.mark.parametrize("residual, out_feats, get_attention", [(False, 3, False), (True, 5, True), (True, 3, False)])
def test_gat_conv(dgl, residual, out_feats, get_attention):
    compare(dgl, lambda nn: nn.GATConv(5, out_feats, num_heads=2, residual=residual, activation=torch.relu),
            get_attention=get_attention)


@pytest.mark.parametrize("aggregator, out_feats", [("mean", 3), ("mean", 8), ("gcn", 3), ("gcn", 8), ("pool", 3),
                                                   ("lstm", 3)])
def test_sage_conv(dgl, aggregator, out_feats):
    compare(dgl, lambda nn: nn.SAGEConv(5, out_feats, aggregator, activation=torch.relu),
            edge_weight=aggregator != "lstm")


@pytest.mark.parametrize("out_feats", [3, 8])
def test_sage_conv_mean_on_pooled_memory(dgl, poisoned_output_pool, out_feats):
    # the fused mean path (pooled projections, root += neighbours' projection in place) on recycled
    # memory poisoned with NaN: DGL's values and gradients, aggregating first (8) and projecting first (3)
    compare(dgl, lambda nn: nn.SAGEConv(5, out_feats, "mean"), edge_weight=True)
    compare(dgl, lambda nn: nn.SAGEConv(5, out_feats, "mean"))


def test_sage_conv_mean_keeps_hooks_on_its_linears(dgl):
    # a hook on fc_self / fc_neigh must run: the fused path is taken only for plain nn.Linear calls
    def make(nn):
        conv = nn.SAGEConv(5, 8, "mean")
        conv.fc_self.register_forward_hook(lambda module, args, out: 2 * out)
        conv.fc_neigh.register_forward_pre_hook(lambda module, args: (args[0] - 1,))
        return conv
    compare(dgl, make)


@pytest.mark.parametrize("out_feats", [3, 8])
def test_sage_conv_mean_on_a_block_gradients(out_feats):
    # one tensor for a block's sources and destinations (x[:num_dst]): the destinations' gradient is
    # added into the sources' in place (create_graph: out of place); x also used outside the layer
    _, block = our_graphs()
    torch.manual_seed(0)
    conv = unn.SAGEConv(5, out_feats, "mean").double()
    x = torch.randn(block.num_src_nodes(), 5, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda x: conv(block, x).sum(0) + x[: block.num_dst_nodes()].sum(), (x,))
    torch.autograd.gradgradcheck(lambda x: conv(block, x), (x,))
    with torch.no_grad():
        expected = conv(block, (x, x[: block.num_dst_nodes()].clone()))
    torch.testing.assert_close(conv(block, x), expected)


@pytest.mark.parametrize("aggregator", ["sum", "max"])
@pytest.mark.parametrize("eps", [dict(init_eps=0.3, learn_eps=True), dict()], ids=["learned", "fixed_zero"])
def test_gin_conv(dgl, aggregator, eps):
    """``fixed_zero`` (DGL's default) takes the root term's shortcut (``x`` for ``1.0 * x``)."""
    compare(dgl, lambda nn: nn.GINConv(torch.nn.Linear(5, 4), aggregator, **eps))


def test_dgl_initialization_and_zero_in_degree_check():
    torch.manual_seed(0)
    conv = unn.GraphConv(400, 300)
    assert abs(conv.weight.std().item() - math.sqrt(2 / 700)) < 0.002 and not conv.bias.any()  # Glorot uniform
    gat = unn.GATConv(400, 30, num_heads=10)
    gain = math.sqrt(2)
    assert abs(gat.fc.weight.std().item() - gain * math.sqrt(2 / 700)) < 0.003  # Glorot normal, ReLU gain
    sage = unn.SAGEConv(400, 300, "mean")
    assert abs(sage.fc_neigh.weight.std().item() - gain * math.sqrt(2 / 700)) < 0.003
    g = udgl.graph(([0, 1], [1, 1]), num_nodes=3)
    with pytest.raises(udgl.DGLError, match="0-in-degree"):
        conv(g, torch.randn(3, 400))
    out = unn.GATConv(4, 2, 3, allow_zero_in_degree=True)(g, torch.randn(3, 4))
    assert out.shape == (3, 3, 2)


def test_sage_gcn_projects_shared_features_once():
    """One feature tensor for both sides (a graph, or a block's sources) is projected once, as DGL
    does; a (source, destination) pair twice. Values: ``test_sage_conv`` against DGL."""
    conv = unn.SAGEConv(5, 3, "gcn")
    calls = []
    conv.fc_neigh.register_forward_hook(lambda module, args, out: calls.append(args[0].shape[0]))
    ours_graph, block = our_graphs()
    conv(ours_graph, torch.randn(6, 5))
    assert calls == [6]
    calls.clear()
    conv(block, torch.randn(block.num_src_nodes(), 5))
    assert calls == [block.num_src_nodes()]
    calls.clear()
    conv(block, (torch.randn(block.num_src_nodes(), 5), torch.randn(block.num_dst_nodes(), 5)))
    assert calls == [block.num_src_nodes(), block.num_dst_nodes()]

