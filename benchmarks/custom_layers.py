"""PyG's and DGL's users' own layers, with only an import changed: a ``MessagePassing``
subclass as PyG's "Creating Message Passing Networks" guide writes it, on PyG's base class and on
unigraph's; a module calling ``g.update_all`` as DGL's "Make your own module" tutorial writes it,
on DGL and on ``unigraph.dgl``. In one process, interleaved.

The question it answers: a PyG user who wrote their own layer and swaps
``torch_geometric.nn.MessagePassing`` for ``unigraph.MessagePassing``, keeping everything else
(``self.propagate(edge_index, x=..., ...)``, PyG's ``add_self_loops`` and ``degree`` helpers), is
the training step faster or slower? Each layer class is written once here, in a function that
takes the base class, so both libraries run the same code:

- ``gcn``: the guide's GCN layer: self-loops added each call, a linear map, symmetric degree
  normalization, ``message = norm * x_j`` summed, a bias;
- ``edge``: the guide's EdgeConv: ``message = MLP([x_i, x_j - x_i])``, max;
- ``mean``: the default message ``x_j`` averaged, then a linear map (GraphSAGE's mean without root);
- ``dgl_sage``: the tutorial's SAGEConv, ``update_all(copy_u, mean)``, a linear map of ``[h, h_N]``;
- ``dgl_weighted``: its weighted variant, ``update_all(u_mul_e, mean)`` with one weight per edge;
- ``dgl_udf``: a message written as a Python function (``edges.src['h'] * edges.data['w']``),
  summed, after a linear map.

DGL's modules take ``(g, x)``: on Cora the graph is built once (as the tutorials do), on the small
graphs a new one per step from the batch's edges, before the clock (as a loader hands it over).

A model: two such layers, ReLU and dropout 0.5 between them and on the input, Adam; a step is
``zero_grad``, forward, cross entropy, backward, ``step``. Workloads: Cora full batch (the
Planetoid raw files, ``--root``; skipped without them) and PyG's ``DataLoader`` batches of small
motif graphs (``benchmarks.small_batches``; a new ``edge_index`` every step, node labels drawn
once). Reported per workload, layer and thread count: median (min - max) of the timed steps,
PyG's median / unigraph's.

    python benchmarks/custom_layers.py --out benchmarks/results
    python benchmarks/custom_layers.py --quick
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time
import types
from datetime import datetime

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from benchmarks.environment import (add_out_argument, finish_arguments, load_average, machine,  # noqa: E402
                                    set_threads, side_by_side, thread_counts, timing_cell, versions, write_report)
from benchmarks.peers import load_pyg  # noqa: E402
from benchmarks.small_batches import add_batch_arguments, batches  # noqa: E402

NAME = "custom_layers_cpu"
LAYERS = ("gcn", "edge", "mean")                    # PyG's MessagePassing against unigraph's
DGL_LAYERS = ("dgl_sage", "dgl_weighted", "dgl_udf")   # DGL against unigraph.dgl
DEFAULT_ROOT = REPO_ROOT.parent / "shared" / "datasets" / "planetoid" / "raw"


def layer_classes(base, utils) -> dict:
    """The user's layers, written against ``base`` (a ``MessagePassing`` class) and PyG's ``utils``."""

    class TutorialGCN(base):
        def __init__(self, width_in: int, width_out: int):
            super().__init__(aggr="add")
            self.lin = torch.nn.Linear(width_in, width_out, bias=False)
            self.bias = torch.nn.Parameter(torch.zeros(width_out))

        def forward(self, x, edge_index):
            edge_index, _ = utils.add_self_loops(edge_index, num_nodes=x.size(0))
            h = self.lin(x)
            source, target = edge_index
            inverse_root = utils.degree(target, h.size(0), dtype=h.dtype).pow(-0.5)
            inverse_root[inverse_root == float("inf")] = 0
            return self.propagate(edge_index, x=h, norm=inverse_root[source] * inverse_root[target]) + self.bias

        def message(self, x_j, norm):
            return norm.view(-1, 1) * x_j

    class TutorialEdgeConv(base):
        def __init__(self, width_in: int, width_out: int):
            super().__init__(aggr="max")
            self.mlp = torch.nn.Sequential(torch.nn.Linear(2 * width_in, width_out), torch.nn.ReLU(),
                                           torch.nn.Linear(width_out, width_out))

        def forward(self, x, edge_index):
            return self.propagate(edge_index, x=x)

        def message(self, x_i, x_j):
            return self.mlp(torch.cat([x_i, x_j - x_i], dim=1))

    class MeanThenLinear(base):
        def __init__(self, width_in: int, width_out: int):
            super().__init__(aggr="mean")
            self.lin = torch.nn.Linear(width_in, width_out)

        def forward(self, x, edge_index):
            return self.lin(self.propagate(edge_index, x=x))

    return {"gcn": TutorialGCN, "edge": TutorialEdgeConv, "mean": MeanThenLinear}


def dgl_layer_classes(dgl) -> dict:
    """The DGL user's modules, written against ``dgl`` (DGL or ``unigraph.dgl``)."""
    fn = dgl.function

    class TutorialSAGE(torch.nn.Module):
        def __init__(self, width_in: int, width_out: int):
            super().__init__()
            self.linear = torch.nn.Linear(2 * width_in, width_out)

        def forward(self, g, h):
            with g.local_scope():
                g.ndata["h"] = h
                g.update_all(fn.copy_u("h", "m"), fn.mean("m", "h_N"))
                return self.linear(torch.cat([h, g.ndata["h_N"]], dim=1))

    class TutorialWeightedSAGE(TutorialSAGE):
        def forward(self, g, h):
            with g.local_scope():
                g.ndata["h"] = h
                g.update_all(fn.u_mul_e("h", "w", "m"), fn.mean("m", "h_N"))
                return self.linear(torch.cat([h, g.ndata["h_N"]], dim=1))

    class WeightedSumUDF(torch.nn.Module):
        def __init__(self, width_in: int, width_out: int):
            super().__init__()
            self.linear = torch.nn.Linear(width_in, width_out)

        def forward(self, g, h):
            with g.local_scope():
                g.ndata["h"] = self.linear(h)
                g.update_all(lambda edges: {"m": edges.src["h"] * edges.data["w"]}, fn.sum("m", "h_N"))
                return g.ndata["h_N"]

    return {"dgl_sage": TutorialSAGE, "dgl_weighted": TutorialWeightedSAGE, "dgl_udf": WeightedSumUDF}


