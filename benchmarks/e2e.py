"""End-to-end training: unigraph beside PyG and DGL, each at its best settings, measured interleaved.

Three parts (issue 13's targets), each written to its own results file ``e2e_<part>_cpu.{json,md}``:

* ``planetoid`` - full-batch GAT (2 layers, 8 heads of 8, ELU, dropout 0.6 on features and
  attention, Adam lr 0.005, weight decay 5e-4) on Cora and CiteSeer. unigraph runs **twice** per
  backend: with its sparse bag-of-words input projection (a real feature of its models, not the
  kernels) and on **equal dense input**, as separate rows. Targets: >= 3x less time per epoch than
  PyG and DGL, test accuracy within 1.5 points of PyG's.
* ``arxiv`` - full-batch GCN, GraphSAGE (mean) and GAT (8 heads of 8) on an ogbn-arxiv-sized
  labelled graph (:func:`unigraph.data.arxiv_like.arxiv_like`: 169k nodes, 2.2M directed edges,
  128 dense features, 40 classes), with power-law degrees and on its uniform-degree twin. Adam lr
  0.01, dropout 0.5, hidden 256 (GCN, SAGE). Targets: >= 1.5x faster than DGL and >= 3x faster
  than PyG at its best, at equal test accuracy (within 1.5 points).
* ``minibatch`` - 3-layer GraphSAGE, [15, 10, 5] neighbours from the seeds, batches of 1,024, on an
  ogbn-products-sized graph (2.4M nodes, ~120M directed edges, 100 features; ``--mb-scale`` shrinks
  it; the memory it needs is printed first and checked against what is free). Target: >= 1.5x
  faster epochs than DGL's and PyG's pipelines (:mod:`benchmarks.mini_batch`).

Every figure follows :mod:`unigraph.benchmarking`: epochs (or batches) of all implementations
interleaved round-robin, min / median / max over them, machine, versions, every thread pool, load
average, peak memory and a STREAM-like bandwidth measurement written beside them. PyG runs on
``edge_index`` and on a torch-sparse ``SparseTensor`` and the faster counts, labelled; DGL and
torch and numba get the same ``--threads``. Without ``--out`` results go to
``benchmarks/results/scratch/``.

    python benchmarks/e2e.py --parts arxiv --out benchmarks/results       # a committed result
    python benchmarks/e2e.py --quick                                       # a smoke run of all parts
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import pathlib
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `python benchmarks/e2e.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from benchmarks import full_batch, mini_batch  # noqa: E402
from benchmarks.environment import add_out_argument, finish_arguments  # noqa: E402
from benchmarks.full_batch import Trainee  # noqa: E402,F401 - re-exported (benchmarks/hetero.py uses it)
from benchmarks.peers import load_dgl, load_pyg  # noqa: E402
from unigraph.benchmarking import bandwidth, environment, output  # noqa: E402
from unigraph.data import Planetoid  # noqa: E402
from unigraph.data.arxiv_like import ARXIV_SIZE, arxiv_like, scaled  # noqa: E402

DEFAULT_ROOT = REPO_ROOT.parent / "shared" / "datasets" / "planetoid" / "raw"
PARTS = ("planetoid", "arxiv", "minibatch")
ACCURACY_TOLERANCE = 0.015
TARGETS = {"planetoid": {"dgl": 3.0, "pyg": 3.0}, "arxiv": {"dgl": 1.5, "pyg": 3.0}, "minibatch": {"dgl": 1.5, "pyg": 1.5}}
PLANETOID_GAT = full_batch.Hyper(hidden=8, heads=8, out_heads=1, dropout=0.6, lr=0.005, weight_decay=5e-4)
ARXIV = {"gcn": full_batch.Hyper(hidden=256), "sage": full_batch.Hyper(hidden=256),
         "gat": full_batch.Hyper(hidden=8, heads=8, out_heads=1)}


def log(message: str) -> None:
    print(f"[e2e {datetime.datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


# ====================================================================== comparisons
def peer_rows(rows: list[dict], peer: str) -> list[dict]:
    return [r for r in rows if r["impl"] == peer or r["impl"].startswith(f"{peer} (")]


def compare(rows: list[dict], part: str, ours: list[str], reference: tuple = ()) -> list[dict]:
    """Each of ``ours`` against DGL and PyG's fastest configuration: speedup (medians), the target,
    and the accuracy gap (the peer's accuracy minus ours). Rows in ``reference`` (a variant shown
    for what it explains, e.g. torch's dropout) are compared too but do not count as met/missed."""
    out = []
    for impl in ours:
        mine = next(r for r in rows if r["impl"] == impl)
        for peer in ("dgl", "pyg"):
            candidates = peer_rows(rows, peer)
            if not candidates:
                continue
            best = min(candidates, key=lambda r: r["median_ms"])
            speedup = round(best["median_ms"] / mine["median_ms"], 3)  # met is judged on the figure shown
            gap = (best["test_acc"] - mine["test_acc"]) if "test_acc" in mine else None
            out.append({"impl": impl, "peer": best["impl"], "speedup": speedup,
                        "target": TARGETS[part][peer], "speed_met": speedup >= TARGETS[part][peer],
                        "accuracy_gap": None if gap is None else round(gap, 4),
                        "accuracy_met": gap is None or gap <= ACCURACY_TOLERANCE, "reference": impl in reference})
    return out


# ====================================================================== parts
def part_planetoid(args, pyg, dgl) -> dict:
    groups = []
    for name in args.datasets:
        ds = Planetoid(args.root, name)
        full_batch.check_input_paths_differ(ds.x)
        h = dataclasses.replace(PLANETOID_GAT, out_heads=args.out_heads)
        trainees = []
        for backend in args.planetoid_backends:
            for dense, label in ((False, " (sparse input projection)"), (True, " (dense input)")):
                torch.manual_seed(args.seed)
                trainees.append(full_batch.unigraph_trainee("gat", ds, h, backend, dense=dense, label=label))
        if pyg is not None:
            trainees += full_batch.pyg_trainees("gat", ds, h, pyg)
        if dgl is not None:
            trainees.append(full_batch.dgl_trainee("gat", ds, h, dgl))
        log(f"{name}: {len(trainees)} implementations, {args.planetoid_epochs} epochs")
        rows = full_batch.train_interleaved(trainees, args.planetoid_epochs, args.planetoid_warmup, log)
        dense = [r["impl"] for r in rows if r["impl"].endswith("(dense input)")]
        groups.append({"graph": name, "model": "gat", "rows": rows,
                       "targets": compare(rows, "planetoid", [r["impl"] for r in rows
                                                              if r["impl"].startswith("unigraph:auto")] or dense)})
    return {"groups": groups, "config": {"epochs": args.planetoid_epochs, "warmup": args.planetoid_warmup,
                                         "hyper": dataclasses.asdict(dataclasses.replace(PLANETOID_GAT, out_heads=args.out_heads))}}


def part_arxiv(args, pyg, dgl) -> dict:
    groups = []
    size = scaled(ARXIV_SIZE, args.arxiv_scale)
    for degrees in args.arxiv_degrees:
        ds = arxiv_like(**size, degrees=degrees, seed=args.seed)
        stats = ds.graph.stats()
        described = (f"arxiv_like({degrees}): {stats.num_src_nodes:,} nodes, {stats.num_edges:,} directed edges, "
                     f"max in-degree {stats.max_in_degree:,}, in-degree CV {stats.cv_in_degree:.2f}")
        log(described)
        for model in args.arxiv_models:
            h = ARXIV[model]
            trainees = []
            for backend in args.arxiv_backends:
                torch.manual_seed(args.seed)
                trainees.append(full_batch.unigraph_trainee(model, ds, h, backend))
            reference = []
            if args.torch_dropout_row:
                torch.manual_seed(args.seed)
                trainees.append(full_batch.unigraph_trainee(model, ds, h, args.arxiv_backends[0],
                                                            torch_dropout=True, label=" (torch dropout)"))
                reference.append(trainees[-1].name)
            ours = [t.name for t in trainees]
            if pyg is not None:
                trainees += full_batch.pyg_trainees(model, ds, h, pyg)
            if dgl is not None:
                trainees.append(full_batch.dgl_trainee(model, ds, h, dgl))
            log(f"{degrees} {model}: {len(trainees)} implementations, {args.arxiv_epochs} epochs")
            rows = full_batch.train_interleaved(trainees, args.arxiv_epochs, args.arxiv_warmup, log)
            groups.append({"graph": described, "model": model, "rows": rows,
                           "targets": compare(rows, "arxiv", ours, reference=tuple(reference))})
    return {"groups": groups, "config": {"size": size, "epochs": args.arxiv_epochs, "warmup": args.arxiv_warmup,
                                         "hyper": {m: dataclasses.asdict(h) for m, h in ARXIV.items()}}}


def part_minibatch(args, pyg, dgl) -> dict:
    w = mini_batch.Workload(scale=args.mb_scale, degrees=args.mb_degrees, batch_size=args.mb_batch_size, seed=args.seed)
    impls = ["unigraph"] + (["dgl"] if dgl is not None else []) + (["pyg"] if pyg is not None else [])
    needed = mini_batch.memory_needed(w, impls)
    available = environment.available_memory_gb()
    log(f"mini-batch workload {w.sizes()}: memory needed (estimate)\n{mini_batch.describe_memory(needed)}\n"
        f"  available now: {available} GiB")
    if available is not None and needed["peak"] / 2**30 > available and not args.mb_force:
        raise SystemExit(f"e2e minibatch: needs about {needed['peak'] / 2**30:.1f} GiB, {available} GiB is free; "
                         f"lower --mb-scale (memory grows linearly with it) or pass --mb-force")
    memory = {"start": environment.current_memory_gb()}
    ds = mini_batch.dataset(w)
    memory.update(after_generation=environment.current_memory_gb(), generation_peak=environment.peak_memory_gb())
    seeds = ds.train_mask.nonzero().flatten()
    batches = mini_batch.batches_per_epoch(seeds.numel(), w.batch_size, args.mb_batches)
    pipelines = [mini_batch.unigraph_pipeline(ds, seeds, w, batches)]
    if dgl is not None:
        pipelines.append(mini_batch.dgl_pipeline(ds, seeds, w, batches, dgl))
    if pyg is not None:
        pipelines += mini_batch.pyg_pipelines(ds, seeds, w, batches, pyg)
    stats = ds.graph.stats()
    memory["pipelines_built"] = environment.current_memory_gb()
    log(f"{stats.num_src_nodes:,} nodes, {stats.num_edges:,} edges, {seeds.numel():,} seeds, {batches} batches "
        f"per epoch, {len(pipelines)} pipelines; resident memory (GiB) {memory}")
    timed = mini_batch.run(pipelines, args.mb_epochs, args.mb_warmup_batches, log)
    memory.update(end=environment.current_memory_gb(), peak=environment.peak_memory_gb())
    log(f"resident memory (GiB) {memory}")
    rows = [{"impl": name, **t["epoch_ms"], "batch_median_ms": t["batch_ms"]["median_ms"],
             "batch_min_ms": t["batch_ms"]["min_ms"]} for name, t in timed.items()]
    graph = (f"arxiv_like({w.degrees}) at ogbn-products size x {w.scale}: {stats.num_src_nodes:,} nodes, "
             f"{stats.num_edges:,} directed edges, {ds.num_features} features, max in-degree {stats.max_in_degree:,}")
    return {"groups": [{"graph": graph, "model": "graphsage [15, 10, 5]", "rows": rows,
                        "targets": compare(rows, "minibatch", ["unigraph"])}],
            "config": {"workload": dataclasses.asdict(w), "sizes": w.sizes(), "batches_per_epoch": batches,
                       "full_epoch_batches": mini_batch.batches_per_epoch(seeds.numel(), w.batch_size, None),
                       "epochs": args.mb_epochs, "warmup_batches": args.mb_warmup_batches,
                       "hops": list(mini_batch.HOPS), "memory_estimate_bytes": needed,
                       "memory_measured_gb": memory}}


# ====================================================================== report
def _allocator_text(settings: dict) -> str:
    """malloc's settings, and unigraph's output pool (its bound; absent in files from before it)."""
    malloc = {k: v for k, v in settings.items() if k != "unigraph_output_pool_bytes"}
    text = "malloc: " + (", ".join(f"{k}={v}" for k, v in malloc.items()) or "glibc default")
    pool = settings.get("unigraph_output_pool_bytes")
    if pool is not None:
        text += f"; unigraph's output pool: {f'up to {pool / 2**30:.3g} GiB kept' if pool else 'off'}"
    return text


def markdown(result: dict) -> str:
    env, part = result["environment"], result["part"]
    m = env["machine"]
    unit = "ms / epoch" + (" (sum of its batches)" if part == "minibatch" else "")
    lines = [f"# End-to-end training: {part} ({m['device']})", "",
             f"Generated by `{env['command']}` on {result['started']} in {result['seconds']:.0f} s"
             + (" (**--quick smoke run: not a measurement**)" if result["quick"] else "") + ".", "",
             f"Machine: {m['cpu']}, {m['cpu_count']} cores, {m['memory_gb']} GiB; threads: "
             f"{environment.threads_text(env['threads'])}; {_allocator_text(env.get('allocator', {}))}; "
             f"load average at start / end {env['loadavg_start']} / {env['loadavg_end']}; peak memory "
             f"{env['peak_memory_gb']} GiB.", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v), "",
             bandwidth.describe(result["bandwidth"]) + ".", "",
             "Every implementation's epochs were interleaved (one of each in turn, rotating); times are the "
             "median (min - max) over the timed epochs after the warm-up.", ""]
    for group in result["groups"]:
        has_acc = any("test_acc" in r for r in group["rows"])
        lines += [f"## {group['model']} on {group['graph']}", ""]
        if part == "minibatch":
            c = result["config"]
            lines += [f"An epoch here is {c['batches_per_epoch']} batches of {c['workload']['batch_size']} seeds "
                      f"(a full pass over the training seeds is {c['full_epoch_batches']}); {c['epochs']} epochs after "
                      f"{c['warmup_batches']} warm-up batches.", ""]
        lines += [
                  f"| implementation | {unit} | min - max |" + (" test accuracy |" if has_acc else ""),
                  "|---|---|---|" + ("---|" if has_acc else "")]
        for r in group["rows"]:
            lines.append(f"| {r['impl']} | {r['median_ms']:.1f} | {r['min_ms']:.1f} - {r['max_ms']:.1f} |"
                         + (f" {r['test_acc']:.3f} |" if has_acc else ""))
        lines += ["", "| unigraph | vs (peer at its best) | speedup | target | met | peer accuracy minus ours |",
                  "|---|---|---|---|---|---|"]
        for t in group["targets"]:
            gap = "-" if t["accuracy_gap"] is None else f"{100 * t['accuracy_gap']:+.1f} pts" + (
                "" if t["accuracy_met"] else " (**not equal**)")
            met = "yes" if t["speed_met"] else "no" if t.get("reference") else "**MISSED**"
            lines.append(f"| {t['impl']} | {t['peer']} | {t['speedup']:.2f}x | >= {t['target']}x | "
                         f"{met + (' (reference row, not counted)' if t.get('reference') else '')} | {gap} |")
        lines.append("")
    missed = [t for g in result["groups"] for t in g["targets"]
              if not t.get("reference") and not (t["speed_met"] and t["accuracy_met"])]
    lines.append("**All targets met.**" if not missed else f"**{len(missed)} target comparison(s) missed.**")
    return "\n".join(lines) + "\n"


