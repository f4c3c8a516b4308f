"""unigraph.dgl.nn's PNAConv and graph-transformer modules (DegreeEncoder, LapPosEncoder, BiasedMHA,
GraphormerLayer, SpatialEncoder, SpatialEncoder3d) against the real DGL's: a DGL state_dict loads,
outputs and gradients (inputs and parameters) agree in float64 (LapPosEncoder: float32, the only
dtype DGL's runs in), the seeded default initialisation is DGL's, and bad input is refused."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn
from dgl_compare import TOL, assert_same_run, graphs, our_graphs, same_modules
from unigraph.dgl.base import DGLError

F64 = torch.float64

# ---------------------------------------------------------------------------------------- PNAConv
# nodes 0 and 5 have no in-edge, 2 -> 1 twice (a multi-edge), 4 has a single message
SRC = torch.tensor([0, 1, 2, 0, 3, 3, 1, 2, 2])
DST = torch.tensor([1, 2, 1, 2, 1, 2, 4, 3, 1])


# every node of this one has 3 to 5 in-edges (its own loop included)
DENSE_SRC = torch.tensor([0, 1, 2, 3, 4, 1, 2, 3, 4, 0, 2, 0, 1, 4, 0, 3, 1, 2, 3])
DENSE_DST = torch.tensor([0, 1, 2, 3, 4, 0, 0, 0, 0, 1, 1, 2, 2, 3, 4, 4, 4, 3, 2])


def _sparse_pair(dgl, num_nodes: int = 6) -> tuple:
    return udgl.graph((SRC, DST), num_nodes=num_nodes), dgl.graph((SRC, DST), num_nodes=num_nodes)


def _test_graphs(dgl, aggregators) -> list[tuple]:
    """``(ours, theirs)`` graphs for these aggregators. An odd moment of exactly two messages is 0
    in exact arithmetic: DGL (and we) compute rounding noise raised to 1/n (~1e-6 for a cube
    root), which depends on how torch vectorises ``pow``, so no two implementations agree there;
    for odd moments the graphs have no node of in-degree 2 (0, 1 and 3+ are well defined)."""
    pairs = [_sparse_pair(dgl), (udgl.graph((DENSE_SRC, DENSE_DST)), dgl.graph((DENSE_SRC, DENSE_DST)))]
    if not {"moment3", "moment5"} & set(aggregators):
        pairs += graphs(dgl, blocks=False)
    return pairs


def _pna_run(dgl, our_graph, their_graph, make, in_size: int, edge_feat_size: int = 0, seed: int = 0) -> None:
    torch.manual_seed(seed)
    ours, theirs = same_modules(dgl, make)
    x = torch.randn(our_graph.num_nodes(), in_size, dtype=F64, requires_grad=True)
    e = (torch.randn(our_graph.num_edges(), edge_feat_size, dtype=F64, requires_grad=True)
         if edge_feat_size else None)
    inputs = [x] + ([e] if e is not None else [])
    assert_same_run(ours, theirs, (our_graph, x, e), (their_graph, x, e), inputs)


AGGREGATOR_SETS = [["mean", "max", "sum"], ["min", "std", "var"], ["moment3", "moment4", "moment5"]]
SCALER_SETS = [["identity"], ["amplification", "attenuation"], ["attenuation", "identity", "amplification"]]


@pytest.mark.parametrize("aggregators", AGGREGATOR_SETS)
@pytest.mark.parametrize("scalers", SCALER_SETS)
def test_pna_conv_aggregators_and_scalers(dgl, aggregators, scalers):
    # every aggregator under every scaler: on the graph with self-loops, and on one with nodes
    # without in-edges (zero aggregations), a multi-edge and a single-message node
    make = lambda nn: nn.PNAConv(4, 4, aggregators, scalers, 1.7)  # noqa: E731
    for ours_graph, their_graph in _test_graphs(dgl, aggregators):
        _pna_run(dgl, ours_graph, their_graph, make, 4)


@pytest.mark.parametrize("in_size, out_size, num_towers, edge_feat_size, residual", [
    (4, 4, 2, 3, True),      # towers, edge features, residual
    (4, 8, 4, 0, True),      # widths differ: DGL drops the residual
    (6, 6, 3, 2, False),
    (4, 2, 1, 5, False),
])
def test_pna_conv_towers_edge_features_residual(dgl, in_size, out_size, num_towers, edge_feat_size, residual):
    aggregators = ["mean", "std", "max", "moment4"]
    make = lambda nn: nn.PNAConv(in_size, out_size, aggregators, ["identity", "amplification", "attenuation"],  # noqa
                                 2.5, 0.0, num_towers, edge_feat_size, residual)
    for ours_graph, their_graph in _test_graphs(dgl, aggregators):
        _pna_run(dgl, ours_graph, their_graph, make, in_size, edge_feat_size)


def test_pna_conv_batch_normalises_per_graph(dgl):
    # 1 / sqrt(|V|) of each node's own graph in a batch
    our_loops, their_loops = graphs(dgl, blocks=False)[0]
    our_sparse, their_sparse = _sparse_pair(dgl, num_nodes=7)
    ours = udgl.batch([our_sparse, our_loops])
    theirs = dgl.batch([their_sparse, their_loops])
    make = lambda nn: nn.PNAConv(4, 4, ["mean", "var"], ["identity", "attenuation"], 1.2, num_towers=2,  # noqa
                                 edge_feat_size=2)
    _pna_run(dgl, ours, theirs, make, 4, 2)


def test_pna_conv_train_mode_batch_statistics(dgl):
    # training: the towers' BatchNorm uses batch statistics and updates its running ones as DGL's
    torch.manual_seed(0)
    ours, theirs = same_modules(dgl, lambda nn: nn.PNAConv(4, 4, ["mean", "min"], ["amplification"], 1.5,
                                                           num_towers=2))
    ours.train(), theirs.train()
    our_graph, their_graph = graphs(dgl, blocks=False)[0]
    x = torch.randn(6, 4, dtype=F64, requires_grad=True)
    assert_same_run(ours, theirs, (our_graph, x), (their_graph, x), [x])
    for name, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], value, **TOL)


def test_pna_conv_default_initialisation(dgl):
    # the same draws in DGL's order: a seeded model equals DGL's
    make = lambda nn: nn.PNAConv(8, 8, ["mean", "max"], ["identity", "amplification"], 2.0, num_towers=2,  # noqa
                                 edge_feat_size=3)
    torch.manual_seed(3)
    theirs = make(dgl.nn)
    torch.manual_seed(3)
    ours = make(unn)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for name, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], value, rtol=0, atol=0)


def test_pna_conv_refuses_bad_input():
    ours, block = our_graphs()
    conv = unn.PNAConv(4, 4, ["mean"], ["identity"], 1.0, edge_feat_size=2)
    x, e = torch.randn(6, 4), torch.randn(ours.num_edges(), 2)
    with pytest.raises(DGLError, match="block"):
        conv(block, torch.randn(block.num_src_nodes(), 4), torch.randn(block.num_edges(), 2))
    with pytest.raises(DGLError, match="pass edge_feat"):
        conv(ours, x)
    with pytest.raises(DGLError, match="edge_feat must be"):
        conv(ours, x, e[:, :1])
    with pytest.raises(DGLError, match="node_feat must be"):
        conv(ours, x[:, :3], e)
    with pytest.raises(DGLError, match="edge_feat_size=0"):
        unn.PNAConv(4, 4, ["mean"], ["identity"], 1.0)(ours, x, e)
    with pytest.raises(DGLError, match="unknown aggregators"):
        unn.PNAConv(4, 4, ["mean", "median"], ["identity"], 1.0)
    with pytest.raises(DGLError, match="unknown scalers"):
        unn.PNAConv(4, 4, ["mean"], ["linear"], 1.0)
    with pytest.raises(DGLError, match="divisible by num_towers"):
        unn.PNAConv(4, 6, ["mean"], ["identity"], 1.0, num_towers=4)


# ---------------------------------------------------------------------------------- DegreeEncoder
@pytest.mark.parametrize("direction", ["in", "out", "both"])
def test_degree_encoder(dgl, direction):
    # degrees above max_degree clamp to it, negative ones to the zero padding row
    torch.manual_seed(0)
    ours, theirs = same_modules(dgl, lambda nn: nn.DegreeEncoder(3, 5, direction=direction))
    degrees = torch.tensor([[0, 1, 2, 3, 7], [2, -1, 4, 0, 0]])
    if direction == "both":
        degrees = torch.stack([degrees, degrees.flip(1)])
    assert_same_run(ours, theirs, (degrees,), (degrees,), [])


def test_degree_encoder_default_initialisation_and_errors(dgl):
    torch.manual_seed(1)
    theirs = dgl.nn.DegreeEncoder(4, 6)
    torch.manual_seed(1)
    ours = unn.DegreeEncoder(4, 6)
    for name, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], value, rtol=0, atol=0)
    with pytest.raises(ValueError, match="direction"):
        unn.DegreeEncoder(4, 6, direction="sideways")
    with pytest.raises(ValueError, match=r"\[2, B, N\]"):
        ours(torch.zeros(3, 2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[B, N\]"):
        unn.DegreeEncoder(4, 6, direction="in")(torch.zeros(2, 2, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="integer"):
        ours(torch.zeros(2, 2, 4))


# ---------------------------------------------------------------------------------- LapPosEncoder
def _lap_inputs(k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A 3-node graph's k eigenpairs per node; pairs beyond the 3rd are padding (NaN)."""
    torch.manual_seed(0)
    eigvals = torch.randn(1, k).repeat(3, 1)
    eigvecs = torch.randn(3, k)
    eigvals[:, 3:] = float("nan")
    eigvecs[:, 3:] = float("nan")
    return eigvals.requires_grad_(), eigvecs.requires_grad_()