class GraphFirst(torch.nn.Module):
    """A layer called ``(x, edge_index)`` as DGL's modules are, ``(g, x)``: the model code is shared."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x, g):
        return self.layer(g, x)


class TwoLayers(torch.nn.Module):
    def __init__(self, layer, width_in: int, hidden: int, classes: int):
        super().__init__()
        self.first, self.second = layer(width_in, hidden), layer(hidden, classes)

    def forward(self, x, edge_index):
        x = F.dropout(x, 0.5, self.training)
        x = F.dropout(F.relu(self.first(x, edge_index)), 0.5, self.training)
        return self.second(x, edge_index)


def workloads(pyg, args) -> dict:
    """name -> (list of (x, edge_index, y), classes, what it is)."""
    found = {}
    root = pathlib.Path(args.root)
    if not args.quick and (root / "ind.cora.x").exists():
        from unigraph.data import Planetoid
        cora = Planetoid(root, "cora")
        found["cora"] = ([(cora.x, cora.graph.edge_index, cora.y)], int(cora.num_classes),
                         f"Cora, {cora.num_nodes} nodes, {cora.graph.num_edges} edges, full batch")
    data = batches(pyg, types.SimpleNamespace(graphs=args.graphs, seed=args.seed, width=args.width,
                                              batch_size=args.batch_size, batches=args.batches, quick=args.quick))
    gen = torch.Generator().manual_seed(args.seed)
    steps = [(d.x, d.edge_index, torch.randint(0, 4, (int(d.num_nodes),), generator=gen)) for d in data]
    nodes = [int(d.num_nodes) for d in data]
    found["small graphs"] = (steps, 4, f"PyG DataLoader batches of {args.batch_size} motif graphs "
                                       f"({min(nodes)}-{max(nodes)} nodes), a new edge_index each step")
    return found


def time_layer(layer: str, steps: list, classes: int, args, bases: dict, utils, kept: bool = False) -> dict:
    """``bases``: library -> a PyG ``MessagePassing`` class, or the ``dgl`` module for DGL's layers;
    ``kept``: the graph is built once (DGL's full-batch tutorials), not per step."""
    contestants = {}
    for library, base in bases.items():
        torch.manual_seed(args.seed)
        if layer in DGL_LAYERS:
            cls = dgl_layer_classes(base)[layer]
            model = TwoLayers(lambda i, o, c=cls: GraphFirst(c(i, o)), steps[0][0].shape[1], args.hidden, classes)
        else:
            model = TwoLayers(layer_classes(base, utils)[layer], steps[0][0].shape[1], args.hidden, classes)
        contestants[library] = (model, torch.optim.Adam(model.parameters(), lr=0.01))
    kept_graphs = {}   # library -> its graph, built once where ``kept``
    times = {library: [] for library in contestants}
    for round_ in range(args.warmup + args.steps):
        order = list(contestants) if round_ % 2 else list(contestants)[::-1]
        for library in order:
            x, edge_index, y = steps[round_ % len(steps)]
            x, edge_index = x.clone(), edge_index.clone()   # new tensors, as a loader hands them over
            if layer in DGL_LAYERS:   # DGL's form: a graph (per step, or once), its edge weights on it
                edge_index = kept_graphs.get(library)
                if edge_index is None:
                    edge_index = dgl_graph(bases[library], steps[round_ % len(steps)], args.seed)
                    if kept:
                        kept_graphs[library] = edge_index
            model, optimizer = contestants[library]
            start = time.perf_counter()
            optimizer.zero_grad()
            F.cross_entropy(model(x, edge_index), y).backward()
            optimizer.step()
            times[library].append(1e3 * (time.perf_counter() - start))
    peer = next(library for library in times if library != "unigraph")
    return {"layer": layer, **side_by_side(times, args.warmup, peer)}


def dgl_graph(dgl, step: tuple, seed: int):
    """The step's graph in ``dgl``'s form, with one positive weight per edge as ``edata['w']``."""
    x, edge_index, _ = step
    g = dgl.graph((edge_index[0].clone(), edge_index[1].clone()), num_nodes=x.shape[0])
    g.edata["w"] = torch.rand(edge_index.shape[1], 1, generator=torch.Generator().manual_seed(seed)) + 0.5
    return g


def run(args) -> dict:
    pyg = load_pyg()
    if pyg is None:
        raise SystemExit("custom_layers compares with PyG's MessagePassing: install torch_geometric")
    import torch_geometric.utils as utils
    import unigraph
    import unigraph.dgl
    from benchmarks.peers import load_dgl
    families = {"pyg": ({"unigraph": unigraph.MessagePassing, "pyg": pyg.nn.MessagePassing},
                        [layer for layer in args.layers if layer in LAYERS])}
    dgl = load_dgl()
    if dgl is not None:
        families["dgl"] = ({"unigraph": unigraph.dgl, "dgl": dgl}, [layer for layer in args.layers if layer in DGL_LAYERS])
    found = workloads(pyg, args)
    sections = []
    saved = torch.get_num_threads()
    try:
        for threads in args.threads:
            set_threads(threads, None)
            for workload, (steps, classes, what) in found.items():
                before = load_average()
                rows = []
                for peer, (bases, chosen) in families.items():
                    for layer in chosen:
                        rows.append(time_layer(layer, steps, classes, args, bases, utils, kept=workload == "cora"))
                        rows[-1]["peer"] = peer
                        print(f"{threads} thread(s) {workload:12s} {layer:12s} unigraph "
                              f"{rows[-1]['unigraph']['ms_median']:8.3f} ms  {peer} {rows[-1][peer]['ms_median']:8.3f} ms"
                              f"  {rows[-1]['speedup']:.2f}x", flush=True)
                sections.append({"threads": threads, "workload": workload, "what": what, "pools": thread_counts(),
                                 "load_average": [before, load_average()], "rows": rows})
    finally:
        torch.set_num_threads(saved)
    return {"machine": machine(torch.device("cpu")), "versions": versions(),
            "date": datetime.now().isoformat(" ", "seconds"),
            "command": "python benchmarks/custom_layers.py " + " ".join(sys.argv[1:]),
            "hidden": args.hidden, "steps": args.steps, "warmup": args.warmup, "sections": sections}


def write_markdown(result: dict, path: pathlib.Path) -> None:
    m = result["machine"]
    lines = ["# PyG's and DGL's users' own layers: the peer beside unigraph, only an import changed", "",
             f"Generated by `{result['command']}` on {result['date']}.", "",
             f"Machine: {m['cpu']}, {m['cpu_count']} cores, {m['memory_gb']} GiB. Versions: "
             + ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v) + ".", "",
             "Each layer class is written once (`benchmarks/custom_layers.py`: the GCN and EdgeConv layers of PyG's "
             "guide to writing message passing layers, and a mean aggregation then a linear map) against the "
             "`MessagePassing` base class it is given, PyG's or unigraph's, and calls "
             "`self.propagate(edge_index, ...)` with PyG's `add_self_loops`/`degree` as a PyG user does; each DGL "
             "module (`dgl_*`: the SAGEConv of DGL's tutorial on writing modules, its weighted variant, a message "
             "written as a Python function) against `dgl` or `unigraph.dgl`, calling `g.update_all` (the graph built "
             "once on Cora, per step on the small graphs, before the clock). A step: "
             f"two layers ({result['hidden']} hidden), ReLU and dropout, cross entropy, backward, Adam. The libraries' "
             f"steps interleaved, alternating order; {result['steps']} timed steps after {result['warmup']} warm-up. "
             "Speedup = the peer's median / unigraph's (> 1: unigraph faster).", ""]
    for section in result["sections"]:
        lines += [f"## {section['workload']}, {section['threads']} thread(s)", "", f"{section['what']}. Load average "
                  f"{section['load_average'][0]} -> {section['load_average'][1]}.", "",
                  "| layer | peer | unigraph ms | peer ms | speedup |", "|---|---|---|---|---|"]
        for row in section["rows"]:
            lines.append(f"| `{row['layer']}` | {row['peer']} | {timing_cell(row['unigraph'])} | "
                         f"{timing_cell(row[row['peer']])} | {row['speedup']:.2f}x |")
        lines.append("")
    path.write_text("\n".join(lines))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[torch.get_num_threads(), 1],
                        help="thread counts, one section each (default: torch's default, then 1)")
    parser.add_argument("--layers", nargs="+", default=list(LAYERS + DGL_LAYERS), choices=LAYERS + DGL_LAYERS,
                        help="the dgl_* layers run where DGL loads (benchmarks.peers.load_dgl)")
    parser.add_argument("--root", default=str(DEFAULT_ROOT), help="folder of the Planetoid raw files (Cora)")
    add_batch_arguments(parser)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--steps", type=int, default=100, help="timed steps per library, layer and workload")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small graphs only, few steps")
    add_out_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.graphs, args.batch_size, args.batches, args.steps, args.warmup = 40, 8, 2, 3, 1
    finish_arguments(parser, args, ("graphs", "batch_size", "batches", "width", "hidden", "steps", "warmup"))
    result = run(args)
    write_report(result, args.out, NAME, write_markdown)
    return result


if __name__ == "__main__":
    main()
