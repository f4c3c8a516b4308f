"""torch.compile beside eager: the training-step time of every layer and model, compiled with
``fullgraph=True`` straight after ``g.prepare()`` (no eager warm-up), on each CPU backend.

A step is forward, a loss, backward and one optimizer step. Per case and backend the script
reports the median step time eager and compiled (after compiling, which is timed apart), and
their ratio, measured interleaved (one eager step, one compiled step, in turn) so that a load
change on the machine hits both alike. The cases (every layer in ``unigraph.nn``, a custom
``MessagePassing`` layer, a DGL-style ``update_all`` layer and the node classifiers) are defined
here once and reused by ``tests/test_compile_models.py``, which checks compiled == eager.

    python benchmarks/compile.py                              # Cora-sized synthetic graph
    python benchmarks/compile.py --nodes 200 --steps 3 --cases GCNConv GAT   # a smoke run
    python benchmarks/compile.py --backends auto numba --compiler inductor
    python benchmarks/compile.py --vary      # a new graph of another size every step (mini-batches)

``--vary`` rotates four graphs of 0.75-1.25x the given size through the steps, as mini-batch
training does; the compile time then covers both compiles (docs/ops.md: the first graph's sizes,
then a dynamic program), and each row says how many graphs dynamo compiled.
"""
from __future__ import annotations