@pytest.mark.parametrize("model_type, num_layer, batch_norm, num_post_layer", [
    ("Transformer", 1, False, 0), ("Transformer", 2, True, 2),
    ("DeepSet", 1, True, 1), ("DeepSet", 2, False, 0), ("DeepSet", 4, True, 3),
])
def test_lap_pos_encoder(dgl, model_type, num_layer, batch_norm, num_post_layer):
    # float32: DGL casts the input to float32 (ours: to the parameters' dtype), same ops, same numbers
    torch.manual_seed(0)
    make = lambda nn: nn.LapPosEncoder(model_type, num_layer, 5, 4, n_head=2, batch_norm=batch_norm,  # noqa
                                       num_post_layer=num_post_layer)
    theirs = make(dgl.nn).eval()
    ours = make(unn).eval()
    ours.load_state_dict(theirs.state_dict())
    eigvals, eigvecs = _lap_inputs(5)
    out_ours, out_theirs = ours(eigvals, eigvecs), theirs(eigvals, eigvecs)
    torch.testing.assert_close(out_ours, out_theirs, rtol=1e-6, atol=1e-6)
    # a float64 model (DGL's fails: it feeds float32 to float64 weights): DGL's numbers, to float32's precision
    ours64 = make(unn).double().eval()
    ours64.load_state_dict(theirs.state_dict())
    vals64, vecs64 = eigvals.detach().double().requires_grad_(), eigvecs.detach().double().requires_grad_()
    out64 = ours64(vals64, vecs64)
    assert out64.dtype == F64
    torch.testing.assert_close(out64.float(), out_theirs, rtol=1e-4, atol=1e-5)
    if model_type == "Transformer":
        grads = [torch.autograd.grad(out.square().sum(), list(module.parameters()) + [eigvals, eigvecs],
                                     allow_unused=True) for out, module in ((out_ours, ours), (out_theirs, theirs))]
        for a, b in zip(*grads):
            if b is None:
                assert a is None or not a.any()
            else:
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    else:
        # DGL's DeepSet has no backward (it zeroes the padding in place in its last ReLU's output):
        # ours, checked against finite differences of the forward that equals DGL's
        with pytest.raises(RuntimeError, match="inplace"):
            out_theirs.sum().backward()
        assert torch.autograd.gradcheck(lambda a, b: ours64(a, b), (vals64, vecs64))


