"""unigraph.dgl.nn's propagation modules (SGConv, APPNPConv, TAGConv, GCN2Conv, ChebConv,
EdgeWeightNorm, LabelPropagation) against the real DGL's: the same parameter names, outputs and
gradients in float64 (eval mode) on the 6-node graph with self-loops (directed: in- and out-degrees
differ), with and without edge weights; EdgeWeightNorm also on a block; DGL's initialisation; the
inputs DGL cannot take (blocks, pairs) and the bad ones refused by name."""
from __future__ import annotations

import math

import pytest
import torch

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn
from dgl_compare import SRC, DST, assert_same_run, compare, graphs, our_graphs, same_modules
from unigraph.dgl.base import DGLError

F32 = dict(rtol=1e-5, atol=1e-6)


def _weights(graph) -> torch.Tensor:
    return torch.rand(graph.num_edges(), dtype=torch.float64) + 0.1   # positive: norm='both' takes sqrt


def _homogeneous(dgl):
    return graphs(dgl, blocks=False)[0]


# ------------------------------------------------------------------ EdgeWeightNorm (+ GraphConv)
@pytest.mark.parametrize("norm, eps", [("both", 0.0), ("both", 0.5), ("right", 0.0), ("left", 0.1), ("none", 0.0)])
def test_edge_weight_norm(dgl, norm, eps):
    """'left' computes what DGL 2.1 computes for it (its in-weight normalisation, as 'right')."""
    torch.manual_seed(0)
    for ours_graph, their_graph in graphs(dgl):
        ours, theirs = same_modules(dgl, lambda nn: nn.EdgeWeightNorm(norm, eps))
        w = _weights(ours_graph).requires_grad_()
        assert_same_run(ours, theirs, (ours_graph, w), (their_graph, w), [w])


class _NormalizedGraphConv(torch.nn.Module):
    """DGL's documented pattern: EdgeWeightNorm's weights into GraphConv(norm='none')."""

    def __init__(self, nn, norm):
        super().__init__()
        self.edge_norm = nn.EdgeWeightNorm(norm)
        self.conv = nn.GraphConv(5, 3, norm="none", activation=torch.tanh)

    def forward(self, graph, feat, weight):
        return self.conv(graph, feat, edge_weight=self.edge_norm(graph, weight))


@pytest.mark.parametrize("norm", ["both", "right"])
def test_graph_conv_with_normalized_edge_weights(dgl, norm):
    torch.manual_seed(0)
    for ours_graph, their_graph in graphs(dgl):
        ours, theirs = same_modules(dgl, lambda nn: _NormalizedGraphConv(nn, norm))
        x = torch.randn(ours_graph.num_src_nodes(), 5, dtype=torch.float64, requires_grad=True)
        w = _weights(ours_graph).requires_grad_()
        assert_same_run(ours, theirs, (ours_graph, x, w), (their_graph, x, w), [x, w])


def test_edge_weight_norm_refusals():
    graph, _ = our_graphs()
    with pytest.raises(DGLError, match="norm must be one of"):
        unn.EdgeWeightNorm("sym")
    with pytest.raises(DGLError, match="one scalar weight per edge"):
        unn.EdgeWeightNorm()(graph, torch.ones(graph.num_edges(), 2))
    with pytest.raises(DGLError, match="one scalar weight per edge"):
        unn.EdgeWeightNorm()(graph, torch.ones(graph.num_edges() - 1))
    with pytest.raises(DGLError, match="positive edge weights"):
        unn.EdgeWeightNorm("both")(graph, torch.zeros(graph.num_edges()))
    unn.EdgeWeightNorm("right")(graph, torch.zeros(graph.num_edges()))   # allowed, as DGL (0/0 where all are 0)


# ------------------------------------------------------------------ SGConv
@pytest.mark.parametrize("k, edge_weight, layer_norm", [(1, False, False), (3, False, True), (2, True, False),
                                                        (0, False, False)])
def test_sg_conv(dgl, k, edge_weight, layer_norm):
    compare(dgl, lambda nn: nn.SGConv(5, 3, k=k, norm=torch.nn.LayerNorm(5) if layer_norm else None),
            edge_weight=edge_weight, blocks=False)


