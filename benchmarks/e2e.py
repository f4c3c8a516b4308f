"""End-to-end training: unigraph beside PyG and DGL, measured side by side in one run.

Part 1, full batch: the GAT of the pipeline-parallel study (2 layers, 8 heads of 8, ELU,
dropout 0.6 on features and attention, Adam lr 0.005, weight decay 5e-4) on Cora and CiteSeer.
Per implementation (unigraph on each CPU backend and ``auto``, PyG, DGL where importable): the
median milliseconds per training step (forward, loss, backward, optimizer step) and the test
accuracy at the epoch of best validation accuracy. Epochs of all implementations are
interleaved (one epoch of each in turn), so a load change on the machine hits all alike.

Part 2, mini-batch: GraphSAGE (2 layers of 256, mean) and GAT (8 heads of 8) with [25, 10]
neighbour sampling, batches of 1,024 seeds, on a synthetic Reddit-like power-law graph (R-MAT)
scaled to the machine; epoch time and the share of it spent sampling, beside PyG's
NeighborLoader and models.

Targets (issue 7): GAT at least 3x less time per epoch than PyG and than DGL, test accuracy
within 1.5 points of PyG's. The markdown says plainly where a target is missed.

    python benchmarks/e2e.py                      # both parts, writes benchmarks/results/e2e_cpu.*
    python benchmarks/e2e.py --quick              # a smoke run (few epochs, small graph)
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import pathlib
import statistics
import sys
import time
from typing import Callable

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `python benchmarks/e2e.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import unigraph  # noqa: E402
from benchmarks.environment import load_average, machine, set_threads, versions  # noqa: E402
from benchmarks.peers import load_dgl, load_pyg  # noqa: E402
from unigraph.data import Planetoid, rmat  # noqa: E402
from unigraph.sampling import NeighborSampler, NodeLoader  # noqa: E402

DEFAULT_ROOT = REPO_ROOT.parent / "shared" / "datasets" / "planetoid" / "raw"
CPU_BACKENDS = ("scatter", "sparse", "numba", "auto")
LR, WEIGHT_DECAY, DROPOUT = 0.005, 5e-4, 0.6
SPEED_TARGET, ACCURACY_TOLERANCE = 3.0, 0.015


# ====================================================================== part 1: full-batch GAT
class Trainee:
    """One implementation under test: ``step()`` trains one epoch, ``accuracies()`` evaluates."""

    def __init__(self, name: str, model: torch.nn.Module, forward: Callable[[], torch.Tensor], y, masks,
                 backend: str | None = None):
        self.name, self.model, self.forward, self.y, self.masks = name, model, forward, y, masks
        self.backend = backend
        self.optimizer = torch.optim.Adam(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
        self.step_ms: list[float] = []
        self.best_val, self.test_at_best_val = -1.0, 0.0

    def _context(self):
        return unigraph.use_backend(self.backend) if self.backend else contextlib.nullcontext()

    def step(self) -> None:
        with self._context():
            start = time.perf_counter()
            self.model.train()
            self.optimizer.zero_grad()
            loss = F.cross_entropy(self.forward()[self.masks["train"]], self.y[self.masks["train"]])
            loss.backward()
            self.optimizer.step()
            self.step_ms.append((time.perf_counter() - start) * 1e3)
            self.model.eval()
            with torch.no_grad():
                predicted = self.forward().argmax(-1)
        val, test = (float((predicted[self.masks[s]] == self.y[self.masks[s]]).float().mean()) for s in ("val", "test"))
        if val > self.best_val:
            self.best_val, self.test_at_best_val = val, test


def unigraph_gat(ds, backend: str, out_heads: int) -> Trainee:
    model = unigraph.GAT(ds.num_features, out_channels=ds.num_classes, hidden_channels=8, heads=8, out_heads=out_heads,
                         dropout=DROPOUT)
    graph, x = ds.graph, ds.x  # the model adds self-loops and makes bag-of-words input sparse itself
    return Trainee(f"unigraph:{backend}", model, lambda: model(graph, x), ds.y, _masks(ds), backend=backend)


def pyg_gat(ds, pyg, out_heads: int) -> Trainee:
    conv = pyg.nn.GATConv

    class PygGAT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = conv(ds.num_features, 8, heads=8, dropout=DROPOUT)
            self.conv2 = conv(64, ds.num_classes, heads=out_heads, concat=False, dropout=DROPOUT)

        def forward(self, x, edge_index):
            x = F.dropout(x, DROPOUT, self.training)
            x = F.elu(self.conv1(x, edge_index))
            x = F.dropout(x, DROPOUT, self.training)
            return self.conv2(x, edge_index)

    model, edge_index, x = PygGAT(), ds.graph.edge_index, ds.x
    return Trainee("pyg", model, lambda: model(x, edge_index), ds.y, _masks(ds))


def dgl_gat(ds, dgl, out_heads: int) -> Trainee:
    gat_conv = dgl.nn.GATConv

    class DglGAT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = gat_conv(ds.num_features, 8, 8, feat_drop=DROPOUT, attn_drop=DROPOUT, activation=F.elu)
            self.conv2 = gat_conv(64, ds.num_classes, out_heads, feat_drop=DROPOUT, attn_drop=DROPOUT)

        def forward(self, g, x):
            return self.conv2(g, self.conv1(g, x).flatten(1)).mean(1)

    g = dgl.add_self_loop(dgl.remove_self_loop(dgl.graph((ds.graph.src, ds.graph.dst), num_nodes=ds.graph.num_nodes)))
    model, x = DglGAT(), ds.x
    return Trainee("dgl", model, lambda: model(g, x), ds.y, _masks(ds))


def _masks(ds) -> dict:
    return {"train": ds.train_mask, "val": ds.val_mask, "test": ds.test_mask}


def full_batch(args, pyg, dgl) -> list[dict]:
    rows = []
    for name in args.datasets:
        ds = Planetoid(args.root, name)
        trainees = []
        for backend in CPU_BACKENDS:
            torch.manual_seed(args.seed)
            trainees.append(unigraph_gat(ds, backend, args.out_heads))
        if pyg is not None:
            torch.manual_seed(args.seed)
            trainees.append(pyg_gat(ds, pyg, args.out_heads))
        if dgl is not None:
            torch.manual_seed(args.seed)
            trainees.append(dgl_gat(ds, dgl, args.out_heads))
        for epoch in range(args.epochs):
            for trainee in trainees:
                trainee.step()
            if epoch % 50 == 0:
                print(f"[e2e] {name} epoch {epoch}: " + ", ".join(f"{t.name} {t.step_ms[-1]:.1f} ms" for t in trainees),
                      file=sys.stderr, flush=True)
        warm = min(args.warmup, args.epochs - 1)
        for trainee in trainees:
            rows.append({"dataset": name, "impl": trainee.name, "ms_per_epoch": statistics.median(trainee.step_ms[warm:]),
                         "ms_p90": sorted(trainee.step_ms[warm:])[int(0.9 * (len(trainee.step_ms) - warm - 1))],
                         "test_acc": trainee.test_at_best_val, "best_val_acc": trainee.best_val})
    return rows


# ====================================================================== part 2: mini-batch
def reddit_like(args):
    """An R-MAT graph with class-correlated labels and random features (timing, not accuracy)."""
    graph = rmat(args.mb_nodes, args.mb_edges, seed=args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    labels = torch.randint(0, args.mb_classes, (args.mb_nodes,), generator=gen)
    centers = torch.randn(args.mb_classes, args.mb_features, generator=gen)
    x = centers[labels] + torch.randn(args.mb_nodes, args.mb_features, generator=gen)
    seeds = torch.randperm(args.mb_nodes, generator=gen)[: int(args.mb_train_fraction * args.mb_nodes)]
    return graph, x, labels, seeds


def _time_epoch(batches, train_one) -> tuple[float, float, int]:
    """(epoch seconds, seconds spent producing batches, batches) for one pass."""
    sampling = 0.0
    start = time.perf_counter()
    iterator = iter(batches)
    count = 0
    while True:
        t0 = time.perf_counter()
        batch = next(iterator, None)
        sampling += time.perf_counter() - t0
        if batch is None:
            break
        train_one(batch)
        count += 1
    return time.perf_counter() - start, sampling, count


def mini_batch(args, pyg) -> list[dict]:
    graph, x, labels, seeds = reddit_like(args)
    graph.prepare()
    rows = []
    for model_name in ("graphsage", "gat"):
        torch.manual_seed(args.seed)
        if model_name == "graphsage":
            model = unigraph.GraphSAGE(args.mb_features, out_channels=args.mb_classes, hidden_channels=256, num_layers=2,
                                       dropout=0.5)
        else:
            # the same model as PyG's GAT below: 8 heads of 8 features, a last layer of 8 averaged heads
            model = unigraph.GAT(args.mb_features, out_channels=args.mb_classes, hidden_channels=8, heads=8, out_heads=8,
                                 dropout=DROPOUT)
        optimizer = torch.optim.Adam(model.parameters(), lr=LR)
        loader = NodeLoader(graph, seeds, NeighborSampler([25, 10]), batch_size=1024, features=x, labels=labels,
                            seed=args.seed)

        def train_one(batch, model=model, optimizer=optimizer):
            optimizer.zero_grad()
            F.cross_entropy(model(batch.blocks, batch.x), batch.y).backward()
            optimizer.step()

        for epoch in range(args.mb_epochs):
            seconds, sampling, count = _time_epoch(loader, train_one)
            rows.append({"model": model_name, "impl": "unigraph", "epoch": epoch, "seconds": seconds,
                         "sampling_seconds": sampling, "batches": count})
            print(f"[e2e] mini-batch {model_name} unigraph epoch {epoch}: {seconds:.2f} s "
                  f"({100 * sampling / seconds:.0f}% sampling)", file=sys.stderr, flush=True)
        if pyg is not None:
            rows += _pyg_mini_batch(args, pyg, model_name, graph, x, labels, seeds)
    return rows


def _pyg_mini_batch(args, pyg, model_name, graph, x, labels, seeds) -> list[dict]:
    from torch_geometric.loader import NeighborLoader
    torch.manual_seed(args.seed)
    data = pyg.data.Data(x=x, y=labels, edge_index=graph.edge_index, num_nodes=graph.num_nodes)
    # PyG lists fanouts from the seeds outwards: unigraph/DGL [25, 10] is PyG [10, 25].
    loader = NeighborLoader(data, num_neighbors=[10, 25], batch_size=1024, input_nodes=seeds, shuffle=True)
    if model_name == "graphsage":
        model = pyg.nn.GraphSAGE(args.mb_features, 256, num_layers=2, out_channels=args.mb_classes, dropout=0.5)
    else:
        # PyG divides hidden_channels among the heads: 64 is 8 heads of 8, as unigraph's hidden_channels=8
        model = pyg.nn.GAT(args.mb_features, 64, num_layers=2, out_channels=args.mb_classes, heads=8, dropout=DROPOUT)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)

    def train_one(batch):
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
        F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
        optimizer.step()

    rows = []
    for epoch in range(args.mb_epochs):
        seconds, sampling, count = _time_epoch(loader, train_one)
        rows.append({"model": model_name, "impl": "pyg", "epoch": epoch, "seconds": seconds,
                     "sampling_seconds": sampling, "batches": count})
        print(f"[e2e] mini-batch {model_name} pyg epoch {epoch}: {seconds:.2f} s "
              f"({100 * sampling / seconds:.0f}% sampling)", file=sys.stderr, flush=True)
    return rows


# ====================================================================== report
def summarize_full_batch(rows: list[dict]) -> list[dict]:
    """Per dataset: unigraph's best backend and auto against each peer, with the targets."""
    out = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        mine = {r["impl"]: r for r in rows if r["dataset"] == dataset}
        for peer in ("pyg", "dgl"):
            if peer not in mine:
                continue
            fastest = min((k for k in mine if k.startswith("unigraph:")), key=lambda k: mine[k]["ms_per_epoch"])
            for impl in dict.fromkeys(("unigraph:auto", fastest)):
                speedup = mine[peer]["ms_per_epoch"] / mine[impl]["ms_per_epoch"]
                accuracy_gap = mine["pyg"]["test_acc"] - mine[impl]["test_acc"] if "pyg" in mine else None
                out.append({"dataset": dataset, "impl": impl, "peer": peer, "speedup": speedup,
                            "speed_met": speedup >= SPEED_TARGET,
                            "accuracy_gap_vs_pyg": accuracy_gap,
                            "accuracy_met": accuracy_gap is None or accuracy_gap <= ACCURACY_TOLERANCE})
    return out


