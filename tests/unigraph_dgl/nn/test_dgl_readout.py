"""unigraph.dgl.nn's readouts and utility modules against the real DGL's: a DGL state_dict loads
(strict), and outputs, input gradients and parameter gradients are DGL's in float64, on batches of
graphs (dgl.batch), single graphs and blocks (Sequential); DGL's default initialization; errors."""
from __future__ import annotations

import contextlib
import types

import pytest
import torch

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn
from dgl_compare import SEEDS, TOL, assert_same_run, graphs
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch import glob, jumping_knowledge, link, sequential

# unigraph.dgl.nn plus this file's classes (the glob ones are not exported from unigraph.dgl.nn yet)
OURS = types.SimpleNamespace(**{
    **{name: getattr(unn, name) for name in unn.__all__}, **{name: getattr(glob, name) for name in glob.__all__},
    "Sequential": sequential.Sequential, "JumpingKnowledge": jumping_knowledge.JumpingKnowledge,
    "EdgePredictor": link.EdgePredictor, "TransE": link.TransE, "TransR": link.TransR})
SIZES = [3, 5, 1, 4]   # four graphs of one batch: node counts


def _paths(lib, sizes):
    """``lib.batch`` of one path graph (both directions) per size, in unigraph.dgl or DGL."""
    parts = []
    for n in sizes:
        ends = torch.arange(max(n - 1, 0))
        parts.append(lib.graph((torch.cat([ends, ends + 1]), torch.cat([ends + 1, ends])), num_nodes=n))
    return lib.batch(parts)


def _modules(dgl, make):
    """``(ours, theirs)``: ``make(OURS)`` holding ``make(dgl.nn)``'s state_dict (strict), float64, eval."""
    theirs = make(dgl.nn).double().eval()
    ours = make(OURS).double().eval()
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def _readout(dgl, make, width=5, sizes=SIZES, **forward):
    """``make``'s module on a batch of graphs of ``sizes`` nodes, in both libraries."""
    torch.manual_seed(0)
    ours, theirs = _modules(dgl, make)
    x = torch.randn(sum(sizes), width, dtype=torch.float64, requires_grad=True)
    assert_same_run(ours, theirs, (_paths(udgl, sizes), x), (_paths(dgl, sizes), x), [x], **forward)


# ---------------------------------------------------------------------- readouts
@pytest.mark.parametrize("name", ["SumPooling", "AvgPooling", "MaxPooling"])
@pytest.mark.parametrize("sizes", [SIZES, [3, 0, 4], [6]], ids=["batch", "empty_graph", "single"])
def test_simple_pooling(dgl, name, sizes):
    _readout(dgl, lambda nn: getattr(nn, name)(), sizes=sizes)


@pytest.mark.parametrize("k", [1, 4, 7])   # 4, 7: graphs of fewer nodes are padded with zero rows
def test_sort_pooling(dgl, k):
    _readout(dgl, lambda nn: nn.SortPooling(k))


def test_sort_pooling_with_an_empty_graph():
    # DGL 2.1 misplaces the rows after an empty graph (its padding helper); ours: zeros for it and
    # the other graphs as when read out alone
    torch.manual_seed(0)
    x = torch.randn(7, 3, dtype=torch.float64)
    pool = OURS.SortPooling(2)
    out = pool(_paths(udgl, [3, 0, 4]), x)
    torch.testing.assert_close(out[1], torch.zeros(6, dtype=torch.float64))
    torch.testing.assert_close(out[[0, 2]], pool(_paths(udgl, [3, 4]), x))


@pytest.mark.parametrize("feat_nn, get_attention", [(False, False), (True, True)])
@pytest.mark.parametrize("sizes", [SIZES, [3, 0, 4]], ids=["batch", "empty_graph"])
def test_global_attention_pooling(dgl, feat_nn, get_attention, sizes):
    def make(nn):
        torch.manual_seed(1)   # the same gate/feat modules on both sides
        return nn.GlobalAttentionPooling(torch.nn.Linear(5, 1), torch.nn.Linear(5, 3) if feat_nn else None)
    _readout(dgl, make, sizes=sizes, get_attention=get_attention)


