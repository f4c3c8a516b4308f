"""unigraph.dgl.nn's convolutions with edge features or learned messages (GINEConv, EdgeConv,
NNConv, GatedGraphConv, GMMConv, CFConv) against the real DGL's: the same parameter names (a DGL
state_dict loads), the same outputs and gradients (inputs, edge features, parameters) in float64
on a graph with self-loops, on a block, with (src, dst) feature pairs; DGL's initialization; and
the errors for bad input."""
from __future__ import annotations

import math

import pytest
import torch

import unigraph
import unigraph.dgl as udgl
import unigraph.dgl.nn as unn
from dgl_compare import DST, SRC, assert_same_run, graphs, our_graphs, same_modules


def _rand(*shape):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=True)


def run_both(dgl, make, edge_width: int | None = None, pair_dst: int | None = None, blocks: bool = True,
             pairs=None, train: bool = False, **forward) -> None:
    """``make(nn)`` in both libraries on each graph pair: node features ``[N_src, 5]`` (a pair
    with ``[N_dst, pair_dst]`` destination features when given), edge features
    ``[E, edge_width]`` when given; outputs and gradients compared."""
    torch.manual_seed(0)
    for ours_graph, their_graph in pairs if pairs is not None else graphs(dgl, blocks):
        ours, theirs = same_modules(dgl, make)
        if train:
            ours.train(), theirs.train()
        x = _rand(ours_graph.num_src_nodes(), 5)
        feat, inputs = x, [x]
        if pair_dst is not None:
            x_dst = _rand(ours_graph.num_dst_nodes(), pair_dst)
            feat, inputs = (x, x_dst), [x, x_dst]
        extra = ()
        if edge_width is not None:
            e = _rand(ours_graph.num_edges(), edge_width)
            extra, inputs = (e,), inputs + [e]
        assert_same_run(ours, theirs, (ours_graph, feat, *extra), (their_graph, feat, *extra), inputs, **forward)


def with_isolated_node(dgl):
    """The 6-node graph without self-loops plus a node 6 without in-edges, in both libraries."""
    return [(udgl.graph((SRC, DST), num_nodes=7), dgl.graph((SRC, DST), num_nodes=7))]


# ---------------------------------------------------------------------------------------- GINEConv
@pytest.mark.parametrize("backend", ["auto", "scatter"], ids=["fused_lane", "sddmm_spmm"])
@pytest.mark.parametrize("eps", [dict(init_eps=0.3, learn_eps=True), dict()], ids=["learned", "fixed_zero"])
def test_gine_conv(dgl, backend, eps):
    """``auto`` on these small graphs: relu(u + e) and its sum in one COO pass; ``scatter``: the
    g-SDDMM, ReLU, g-SpMM route."""
    with unigraph.use_backend(backend):
        run_both(dgl, lambda nn: nn.GINEConv(torch.nn.Linear(5, 4), **eps), edge_width=5)
        run_both(dgl, lambda nn: nn.GINEConv(None, **eps), edge_width=5, pair_dst=5)


def test_gine_conv_broadcast_edge_features(dgl):
    run_both(dgl, lambda nn: nn.GINEConv(torch.nn.Linear(5, 3)), edge_width=1)


# ---------------------------------------------------------------------------------------- EdgeConv
@pytest.mark.parametrize("batch_norm, train", [(False, False), (True, False), (True, True)])
def test_edge_conv(dgl, batch_norm, train):
    """With a pair on the graph (not a block), DGL reads the destination features at both ends."""
    run_both(dgl, lambda nn: nn.EdgeConv(5, 3, batch_norm=batch_norm), train=train)
    run_both(dgl, lambda nn: nn.EdgeConv(5, 3, batch_norm=batch_norm), pair_dst=5, train=train)


def test_edge_conv_zero_in_degree(dgl):
    """Allowed: the isolated node's output is 0 (DGL's max over no edges), also on the rearranged
    path; refused by default."""
    run_both(dgl, lambda nn: nn.EdgeConv(5, 4, allow_zero_in_degree=True), pairs=with_isolated_node(dgl))
    run_both(dgl, lambda nn: nn.EdgeConv(5, 4, batch_norm=True, allow_zero_in_degree=True),
             pairs=with_isolated_node(dgl))
    with pytest.raises(udgl.DGLError, match="0-in-degree"):
        unn.EdgeConv(5, 4)(with_isolated_node(dgl)[0][0], torch.randn(7, 5))


