"""Every layer PyG also has gives PyG's output, input gradients and parameter gradients (float64,
1e-5) given the same weights, on drawn graphs with the edge cases, on every CPU backend.

Weights travel by ``load_state_dict(pyg_layer.state_dict(), strict=True)``: our parameter names
are PyG's. Bipartite graphs get a (source, destination) feature pair, as PyG takes them. Layers
run in eval mode (attention dropout is random in both libraries; it is tested separately).
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable

import pytest
import torch
from hypothesis import assume, given, strategies as st

import unigraph
from graph_strategies import graphs
from op_cases import cpu_test_backends

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

BACKENDS = cpu_test_backends()
IN, OUT, EDGE_DIM = 5, 4, 3


def mlp(width_in: int, width_out: int) -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(width_in, 6), torch.nn.ReLU(), torch.nn.Linear(6, width_out))


class TwoLayerNet(torch.nn.Module):  # not a Sequential: EdgeConv's generic (materialized) path
    def __init__(self, width_in: int, width_out: int):
        super().__init__()
        self.first, self.second = torch.nn.Linear(width_in, 6), torch.nn.Linear(6, width_out)

    def forward(self, x):
        return self.second(torch.tanh(self.first(x)))


@dataclasses.dataclass
class Case:
    name: str
    make: Callable[[], tuple[torch.nn.Module, torch.nn.Module]]  # (ours, pyg) with equal weights
    graphs: str = "any"            # "any", "homogeneous" or "bipartite" (two feature widths)
    edge_input: str | None = None  # "weight" (positive [E]), "pair-weight" (see pair_weights) or "attr"
    src_width: int = IN
    dst_width: int = IN


def same(ours_cls, pyg_cls, *args, **kwargs):
    def make():
        return ours_cls(*args, **kwargs), pyg_cls(*args, **kwargs)
    return make


def with_nn(ours_cls, pyg_cls, net_factory, **kwargs):
    def make():
        net = net_factory()
        return ours_cls(copy.deepcopy(net), **kwargs), pyg_cls(net, **kwargs)
    return make


U = unigraph
CASES = [
    Case("GCNConv", same(U.GCNConv, pyg_nn.GCNConv, IN, OUT), graphs="homogeneous"),
    Case("GCNConv-weighted-improved", same(U.GCNConv, pyg_nn.GCNConv, IN, OUT, improved=True), graphs="homogeneous",
         edge_input="pair-weight"),
    Case("GCNConv-no-loops", same(U.GCNConv, pyg_nn.GCNConv, IN, OUT, add_self_loops=False), graphs="homogeneous",
         edge_input="pair-weight"),
    Case("GCNConv-unnormalized", same(U.GCNConv, pyg_nn.GCNConv, IN, OUT, normalize=False, bias=False),
         graphs="homogeneous", edge_input="pair-weight"),
    Case("SAGEConv-mean", same(U.SAGEConv, pyg_nn.SAGEConv, IN, OUT)),
    Case("SAGEConv-sum-projected-first", same(U.SAGEConv, pyg_nn.SAGEConv, 8, 3, aggr="sum"), src_width=8, dst_width=8),
    Case("SAGEConv-maxpool-normalized", same(U.SAGEConv, pyg_nn.SAGEConv, IN, OUT, aggr="max", project=True,
                                             normalize=True)),
    Case("SAGEConv-bipartite-widths-no-root", same(U.SAGEConv, pyg_nn.SAGEConv, (IN, 3), OUT, aggr="min",
                                                   root_weight=False), graphs="bipartite", dst_width=3),
    Case("GATConv", same(U.GATConv, pyg_nn.GATConv, IN, 3, heads=2)),
    Case("GATConv-mean-heads-residual", same(U.GATConv, pyg_nn.GATConv, IN, 3, heads=2, concat=False,
                                             residual=True, negative_slope=0.1)),
    Case("GATConv-edge-features", same(U.GATConv, pyg_nn.GATConv, IN, 3, heads=2, edge_dim=EDGE_DIM),
         edge_input="attr"),
    Case("GATConv-edge-features-max-fill", same(U.GATConv, pyg_nn.GATConv, IN, 3, heads=2, edge_dim=EDGE_DIM,
                                                fill_value="max"), edge_input="attr"),
    Case("GATConv-no-loops-two-widths", same(U.GATConv, pyg_nn.GATConv, (IN, 3), 3, heads=2, add_self_loops=False),
         graphs="bipartite", dst_width=3),
    Case("GATv2Conv", same(U.GATv2Conv, pyg_nn.GATv2Conv, IN, 3, heads=2)),
    Case("GATv2Conv-edge-residual-mean", same(U.GATv2Conv, pyg_nn.GATv2Conv, IN, 3, heads=2, edge_dim=EDGE_DIM,
                                              concat=False, residual=True, fill_value=0.5), edge_input="attr"),
    Case("GATv2Conv-shared-weights", same(U.GATv2Conv, pyg_nn.GATv2Conv, IN, 3, heads=2, share_weights=True)),
    Case("GINConv-train-eps", with_nn(U.GINConv, pyg_nn.GINConv, lambda: mlp(IN, OUT), eps=0.3, train_eps=True)),
    Case("GraphConv-sum-weighted", same(U.GraphConv, pyg_nn.GraphConv, IN, OUT), edge_input="weight"),
    Case("GraphConv-mean-projected-first", same(U.GraphConv, pyg_nn.GraphConv, 8, 3, aggr="mean"), src_width=8, dst_width=8,
         edge_input="weight"),
    Case("GraphConv-max", same(U.GraphConv, pyg_nn.GraphConv, IN, OUT, aggr="max"), edge_input="weight"),
    Case("EdgeConv-mlp", with_nn(U.EdgeConv, pyg_nn.EdgeConv, lambda: mlp(2 * IN, OUT))),
    Case("EdgeConv-linear-mean", with_nn(U.EdgeConv, pyg_nn.EdgeConv, lambda: torch.nn.Linear(2 * IN, OUT),
                                         aggr="mean")),
    Case("EdgeConv-linear-max", with_nn(U.EdgeConv, pyg_nn.EdgeConv, lambda: torch.nn.Linear(2 * IN, OUT))),
    Case("EdgeConv-generic-net", with_nn(U.EdgeConv, pyg_nn.EdgeConv, lambda: TwoLayerNet(2 * IN, OUT), aggr="add")),
]


def pair_weights(g) -> torch.Tensor:
    """Positive weights that depend on the (source, destination) pair only: GCN keeps one of several
    parallel self-loops' weights (PyG does not say which), so parallel edges must agree. (Layers with
    max/min get random weights instead: on exact ties PyG splits the gradient between the tied edges,
    unigraph gives it to one of them; the node gradients agree either way.)"""
    return 0.5 + ((3 * g.src + 5 * g.dst) % 7).to(torch.float64) / 7


def make_inputs(case: Case, g, gen: torch.Generator) -> tuple[Any, torch.Tensor | None]:
    def features(rows: int, width: int) -> torch.Tensor:
        return torch.randn(rows, width, generator=gen, dtype=torch.float64, requires_grad=True)

    if g.is_bipartite:
        x = (features(g.num_src_nodes, case.src_width), features(g.num_dst_nodes, case.dst_width))
    else:
        x = features(g.num_src_nodes, case.src_width)
    edge = None
    if case.edge_input == "pair-weight":
        edge = pair_weights(g).requires_grad_(True)
    elif case.edge_input == "weight":
        edge = (0.5 + torch.rand(g.num_edges, generator=gen, dtype=torch.float64)).requires_grad_(True)
    elif case.edge_input == "attr":
        edge = torch.randn(g.num_edges, EDGE_DIM, generator=gen, dtype=torch.float64, requires_grad=True)
    return x, edge


def leaves_of(x, edge) -> list[torch.Tensor]:
    leaves = list(x) if isinstance(x, tuple) else [x]
    return leaves + ([edge] if edge is not None else [])


def run(layer, call, leaves, upstream):
    out = call()
    params = [p for _, p in layer.named_parameters()]
    grads = torch.autograd.grad((out * upstream).sum(), leaves + params, allow_unused=True)
    grads = [torch.zeros_like(t) if g is None else g for t, g in zip(leaves + params, grads)]
    return out.detach(), grads[:len(leaves)], dict(zip([n for n, _ in layer.named_parameters()], grads[len(leaves):]))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@given(data=st.data())
def test_layer_matches_pyg(case: Case, data):
    if case.graphs == "any":
        bipartite = data.draw(st.booleans(), label="bipartite")
    else:
        bipartite = case.graphs == "bipartite"
    drawn = data.draw(graphs(max_nodes=8, max_edges=24, hub_degree=16, bipartite=bipartite), label="graph")
    g = drawn.graph
    assume(g.num_src_nodes > 0 and g.num_dst_nodes > 0)  # PyG's softmax and scatter need nodes
    if case.edge_input == "attr":  # PyG fills loop features into min(src, dst) rows: index error otherwise
        assume(g.num_src_nodes >= g.num_dst_nodes)
    gen = drawn.generator()
    torch.manual_seed(drawn.seed % 1000)
    ours, pyg = case.make()
    ours.double().eval()
    pyg.double().eval()
    ours.load_state_dict(pyg.state_dict(), strict=True)
    x, edge = make_inputs(case, g, gen)
    leaves = leaves_of(x, edge)
    pyg_args = (x, g.edge_index) + ((edge,) if edge is not None else ())
    with torch.no_grad():
        upstream = torch.randn(pyg(*pyg_args).shape, generator=gen, dtype=torch.float64)
    expected, expected_input_grads, expected_param_grads = run(pyg, lambda: pyg(*pyg_args), leaves, upstream)
    ours_args = (g, x) + ((edge,) if edge is not None else ())
    for backend in BACKENDS:
        with unigraph.use_backend(backend):
            out, input_grads, param_grads = run(ours, lambda: ours(*ours_args), leaves, upstream)
        where = f"{case.name} on {backend} ({drawn.kind}, bipartite={g.is_bipartite})"
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5, msg=lambda m: f"{where} output: {m}")
        for i, (got, want) in enumerate(zip(input_grads, expected_input_grads)):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=lambda m: f"{where} input grad {i}: {m}")
        assert param_grads.keys() == expected_param_grads.keys()
        for name, want in expected_param_grads.items():
            torch.testing.assert_close(param_grads[name], want, atol=1e-5, rtol=1e-5,
                                       msg=lambda m: f"{where} grad of {name}: {m}")