def test_lap_pos_encoder_train_mode_and_initialisation(dgl):
    # DeepSet in training: the raw BatchNorm's batch statistics and running stats as DGL's; the
    # seeded initialisation (DGL draws a Linear(2, dim) before replacing it) as DGL's
    make = lambda nn: nn.LapPosEncoder("DeepSet", 3, 5, 4, batch_norm=True, num_post_layer=2)  # noqa: E731
    torch.manual_seed(2)
    theirs = make(dgl.nn)
    torch.manual_seed(2)
    ours = make(unn)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for name, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], value, rtol=0, atol=0)
    eigvals, eigvecs = _lap_inputs(5)
    torch.testing.assert_close(ours(eigvals, eigvecs), theirs(eigvals, eigvecs), rtol=1e-6, atol=1e-6)
    for name, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], value, rtol=1e-6, atol=1e-7)


def test_lap_pos_encoder_errors():
    with pytest.raises(ValueError, match="model_type"):
        unn.LapPosEncoder("GNN", 2, 3, 4)
    with pytest.raises(ValueError, match=r"\[N, k=3\]"):
        unn.LapPosEncoder("DeepSet", 2, 3, 4)(torch.randn(4, 3), torch.randn(4, 2))


# -------------------------------------------------------------------------- BiasedMHA, Graphormer
def _attention_inputs(bsz: int = 2, n: int = 5, feat: int = 8, heads: int = 2) -> tuple:
    torch.manual_seed(0)
    x = torch.randn(bsz, n, feat, dtype=F64, requires_grad=True)
    bias = torch.rand(bsz, n, n, heads, dtype=F64, requires_grad=True)
    mask = torch.rand(bsz, n, n) < 0.4
    mask[:, :, 0] = False   # one kept pair per row
    return x, bias, mask


