"""unigraph.dgl.nn's convolutions beside DGL's own (the same state_dict) on graphs DGL's tests
do not draw: nodes without in-edges (``allow_zero_in_degree=True`` where the module asks),
repeated edges, a block whose seeds include such a node, and a graph without edges. Outputs and the
input gradient agree in float64, except where DGL 2.1 is wrong or fails on the graph without
edges: its max reduction sends the gradient of an empty maximum to node 0 (unigraph's: no input,
checked against the formula), EdgeConv's backward and PNAConv's forward raise (unigraph's
compute). Modules that propagate over several hops refuse a block, as DGL's fail on one."""
from __future__ import annotations

import pytest
import torch
from torch.nn import Linear

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn

TOL = dict(rtol=1e-8, atol=1e-8, equal_nan=True)
SRC = torch.tensor([0, 1, 2, 2, 3, 3, 0, 4, 1, 1])
DST = torch.tensor([1, 2, 0, 2, 4, 4, 3, 0, 0, 0])   # 3->4 and 1->0 repeated; nodes 5, 6 without in-edges
SEEDS = torch.tensor([0, 4, 5])
NONE = torch.tensor([], dtype=torch.long)

MODULES = {
    "GraphConv both": lambda m: m.GraphConv(8, 8, norm="both", allow_zero_in_degree=True),
    "GraphConv right": lambda m: m.GraphConv(8, 8, norm="right", allow_zero_in_degree=True),
    "GraphConv left": lambda m: m.GraphConv(8, 8, norm="left", allow_zero_in_degree=True),
    "SAGEConv mean": lambda m: m.SAGEConv(8, 8, "mean"),
    "SAGEConv gcn": lambda m: m.SAGEConv(8, 8, "gcn"),
    "SAGEConv pool": lambda m: m.SAGEConv(8, 8, "pool"),
    "SAGEConv lstm": lambda m: m.SAGEConv(8, 8, "lstm"),
    "GATConv residual": lambda m: m.GATConv(8, 4, 2, allow_zero_in_degree=True, residual=True),
    "GATv2Conv": lambda m: m.GATv2Conv(8, 4, 2, allow_zero_in_degree=True),
    "DotGatConv": lambda m: m.DotGatConv(8, 4, 2, allow_zero_in_degree=True),
    "GINConv sum": lambda m: m.GINConv(Linear(8, 8), "sum", learn_eps=True),
    "GINConv max": lambda m: m.GINConv(Linear(8, 8), "max"),
    "GINConv mean": lambda m: m.GINConv(Linear(8, 8), "mean"),
    "EdgeConv": lambda m: m.EdgeConv(8, 8, allow_zero_in_degree=True),
    "GatedGraphConv": lambda m: m.GatedGraphConv(8, 8, 2, 1),
    "TAGConv": lambda m: m.TAGConv(8, 8, k=2),
    "SGConv": lambda m: m.SGConv(8, 8, k=2, allow_zero_in_degree=True),
    "APPNPConv": lambda m: m.APPNPConv(3, 0.1),
    "ChebConv": lambda m: m.ChebConv(8, 8, 2),
    "AGNNConv": lambda m: m.AGNNConv(allow_zero_in_degree=True),
    "GCN2Conv": lambda m: m.GCN2Conv(8, 1, allow_zero_in_degree=True),
    "TWIRLSConv": lambda m: m.TWIRLSConv(8, 8, 4, prop_step=2),
    "PNAConv": lambda m: m.PNAConv(8, 8, ["mean", "max", "sum", "std", "min"],
                                   ["identity", "amplification", "attenuation"], 2.5),
}
MULTI_HOP = {"GatedGraphConv", "TAGConv", "SGConv", "APPNPConv", "ChebConv", "GCN2Conv", "TWIRLSConv", "PNAConv"}


@pytest.fixture(autouse=True)
def float64_by_default():
    """DGL's APPNPConv and TWIRLSConv make their edge weights in the default dtype: with float32
    there a float64 module fails (DGL's dtype check)."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(saved)


def _graphs(lib, name: str):
    if name == "no edges":
        return lib.graph((NONE, NONE), num_nodes=4)
    g = lib.graph((SRC, DST), num_nodes=7)
    return g if name == "corner" else lib.to_block(g.in_subgraph(SEEDS), SEEDS)


def _run(module, graph, x, x0):
    return module(graph, x, x0) if x0 is not None else module(graph, x)


@pytest.mark.parametrize("graph", ["corner", "block", "no edges"])
@pytest.mark.parametrize("name", MODULES)
def test_corner_graphs_agree_with_dgl(dgl, name, graph):
    make = MODULES[name]
    theirs = make(dgl.nn).double().eval()
    ours = make(unn).double().eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    our_graph, their_graph = _graphs(udgl, graph), _graphs(dgl, graph)
    n = our_graph.num_src_nodes()
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(n, 8, generator=gen, dtype=torch.float64)
    x0 = torch.randn(n, 8, generator=gen, dtype=torch.float64) if name == "GCN2Conv" else None
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    if graph == "block" and name.split()[0] in MULTI_HOP:
        with pytest.raises(Exception):
            _run(theirs, their_graph, x_theirs, x0)
        with pytest.raises(udgl.DGLError, match="block|bipartite|same nodes"):
            _run(ours, our_graph, x_ours, x0)
        return
    out = _run(ours, our_graph, x_ours, x0)
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    (mine,) = torch.autograd.grad(out, x_ours, upstream)
    if graph == "no edges" and name == "PNAConv":    # DGL 2.1: KeyError 'h_neigh' (no edge wrote it)
        with pytest.raises(KeyError):
            _run(theirs, their_graph, x_theirs, x0)
        assert out.isfinite().all() and mine.isfinite().all()
        return
    expected = _run(theirs, their_graph, x_theirs, x0)
    torch.testing.assert_close(out, expected, **TOL)
    if graph == "no edges" and name == "EdgeConv":   # DGL 2.1's max backward indexes an empty argmax
        with pytest.raises(RuntimeError):
            torch.autograd.grad(expected, x_theirs, upstream)
        assert not mine.any()     # every output row is an empty maximum (0): nothing reaches x
        return
    if graph == "no edges" and name in ("SAGEConv pool", "GINConv max"):
        # an empty maximum is 0 and depends on no input: only the node's own term has a gradient
        # (DGL 2.1 sends the maximum's gradient to node 0)
        if name == "SAGEConv pool":
            own = upstream @ ours.fc_self.weight
        else:
            own = (1 + ours.eps) * (upstream @ ours.apply_func.weight)
        torch.testing.assert_close(mine, own, **TOL)
        return
    (peer,) = torch.autograd.grad(expected, x_theirs, upstream)
    torch.testing.assert_close(mine, peer, **TOL)
