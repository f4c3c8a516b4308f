"""Every convolution both libraries have, unigraph's beside PyG's own (the same state_dict), on
the graphs layer tests seldom draw: a node without edges, self-loops, repeated edges, no edges at
all, one node, one node with its loop. Outputs and the input gradient agree in float64; where
PyG's layer raises (an LSTM over no neighbours), unigraph's computes; an LSTM over edges not
sorted by destination is refused by both."""
from __future__ import annotations

import pytest
import torch
from torch.nn import Linear

import unigraph.nn as U

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

TOL = dict(rtol=1e-8, atol=1e-8, equal_nan=True)
DEG = torch.tensor([1, 3, 2, 1])   # PNA's degree histogram

# name -> (constructor given the module holding the classes, what the call adds after (x, edge_index))
LAYERS = {
    "GCNConv": (lambda m: m.GCNConv(8, 8), None),
    "GCNConv(improved) weighted": (lambda m: m.GCNConv(8, 8, improved=True), "weight"),
    "GATConv": (lambda m: m.GATConv(8, 4, heads=2), None),
    "GATConv edge_dim": (lambda m: m.GATConv(8, 4, heads=2, edge_dim=3), "edge_attr"),
    "GATv2Conv edge_dim": (lambda m: m.GATv2Conv(8, 4, heads=2, edge_dim=3), "edge_attr"),
    "TransformerConv edge_dim": (lambda m: m.TransformerConv(8, 4, heads=2, edge_dim=3), "edge_attr"),
    "SuperGATConv": (lambda m: m.SuperGATConv(8, 4, heads=2, attention_type="MX"), None),
    "SAGEConv": (lambda m: m.SAGEConv(8, 8), None),
    "SAGEConv max": (lambda m: m.SAGEConv(8, 8, aggr="max"), None),
    "SAGEConv lstm": (lambda m: m.SAGEConv(8, 8, aggr="lstm"), None),
    "SAGEConv mean/max/std": (lambda m: m.SAGEConv(8, 8, aggr=["mean", "max", "std"]), None),
    "GraphConv": (lambda m: m.GraphConv(8, 8), None),
    "GraphConv max": (lambda m: m.GraphConv(8, 8, aggr="max"), None),
    "ResGatedGraphConv edge_dim": (lambda m: m.ResGatedGraphConv(8, 8, edge_dim=3), "edge_attr"),
    "GINConv": (lambda m: m.GINConv(Linear(8, 8), train_eps=True), None),
    "GINEConv": (lambda m: m.GINEConv(Linear(8, 8), edge_dim=3), "edge_attr"),
    "EdgeConv max": (lambda m: m.EdgeConv(Linear(16, 8), aggr="max"), None),
    "EdgeConv mean": (lambda m: m.EdgeConv(Linear(16, 8), aggr="mean"), None),
    "NNConv": (lambda m: m.NNConv(8, 8, Linear(3, 64), aggr="mean"), "edge_attr"),
    "CGConv": (lambda m: m.CGConv(8, dim=3), "edge_attr"),
    "GMMConv": (lambda m: m.GMMConv(8, 8, dim=3, kernel_size=2), "edge_attr"),
    "PointNetConv": (lambda m: m.PointNetConv(Linear(11, 8), Linear(8, 8)), "pos"),
    "FiLMConv": (lambda m: m.FiLMConv(8, 8), None),
    "SimpleConv": (lambda m: m.SimpleConv(), None),
    "SimpleConv mean+root": (lambda m: m.SimpleConv(aggr="mean", combine_root="sum"), None),
    "GeneralConv attention": (lambda m: m.GeneralConv(8, 8, in_edge_channels=3, attention=True, heads=2),
                              "edge_attr"),
    "MixHopConv": (lambda m: m.MixHopConv(8, 8), None),
    "HypergraphConv": (lambda m: m.HypergraphConv(8, 8), None),
    "PDNConv": (lambda m: m.PDNConv(8, 8, edge_dim=3, hidden_channels=4), "edge_attr"),
    "GENConv softmax": (lambda m: m.GENConv(8, 8, aggr="softmax", learn_t=True, edge_dim=3), "edge_attr"),
    "GENConv powermean": (lambda m: m.GENConv(8, 8, aggr="powermean", learn_p=True), None),
    "GCN2Conv": (lambda m: m.GCN2Conv(8, 0.1, 0.5, 2), "x0"),
    "FAConv": (lambda m: m.FAConv(8, eps=0.2), "x0"),
    "LEConv": (lambda m: m.LEConv(8, 8), "weight"),
    "ClusterGCNConv": (lambda m: m.ClusterGCNConv(8, 8, diag_lambda=0.5), None),
    "ARMAConv": (lambda m: m.ARMAConv(8, 8, num_stacks=2, num_layers=2, shared_weights=True), "weight"),
    "SGConv": (lambda m: m.SGConv(8, 8, K=2), "weight"),
    "SSGConv": (lambda m: m.SSGConv(8, 8, alpha=0.1, K=2), None),
    "TAGConv": (lambda m: m.TAGConv(8, 8, K=2), "weight"),
    "ChebConv": (lambda m: m.ChebConv(8, 8, K=3), "weight"),
    "APPNP": (lambda m: m.APPNP(K=3, alpha=0.1), "weight"),
    "LGConv": (lambda m: m.LGConv(), "weight"),
    "AGNNConv": (lambda m: m.AGNNConv(), None),
    "EGConv": (lambda m: m.EGConv(8, 8, aggregators=["sum", "mean", "symnorm", "max", "std"], num_heads=2,
                                  num_bases=2), None),
    "FeaStConv": (lambda m: m.FeaStConv(8, 8, heads=2), None),
    "PANConv": (lambda m: m.PANConv(8, 8, filter_size=2), None),
    "PNAConv": (lambda m: m.PNAConv(8, 8, ["mean", "max", "min", "std"], ["identity", "amplification", "attenuation"],
                                    DEG), None),
    "PNAConv towers edge_dim": (lambda m: m.PNAConv(8, 8, ["mean", "sum"], ["identity", "linear"], DEG, edge_dim=3,
                                                    towers=2), "edge_attr"),
    "GatedGraphConv": (lambda m: m.GatedGraphConv(8, 2), None),
    "AntiSymmetricConv": (lambda m: m.AntiSymmetricConv(8), None),
    "LGConv plain": (lambda m: m.LGConv(), None),
    "MFConv": (lambda m: m.MFConv(8, 8), None),
    "WLConvContinuous": (lambda m: m.WLConvContinuous(), None),
}

