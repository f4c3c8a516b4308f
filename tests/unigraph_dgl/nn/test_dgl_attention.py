"""unigraph.dgl.nn's attention layers (GATv2Conv, DotGatConv, EGATConv, EdgeGATConv, AGNNConv)
against DGL's own: a DGL state_dict loads, and outputs, attentions, input and parameter gradients
agree in float64 on a graph with self-loops and on a block, with one feature tensor or a
(src, dst) pair, with edge features and edge weights; DGL's initialization; attention dropout only
in training; the errors."""
from __future__ import annotations

import math

import pytest
import torch

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn
from dgl_compare import TOL, assert_same_run, compare, graphs, our_graphs, same_modules


def compare_with(dgl, make, src_width: int, dst_width: int | None = None, edge_width: int | None = None,
                 lead: tuple = (), blocks: bool = True, graph: bool = True, edge_weight: bool = False,
                 **forward) -> None:
    """Like dgl_compare.compare, with a (src, dst) feature pair when ``dst_width`` is given, edge
    features ``[E, *lead, edge_width]`` as the third argument, leading feature dimensions ``lead``;
    on the graph with self-loops (``graph``) and its block (``blocks``)."""
    torch.manual_seed(0)
    for ours_graph, their_graph in graphs(dgl, blocks)[0 if graph else 1:]:
        ours, theirs = same_modules(dgl, make)

        def rand(rows, width):
            return torch.randn(rows, *lead, width, dtype=torch.float64, requires_grad=True)

        x = rand(ours_graph.num_src_nodes(), src_width)
        inputs, args = [x], [x]
        if dst_width is not None:
            x_dst = rand(ours_graph.num_dst_nodes(), dst_width)
            inputs, args = [x, x_dst], [(x, x_dst)]
        if edge_width is not None:
            e = rand(ours_graph.num_edges(), edge_width)
            inputs.append(e)
            args.append(e)
        extra = {"edge_weight": torch.randn(ours_graph.num_edges(), dtype=torch.float64)} if edge_weight else {}
        assert_same_run(ours, theirs, (ours_graph, *args), (their_graph, *args), inputs, **extra, **forward)


# ---------------------------------------------------------------------- GATv2Conv
@pytest.mark.parametrize("options", [dict(), dict(residual=True, activation=torch.tanh),
                                     dict(residual=True, bias=False), dict(share_weights=True),
                                     dict(share_weights=True, bias=False, residual=True)],
                         ids=["plain", "residual", "residual_nobias", "shared", "shared_nobias_residual"])
@pytest.mark.parametrize("get_attention", [False, True])
def test_gatv2_conv(dgl, options, get_attention):
    compare(dgl, lambda nn: nn.GATv2Conv(5, 3, 2, attn_drop=0.5, negative_slope=0.1, **options),
            get_attention=get_attention)


def test_gatv2_conv_identity_residual_and_pairs(dgl):
    compare(dgl, lambda nn: nn.GATv2Conv(5, 5, 1, residual=True))           # in == heads * out: identity
    compare_with(dgl, lambda nn: nn.GATv2Conv((5, 4), 3, 2, residual=True), 5, 4, get_attention=True)
    # an int in_feats with a pair: fc_src and fc_dst (shared under share_weights) on each side
    compare_with(dgl, lambda nn: nn.GATv2Conv(5, 3, 2), 5, 5)
    compare_with(dgl, lambda nn: nn.GATv2Conv(5, 3, 2, share_weights=True), 5, 5)


# ---------------------------------------------------------------------- DotGatConv
def test_dotgat_conv(dgl):
    compare(dgl, lambda nn: nn.DotGatConv(5, 3, 2), get_attention=True)
    compare(dgl, lambda nn: nn.DotGatConv(5, 4, 1))
    # pairs on a block only: on a graph with one node set DGL's layer stores both sides of a pair
    # under one name, so its sources read the destinations' features (ours read the sources')
    compare_with(dgl, lambda nn: nn.DotGatConv((5, 4), 3, 2), 5, 4, graph=False, get_attention=True)


# ---------------------------------------------------------------------- AGNNConv
@pytest.mark.parametrize("learn_beta", [True, False])
def test_agnn_conv(dgl, learn_beta):
    compare(dgl, lambda nn: nn.AGNNConv(0.7, learn_beta=learn_beta))
    compare_with(dgl, lambda nn: nn.AGNNConv(1.5, learn_beta=learn_beta), 4, lead=(3,))   # [N, 3, 4]
    compare_with(dgl, lambda nn: nn.AGNNConv(learn_beta=learn_beta), 4, 4, graph=False)   # see test_dotgat_conv


# ---------------------------------------------------------------------- EGATConv
@pytest.mark.parametrize("edge_weight, get_attention", [(False, False), (True, True), (False, True)])
def test_egat_conv(dgl, edge_weight, get_attention):
    # DGL's EGATConv does not cut one tensor to a block's destinations: the block gets a pair
    compare_with(dgl, lambda nn: nn.EGATConv(5, 3, 4, 2, num_heads=2), 5, edge_width=3, blocks=False,
                 edge_weight=edge_weight, get_attention=get_attention)
    compare_with(dgl, lambda nn: nn.EGATConv((5, 4), 3, 2, 4, num_heads=3), 5, 4, edge_width=3,
                 edge_weight=edge_weight, get_attention=get_attention)