def test_sg_conv_zero_in_degree(dgl):
    ours_graph, their_graph = udgl.graph((SRC, DST), num_nodes=7), dgl.graph((SRC, DST), num_nodes=7)  # node 6 alone
    ours, theirs = same_modules(dgl, lambda nn: nn.SGConv(5, 3, k=2, allow_zero_in_degree=True))
    x = torch.randn(7, 5, dtype=torch.float64, requires_grad=True)
    assert_same_run(ours, theirs, (ours_graph, x), (their_graph, x), [x])
    ours.set_allow_zero_in_degree(False)
    with pytest.raises(DGLError, match="0-in-degree"):
        ours(ours_graph, x)


def test_sg_conv_cache(dgl):
    """DGL's transductive cache: later calls reuse the first call's propagation, whatever their
    features; a call that the cached rows cannot belong to is refused; clearing it recomputes."""
    ours_graph, their_graph = _homogeneous(dgl)
    ours, theirs = same_modules(dgl, lambda nn: nn.SGConv(5, 3, k=2, cached=True))
    x = torch.randn(6, 5, dtype=torch.float64)
    first = ours(ours_graph, x)
    torch.testing.assert_close(first, theirs(their_graph, x), rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(ours(ours_graph, x + 1), theirs(their_graph, x + 1), rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(ours(ours_graph, x + 1), first, rtol=0, atol=0)
    other = udgl.add_self_loop(udgl.graph((SRC, DST), num_nodes=7))
    with pytest.raises(DGLError, match="cached=True"):
        ours(other, torch.randn(7, 5, dtype=torch.float64))
    ours._cached_h = None
    fresh = unn.SGConv(5, 3, k=2).double()
    fresh.load_state_dict(ours.state_dict())
    torch.testing.assert_close(ours(ours_graph, x + 1), fresh(ours_graph, x + 1), rtol=0, atol=0)


# ------------------------------------------------------------------ APPNPConv
@pytest.mark.parametrize("k, alpha", [(1, 0.1), (4, 0.3)])
def test_appnp_conv(dgl, k, alpha):
    compare(dgl, lambda nn: nn.APPNPConv(k, alpha), edge_weight=True, blocks=False)
    # without weights: DGL 2.1 fails in float64 (its all-ones weights are float32), but unit weights
    # normalised by EdgeWeightNorm('both') are exactly its degree normalisation
    ours_graph, their_graph = _homogeneous(dgl)
    ours, theirs = unn.APPNPConv(k, alpha), dgl.nn.APPNPConv(k, alpha)
    x = torch.randn(6, 2, 5, dtype=torch.float64, requires_grad=True)
    ones = torch.ones(ours_graph.num_edges(), dtype=torch.float64)
    out = ours(ours_graph, x)
    expected = theirs(their_graph, x, edge_weight=ones)
    torch.testing.assert_close(out, expected, rtol=1e-9, atol=1e-10)
    grad, = torch.autograd.grad(out.square().sum(), x)
    torch.testing.assert_close(grad, torch.autograd.grad(expected.square().sum(), x)[0], rtol=1e-9, atol=1e-10)
    x32 = x.detach().float()
    torch.testing.assert_close(ours(ours_graph, x32), theirs(their_graph, x32), **F32)


@pytest.mark.parametrize("edge_weight", [False, True])
def test_appnp_conv_edge_drop_draws_as_dgl(dgl, edge_weight):
    """In training, the same seed drops the same edges at every hop as DGL (float32: DGL's dtype)."""
    ours_graph, their_graph = _homogeneous(dgl)
    x = torch.randn(6, 4)
    extra = {"edge_weight": _weights(ours_graph).float()} if edge_weight else {}
    torch.manual_seed(3)
    expected = dgl.nn.APPNPConv(3, 0.2, edge_drop=0.5).train()(their_graph, x, **extra)
    torch.manual_seed(3)
    out = unn.APPNPConv(3, 0.2, edge_drop=0.5).train()(ours_graph, x, **extra)
    torch.testing.assert_close(out, expected, **F32)
    eval_out = unn.APPNPConv(3, 0.2, edge_drop=0.5).eval()(ours_graph, x, **extra)
    assert not torch.allclose(out, eval_out)


# ------------------------------------------------------------------ TAGConv
@pytest.mark.parametrize("k, edge_weight, bias", [(1, False, True), (2, True, True), (3, False, False)])
def test_tag_conv(dgl, k, edge_weight, bias):
    compare(dgl, lambda nn: nn.TAGConv(5, 3, k=k, bias=bias, activation=torch.relu), edge_weight=edge_weight,
            blocks=False)


def test_tag_conv_on_more_feature_dimensions(dgl):
    ours_graph, their_graph = _homogeneous(dgl)
    ours, theirs = same_modules(dgl, lambda nn: nn.TAGConv(5, 3, k=2))
    x = torch.randn(6, 2, 5, dtype=torch.float64, requires_grad=True)
    assert_same_run(ours, theirs, (ours_graph, x), (their_graph, x), [x])


# ------------------------------------------------------------------ GCN2Conv
@pytest.mark.parametrize("project, bias, edge_weight", [(True, True, False), (False, True, True),
                                                        (True, False, True), (False, False, False)])
def test_gcn2_conv(dgl, project, bias, edge_weight):
    torch.manual_seed(0)
    ours_graph, their_graph = _homogeneous(dgl)
    ours, theirs = same_modules(dgl, lambda nn: nn.GCN2Conv(5, layer=3, alpha=0.2, lambda_=0.7, bias=bias,
                                                            project_initial_features=project, activation=torch.tanh))
    x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    x0 = torch.randn(8, 5, dtype=torch.float64, requires_grad=True)   # more rows than nodes: the first 6 are used
    extra = {"edge_weight": _weights(ours_graph)} if edge_weight else {}
    assert_same_run(ours, theirs, (ours_graph, x, x0), (their_graph, x, x0), [x, x0], **extra)
    assert str(ours).startswith("GCN2Conv(in=5, alpha=0.2, beta=")


# ------------------------------------------------------------------ ChebConv
@pytest.mark.parametrize("k", [1, 2, 4])
def test_cheb_conv(dgl, k):
    ours_graph, their_graph = _homogeneous(dgl)
    for lambda_max in ([1.7], torch.tensor([1.3], dtype=torch.float64)):
        ours, theirs = same_modules(dgl, lambda nn: nn.ChebConv(5, 3, k))
        x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
        assert_same_run(ours, theirs, (ours_graph, x, lambda_max), (their_graph, x, lambda_max), [x])
    with pytest.warns(UserWarning, match="lambda_max"):
        out = ours(ours_graph, x)
    torch.testing.assert_close(out, ours(ours_graph, x, [2.0]), rtol=0, atol=0)


def test_cheb_conv_on_a_batch(dgl):
    """One lambda_max per graph of the batch, spread over that graph's nodes."""
    second = (torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]))
    ours_graph = udgl.batch([our_graphs()[0], udgl.graph(second)])
    their_graph = dgl.batch([_homogeneous(dgl)[1], dgl.graph(second)])
    ours, theirs = same_modules(dgl, lambda nn: nn.ChebConv(5, 3, 3, activation=None))
    x = torch.randn(9, 5, dtype=torch.float64, requires_grad=True)
    lam = torch.tensor([1.5, 2.5], dtype=torch.float64, requires_grad=True)
    assert_same_run(ours, theirs, (ours_graph, x, lam), (their_graph, x, lam), [x, lam])
    with pytest.raises(DGLError, match="one value per graph"):
        ours(ours_graph, x, [2.0])


