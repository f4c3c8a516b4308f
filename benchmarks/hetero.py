"""Heterogeneous training: unigraph beside PyG and DGL on the same generated academic graph.

The graph is :func:`unigraph.data.academic_graph` (papers, authors, institutions, fields; 7
relations; a paper's label is its authors' area and its fields' topic). Two models, built the
same way in every library (per-type input projection to ``--hidden``, ReLU, dropout, then two
graph layers with ReLU and dropout between them; Adam with the end-to-end benchmark's settings):

* **R-GCN**: two relational convolutions (mean per relation, root weight, bias). unigraph's
  ``RGCN`` on the typed graph; PyG's ``RGCNConv`` on the homogeneous graph with edge types
  (``HeteroData.to_homogeneous``); DGL's ``RelGraphConv`` with the ``1/|N_r(i)|`` edge norm.
* **HeteroConv(SAGE)**: one ``SAGEConv`` (mean) per relation, summed per destination type: our
  ``HeteroConv``, PyG's ``HeteroConv``, DGL's ``HeteroGraphConv``.

Per implementation: the median milliseconds per full-batch training step and the test accuracy
at the epoch of best validation accuracy. Epochs of all implementations of a model are
interleaved (one epoch of each in turn), so a load change on the machine hits all alike. A speedup
only counts at equal accuracy: the report gives each implementation's accuracy beside its time.

    python benchmarks/hetero.py --out benchmarks/results   # writes benchmarks/results/hetero_cpu.{json,md}
    python benchmarks/hetero.py --quick            # a smoke run (tiny graph, few epochs)
"""
from __future__ import annotations