def test_egat_conv_without_bias_and_on_a_block():
    # DGL's EGATConv(bias=False) fails to build; ours equals the biased layer with a zero bias
    torch.manual_seed(0)
    g, block = our_graphs()
    biased = unn.EGATConv(5, 3, 4, 2, num_heads=2).double()
    plain = unn.EGATConv(5, 3, 4, 2, num_heads=2, bias=False).double()
    assert "bias" not in dict(plain.named_parameters())
    plain.load_state_dict({k: v for k, v in biased.state_dict().items() if k != "bias"})
    x = torch.randn(g.num_nodes(), 5, dtype=torch.float64)
    e = torch.randn(g.num_edges(), 3, dtype=torch.float64)
    for a, b in zip(plain(g, x, e), biased(g, x, e)):
        torch.testing.assert_close(a, b, **TOL)
    # one tensor on a block: its first rows are the destinations, as with an explicit pair
    x = torch.randn(block.num_src_nodes(), 5, dtype=torch.float64)
    e = torch.randn(block.num_edges(), 3, dtype=torch.float64)
    pair = (x, x[: block.num_dst_nodes()])
    for a, b in zip(biased(block, x, e, get_attention=True), biased(block, pair, e, get_attention=True)):
        torch.testing.assert_close(a, b, **TOL)


# ---------------------------------------------------------------------- EdgeGATConv
@pytest.mark.parametrize("options", [dict(), dict(residual=False, bias=False, activation=torch.relu),
                                     dict(allow_zero_in_degree=True, negative_slope=0.3)],
                         ids=["default", "plain", "slope"])
def test_edgegat_conv(dgl, options):
    compare_with(dgl, lambda nn: nn.EdgeGATConv(5, 3, 4, 2, attn_drop=0.3, **options), 5, edge_width=3,
                 get_attention=True)


def test_edgegat_conv_pairs_and_leading_dimensions(dgl):
    compare_with(dgl, lambda nn: nn.EdgeGATConv((5, 4), 3, 2, 3), 5, 4, edge_width=3, get_attention=True)
    compare_with(dgl, lambda nn: nn.EdgeGATConv(5, 3, 2, 2), 5, 5, edge_width=3)   # int in_feats: fc both sides
    compare_with(dgl, lambda nn: nn.EdgeGATConv(5, 3, 2, 2), 5, edge_width=3, lead=(2,), get_attention=True)


# ---------------------------------------------------------------------- a bipartite graph
@pytest.mark.parametrize("make, dst_width, edge_width, forward", [
    (lambda nn: nn.GATv2Conv((5, 4), 3, 2, residual=True), 4, None, dict(get_attention=True)),
    (lambda nn: nn.DotGatConv((5, 4), 3, 2), 4, None, dict(get_attention=True)),
    (lambda nn: nn.AGNNConv(0.5), 5, None, {}),
    (lambda nn: nn.EGATConv((5, 4), 3, 3, 2, 2), 4, 3, dict(get_attention=True)),
    (lambda nn: nn.EdgeGATConv((5, 4), 3, 3, 2), 4, 3, dict(get_attention=True)),
], ids=["gatv2", "dotgat", "agnn", "egat", "edgegat"])
def test_on_a_bipartite_graph(dgl, make, dst_width, edge_width, forward):
    src, dst = torch.tensor([0, 1, 2, 3, 3, 0]), torch.tensor([0, 0, 1, 1, 2, 2])
    relation, counts = ("a", "r", "b"), {"a": 4, "b": 3}
    ours_graph = udgl.heterograph({relation: (src, dst)}, num_nodes_dict=counts)
    their_graph = dgl.heterograph({relation: (src, dst)}, num_nodes_dict=counts)
    torch.manual_seed(0)
    ours, theirs = same_modules(dgl, make)
    inputs = [torch.randn(4, 5, dtype=torch.float64, requires_grad=True),
              torch.randn(3, dst_width, dtype=torch.float64, requires_grad=True)]
    args = [tuple(inputs)]
    if edge_width is not None:
        inputs.append(torch.randn(6, edge_width, dtype=torch.float64, requires_grad=True))
        args.append(inputs[-1])
    assert_same_run(ours, theirs, (ours_graph, *args), (their_graph, *args), inputs, **forward)


# ---------------------------------------------------------------------- dropout, initialization
@pytest.mark.parametrize("make", [lambda: unn.GATv2Conv(5, 3, 2, attn_drop=0.5),
                                  lambda: unn.EdgeGATConv(5, 3, 3, 2, attn_drop=0.5)], ids=["gatv2", "edgegat"])