# ------------------------------------------------------------------ LabelPropagation
@pytest.mark.parametrize("norm_type", ["sym", "row"])
@pytest.mark.parametrize("clamp, normalize, reset", [(True, False, False), (False, True, True), (True, True, True),
                                                     (False, False, True)])
@pytest.mark.parametrize("mask_kind", ["bool", "ids", "none"])
def test_label_propagation(dgl, norm_type, clamp, normalize, reset, mask_kind):
    """Float32 (DGL's dtype whatever the input's): integer labels and a multi-label matrix."""
    ours_graph, their_graph = _homogeneous(dgl)
    mask = {"bool": torch.tensor([0, 1, 1, 0, 1, 0]).bool(), "ids": torch.tensor([1, 4]), "none": None}[mask_kind]
    integer = torch.tensor([0, 2, 1, 3, 0, 2])
    matrix = torch.rand(6, 3, dtype=torch.float64) > 0.5
    for labels in (integer, integer.view(-1, 1), matrix):
        ours = unn.LabelPropagation(3, 0.6, norm_type, clamp, normalize, reset)
        theirs = dgl.nn.LabelPropagation(3, 0.6, norm_type, clamp, normalize, reset)
        out = ours(ours_graph, labels, mask)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, theirs(their_graph, labels, mask), **F32)