# name -> (number of nodes, edge_index)
GRAPHS = {
    # self-loops at 2 and 5, 3->4 twice, 1->0 twice, node 6 without edges
    "corner": (7, torch.tensor([[0, 1, 2, 2, 3, 3, 0, 4, 1, 1, 5], [1, 2, 0, 2, 4, 4, 3, 0, 0, 0, 5]])),
    "no edges": (5, torch.empty(2, 0, dtype=torch.long)),
    "one node": (1, torch.empty(2, 0, dtype=torch.long)),
    "one node, its loop": (1, torch.tensor([[0], [0]])),
    "random": (30, torch.randint(0, 30, (2, 90), generator=torch.Generator().manual_seed(1))),
}
PYG_RAISES = {("SAGEConv lstm", "no edges"), ("SAGEConv lstm", "one node")}   # an LSTM over no neighbours
BOTH_RAISE = {("SAGEConv lstm", "corner"), ("SAGEConv lstm", "random")}   # LSTM aggregation: edges unsorted


@pytest.fixture(autouse=True)
def float64_by_default():
    """PyG's ClusterGCNConv and PANConv make some tensors in the default dtype (degrees, a
    SparseTensor): with float32 there, a float64 layer computes partly in float32 (ClusterGCNConv
    6e-8 off the float64 result) or fails (PANConv)."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(saved)


def _call(layer, x, edge_index, extra, inputs):
    if extra == "x0":
        return layer(x, inputs["x0"], edge_index)
    if extra == "pos":
        return layer(x, inputs["pos"], edge_index)
    return layer(x, edge_index, *([inputs[extra]] if extra else []))


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("name", LAYERS)
def test_corner_graphs_agree_with_pyg(name, graph):
    make, extra = LAYERS[name]
    torch.manual_seed(0)
    theirs = make(pyg_nn).double().eval()
    torch.manual_seed(0)
    ours = make(U).double().eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    n, edge_index = GRAPHS[graph]
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(n, 8, generator=gen, dtype=torch.float64)
    inputs = {"edge_attr": torch.randn(edge_index.shape[1], 3, generator=gen, dtype=torch.float64),
              "weight": torch.rand(edge_index.shape[1], generator=gen, dtype=torch.float64) + 0.1,
              "pos": torch.randn(n, 3, generator=gen, dtype=torch.float64),
              "x0": torch.randn(n, 8, generator=gen, dtype=torch.float64)}
    x_ours = x.clone().requires_grad_()
    if (name, graph) in BOTH_RAISE:
        with pytest.raises(ValueError, match="not sorted"):
            _call(theirs, x.clone(), edge_index, extra, inputs)
        with pytest.raises(ValueError, match="not sorted"):
            _call(ours, x_ours, edge_index, extra, inputs)
        return
    out = _call(ours, x_ours, edge_index, extra, inputs)
    out = out[0] if isinstance(out, tuple) else out
    if (name, graph) in PYG_RAISES:
        with pytest.raises(RuntimeError):
            _call(theirs, x.clone(), edge_index, extra, inputs)
        assert out.shape == (n, 8) and out.isfinite().all()
        return
    x_theirs = x.clone().requires_grad_()
    expected = _call(theirs, x_theirs, edge_index, extra, inputs)
    expected = expected[0] if isinstance(expected, tuple) else expected
    torch.testing.assert_close(out, expected, **TOL)
    upstream = torch.randn(expected.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    (mine,) = torch.autograd.grad(out, x_ours, upstream, allow_unused=True)
    (peer,) = torch.autograd.grad(expected, x_theirs, upstream, allow_unused=True)
    mine = torch.zeros_like(x) if mine is None else mine
    peer = torch.zeros_like(x) if peer is None else peer
    torch.testing.assert_close(mine, peer, **TOL)