def test_weight_and_sum(dgl):
    _readout(dgl, lambda nn: nn.WeightAndSum(5))


@pytest.mark.parametrize("n_iters, n_layers", [(1, 1), (3, 2)])
def test_set2set(dgl, n_iters, n_layers):
    _readout(dgl, lambda nn: nn.Set2Set(5, n_iters, n_layers), sizes=[3, 0, 4, 1])
    _readout(dgl, lambda nn: nn.Set2Set(5, n_iters, n_layers), sizes=[6])


# ---------------------------------------------------------------------- set transformer
ENCODERS = {"sab": dict(block_type="sab"), "isab": dict(block_type="isab", m=3)}


@pytest.mark.parametrize("block", ENCODERS)
def test_set_transformer_encoder(dgl, block):
    _readout(dgl, lambda nn: nn.SetTransformerEncoder(6, 2, 4, 7, n_layers=2, **ENCODERS[block]), width=6)


@pytest.mark.filterwarnings("ignore:if k is set to 1")   # DGL's own k=1 warning
@pytest.mark.parametrize("k, n_layers", [(1, 0), (3, 2)])
def test_set_transformer_decoder(dgl, k, n_layers):
    with pytest.warns(UserWarning, match="k=1") if k == 1 else contextlib.nullcontext():
        _readout(dgl, lambda nn: nn.SetTransformerDecoder(6, 2, 4, 7, n_layers, k), width=6)


def test_set_transformer_training_dropout(dgl):
    # train mode, same seed before each call: the FFN dropout draws the same masks as DGL's, and
    # droph/dropa are not applied (DGL 2.1 builds them and never calls them)
    ours, theirs = _modules(dgl, lambda nn: torch.nn.ModuleList([
        nn.SetTransformerEncoder(6, 2, 4, 7, 1, "isab", 2, dropouth=0.5, dropouta=0.5),
        nn.SetTransformerDecoder(6, 2, 4, 7, 1, 2, dropouth=0.5, dropouta=0.5)]))
    ours.train(), theirs.train()
    x = torch.randn(sum(SIZES), 6, dtype=torch.float64)
    outs = []
    for model, lib in ((ours, udgl), (theirs, dgl)):
        torch.manual_seed(3)
        g = _paths(lib, SIZES)
        outs.append(model[1](g, model[0](g, x)))
    torch.testing.assert_close(outs[0], outs[1], **TOL)


def test_set_transformer_with_an_empty_graph():
    # DGL 2.1's padding fails on an empty set; ours reads the other graphs as without it
    torch.manual_seed(0)
    encoder = OURS.SetTransformerEncoder(6, 2, 4, 7, 1, "isab", 2).double().eval()
    decoder = OURS.SetTransformerDecoder(6, 2, 4, 7, 1, 2).double().eval()
    x = torch.randn(7, 6, dtype=torch.float64)
    with_empty, without = _paths(udgl, [3, 0, 4]), _paths(udgl, [3, 4])
    encoded = encoder(with_empty, x)
    torch.testing.assert_close(encoded, encoder(without, x))
    torch.testing.assert_close(decoder(with_empty, encoded)[[0, 2]], decoder(without, encoded))


# ---------------------------------------------------------------------- Sequential
def _two_convs(nn):
    torch.manual_seed(2)
    return nn.Sequential(nn.GraphConv(5, 4, activation=torch.relu), nn.GraphConv(4, 3))


def test_sequential_one_graph(dgl):
    for ours_graph, their_graph in graphs(dgl, blocks=False):
        ours, theirs = _modules(dgl, _two_convs)
        x = torch.randn(ours_graph.num_nodes(), 5, dtype=torch.float64, requires_grad=True)
        assert_same_run(ours, theirs, (ours_graph, x), (their_graph, x), [x])