def test_label_propagation_refusals():
    graph, block = our_graphs()
    with pytest.raises(ValueError, match="norm_type"):
        unn.LabelPropagation(2, 0.5, norm_type="col")
    with pytest.raises(TypeError, match="integer class ids"):
        unn.LabelPropagation(2, 0.5)(graph, torch.rand(6))
    with pytest.raises(DGLError, match="one row per node"):
        unn.LabelPropagation(2, 0.5)(graph, torch.tensor([0, 1]))
    with pytest.raises(DGLError, match="one node set"):
        unn.LabelPropagation(2, 0.5)(block, torch.tensor([0, 1, 0, 1, 0, 1])[: block.num_src_nodes()])


# ------------------------------------------------------------------ initialisation and refusals
@pytest.mark.parametrize("make", [lambda nn: nn.SGConv(7, 4, k=2), lambda nn: nn.TAGConv(7, 4, k=2),
                                  lambda nn: nn.GCN2Conv(7, layer=2, project_initial_features=False),
                                  lambda nn: nn.ChebConv(7, 4, 3)], ids=["sg", "tag", "gcn2", "cheb"])
def test_dgl_initialization_draw_for_draw(dgl, make):
    """From the same seed, the same initial parameters as DGL (same distributions, same draws)."""
    torch.manual_seed(11)
    theirs = make(dgl.nn).state_dict()
    torch.manual_seed(11)
    ours = make(unn).state_dict()
    assert list(ours) == list(theirs)
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], rtol=0, atol=0)


def test_initialization_distributions():
    torch.manual_seed(0)
    sg = unn.SGConv(400, 300)
    assert abs(sg.fc.weight.std().item() - math.sqrt(2 / 700)) < 0.002 and not sg.fc.bias.any()
    tag = unn.TAGConv(200, 300, k=1)
    assert abs(tag.lin.weight.std().item() - math.sqrt(2) * math.sqrt(2 / 700)) < 0.003
    gcn2 = unn.GCN2Conv(300, layer=2)
    assert abs(gcn2.weight1.std().item() - 1) < 0.01 and not gcn2.bias.any() and gcn2.weight2 is None
    assert gcn2.beta == pytest.approx(math.log(1 / 2 + 1))


@pytest.mark.parametrize("make, extra", [(lambda: unn.SGConv(5, 3), ()), (lambda: unn.APPNPConv(2, 0.1), ()),
                                         (lambda: unn.TAGConv(5, 3), ()), (lambda: unn.ChebConv(5, 3, 2), ([2.0],)),
                                         (lambda: unn.GCN2Conv(5, 1), "feat_0")],
                         ids=["sg", "appnp", "tag", "cheb", "gcn2"])
def test_multi_hop_layers_refuse_blocks_pairs_and_bad_features(make, extra):
    graph, block = our_graphs()
    x = torch.randn(6, 5)
    args = lambda feat: (feat,) if extra == "feat_0" else extra   # noqa: E731
    with pytest.raises(DGLError, match="one node set"):
        make()(block, x[: block.num_src_nodes()], *args(x))
    with pytest.raises(TypeError, match="pair"):
        make()(graph, (x, x), *args(x))
    with pytest.raises(DGLError, match="one row per node"):
        make()(graph, x[:4], *args(x))
    if not isinstance(make(), unn.ChebConv):   # the others take edge weights, normalised by 'both'
        with pytest.raises(DGLError, match="positive edge weights"):
            make()(graph, x, *args(x), edge_weight=-torch.ones(graph.num_edges()))
        with pytest.raises(DGLError, match="one scalar weight per edge"):
            make()(graph, x, *args(x), edge_weight=torch.ones(graph.num_edges(), 1))


def test_constructor_and_feat_0_refusals():
    graph, _ = our_graphs()
    with pytest.raises(ValueError, match="layer"):
        unn.GCN2Conv(5, layer=0)
    with pytest.raises(ValueError, match="k"):
        unn.ChebConv(5, 3, 0)
    with pytest.raises(DGLError, match="feat_0"):
        unn.GCN2Conv(5, 1)(graph, torch.randn(6, 5), torch.randn(4, 5))
    with pytest.raises(DGLError, match="0-in-degree"):
        unn.GCN2Conv(5, 1)(udgl.graph((SRC, DST), num_nodes=7), torch.randn(7, 5), torch.randn(7, 5))
    with pytest.raises(DGLError, match="dimensions"):
        unn.APPNPConv(2, 0.1)(graph, torch.randn(6))   # DGL returns an [N, N] broadcast for this