def test_edge_conv_with_a_hooked_theta_runs_per_edge(dgl):
    def make(nn):
        conv = nn.EdgeConv(5, 3)
        conv.theta.register_forward_hook(lambda module, args, out: out.tanh())
        return conv
    run_both(dgl, make)


# ---------------------------------------------------------------------------------------- NNConv
@pytest.mark.parametrize("aggregator", ["sum", "mean", "max"])
@pytest.mark.parametrize("out_feats, residual, bias", [(3, True, True), (5, True, False), (3, False, True)])
def test_nn_conv(dgl, aggregator, out_feats, residual, bias):
    """``out_feats=5``: the identity residual."""
    def make(nn):
        return nn.NNConv(5, out_feats, torch.nn.Linear(4, 5 * out_feats), aggregator, residual=residual, bias=bias)
    run_both(dgl, make, edge_width=4)


def test_nn_conv_pair(dgl):
    run_both(dgl, lambda nn: nn.NNConv((5, 2), 3, torch.nn.Linear(4, 15), "sum", residual=True),
             edge_width=4, pair_dst=2)


# ---------------------------------------------------------------------------------------- GatedGraphConv
@pytest.mark.parametrize("n_etypes", [1, 2, 3], ids=["one_type", "node_projections", "edge_projections"])
@pytest.mark.parametrize("bias", [True, False])
def test_gated_graph_conv(dgl, n_etypes, bias):
    """16 edges on 6 nodes: 2 types project every node by each type (12 rows <= 16), 3 project
    each edge by its own type (18 > 16); type 2 of 3 has no edge in the block."""
    for ours_graph, their_graph in graphs(dgl, blocks=False):
        ours, theirs = same_modules(dgl, lambda nn: nn.GatedGraphConv(4, 6, 3, n_etypes, bias=bias))
        x = _rand(6, 4)
        etypes = torch.arange(ours_graph.num_edges()) % n_etypes
        if n_etypes == 3:
            etypes = etypes.clamp(max=1)
        assert_same_run(ours, theirs, (ours_graph, x, etypes), (their_graph, x, etypes), [x])
        if n_etypes == 1:
            assert_same_run(ours, theirs, (ours_graph, x), (their_graph, x), [x])


def test_gated_graph_conv_errors():
    g, block = our_graphs()
    conv = unn.GatedGraphConv(4, 6, 2, 3)
    x = torch.randn(6, 4)
    with pytest.raises(udgl.DGLError, match="needs etypes"):
        conv(g, x)
    with pytest.raises(udgl.DGLError, match=r"lie in \[0, 3\)"):
        conv(g, x, torch.full((g.num_edges(),), 3))
    with pytest.raises(udgl.DGLError, match="one type per edge"):
        conv(g, x, torch.zeros(3, dtype=torch.long))
    with pytest.raises(udgl.DGLError, match="integer type ids"):
        conv(g, x, torch.full((g.num_edges(),), 0.5))
    with pytest.raises(udgl.DGLError, match="homogeneous"):
        conv(block, torch.randn(block.num_src_nodes(), 4), torch.zeros(block.num_edges(), dtype=torch.long))
    with pytest.raises(udgl.DGLError, match="at most 6"):
        conv(g, torch.randn(6, 7), torch.zeros(g.num_edges(), dtype=torch.long))
    with pytest.raises(udgl.DGLError, match="must not be less than in_feats"):
        unn.GatedGraphConv(7, 6, 2, 1)


# ---------------------------------------------------------------------------------------- GMMConv
@pytest.mark.parametrize("aggregator", ["sum", "mean", "max"])
@pytest.mark.parametrize("out_feats, residual, bias", [(3, True, True), (5, True, False), (3, False, True)])
def test_gmm_conv(dgl, aggregator, out_feats, residual, bias):
    def make(nn):
        conv = nn.GMMConv(5, out_feats, 2, 3, aggregator, residual=residual, bias=bias)
        with torch.no_grad():   # kernels of several widths (DGL starts every inv_sigma at 1)
            conv.inv_sigma.uniform_(0.5, 1.5)
        return conv
    run_both(dgl, make, edge_width=2)