def write_markdown(result: dict, path: pathlib.Path) -> None:
    lines = [f"# End-to-end training ({result['device']})", "",
             f"Generated by `benchmarks/e2e.py {' '.join(result['argv'])}` on {result['started']} in "
             f"{result['seconds']:.0f} s.", "",
             f"Machine: {result['machine']['cpu']}, {result['machine']['cpu_count']} cores; threads: "
             f"{result['threads']}; load average at start/end {result['loadavg_start']} / {result['loadavg_end']}.", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v), ""]
    if result["full_batch"]:
        lines += ["## Full-batch GAT (2 layers, 8 heads of 8, dropout 0.6), "
                  f"{result['config']['epochs']} epochs", "",
                  "Median ms per training step after warm-up (p90 in brackets); test accuracy at the best "
                  "validation epoch.", "",
                  "| dataset | implementation | ms / epoch | test accuracy |", "|---|---|---|---|"]
        for r in result["full_batch"]:
            lines.append(f"| {r['dataset']} | {r['impl']} | {r['ms_per_epoch']:.1f} ({r['ms_p90']:.1f}) | "
                         f"{r['test_acc']:.3f} |")
        lines += ["", f"### Targets: >= {SPEED_TARGET:.0f}x less time per epoch than each peer, accuracy "
                  f"within {100 * ACCURACY_TOLERANCE:.1f} points of PyG", "",
                  "| dataset | unigraph | vs | speedup | speed target | PyG accuracy minus ours (target <= 1.5) | accuracy target |",
                  "|---|---|---|---|---|---|---|"]
        for s in result["targets"]:
            gap = "n/a" if s["accuracy_gap_vs_pyg"] is None else f"{100 * s['accuracy_gap_vs_pyg']:+.1f} pts"
            lines.append(f"| {s['dataset']} | {s['impl']} | {s['peer']} | {s['speedup']:.2f}x | "
                         f"{'met' if s['speed_met'] else '**MISSED**'} | {gap} | "
                         f"{'met' if s['accuracy_met'] else '**MISSED**'} |")
        missed = [s for s in result["targets"] if not (s["speed_met"] and s["accuracy_met"])]
        lines += ["", "**All full-batch targets met.**" if not missed else
                  f"**{len(missed)} target comparison(s) missed** (see the rows marked MISSED)."]
    if result["mini_batch"]:
        cfg = result["config"]
        lines += ["", "## Mini-batch training, [25, 10] neighbour sampling, batches of 1,024 seeds", "",
                  f"R-MAT graph with {cfg['mb_nodes']:,} nodes and {cfg['mb_edges']:,} directed edges, "
                  f"{cfg['mb_features']} features, {cfg['mb_classes']} classes, "
                  f"{int(cfg['mb_train_fraction'] * cfg['mb_nodes']):,} training seeds. Median over "
                  f"{cfg['mb_epochs']} epochs.", "",
                  "| model | implementation | s / epoch | sampling share | speedup vs PyG |", "|---|---|---|---|---|"]
        groups = {}
        for r in result["mini_batch"]:
            groups.setdefault((r["model"], r["impl"]), []).append(r)
        for (model, impl), runs in groups.items():
            seconds = statistics.median(r["seconds"] for r in runs)
            share = statistics.median(r["sampling_seconds"] / r["seconds"] for r in runs)
            pyg_runs = groups.get((model, "pyg"))
            speedup = (statistics.median(r["seconds"] for r in pyg_runs) / seconds) if pyg_runs else None
            lines.append(f"| {model} | {impl} | {seconds:.2f} | {100 * share:.0f}% | "
                         f"{'-' if speedup is None else f'{speedup:.2f}x'} |")
    lines += ["", f"Reproduce: `python benchmarks/e2e.py {' '.join(result['argv'])}`."]
    path.write_text("\n".join(lines) + "\n")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: few epochs, a small mini-batch graph")
    parser.add_argument("--root", type=pathlib.Path, default=DEFAULT_ROOT, help="folder with the Planetoid raw files")
    parser.add_argument("--datasets", nargs="+", default=["cora", "citeseer"])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=5, help="epochs left out of the timing")
    parser.add_argument("--out-heads", type=int, default=1, help="heads of the last GAT layer (averaged)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parts", nargs="+", default=["full", "mini"], choices=["full", "mini"])
    parser.add_argument("--mb-nodes", type=int, default=100_000)
    parser.add_argument("--mb-edges", type=int, default=4_000_000)
    parser.add_argument("--mb-features", type=int, default=128)
    parser.add_argument("--mb-classes", type=int, default=16)
    parser.add_argument("--mb-train-fraction", type=float, default=0.1)
    parser.add_argument("--mb-epochs", type=int, default=3)
    parser.add_argument("--no-peers", action="store_true", help="skip PyG and DGL")
    parser.add_argument("--out", type=pathlib.Path, default=REPO_ROOT / "benchmarks" / "results")
    parser.add_argument("--name", default="e2e_cpu")
    args = parser.parse_args(argv)
    if args.quick:
        args.epochs, args.warmup, args.mb_epochs = min(args.epochs, 12), 2, 1
        args.mb_nodes, args.mb_edges = 5_000, 100_000
    if "full" in args.parts and not args.root.is_dir():
        parser.error(f"--root {args.root} is not a folder with the Planetoid raw files (ind.cora.x ...); "
                     "get them from https://github.com/kimiyoung/planetoid or run with --parts mini")
    return args


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    pyg = None if args.no_peers else load_pyg()
    dgl = None if args.no_peers else load_dgl()
    set_threads(args.threads, dgl)
    started, t0, loadavg_start = datetime.datetime.now().isoformat(timespec="seconds"), time.perf_counter(), load_average()
    print(unigraph.info(), file=sys.stderr)
    full = full_batch(args, pyg, dgl) if "full" in args.parts else []
    mini = mini_batch(args, pyg) if "mini" in args.parts else []
    result = {"benchmark": "e2e", "started": started, "seconds": time.perf_counter() - t0, "argv": list(argv),
              "device": "cpu", "machine": machine(torch.device("cpu")), "versions": versions(),
              "threads": args.threads, "loadavg_start": loadavg_start, "loadavg_end": load_average(),
              "config": {k: (str(v) if isinstance(v, pathlib.Path) else v) for k, v in vars(args).items()},
              "full_batch": full, "targets": summarize_full_batch(full), "mini_batch": mini}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1))
    write_markdown(result, args.out / f"{args.name}.md")
    print((args.out / f"{args.name}.md").read_text())
    return result


if __name__ == "__main__":
    main()