def _two_blocks(lib, g):
    last = lib.to_block(g.in_subgraph(SEEDS), SEEDS)
    frontier = last.srcdata[lib.NID]
    return [lib.to_block(g.in_subgraph(frontier), frontier), last]


def test_sequential_blocks(dgl):
    (ours_graph, their_graph), = graphs(dgl, blocks=False)
    ours, theirs = _modules(dgl, _two_convs)
    our_blocks, their_blocks = _two_blocks(udgl, ours_graph), _two_blocks(dgl, their_graph)
    x = torch.randn(our_blocks[0].num_src_nodes(), 5, dtype=torch.float64, requires_grad=True)
    assert_same_run(ours, theirs, (our_blocks, x), (their_blocks, x), [x])


class _WeightedConv(torch.nn.Module):
    """A layer taking and handing on two inputs: node features and edge weights."""

    def __init__(self, nn, width):
        super().__init__()
        self.conv = nn.GraphConv(width, width, norm="none")

    def forward(self, graph, feat, weight):
        return self.conv(graph, feat, edge_weight=weight), weight * 0.5


def test_sequential_passes_extra_inputs_along(dgl):
    (ours_graph, their_graph), = graphs(dgl, blocks=False)
    ours, theirs = _modules(dgl, lambda nn: nn.Sequential(_WeightedConv(nn, 4), _WeightedConv(nn, 4)))
    x = torch.randn(ours_graph.num_nodes(), 4, dtype=torch.float64, requires_grad=True)
    w = torch.rand(ours_graph.num_edges(), dtype=torch.float64, requires_grad=True)
    assert_same_run(ours, theirs, (ours_graph, x, w), (their_graph, x, w), [x, w])


def test_sequential_errors():
    g = udgl.graph(([0], [1]))
    net = OURS.Sequential(torch.nn.Identity(), torch.nn.Identity())
    with pytest.raises(DGLError, match="1 graphs for 2 modules"):
        net([g], torch.ones(2, 1))
    with pytest.raises(DGLError, match="graph or a list of graphs"):
        net(torch.ones(2, 1), torch.ones(2, 1))
    with pytest.raises(DGLError, match="must hold graphs"):
        net([g, "g"], torch.ones(2, 1))