import argparse
import copy
import json
import pathlib
import statistics
import sys
import time
from typing import Callable

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `python benchmarks/compile.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402
from torch import Tensor  # noqa: E402

import unigraph  # noqa: E402
from benchmarks.environment import load_average, machine, versions  # noqa: E402
from unigraph import MessagePassing, function as fn, nn  # noqa: E402

CPU_BACKENDS = ("auto", "numba", "sparse", "scatter")


# ====================================================================== the cases
class CustomMessagePassing(MessagePassing):
    r"""A user's layer: :math:`x_i' = \sum_j \tanh(W x_j / \tau) \cdot w_{ji} - x_i` (reads an
    attribute, an edge weight and both endpoints)."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__(aggr="sum")
        self.lin = torch.nn.Linear(in_channels, out_channels)
        self.tau = 2.0

    def forward(self, g: unigraph.Graph, x: Tensor, edge_weight: Tensor) -> Tensor:
        return self.propagate(g, x=self.lin(x), edge_weight=edge_weight)

    def message(self, x_i: Tensor, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return torch.tanh(x_j / self.tau) * edge_weight.view(-1, 1) - x_i


class UpdateAllLayer(torch.nn.Module):
    """A DGL-style layer: a built-in weighted sum plus a user-defined message, with a mean."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.lin = torch.nn.Linear(in_channels, out_channels)

    def forward(self, g: unigraph.Graph, x: Tensor, edge_weight: Tensor) -> Tensor:
        g.ndata["h"] = self.lin(x)
        g.edata["w"] = edge_weight.view(-1, 1)
        g.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "weighted"))
        g.update_all(lambda edges: {"m": torch.relu(edges.src["h"] - edges.dst["h"])}, fn.mean("m", "relative"))
        return g.ndata["weighted"] + g.ndata["relative"]


class WithEdgeInput(torch.nn.Module):
    """A layer that takes an edge tensor beside the features (edge weights or edge features)."""

    def __init__(self, layer: torch.nn.Module, edge_attr: bool):
        super().__init__()
        self.layer, self.edge_attr = layer, edge_attr

    def forward(self, g: unigraph.Graph, x: Tensor, edge_weight: Tensor) -> Tensor:
        edge = edge_weight.view(-1, 1).expand(-1, 2) if self.edge_attr else edge_weight
        return self.layer(g, x, edge)


def _mlp(a: int, b: int) -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(a, b), torch.nn.ReLU(), torch.nn.Linear(b, b))


# name -> builder(in_channels, out_channels) -> module taking (g, x, edge_weight) or (g, x)
LAYERS: dict[str, Callable[[int, int], torch.nn.Module]] = {
    "GCNConv": lambda i, o: nn.GCNConv(i, o),
    "GCNConv(edge_weight)": lambda i, o: WithEdgeInput(nn.GCNConv(i, o), edge_attr=False),
    "SAGEConv": lambda i, o: nn.SAGEConv(i, o),
    "SAGEConv(max)": lambda i, o: nn.SAGEConv(i, o, aggr="max"),
    "GATConv": lambda i, o: nn.GATConv(i, o, heads=2),
    "GATConv(edge_attr)": lambda i, o: WithEdgeInput(nn.GATConv(i, o, heads=2, edge_dim=2), edge_attr=True),
    "GATv2Conv": lambda i, o: nn.GATv2Conv(i, o, heads=2),
    "GINConv": lambda i, o: nn.GINConv(_mlp(i, o), train_eps=True),
    "GraphConv": lambda i, o: WithEdgeInput(nn.GraphConv(i, o, aggr="mean"), edge_attr=False),
    "EdgeConv": lambda i, o: nn.EdgeConv(_mlp(2 * i, o)),
    "EdgeConv(deep nn)": lambda i, o: nn.EdgeConv(torch.nn.Sequential(torch.nn.Tanh(), torch.nn.Linear(2 * i, o))),
    "MRConv": lambda i, o: nn.MRConv(i, o),
    "CustomMessagePassing": CustomMessagePassing,
    "UpdateAllLayer": UpdateAllLayer,
}
# node classifiers without dropout, so that compiled and eager draw no random numbers
MODELS: dict[str, Callable[[int, int], torch.nn.Module]] = {
    "GCN": lambda i, o: unigraph.GCN(i, out_channels=o, hidden_channels=16, dropout=0.0),
    "GraphSAGE": lambda i, o: unigraph.GraphSAGE(i, out_channels=o, hidden_channels=16, num_layers=2, dropout=0.0),
    "GAT": lambda i, o: unigraph.GAT(i, out_channels=o, hidden_channels=4, heads=2, dropout=0.0),
    "GIN": lambda i, o: unigraph.GIN(i, out_channels=o, hidden_channels=16, num_layers=2, dropout=0.0),
}
CASES = {**LAYERS, **MODELS}
TAKES_EDGE_WEIGHT = ("GCNConv(edge_weight)", "GATConv(edge_attr)", "GraphConv", "CustomMessagePassing",
                     "UpdateAllLayer")


def synthetic_graph(num_nodes: int, num_edges: int, seed: int = 0) -> unigraph.Graph:
    """A random graph with a few self-loops and multi-edges (what the layers must handle)."""
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=gen)
    edge_index[:, : max(num_edges // 50, 1)] = torch.arange(max(num_edges // 50, 1)) % num_nodes  # self-loops
    return unigraph.Graph(edge_index, num_nodes=num_nodes)


def make_case(name: str, graph: unigraph.Graph, in_channels: int, out_channels: int, dtype: torch.dtype,
              seed: int = 0) -> tuple[torch.nn.Module, tuple]:
    """The module of case ``name`` and its inputs ``(g, x[, edge_weight])`` (seeded)."""
    torch.manual_seed(seed)
    module = CASES[name](in_channels, out_channels).to(dtype)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(graph.num_nodes, in_channels, generator=gen, dtype=dtype)
    if name in TAKES_EDGE_WEIGHT:
        edge_weight = torch.rand(graph.num_edges, generator=gen, dtype=dtype) + 0.5
        return module, (graph, x, edge_weight)
    return module, (graph, x)


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, inputs: tuple) -> Tensor:
    """Forward, a loss, backward and one optimizer step; returns the (detached) output."""
    optimizer.zero_grad()
    out = model(*inputs)
    out.square().mean().backward()
    optimizer.step()
    return out.detach()


# ====================================================================== timing
VARY = (1.0, 0.75, 1.25, 0.9)  # graph sizes of --vary, relative to --nodes/--edges


def time_case(name: str, backend: str, compiler: str, graphs: list[unigraph.Graph], width: int, steps: int) -> dict:
    """Step ``i`` runs on ``graphs[i % len(graphs)]`` (one graph: full-batch training)."""
    from torch._dynamo.utils import counters
    eager = make_case(name, graphs[0], width, width, torch.float32)[0]
    inputs = [make_case(name, graph, width, width, torch.float32)[1] for graph in graphs]
    compiled_model = copy.deepcopy(eager)
    eager_opt = torch.optim.Adam(eager.parameters(), lr=1e-3)
    compiled_opt = torch.optim.Adam(compiled_model.parameters(), lr=1e-3)
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(compiled_model, fullgraph=True, backend=compiler)
    with unigraph.use_backend(backend):
        start = time.perf_counter()
        for step_inputs in inputs:  # compiles forward and backward (twice for graphs of other sizes)
            train_step(compiled, compiled_opt, step_inputs)
        compile_s = time.perf_counter() - start
        for step_inputs in inputs:  # eager's one-time costs (formats, numba) outside the timing
            train_step(eager, eager_opt, step_inputs)
        eager_ms, compiled_ms = [], []
        for step in range(steps):
            for model, opt, times in ((eager, eager_opt, eager_ms), (compiled, compiled_opt, compiled_ms)):
                start = time.perf_counter()
                train_step(model, opt, inputs[step % len(inputs)])
                times.append((time.perf_counter() - start) * 1e3)
    eager_median, compiled_median = statistics.median(eager_ms), statistics.median(compiled_ms)
    return {"case": name, "backend": backend, "compiler": compiler, "compile_s": round(compile_s, 2),
            "eager_ms": round(eager_median, 3), "compiled_ms": round(compiled_median, 3),
            "eager_over_compiled": round(eager_median / compiled_median, 2),
            "compiles": counters["stats"]["unique_graphs"]}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2708, help="nodes of the synthetic graph (Cora: 2708)")
    parser.add_argument("--edges", type=int, default=10556, help="edges (Cora: 10556)")
    parser.add_argument("--width", type=int, default=64, help="feature width in and out")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per case")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES), metavar="CASE")
    parser.add_argument("--backends", nargs="+", default=list(CPU_BACKENDS))
    parser.add_argument("--compiler", default="inductor", help="torch.compile backend (inductor, aot_eager, ...)")
    parser.add_argument("--vary", action="store_true", help="a new graph of another size every step (mini-batches)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the rows here")
    args = parser.parse_args(argv)
    scales = VARY if args.vary else (1.0,)
    graphs = [synthetic_graph(round(args.nodes * f), round(args.edges * f), seed=i).prepare()
              for i, f in enumerate(scales)]
    load_start = load_average()
    rows = []
    print(f"{'case':24s} {'backend':8s} {'compile s':>9s} {'eager ms':>9s} {'compiled ms':>11s} {'ratio':>6s} "
          f"{'compiles':>8s}")
    for name in args.cases:
        for backend in args.backends:
            row = time_case(name, backend, args.compiler, graphs, args.width, args.steps)
            rows.append(row)
            print(f"{name:24s} {backend:8s} {row['compile_s']:9.2f} {row['eager_ms']:9.3f} {row['compiled_ms']:11.3f} "
                  f"{row['eager_over_compiled']:6.2f} {row['compiles']:8d}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(torch.device("cpu")), "versions": versions(),
                                         "torch_threads": torch.get_num_threads(), "compiler": args.compiler,
                                         "steps": args.steps, "loadavg_start": load_start,
                                         "loadavg_end": load_average(),
                                         "graph": {"nodes": args.nodes, "edges": args.edges,
                                                   "vary": list(scales) if args.vary else None},
                                         "width": args.width,
                                         "rows": rows}, indent=1))
    return rows


if __name__ == "__main__":
    main()