def test_gmm_conv_pair_and_zero_in_degree(dgl):
    run_both(dgl, lambda nn: nn.GMMConv((5, 2), 3, 2, 3, "mean", residual=True), edge_width=2, pair_dst=2)
    run_both(dgl, lambda nn: nn.GMMConv(5, 3, 2, 3, "max", allow_zero_in_degree=True), edge_width=2,
             pairs=with_isolated_node(dgl))
    with pytest.raises(udgl.DGLError, match="0-in-degree"):
        unn.GMMConv(5, 3, 2, 3)(with_isolated_node(dgl)[0][0], torch.randn(7, 5), torch.randn(10, 2))


# ---------------------------------------------------------------------------------------- CFConv
def test_cf_conv(dgl):
    run_both(dgl, lambda nn: nn.CFConv(5, 3, 4, 2), edge_width=3)
    run_both(dgl, lambda nn: nn.CFConv(5, 3, 4, 2), edge_width=3, pair_dst=7)   # destinations unread


# ---------------------------------------------------------------------------------------- shared
def test_dgl_initialization():
    torch.manual_seed(0)
    gain = math.sqrt(2)
    gmm = unn.GMMConv(300, 100, 3, 4, residual=True)
    assert abs(gmm.fc.weight.std().item() - gain * math.sqrt(2 / 700)) < 0.003   # Glorot normal, ReLU gain
    assert abs(gmm.res_fc.weight.std().item() - gain * math.sqrt(2 / 400)) < 0.003
    assert abs(gmm.mu.std().item() - 0.1) < 0.05 and bool((gmm.inv_sigma == 1).all()) and not gmm.bias.any()
    ggc = unn.GatedGraphConv(100, 300, 2, 2)
    assert all(abs(lin.weight.std().item() - gain * math.sqrt(2 / 600)) < 0.003 and not lin.bias.any()
               for lin in ggc.linears)
    nnc = unn.NNConv(300, 100, torch.nn.Identity(), residual=True)
    assert abs(nnc.res_fc.weight.std().item() - gain * math.sqrt(2 / 400)) < 0.003 and not nnc.bias.any()
    assert isinstance(unn.NNConv(5, 5, torch.nn.Identity(), residual=True).res_fc, torch.nn.Identity)


@pytest.mark.parametrize("make, args", [
    (lambda: unn.GINEConv(), (torch.randn(6, 5), torch.randn(3, 5))),
    (lambda: unn.NNConv(5, 3, torch.nn.Linear(4, 15)), (torch.randn(6, 5), torch.randn(3, 4))),
    (lambda: unn.GMMConv(5, 3, 2, 3), (torch.randn(6, 5), torch.randn(16, 3))),
    (lambda: unn.CFConv(5, 3, 4, 2), (torch.randn(6, 5), torch.randn(3, 3))),
], ids=["gine", "nn", "gmm", "cf"])
def test_edge_features_checked(make, args):
    g, _ = our_graphs()
    with pytest.raises(udgl.DGLError, match="per edge"):
        make()(g, *args)


def test_bad_options_and_edge_func_width():
    with pytest.raises(udgl.DGLError, match="aggregator_type"):
        unn.NNConv(5, 3, torch.nn.Linear(4, 15), "lstm")
    with pytest.raises(udgl.DGLError, match="aggregator_type"):
        unn.GMMConv(5, 3, 2, 3, "min")
    g, _ = our_graphs()
    with pytest.raises(udgl.DGLError, match="in_feats \\* out_feats = 15"):
        unn.NNConv(5, 3, torch.nn.Linear(4, 10))(g, torch.randn(6, 5), torch.randn(g.num_edges(), 4))
    with pytest.raises(udgl.DGLError, match="destination"):
        unn.GINEConv()(g, (torch.randn(6, 5), torch.randn(1, 5)), torch.randn(g.num_edges(), 5))
