"""Every layer PyG and unigraph both have, on PyG's mini-batches of small graphs: one training
step of the layer alone, unigraph's class beside PyG's, in one process, interleaved.

The question it answers (issue 25, "no call form slower than PyG's on the same work"): a PyG user
who batches small graphs with PyG's ``DataLoader`` and changes only the layer's import, does any
layer get slower? Each batch is a new ``edge_index`` (what a loader hands over), so the per-call
work of a fresh graph is in every step.

Data: motif graphs (``benchmarks.ports.small_graphs``: 7 one-hot degree features, as MUTAG's atom
types) widened to ``--width`` features with seeded noise columns, collated by PyG's ``DataLoader``
into batches of ``--batch-size`` graphs once, before the clock (the loader is the same for both and
``ports.py``'s GIN row times it); each step gets the batch's tensors as new copies, made before the
clock, as a loader hands them over (so no cache keyed on a tensor hits across steps). A step: ``out = layer(x, edge_index[, edge_attr])``,
``out.square().mean().backward()``; layers built with the same seed; each round runs unigraph's and
PyG's step, the order alternating; rows rotate through the batches. Reported per layer and thread
count: the median (min - max) of the timed steps after the warm-up, and PyG's median / unigraph's.

    python benchmarks/small_batches.py --out benchmarks/results        # both thread settings
    python benchmarks/small_batches.py --quick                         # a smoke run
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

from benchmarks.environment import (add_out_argument, finish_arguments, load_average, machine,  # noqa: E402
                                    set_threads, side_by_side, thread_counts, timing_cell, versions, write_report)
from benchmarks.peers import load_pyg  # noqa: E402

NAME = "small_batches_cpu"


def layers(width: int) -> dict:
    """name -> (builder taking the module that holds the classes, whether it reads edge_attr)."""
    deg = torch.tensor([0, 10, 30, 20, 5])
    return {
        "GCNConv": (lambda m: m.GCNConv(width, width), False),
        "GCNConv(normalize=False)": (lambda m: m.GCNConv(width, width, normalize=False), False),
        "GATConv(heads=4)": (lambda m: m.GATConv(width, width // 4, heads=4), False),
        "GATConv": (lambda m: m.GATConv(width, width), False),
        "GATv2Conv(heads=4)": (lambda m: m.GATv2Conv(width, width // 4, heads=4), False),
        "SAGEConv": (lambda m: m.SAGEConv(width, width), False),
        "SAGEConv(aggr='max')": (lambda m: m.SAGEConv(width, width, aggr="max"), False),
        "SAGEConv(aggr='sum')": (lambda m: m.SAGEConv(width, width, aggr="sum"), False),
        "GraphConv": (lambda m: m.GraphConv(width, width), False),
        "GraphConv(aggr='mean')": (lambda m: m.GraphConv(width, width, aggr="mean"), False),
        "GINConv": (lambda m: m.GINConv(torch.nn.Linear(width, width)), False),
        "GINEConv": (lambda m: m.GINEConv(torch.nn.Linear(width, width), edge_dim=4), True),
        "EdgeConv": (lambda m: m.EdgeConv(torch.nn.Linear(2 * width, width)), False),
        "PNAConv": (lambda m: m.PNAConv(width, width, ["mean", "max", "std"], ["identity", "amplification"],
                                        deg=deg), False),
    }


def batches(pyg, args) -> list:
    from benchmarks.ports import small_graphs
    from torch_geometric.loader import DataLoader
    graphs = small_graphs(pyg, types.SimpleNamespace(gin_graphs=args.graphs, seed=args.seed))
    gen = torch.Generator().manual_seed(args.seed)
    for graph in graphs:
        noise = torch.randn(graph.num_nodes, args.width - graph.x.shape[1], generator=gen)
        graph.x = torch.cat([graph.x, noise], 1)
        graph.edge_attr = torch.randn(graph.edge_index.shape[1], 4, generator=gen)
    loader = DataLoader(graphs, args.batch_size, shuffle=True, generator=torch.Generator().manual_seed(args.seed))
    return [batch for batch, _ in zip(loader, range(args.batches))]


def fresh(data) -> tuple:
    """The batch's tensors as new tensors, as a loader hands over each batch (no cache keyed on a
    tensor can hit across steps)."""
    return data.x.clone(), data.edge_index.clone(), data.edge_attr.clone()


def step(layer, tensors: tuple, edge_attr: bool) -> None:
    x, edge_index, attr = tensors
    out = layer(x, edge_index, attr) if edge_attr else layer(x, edge_index)
    out.square().mean().backward()


def time_layer(name: str, build, edge_attr: bool, data: list, args, pyg_nn, ours_nn) -> dict:
    contestants = {}
    for library, module in (("unigraph", ours_nn), ("pyg", pyg_nn)):
        torch.manual_seed(args.seed)
        contestants[library] = build(module)
    times = {library: [] for library in contestants}
    for round_ in range(args.warmup + args.steps):
        order = list(contestants) if round_ % 2 else list(contestants)[::-1]
        for library in order:
            tensors = fresh(data[round_ % len(data)])
            start = time.perf_counter()
            step(contestants[library], tensors, edge_attr)
            times[library].append(1e3 * (time.perf_counter() - start))
    return {"layer": name, **side_by_side(times, args.warmup, "pyg")}


def run(args) -> dict:
    pyg = load_pyg()
    if pyg is None:
        raise SystemExit("small_batches compares with PyG's layers: install torch_geometric")
    import torch_geometric.nn as pyg_nn
    import unigraph.nn as ours_nn
    data = batches(pyg, args)
    chosen = {name: spec for name, spec in layers(args.width).items() if not args.layers or name in args.layers}
    sections = []
    saved = torch.get_num_threads()
    try:
        for threads in args.threads:
            set_threads(threads, None)
            before = load_average()
            rows = []
            for name, (build, edge_attr) in chosen.items():
                rows.append(time_layer(name, build, edge_attr, data, args, pyg_nn, ours_nn))
                print(f"{threads} thread(s) {name:28s} unigraph {rows[-1]['unigraph']['ms_median']:7.3f} ms  "
                      f"pyg {rows[-1]['pyg']['ms_median']:7.3f} ms  {rows[-1]['speedup']:.2f}x", flush=True)
            sections.append({"threads": threads, "pools": thread_counts(), "load_average": [before, load_average()],
                             "rows": rows})
    finally:
        torch.set_num_threads(saved)
    return {"machine": machine(torch.device("cpu")), "versions": versions(), "date": datetime.now().isoformat(" ", "seconds"),
            "command": "python benchmarks/small_batches.py " + " ".join(sys.argv[1:]),
            "batch_size": args.batch_size, "width": args.width, "steps": args.steps, "warmup": args.warmup,
            "batches": [{"nodes": int(d.num_nodes), "edges": int(d.edge_index.shape[1])} for d in data],
            "sections": sections}


def write_markdown(result: dict, path: pathlib.Path) -> None:
    m, sizes = result["machine"], result["batches"]
    lines = ["# Layers on PyG's mini-batches of small graphs: unigraph's class beside PyG's", "",
             f"Generated by `{result['command']}` on {result['date']}.", "",
             f"Machine: {m['cpu']}, {m['cpu_count']} cores, {m['memory_gb']} GiB. Versions: "
             + ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v) + ".", "",
             f"A step: one layer ({result['width']} features in and out) on one batch of {result['batch_size']} motif "
             f"graphs collated by PyG's DataLoader before the clock ({min(s['nodes'] for s in sizes)}-"
             f"{max(s['nodes'] for s in sizes)} nodes, {min(s['edges'] for s in sizes)}-{max(s['edges'] for s in sizes)} "
             "edges, new tensors each step, as a loader hands them over), forward and backward of `out.square().mean()`. The two libraries' "
             f"steps interleaved, alternating order; {result['steps']} timed steps after {result['warmup']} warm-up. "
             "Speedup = PyG's median / unigraph's (> 1: unigraph faster).", ""]
    for section in result["sections"]:
        lines += [f"## {section['threads']} thread(s)", "",
                  f"Load average {section['load_average'][0]} -> {section['load_average'][1]}.", "",
                  "| layer | unigraph ms | PyG ms | speedup |", "|---|---|---|---|"]
        for row in section["rows"]:
            lines.append(f"| `{row['layer']}` | {timing_cell(row['unigraph'])} | {timing_cell(row['pyg'])} | "
                         f"{row['speedup']:.2f}x |")
        lines.append("")
    path.write_text("\n".join(lines))


def add_batch_arguments(parser: argparse.ArgumentParser) -> None:
    """The small-graph batches' arguments (:func:`batches`), with ``--warmup`` and ``--seed``."""
    parser.add_argument("--graphs", type=int, default=1000, help="motif graphs generated (default 1000)")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--batches", type=int, default=7, help="batches cycled through (default 7)")
    parser.add_argument("--width", type=int, default=32, help="feature width (seeded noise columns added)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[torch.get_num_threads(), 1],
                        help="thread counts, one section each (default: torch's default, then 1)")
    parser.add_argument("--layers", nargs="+", help="only these layers (names as in the table)")
    add_batch_arguments(parser)
    parser.add_argument("--steps", type=int, default=150, help="timed steps per library and layer")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few graphs and steps")
    add_out_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.graphs, args.batch_size, args.batches, args.steps, args.warmup = 40, 8, 2, 3, 1
    finish_arguments(parser, args, ("graphs", "batch_size", "batches", "width", "steps", "warmup"))
    if args.width < 8 or args.width % 4:
        parser.error(f"--width must be a multiple of 4, at least 8 (the attention layers use 4 heads), got {args.width}")
    unknown = set(args.layers or ()) - set(layers(args.width))
    if unknown:
        parser.error(f"unknown layers {sorted(unknown)}; choices: {', '.join(layers(args.width))}")
    result = run(args)
    write_report(result, args.out, NAME, write_markdown)
    return result


if __name__ == "__main__":
    main()