@pytest.mark.parametrize("attn_bias_type", ["add", "mul"])
@pytest.mark.parametrize("bias", [True, False])
def test_biased_mha(dgl, attn_bias_type, bias):
    torch.manual_seed(0)
    ours, theirs = same_modules(dgl, lambda nn: nn.BiasedMHA(8, 2, bias, attn_bias_type, 0.3))
    x, attn_bias, mask = _attention_inputs()
    assert_same_run(ours, theirs, (x, attn_bias, mask), (x, attn_bias, mask), [x, attn_bias])
    assert_same_run(ours, theirs, (x,), (x,), [x])                                   # no bias, no mask
    shared = attn_bias[0].detach().clone().requires_grad_()                           # [N, N, H]: broadcast
    assert_same_run(ours, theirs, (x, shared), (x, shared), [x, shared])


def test_biased_mha_initialisation_and_errors(dgl):
    torch.manual_seed(4)
    theirs = dgl.nn.BiasedMHA(8, 4)
    torch.manual_seed(4)
    ours = unn.BiasedMHA(8, 4)
    for name, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], value, rtol=0, atol=0)
    with pytest.raises(ValueError, match="divisible"):
        unn.BiasedMHA(8, 3)
    with pytest.raises(ValueError, match="attn_bias_type"):
        unn.BiasedMHA(8, 2, attn_bias_type="concat")
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match="ndata"):
        ours(x[..., :6])
    with pytest.raises(ValueError, match="attn_bias"):
        ours(x, torch.rand(2, 5, 5, 3))
    with pytest.raises(ValueError, match="attn_mask"):
        ours(x, None, torch.zeros(2, 5, 4, dtype=torch.bool))


@pytest.mark.parametrize("attn_bias_type", ["add", "mul"])
@pytest.mark.parametrize("norm_first", [True, False])
def test_graphormer_layer(dgl, attn_bias_type, norm_first):
    torch.manual_seed(0)
    ours, theirs = same_modules(dgl, lambda nn: nn.GraphormerLayer(8, 16, 2, attn_bias_type, norm_first))
    x, attn_bias, mask = _attention_inputs()
    assert_same_run(ours, theirs, (x, attn_bias, mask), (x, attn_bias, mask), [x, attn_bias])
    assert_same_run(ours, theirs, (x,), (x,), [x])