# ---------------------------------------------------------------------- JumpingKnowledge, link heads
@pytest.mark.parametrize("mode", ["cat", "max", "lstm"])
def test_jumping_knowledge(dgl, mode):
    torch.manual_seed(0)
    ours, theirs = _modules(dgl, lambda nn: nn.JumpingKnowledge(mode, 4, 3))
    feats = [torch.randn(6, 4, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    feats[1].data[0] = feats[0].data[0]   # ties in 'max': the gradient goes where DGL sends it
    assert_same_run(ours, theirs, (feats,), (feats,), feats)


@pytest.mark.parametrize("op", ["dot", "cos", "ele", "cat"])
@pytest.mark.parametrize("linear", [None, dict(bias=False), dict(bias=True)], ids=["plain", "linear", "bias"])
def test_edge_predictor(dgl, op, linear):
    torch.manual_seed(0)
    ours, theirs = _modules(dgl, lambda nn: nn.EdgePredictor(op, 4, 3, **linear) if linear else nn.EdgePredictor(op))
    h_src, h_dst = (torch.randn(7, 4, dtype=torch.float64, requires_grad=True) for _ in range(2))
    assert_same_run(ours, theirs, (h_src, h_dst), (h_src, h_dst), [h_src, h_dst])


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("name", ["TransE", "TransR"])
def test_knowledge_graph_scores(dgl, name, p):
    torch.manual_seed(0)
    make = (lambda nn: nn.TransE(3, 4, p=p)) if name == "TransE" else (lambda nn: nn.TransR(3, 2, 4, p=p))
    ours, theirs = _modules(dgl, make)
    head, tail = (torch.randn(9, 4, dtype=torch.float64, requires_grad=True) for _ in range(2))
    rels = torch.tensor([0, 1, 2, 2, 1, 0, 0, 1, 2])
    assert_same_run(ours, theirs, (head, tail, rels), (head, tail, rels), [head, tail])


# ---------------------------------------------------------------------- initialization, errors
@pytest.mark.parametrize("make", [
    lambda nn: nn.SetTransformerEncoder(64, 4, 16, 128, 1, "isab", 40),
    lambda nn: nn.SetTransformerDecoder(64, 4, 16, 128, 1, 40),
    lambda nn: nn.Set2Set(32, 2, 2), lambda nn: nn.WeightAndSum(64),
    lambda nn: nn.JumpingKnowledge("lstm", 32, 4), lambda nn: nn.TransR(3, 32, 48)], ids=[
    "encoder", "decoder", "set2set", "weight_and_sum", "jumping_knowledge", "transr"])
def test_default_initialization_is_dgls(dgl, make):
    """Every parameter has DGL's name, shape and distribution (spread and range)."""
    torch.manual_seed(0)
    theirs = dict(make(dgl.nn).named_parameters())
    ours = dict(make(OURS).named_parameters())
    assert {k: v.shape for k, v in ours.items()} == {k: v.shape for k, v in theirs.items()}
    for name, value in ours.items():
        if value.numel() >= 1000:
            assert abs(value.std().item() / theirs[name].std().item() - 1) < 0.1, name
            assert abs(value.abs().max().item() / theirs[name].abs().max().item() - 1) < 0.1, name
        elif value.numel() >= 16 and theirs[name].std() == 0:   # LayerNorm's ones and zeros
            torch.testing.assert_close(value, theirs[name])


def test_errors():
    g = _paths(udgl, [3, 2])
    x = torch.randn(5, 4)
    block = udgl.to_block(g, torch.tensor([0, 1]))
    with pytest.raises(DGLError, match="feat has 4 rows but the graph has 5 nodes"):
        OURS.SumPooling()(g, x[:4])
    with pytest.raises(DGLError, match="block"):
        OURS.AvgPooling()(block, x)
    with pytest.raises(DGLError, match="one score per node"):
        OURS.GlobalAttentionPooling(torch.nn.Linear(4, 2))(g, x)
    with pytest.raises(DGLError, match="input_dim=3"):
        OURS.Set2Set(3, 1, 1)(g, x)
    with pytest.raises(DGLError, match="SortPooling: feat must be"):
        OURS.SortPooling(2)(g, x.view(5, 2, 2))
    with pytest.raises(DGLError, match="block_type"):
        OURS.SetTransformerEncoder(4, 1, 4, 4, block_type="mab")
    with pytest.raises(DGLError, match="needs m"):
        OURS.SetTransformerEncoder(4, 1, 4, 4, block_type="isab")
    with pytest.raises(DGLError, match="d_model=6"):
        OURS.SetTransformerDecoder(6, 1, 4, 4, 1, 2)(g, x)
    with pytest.raises(DGLError, match="mode"):
        OURS.JumpingKnowledge("sum")
    with pytest.raises(DGLError, match="needs in_feats and num_layers"):
        OURS.JumpingKnowledge("lstm", 4)
    with pytest.raises(DGLError, match="op must be one of"):
        OURS.EdgePredictor("mul")
    with pytest.raises(DGLError, match="both be"):
        OURS.EdgePredictor("dot")(x, x[:3])
    with pytest.raises(DGLError, match="rels must hold one relation id per pair"):
        OURS.TransE(2, 4)(x, x, torch.zeros(4, dtype=torch.int64))
    with pytest.raises(DGLError, match=r"\[N, 4\]"):
        OURS.TransR(2, 3, 4)(x[:, :3], x[:, :3], torch.zeros(5, dtype=torch.int64))