def test_attention_dropout_only_in_training(make):
    g, _ = our_graphs()
    torch.manual_seed(0)
    conv = make().double()
    x = torch.randn(g.num_nodes(), 5, dtype=torch.float64)
    args = (g, x) if isinstance(conv, unn.GATv2Conv) else (g, x, torch.randn(g.num_edges(), 3, dtype=torch.float64))
    _, kept = conv.eval()(*args, get_attention=True)
    _, dropped = conv.train()(*args, get_attention=True)
    assert (kept > 0).all() and (dropped == 0).any()
    survivors = dropped != 0
    torch.testing.assert_close(dropped[survivors], 2 * kept[survivors], **TOL)   # scaled by 1 / (1 - p)


def test_dgl_initialization():
    torch.manual_seed(0)
    gain = math.sqrt(2)
    gat = unn.GATv2Conv(400, 30, num_heads=10, residual=True)
    for linear in (gat.fc_src, gat.fc_dst, gat.res_fc):   # Glorot normal with the ReLU gain, zero biases
        assert abs(linear.weight.std().item() - gain * math.sqrt(2 / 700)) < 0.003 and not linear.bias.any()
    shared = unn.GATv2Conv(400, 30, num_heads=10, share_weights=True)
    assert shared.fc_dst is shared.fc_src and set(shared.state_dict()) >= {"fc_src.weight", "fc_dst.weight"}
    egat = unn.EGATConv(400, 200, 30, 30, num_heads=10)
    assert abs(egat.fc_fij.weight.std().item() - gain * math.sqrt(2 / 500)) < 0.003 and not egat.bias.any()
    edgegat = unn.EdgeGATConv(400, 200, 30, num_heads=10)
    assert abs(edgegat.fc_edge.weight.std().item() - gain * math.sqrt(2 / 500)) < 0.003 and not edgegat.bias.any()
    assert edgegat.res_fc.bias is None
    dot = unn.DotGatConv(400, 30, num_heads=10)   # torch's Linear default: uniform(+-1/sqrt(in))
    assert dot.fc.weight.abs().max().item() <= 1 / math.sqrt(400) and dot.fc.bias is None
    agnn, fixed = unn.AGNNConv(0.5), unn.AGNNConv(0.5, learn_beta=False)
    assert agnn.beta.requires_grad and agnn.beta.tolist() == [0.5]
    assert "beta" in fixed.state_dict() and "beta" not in dict(fixed.named_parameters())


# ---------------------------------------------------------------------- errors
def _lonely_graph():
    return udgl.graph((torch.tensor([0, 1]), torch.tensor([1, 2])), num_nodes=4)   # nodes 0 and 3: no in-edges


@pytest.mark.parametrize("call", [
    lambda g: unn.GATv2Conv(5, 3, 2)(g, torch.randn(4, 5)),
    lambda g: unn.DotGatConv(5, 3, 2)(g, torch.randn(4, 5)),
    lambda g: unn.AGNNConv()(g, torch.randn(4, 5)),
    lambda g: unn.EdgeGATConv(5, 3, 3, 2)(g, torch.randn(4, 5), torch.randn(2, 3)),
    lambda g: unn.EGATConv(5, 3, 3, 3, 2)(g, torch.randn(4, 5), torch.randn(2, 3)),
], ids=["gatv2", "dotgat", "agnn", "edgegat", "egat"])
def test_zero_in_degree_refused(call):
    with pytest.raises(udgl.DGLError, match="0-in-degree"):
        call(_lonely_graph())


def test_zero_in_degree_allowed():
    g = _lonely_graph()
    out = unn.GATv2Conv(5, 3, 2, allow_zero_in_degree=True)(g, torch.randn(4, 5))
    assert out.shape == (4, 2, 3) and not out[[0, 3]].any()
    conv = unn.DotGatConv(5, 3, 2)
    conv.set_allow_zero_in_degree(True)
    assert conv(g, torch.randn(4, 5)).shape == (4, 2, 3)


def test_bad_inputs():
    g, _ = our_graphs()
    n, m = g.num_nodes(), g.num_edges()
    with pytest.raises(udgl.DGLError, match="source node features have 4 features"):
        unn.GATv2Conv(5, 3, 2)(g, torch.randn(n, 4))
    with pytest.raises(udgl.DGLError, match="destination node features have 5 features"):
        unn.DotGatConv((5, 4), 3, 2)(g, (torch.randn(n, 5), torch.randn(n, 5)))
    with pytest.raises(udgl.DGLError, match="same feature shape"):
        unn.AGNNConv()(g, (torch.randn(n, 5), torch.randn(n, 4)))
    with pytest.raises(udgl.DGLError, match="efeats must be"):
        unn.EGATConv(5, 3, 3, 3, 2)(g, torch.randn(n, 5), torch.randn(m - 1, 3))
    with pytest.raises(udgl.DGLError, match="edge_weight must be"):
        unn.EGATConv(5, 3, 3, 3, 2)(g, torch.randn(n, 5), torch.randn(m, 3), edge_weight=torch.ones(m, 2))
    with pytest.raises(udgl.DGLError, match="edge_feat must be"):
        unn.EdgeGATConv(5, 3, 3, 2)(g, torch.randn(n, 5), torch.randn(m, 4))
    with pytest.raises(ValueError, match="rows"):   # features for the wrong number of nodes: the ops' check
        unn.GATv2Conv(5, 3, 2)(g, torch.randn(n + 1, 5))