# ====================================================================== command line
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny sizes, few epochs (results go to scratch)")
    parser.add_argument("--threads", type=int, default=2, help="threads for torch, numba and DGL (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-peers", action="store_true", help="skip PyG and DGL")
    add_out_argument(parser)
    p = parser.add_argument_group("planetoid")
    p.add_argument("--root", type=pathlib.Path, default=DEFAULT_ROOT, help="folder with the Planetoid raw files")
    p.add_argument("--datasets", nargs="+", default=["cora", "citeseer"])
    p.add_argument("--planetoid-epochs", type=int, default=200)
    p.add_argument("--planetoid-warmup", type=int, default=5)
    p.add_argument("--planetoid-backends", nargs="+", default=["auto", "numba", "sparse", "scatter"])
    p.add_argument("--out-heads", type=int, default=1, help="heads of the last GAT layer (averaged)")
    a = parser.add_argument_group("arxiv")
    a.add_argument("--arxiv-models", nargs="+", default=list(full_batch.MODELS), choices=full_batch.MODELS)
    a.add_argument("--arxiv-degrees", nargs="+", default=["power_law", "uniform"], choices=["power_law", "uniform"])
    a.add_argument("--arxiv-scale", type=float, default=1.0, help="fraction of ogbn-arxiv's nodes and edges")
    a.add_argument("--arxiv-epochs", type=int, default=100)
    a.add_argument("--arxiv-warmup", type=int, default=3)
    a.add_argument("--arxiv-backends", nargs="+", default=["auto"])
    a.add_argument("--no-torch-dropout-row", dest="torch_dropout_row", action="store_false",
                   help="leave out the row of unigraph's model with torch's dropout masks")
    b = parser.add_argument_group("minibatch")
    b.add_argument("--mb-scale", type=float, default=1.0, help="fraction of ogbn-products' nodes and edges")
    b.add_argument("--mb-degrees", default="power_law", choices=["power_law", "uniform"])
    b.add_argument("--mb-epochs", type=int, default=3)
    b.add_argument("--mb-batch-size", type=int, default=1024, help="seeds per batch (default 1024)")
    b.add_argument("--mb-batches", type=int, help="batches per epoch (default: every training seed)")
    b.add_argument("--mb-warmup-batches", type=int, default=3)
    b.add_argument("--mb-force", action="store_true", help="run even when the memory estimate exceeds what is free")
    args = parser.parse_args(argv)
    if args.quick:
        args.planetoid_epochs, args.planetoid_warmup = min(args.planetoid_epochs, 6), 1
        args.arxiv_scale, args.arxiv_epochs, args.arxiv_warmup = min(args.arxiv_scale, 0.01), min(args.arxiv_epochs, 4), 1
        args.mb_scale, args.mb_epochs, args.mb_warmup_batches = min(args.mb_scale, 0.001), 1, 1
        args.mb_batches = min(args.mb_batches or 3, 3)
    if "planetoid" in args.parts and not args.root.is_dir():
        parser.error(f"--root {args.root} is not a folder with the Planetoid raw files (ind.cora.x ...); get them "
                     "from https://github.com/kimiyoung/planetoid or leave out --parts planetoid")
    finish_arguments(parser, args, ("planetoid_epochs", "arxiv_epochs", "mb_epochs", "mb_batch_size", "threads"))
    return args


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    pyg = None if args.no_peers else load_pyg()
    dgl = None if args.no_peers else load_dgl()
    environment.set_threads(args.threads, dgl)
    threads = sorted({1, args.threads})
    measured = bandwidth.stream(threads, elements=1 << 18 if args.quick else None, repeats=2 if args.quick else 5)
    log(bandwidth.describe(measured))
    results = {}
    for part in args.parts:
        started, t0 = datetime.datetime.now().isoformat(timespec="seconds"), time.perf_counter()
        env = environment.describe("python benchmarks/e2e.py " + " ".join(argv), "cpu", dgl)
        body = {"planetoid": part_planetoid, "arxiv": part_arxiv, "minibatch": part_minibatch}[part](args, pyg, dgl)
        result = {"benchmark": "e2e", "part": part, "quick": args.quick, "started": started,
                  "seconds": round(time.perf_counter() - t0, 1), "environment": environment.finish(env),
                  "bandwidth": measured, **body}
        text = markdown(result)
        output.write_report(result, args.out, f"e2e_{part}_cpu", text)
        print(text)
        results[part] = result
    log(f"wrote {', '.join(f'e2e_{p}_cpu' for p in args.parts)} (.json, .md) to {args.out}")
    return results


if __name__ == "__main__":
    main()