def test_graphormer_layer_activation_and_initialisation(dgl):
    # an activation with parameters (ffn.1.weight) and a seeded initialisation, as DGL's
    make = lambda nn: nn.GraphormerLayer(8, 12, 4, activation=torch.nn.PReLU())  # noqa: E731
    torch.manual_seed(5)
    theirs = make(dgl.nn)
    torch.manual_seed(5)
    ours = make(unn)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for name, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], value, rtol=0, atol=0)
    ours, theirs = same_modules(dgl, make)
    x, attn_bias, mask = _attention_inputs(heads=4)
    assert_same_run(ours, theirs, (x, attn_bias, mask), (x, attn_bias, mask), [x, attn_bias])


# ------------------------------------------------------------------------------- SpatialEncoders
def _padded_distances(lib) -> torch.Tensor:
    """DGL's test graphs' hop distances by ``lib.shortest_dist``, -1 padded to a batch of 6 nodes."""
    g1 = lib.graph((torch.tensor([0, 0, 0, 1, 1, 2, 3, 3]), torch.tensor([1, 2, 3, 0, 3, 0, 0, 1])))
    g2 = lib.graph((torch.tensor([0, 1, 2, 3, 2, 5]), torch.tensor([1, 2, 3, 4, 0, 3])))
    dist = -torch.ones((2, 6, 6), dtype=torch.long)
    dist[0, :4, :4] = lib.shortest_dist(g1, root=None, return_paths=False)
    dist[1, :6, :6] = lib.shortest_dist(g2, root=None, return_paths=False)
    return dist


def test_spatial_encoder(dgl):
    # distances from each library's shortest_dist; up to 4 hops, and -1 (no path, padding)
    ours_dist, their_dist = _padded_distances(udgl), _padded_distances(dgl)
    assert int(their_dist.max()) == 4 and bool((their_dist == -1).any())
    for max_dist in (1, 2, 5):
        torch.manual_seed(0)
        ours, theirs = same_modules(dgl, lambda nn: nn.SpatialEncoder(max_dist, num_heads=3))
        assert_same_run(ours, theirs, (ours_dist,), (their_dist,), [])
    with pytest.raises(TypeError, match="integer"):
        ours(ours_dist.double())


@pytest.mark.parametrize("typed", [False, True])
def test_spatial_encoder_3d(dgl, typed):
    torch.manual_seed(0)
    ours, theirs = same_modules(dgl, lambda nn: nn.SpatialEncoder3d(4, num_heads=3, max_node_type=3))
    with torch.no_grad():   # non-trivial node-type scalings (DGL starts at gamma 1, beta 0)
        for module in (ours, theirs):
            module.gamma.weight.copy_(torch.linspace(0.5, 1.5, 9, dtype=F64).view(9, 1))
            module.beta.weight.copy_(torch.linspace(-0.3, 0.4, 9, dtype=F64).view(9, 1))
    coord = torch.rand(2, 5, 3, dtype=F64, requires_grad=True)
    args = (coord, torch.tensor([[1, 0, 2, 1, 2], [0, 2, 2, -1, -1]])) if typed else (coord,)
    assert_same_run(ours, theirs, args, args, [coord])


def test_spatial_encoder_3d_initialisation_and_errors(dgl):
    torch.manual_seed(6)
    theirs = dgl.nn.SpatialEncoder3d(4, num_heads=2, max_node_type=3)
    torch.manual_seed(6)
    ours = unn.SpatialEncoder3d(4, num_heads=2, max_node_type=3)
    for name, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], value, rtol=0, atol=0)
    coord = torch.rand(1, 4, 3)
    with pytest.raises(ValueError, match="node types must lie"):
        ours(coord, torch.tensor([[0, 1, 3, 0]]))
    with pytest.raises(ValueError, match="node types must lie"):
        ours(coord, torch.tensor([[0, 1, -2, 0]]))
    with pytest.raises(ValueError, match=r"node_type must be \[B=1, N=4\]"):
        ours(coord, torch.tensor([[0, 1, 2]]))
    with pytest.raises(ValueError, match="coord"):
        ours(coord[0])