import argparse
import datetime
import pathlib
import statistics
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `python benchmarks/hetero.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import unigraph  # noqa: E402
from benchmarks.e2e import Trainee  # noqa: E402
from benchmarks.environment import (add_out_argument, load_average, machine, out_dir, set_threads, versions,  # noqa: E402
                                    write_report)
from benchmarks.peers import load_dgl, load_pyg  # noqa: E402
from unigraph.benchmarking.peers import as_run_by  # noqa: E402
from unigraph.data import academic_graph  # noqa: E402
from unigraph.models import RGCN  # noqa: E402

MODELS = ("rgcn", "heteroconv")
ACCURACY_TOLERANCE = 0.015


def masks(ds) -> dict:
    return {"train": ds.train_mask, "val": ds.val_mask, "test": ds.test_mask}


def homogeneous(ds):
    """The typed graph as one graph: node offsets per type, edge types, and R-GCN's per-relation norm."""
    hg = ds.graph
    g = hg.to_homogeneous()
    offsets, start = {}, 0
    for t in hg.node_types:
        offsets[t] = start
        start += hg.num_nodes(t)
    edge_type = g.edata["edge_type"]
    key = edge_type * g.num_nodes + g.dst                      # in-degree of each (relation, destination)
    _, inverse, counts = torch.unique(key, return_inverse=True, return_counts=True)
    norm = (1.0 / counts.to(torch.float32))[inverse].unsqueeze(1)
    return g, offsets, edge_type, norm


class TypeProjection(torch.nn.Module):
    """The peers' per-type input projection: one Linear per type, stacked type after type."""

    def __init__(self, widths: dict, hidden: int):
        super().__init__()
        self.types = list(widths)
        self.lins = torch.nn.ModuleDict({t: torch.nn.Linear(w, hidden) for t, w in widths.items()})

    def forward(self, x_dict):
        return torch.cat([F.relu(self.lins[t](x_dict[t])) for t in self.types])


# ---------------------------------------------------------------------- R-GCN
def unigraph_rgcn(ds, args) -> Trainee:
    model = RGCN(ds.num_features, args.hidden, ds.num_classes, ds.graph.relations, ds.target, dropout=args.dropout,
                 num_bases=args.bases)
    hg, x = ds.graph, ds.x_dict
    return Trainee("unigraph", model, lambda: model(hg, x), ds.y, masks(ds))


class HomogeneousRGCN(torch.nn.Module):
    def __init__(self, ds, args, conv_factory):
        super().__init__()
        self.project = TypeProjection(ds.num_features, args.hidden)
        self.conv1 = conv_factory(args.hidden, args.hidden)
        self.conv2 = conv_factory(args.hidden, ds.num_classes)
        self.dropout = args.dropout

    def forward(self, x_dict, run_conv, target):
        h = F.dropout(self.project(x_dict), self.dropout, self.training)
        h = F.dropout(F.relu(run_conv(self.conv1, h)), self.dropout, self.training)
        return run_conv(self.conv2, h)[target]


def pyg_rgcn(ds, pyg, args) -> Trainee:
    g, offsets, edge_type, _ = homogeneous(ds)
    relations = len(ds.graph.relations)
    model = HomogeneousRGCN(ds, args, lambda i, o: pyg.nn.RGCNConv(i, o, relations, num_bases=args.bases))
    edge_index, x = g.edge_index, ds.x_dict
    target = slice(offsets[ds.target], offsets[ds.target] + ds.graph.num_nodes(ds.target))
    return Trainee("pyg", model, lambda: model(x, lambda conv, h: conv(h, edge_index, edge_type), target), ds.y,
                   masks(ds))


def dgl_rgcn(ds, dgl, args) -> Trainee:
    g, offsets, edge_type, norm = homogeneous(ds)
    relations = len(ds.graph.relations)
    regularizer = "basis" if args.bases else None
    model = HomogeneousRGCN(ds, args, lambda i, o: dgl.nn.RelGraphConv(i, o, relations, regularizer=regularizer,
                                                                        num_bases=args.bases, self_loop=True))
    dg, x = dgl.graph((g.src, g.dst), num_nodes=g.num_nodes), ds.x_dict
    target = slice(offsets[ds.target], offsets[ds.target] + ds.graph.num_nodes(ds.target))
    return Trainee("dgl", model, lambda: model(x, lambda conv, h: conv(dg, h, edge_type, norm=norm), target), ds.y,
                   masks(ds))


# ---------------------------------------------------------------------- HeteroConv(SAGE)
class HeteroSage(torch.nn.Module):
    def __init__(self, ds, args, project, make_layer):
        super().__init__()
        self.project = project
        self.conv1 = make_layer(args.hidden, args.hidden)
        self.conv2 = make_layer(args.hidden, ds.num_classes)
        self.dropout, self.target = args.dropout, ds.target

    def forward(self, run_conv, x_dict):
        h = {t: F.dropout(F.relu(v), self.dropout, self.training) for t, v in self.project(x_dict).items()}
        h = {t: F.dropout(F.relu(v), self.dropout, self.training) for t, v in run_conv(self.conv1, h).items()}
        return run_conv(self.conv2, h)[self.target]


def unigraph_sage(ds, args) -> Trainee:
    relations = ds.graph.relations
    model = HeteroSage(ds, args, unigraph.hetero.TypedLinear(ds.num_features, args.hidden),
                       lambda i, o: unigraph.HeteroConv({r: unigraph.SAGEConv(i, o) for r in relations}, aggr="sum"))
    hg, x = ds.graph, ds.x_dict
    return Trainee("unigraph", model, lambda: model(lambda conv, h: conv(hg, h), x), ds.y, masks(ds))


def pyg_sage(ds, pyg, args) -> Trainee:
    relations = ds.graph.relations
    model = HeteroSage(ds, args, pyg.nn.HeteroDictLinear(ds.num_features, args.hidden),
                       lambda i, o: pyg.nn.HeteroConv({r: pyg.nn.SAGEConv(i, o) for r in relations}, aggr="sum"))
    edge_index, x = {r: g.edge_index for r, g in ds.graph.items()}, ds.x_dict
    return Trainee("pyg", model, lambda: model(lambda conv, h: conv(h, edge_index), x), ds.y, masks(ds))


def dgl_sage(ds, dgl, args) -> Trainee:
    hg = ds.graph.to_dgl()
    names = [r[1] for r in ds.graph.relations]  # the generated graph's relation names are unique

    class Project(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lins = torch.nn.ModuleDict({t: torch.nn.Linear(w, args.hidden) for t, w in ds.num_features.items()})

        def forward(self, x_dict):
            return {t: self.lins[t](v) for t, v in x_dict.items()}

    model = HeteroSage(ds, args, Project(), lambda i, o: dgl.nn.HeteroGraphConv(
        {n: dgl.nn.SAGEConv(i, o, "mean") for n in names}, aggregate="sum"))
    x = ds.x_dict
    return Trainee("dgl", model, lambda: model(lambda conv, h: conv(hg, h), x), ds.y, masks(ds))


BUILDERS = {"rgcn": (unigraph_rgcn, pyg_rgcn, dgl_rgcn), "heteroconv": (unigraph_sage, pyg_sage, dgl_sage)}


# ---------------------------------------------------------------------- run and report
def run_model(name: str, ds, args, pyg, dgl) -> list[dict]:
    ours, with_pyg, with_dgl = BUILDERS[name]
    trainees = []
    for build, peer in ((lambda: ours(ds, args), True), (lambda: with_pyg(ds, pyg, args), pyg),
                        (lambda: with_dgl(ds, dgl, args), dgl)):
        if peer is None:
            continue
        torch.manual_seed(args.seed)
        trainees.append(build())
    for epoch in range(args.epochs):
        for trainee in trainees:
            as_run_by(trainee.name, trainee.step)()
        if epoch % 20 == 0:
            print(f"[hetero] {name} epoch {epoch}: " + ", ".join(f"{t.name} {t.step_ms[-1]:.1f} ms" for t in trainees),
                  file=sys.stderr, flush=True)
    warm = min(args.warmup, args.epochs - 1)
    rows = []
    for t in trainees:
        times = t.step_ms[warm:]
        rows.append({"model": name, "impl": t.name, "ms_per_epoch": statistics.median(times),
                     "ms_p90": sorted(times)[int(0.9 * (len(times) - 1))], "ms_min": min(times), "ms_max": max(times),
                     "test_acc": t.test_at_best_val,
                     "best_val_acc": t.best_val})
    return rows


def comparisons(rows: list[dict]) -> list[dict]:
    """unigraph against each peer: speedup, and the accuracy difference it was measured at."""
    out = []
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = {r["impl"]: r for r in rows if r["model"] == model}
        for peer in ("pyg", "dgl"):
            if peer in mine and "unigraph" in mine:
                gap = mine[peer]["test_acc"] - mine["unigraph"]["test_acc"]
                out.append({"model": model, "peer": peer,
                            "speedup": mine[peer]["ms_per_epoch"] / mine["unigraph"]["ms_per_epoch"],
                            "accuracy_gap": gap, "equal_accuracy": gap <= ACCURACY_TOLERANCE})
    return out


def write_markdown(result: dict, path: pathlib.Path) -> None:
    cfg = result["config"]
    lines = [f"# Heterogeneous training ({result['device']})", "",
             f"Generated by `benchmarks/hetero.py {' '.join(result['argv'])}` on {result['started']} in "
             f"{result['seconds']:.0f} s.", "",
             f"Machine: {result['machine']['cpu']}, {result['machine']['cpu_count']} cores; threads: "
             f"{cfg['threads']}; load average at start/end {result['loadavg_start']} / {result['loadavg_end']}.", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v), "",
             f"Graph: {result['graph']}. Full batch, {cfg['epochs']} epochs, hidden {cfg['hidden']}, dropout "
             f"{cfg['dropout']}, bases {cfg['bases']}.", "",
             "| model | implementation | ms / epoch: median | min - max (p90) | test accuracy |", "|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['model']} | {r['impl']} | {r['ms_per_epoch']:.1f} | {r['ms_min']:.1f} - {r['ms_max']:.1f} "
                     f"({r['ms_p90']:.1f}) | {r['test_acc']:.3f} |")
    lines += ["", f"Speedups count at equal accuracy (peer's test accuracy at most {100 * ACCURACY_TOLERANCE:.1f} "
              "points above ours).", "", "| model | vs | speedup | peer minus ours | equal accuracy |",
              "|---|---|---|---|---|"]
    for c in result["comparisons"]:
        lines.append(f"| {c['model']} | {c['peer']} | {c['speedup']:.2f}x | {100 * c['accuracy_gap']:+.1f} pts | "
                     f"{'yes' if c['equal_accuracy'] else '**NO**'} |")
    lines += ["", f"Reproduce: `python benchmarks/hetero.py {' '.join(result['argv'])}`."]
    path.write_text("\n".join(lines) + "\n")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: a tiny graph and few epochs")
    parser.add_argument("--papers", type=int, default=20_000, help="papers of the academic graph (default 20,000)")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5, help="epochs left out of the timing")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--bases", type=int, default=None, help="R-GCN basis decomposition (default: none)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-peers", action="store_true", help="skip PyG and DGL")
    add_out_argument(parser)  # default: benchmarks/results/scratch (the committed results only by --out)
    parser.add_argument("--name", default="hetero_cpu")
    args = parser.parse_args(argv)
    if args.quick:
        args.papers, args.epochs, args.warmup = min(args.papers, 400), min(args.epochs, 3), 1
    return args


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    pyg = None if args.no_peers else load_pyg()
    dgl = None if args.no_peers else load_dgl()
    set_threads(args.threads, dgl)
    started, t0, loadavg_start = datetime.datetime.now().isoformat(timespec="seconds"), time.perf_counter(), load_average()
    ds = academic_graph(args.papers, seed=args.seed)
    print(ds, file=sys.stderr)
    rows = [row for model in args.models for row in run_model(model, ds, args, pyg, dgl)]
    result = {"benchmark": "hetero", "started": started, "seconds": time.perf_counter() - t0, "argv": list(argv),
              "device": "cpu", "machine": machine(torch.device("cpu")), "versions": versions(),
              "loadavg_start": loadavg_start, "loadavg_end": load_average(), "graph": repr(ds),
              "config": {k: (str(v) if isinstance(v, pathlib.Path) else v) for k, v in vars(args).items()},
              "rows": rows, "comparisons": comparisons(rows)}
    write_report(result, out_dir(args), args.name, write_markdown)
    return result


if __name__ == "__main__":
    main()
