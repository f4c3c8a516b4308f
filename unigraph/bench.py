"""``unigraph bench GRAPH``: time unigraph's backends (and DGL and PyG where importable) on your own
graph, for the ops a model uses, forward and forward+backward; say what ``auto`` picks and why.

    unigraph bench graph.pt                       # an edge_index / dict / PyG Data saved with torch.save
    unigraph bench adjacency.npz --model gcn      # a scipy.sparse.save_npz matrix or an edge_index .npz
    unigraph bench rmat:100000:16 --width 128     # a generated graph (rmat, uniform, arxiv_like)
    unigraph bench graph.bin --peers dgl          # a dgl.save_graphs file; DGL must import

For every op and mode the implementations are timed interleaved (round-robin repeats, see
:mod:`unigraph.benchmarking.timing`) after a warm-up that also checks every implementation's output
against unigraph's ``auto`` (a fast wrong answer is reported, never ranked). The table gives the
median ms (min-max), what ``auto`` picked and its regret against the fastest unigraph backend, the
fastest peer, and, with the bandwidth measured, the floor time and GB/s achieved
(:mod:`unigraph.benchmarking.traffic`). ``--out`` gets ``<name>.json`` (everything) and
``<name>.png`` (a bar chart; needs matplotlib). See ``docs/benchmarks.md``.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import pathlib
import sys
import time

import torch

import unigraph
from unigraph import backends as registry
from unigraph.benchmarking import bandwidth, environment, op_cases, output, traffic
from unigraph.benchmarking.graph_source import MAX_EDGES, MAX_FILE_BYTES, GraphSourceError, load
from unigraph.benchmarking.timing import Timing, interleaved
from unigraph.cli_parser import Parser

MODELS = ("gcn", "sage", "gat", "gin", "all")
PEERS = ("dgl", "pyg")
CHECK_RTOL = CHECK_ATOL = 1e-3  # sanity check of every output against auto's (float32 sums in any order)
# errors an implementation may raise on a case it cannot run (reported per implementation, not hidden)
RUN_ERRORS = (RuntimeError, NotImplementedError, TypeError, ValueError, MemoryError)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", help="a .pt/.npz/.npy edge_index, a scipy .npz, a saved PyG Data, a DGL graph "
                        "file, or a spec rmat:N:DEG / uniform:N:DEG / arxiv_like:N:DEG[:SEED]")
    parser.add_argument("--model", default="all", choices=MODELS, help="time the ops this model's layer uses "
                        "(gcn: u_mul_e/sum, sage: copy_u/mean, gat: gat, gin: copy_u/sum); default: all ops")
    parser.add_argument("--ops", nargs="+", choices=op_cases.OPS, help="these ops instead of --model's")
    parser.add_argument("--modes", nargs="+", default=list(op_cases.MODES), choices=op_cases.MODES)
    parser.add_argument("--width", type=int, default=64, help="feature width F (default 64)")
    parser.add_argument("--heads", type=int, default=8, help="attention heads for gat and edge_softmax (default 8)")
    parser.add_argument("--backends", nargs="+", help="unigraph backends to time (default: every one auto weighs "
                        "here); auto is always timed")
    parser.add_argument("--peers", nargs="*", choices=PEERS, help="peers to time (default: those importable; "
                        "a peer named here must import)")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per implementation (default 7)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    parser.add_argument("--min-run-ms", type=float, default=20.0, help="batch short calls until one run takes "
                        "this long (default 20)")
    parser.add_argument("--threads", type=int, help="CPU threads for torch, numba and DGL (default: torch's)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--no-bandwidth", action="store_true", help="skip the STREAM-like bandwidth measurement "
                        "(and the floor / GB/s columns)")
    parser.add_argument("--out", default="unigraph-bench", help="folder for <name>.json and <name>.png "
                        "(default: ./unigraph-bench)")
    parser.add_argument("--progress", default="auto", choices=["auto", "bar", "text", "off"],
                        help="auto (default): a tqdm bar on a terminal when tqdm is installed, text lines otherwise")
    parser.add_argument("--max-edges", type=int, default=MAX_EDGES, help=f"refuse larger graphs (default {MAX_EDGES:,})")
    parser.add_argument("--max-file-bytes", type=int, default=MAX_FILE_BYTES,
                        help=f"refuse larger files (default {MAX_FILE_BYTES:,})")
    parser.add_argument("--max-load-bytes", type=int, help="bytes a file may make the reader allocate beyond what it "
                        "stores (inflated .npz members, row pointers for num_nodes); default max(64 MiB, 64 x the "
                        "file's size), or UNIGRAPH_MAX_LOAD_BYTES (docs/security.md)")


# ---------------------------------------------------------------------- progress
class Progress:
    """A tqdm bar when wanted and installed (in rounds: one round times every implementation of a
    case once), else a text line per case, or nothing."""

    def __init__(self, cases: int, repeats: int, mode: str):
        tqdm_ok = importlib.util.find_spec("tqdm") is not None
        if mode == "bar" and not tqdm_ok:
            print("unigraph bench: --progress bar needs tqdm (pip install tqdm); showing text lines", file=sys.stderr)
        self.bar = None
        if tqdm_ok and (mode == "bar" or (mode == "auto" and sys.stderr.isatty())):
            from tqdm import tqdm
            self.bar = tqdm(total=cases * repeats, unit="round", file=sys.stderr)
        self.text = self.bar is None and mode != "off"
        self.cases, self.repeats, self.done_cases, self.runs, self.per_round = cases, repeats, 0, 0, 1

    def case(self, label: str, implementations: int) -> None:
        self.runs, self.per_round = 0, max(implementations, 1)
        if self.bar is not None:
            self.bar.set_description(label)
        elif self.text:
            print(f"[bench {self.done_cases + 1}/{self.cases}] {label}: {implementations} implementations",
                  file=sys.stderr, flush=True)

    def run_done(self, _name: str = "") -> None:
        self.runs += 1
        if self.bar is not None and self.runs % self.per_round == 0:
            self.bar.update(1)

    def case_done(self) -> None:
        self.done_cases += 1
        if self.bar is not None:
            self.bar.n = self.done_cases * self.repeats
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ---------------------------------------------------------------------- the run
def _peers(requested: list[str] | None, device: torch.device) -> tuple[object, bool, dict[str, str]]:
    """(DGL module or None, whether to time PyG, skipped peer -> reason). A peer named explicitly
    that cannot load raises; by default an unimportable peer is skipped with its reason."""
    skipped: dict[str, str] = {}
    wanted = PEERS if requested is None else tuple(requested)
    dgl_module = None
    if "dgl" in wanted:
        from unigraph._optional import require_dgl
        try:
            dgl_module = require_dgl("timing DGL in unigraph bench")
        except ImportError as err:
            if requested is not None:
                raise
            skipped["dgl"] = str(err).split(". ")[0]
    use_pyg = "pyg" in wanted
    if use_pyg and importlib.util.find_spec("torch_geometric") is None:
        if requested is not None:
            raise ImportError("--peers pyg needs torch_geometric: pip install torch_geometric")
        skipped["pyg"], use_pyg = "torch_geometric is not installed", False
    return dgl_module, use_pyg, skipped


def _backends(requested: list[str] | None) -> list[str] | None:
    """Validated ``--backends`` (ValueError/RuntimeError name an unknown or unavailable one)."""
    if requested is None:
        return None
    for name in requested:
        if name not in ("auto", "auto-tune"):
            registry.get(name)
    return [name for name in requested if name != "auto"]


def _close(out: torch.Tensor, reference: torch.Tensor) -> str | None:
    """None when ``out`` matches ``reference``, else what differs."""
    out, reference = out.detach().float(), reference.detach().float()
    if out.numel() != reference.numel():
        return f"output has {out.numel()} elements, auto's has {reference.numel()}"
    out, reference = out.reshape(reference.shape), reference
    if not torch.allclose(out, reference, rtol=CHECK_RTOL, atol=CHECK_ATOL, equal_nan=True):
        return f"output differs from auto's by up to {float((out - reference).abs().nan_to_num(math.inf).max()):.3g}"
    return None


def time_case(op: str, mode: str, g: unigraph.Graph, peers: op_cases.PeerGraphs, args, backends: list[str] | None,
              progress: Progress) -> dict:
    """Every implementation of one op in one mode: timings, auto's choice and reason, errors."""
    device = torch.device(args.device)
    leaves = op_cases.make_inputs(op, g, args.width, args.heads, device)
    decision = op_cases.explain(op, g, leaves, mode=mode)
    candidates = {c.name: c for c in decision.candidates}
    names = [c.name for c in decision.candidates if c.auto] if backends is None else backends
    forwards = {"auto": lambda: op_cases.unigraph_call(op, g, leaves)}
    not_run: dict[str, str] = {}
    for name in names:
        c = candidates.get(name)
        if c is not None and c.estimate_us is None:  # cannot run this call here: its reason is in the note
            not_run[name] = c.note
            continue
        forwards[name] = (lambda b=name: op_cases.unigraph_call(op, g, leaves, backend=b))
    forwards.update(op_cases.peer_calls(op, peers, leaves))
    with torch.no_grad():
        reference = forwards["auto"]()
    errors: dict[str, str] = {}
    calls = {}
    for name, forward in forwards.items():
        try:
            with torch.no_grad():
                problem = _close(forward(), reference)
            run = op_cases.in_mode(forward, leaves, mode)
            run()
        except RUN_ERRORS as err:  # reported in the table, the others still timed
            errors[name] = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
            continue
        if problem is not None:
            errors[name] = f"WRONG RESULT, not timed: {problem}"
            continue
        calls[name] = run
    progress.case(f"{op} {mode}", len(calls))
    sync = (lambda: environment.synchronize(device)) if device.type == "cuda" else None
    timings = interleaved(calls, args.repeats, warmup=args.warmup, min_run_s=args.min_run_ms / 1e3, sync=sync,
                          progress=progress.run_done)
    progress.case_done()
    return {"op": op, "mode": mode, "auto_choice": decision.backend, "auto_reason": decision.reason,
            "timings": {name: t.summary() for name, t in timings.items()}, "errors": errors, "not_run": not_run,
            "bytes": op_cases.traffic_of(op, traffic.Shape.of(g), args.width, args.heads, mode)}


def score(case: dict, gbps: float | None) -> None:
    """Add auto's regret, the fastest unigraph backend and peer, and the bandwidth figures to ``case``."""
    t = {name: Timing(s["runs_ms"], s["calls_per_run"]) for name, s in case["timings"].items()}
    ours = [n for n in t if n != "auto" and not n.startswith(("dgl", "pyg"))]
    theirs = [n for n in t if n.startswith(("dgl", "pyg"))]
    case["fastest_unigraph"] = min(ours, key=lambda n: t[n].median_ms) if ours else "auto"
    case["fastest_peer"] = min(theirs, key=lambda n: t[n].median_ms) if theirs else None
    best = t[case["fastest_unigraph"]].median_ms
    case["auto_regret"] = round(t["auto"].median_ms / best, 3) if "auto" in t else None
    if case["fastest_peer"] is not None:
        case["speedup_vs_fastest_peer"] = round(t[case["fastest_peer"]].median_ms / min(best, t["auto"].median_ms), 3)
    if gbps:
        case["floor_ms"] = float(f"{traffic.floor_ms(case['bytes'], gbps):.4g}")
        case["achieved_gbps"] = {n: float(f"{traffic.achieved_gbps(case['bytes'], t[n].median_ms):.4g}") for n in t}


def run(args) -> dict:
    started = time.perf_counter()
    device = torch.device(args.device)
    loaded = load(args.graph, max_file_bytes=args.max_file_bytes, max_edges=args.max_edges,
                  max_load_bytes=args.max_load_bytes)
    g = loaded.graph.to(device).prepare()
    dgl_module, use_pyg, skipped = _peers(args.peers, device)
    backends = _backends(args.backends)
    environment.set_threads(args.threads or torch.get_num_threads(), dgl_module)  # DGL gets torch's count
    env = environment.describe("unigraph " + " ".join(args.argv), device, dgl_module)
    peers = op_cases.PeerGraphs(g, dgl_module, use_pyg)
    skipped.update(peers.skipped)
    wanted_ops = args.ops or (op_cases.OPS if args.model == "all" else op_cases.MODEL_OPS[args.model])
    measured = None
    if not args.no_bandwidth and device.type == "cpu":
        threads = sorted({1, torch.get_num_threads()})
        print(f"[bench] measuring memory bandwidth (STREAM-like copy/triad, {threads} threads)", file=sys.stderr)
        measured = bandwidth.stream(threads, repeats=3)
    gbps = bandwidth.best_gbps(measured, torch.get_num_threads()) if measured else None
    progress = Progress(len(wanted_ops) * len(args.modes), args.repeats, args.progress)
    cases = []
    try:
        for op in wanted_ops:
            for mode in args.modes:
                case = time_case(op, mode, g, peers, args, backends, progress)
                score(case, gbps)
                cases.append(case)
    finally:
        progress.close()
    stats = g.stats()
    return {"benchmark": "unigraph bench", "graph": {"source": args.graph, "name": loaded.name,
                                                    "description": loaded.description,
                                                    "nodes": stats.num_src_nodes, "edges": stats.num_edges,
                                                    "mean_in_degree": round(stats.mean_in_degree, 3),
                                                    "max_in_degree": stats.max_in_degree,
                                                    "cv_in_degree": round(stats.cv_in_degree, 3)},
            "settings": {"model": args.model, "ops": list(wanted_ops), "modes": args.modes, "width": args.width,
                         "heads": args.heads, "repeats": args.repeats, "warmup": args.warmup,
                         "min_run_ms": args.min_run_ms, "device": str(device)},
            "environment": environment.finish(env), "bandwidth": measured, "bandwidth_gbps_used": gbps,
            "skipped_peers": skipped, "cases": cases, "seconds": round(time.perf_counter() - started, 1)}


# ---------------------------------------------------------------------- report
def table(result: dict) -> str:
    """The plain-text table ``unigraph bench`` prints."""
    impls = list(dict.fromkeys(n for c in result["cases"] for n in [*c["timings"], *c["errors"], *c["not_run"]]))
    g, env = result["graph"], result["environment"]
    lines = [f"graph: {g['description']}; in-degree mean {g['mean_in_degree']}, max {g['max_in_degree']}, "
             f"cv {g['cv_in_degree']}",
             f"F = {result['settings']['width']}, heads = {result['settings']['heads']}; median ms over "
             f"{result['settings']['repeats']} interleaved runs (min-max); threads: {environment.threads_text(env['threads'])}; "
             f"load average {env['loadavg_start']}"]
    if result["bandwidth"]:
        lines.append(bandwidth.describe(result["bandwidth"]))
    header = ["op", "mode", *impls, "auto picks", "regret", "vs fastest peer"]
    if result["bandwidth_gbps_used"]:
        header += ["floor ms", "GB/s (auto)"]
    rows = [header]
    for c in result["cases"]:
        cells = [c["op"], c["mode"]]
        for name in impls:
            if name in c["timings"]:
                s = c["timings"][name]
                cells.append(f"{s['median_ms']:.3g} ({s['min_ms']:.3g}-{s['max_ms']:.3g})")
            elif name in c["errors"]:
                cells.append("WRONG" if c["errors"][name].startswith("WRONG") else "error")
            else:
                cells.append("n/a")
        cells += [c["auto_choice"], "-" if c["auto_regret"] is None else f"{c['auto_regret']:.2f}x",
                  "-" if c.get("fastest_peer") is None else f"{c['speedup_vs_fastest_peer']:.2f}x ({c['fastest_peer']})"]
        if result["bandwidth_gbps_used"]:
            cells += [f"{c['floor_ms']:.3g}", f"{c['achieved_gbps'].get('auto', float('nan')):.1f}"]
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines += ["", *("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows), ""]
    lines.append("why auto picks what it picks (unigraph.explain):")
    for c in result["cases"]:
        if c["mode"] == result["settings"]["modes"][0]:
            lines.append(f"  {c['op']}: {c['auto_choice']} - {c['auto_reason']}")
    problems = [(c, n, msg) for c in result["cases"] for n, msg in {**c["errors"], **c["not_run"]}.items()]
    if problems:
        lines.append("not timed:")
        lines += sorted({f"  {n} on {c['op']} {c['mode']}: {msg}" for c, n, msg in problems})
    for peer, why in result["skipped_peers"].items():
        lines.append(f"skipped {peer}: {why}")
    lines.append("regret: auto's median over the fastest unigraph backend's; vs fastest peer: its median over the "
                 "faster of auto and the fastest unigraph backend" + ("; floor: the bytes the op must move at the "
                 "measured copy bandwidth (docs/benchmarks.md)" if result["bandwidth_gbps_used"] else ""))
    return "\n".join(lines)


def plot(result: dict, path: pathlib.Path) -> str | None:
    """A bar chart of median ms per case and implementation; None, or why there is no plot."""
    if importlib.util.find_spec("matplotlib") is None:
        return "no PNG plot: matplotlib is not installed (pip install matplotlib, or pip install 'unigraph[bench]')"
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cases = result["cases"]
    impls = list(dict.fromkeys(n for c in cases for n in c["timings"]))
    fig, ax = plt.subplots(figsize=(min(24.0, max(6.0, 0.9 * len(cases) + 2)), 4.5))
    step = 0.8 / max(len(impls), 1)
    for k, name in enumerate(impls):
        xs = [i + k * step for i, c in enumerate(cases) if name in c["timings"]]
        ys = [c["timings"][name]["median_ms"] for c in cases if name in c["timings"]]
        ax.bar(xs, ys, width=step, label=name)
    ax.set_xticks([i + 0.4 - step / 2 for i in range(len(cases))])
    ax.set_xticklabels([f"{c['op']}\n{c['mode']}" for c in cases], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("median ms (log)")
    ax.set_title(f"unigraph bench: {result['graph']['name']} ({result['graph']['edges']:,} edges), "
                 f"F = {result['settings']['width']}", fontsize=10)
    ax.legend(fontsize=7, ncol=min(4, len(impls)))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def _device_problem(device: str) -> str | None:
    """Why ``--device`` cannot run here (None when it can)."""
    try:
        parsed = torch.device(device)
    except RuntimeError:
        return f"--device must be cpu or cuda[:N], got {device!r}"
    if parsed.type not in ("cpu", "cuda"):
        return f"--device must be cpu or cuda[:N], got {device!r}"
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            return f"--device {device}: no CUDA GPU is visible here (torch {torch.__version__}); use --device cpu"
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            return f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)"
    return None


def run_command(parser: argparse.ArgumentParser, args, argv: list[str]) -> int:
    """``unigraph bench``: bad arguments and unreadable graphs end with exit status 2 and a message.
    ``argv`` is the command line after ``unigraph`` (recorded in the results)."""
    args.argv = argv
    for name, minimum in (("width", 1), ("heads", 1), ("repeats", 1), ("warmup", 1), ("max_edges", 1),
                          ("max_file_bytes", 1)):
        if getattr(args, name) < minimum:
            parser.error(f"--{name.replace('_', '-')} must be >= {minimum}, got {getattr(args, name)}")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    if args.max_load_bytes is not None and args.max_load_bytes < 1:
        parser.error(f"--max-load-bytes must be >= 1, got {args.max_load_bytes}")
    if not math.isfinite(args.min_run_ms) or args.min_run_ms < 0:
        parser.error(f"--min-run-ms must be a finite number >= 0, got {args.min_run_ms}")
    problem = _device_problem(args.device)
    if problem is not None:
        parser.error(problem)
    try:
        result = run(args)
    except (GraphSourceError, FileNotFoundError, ImportError) as err:
        parser.error(str(err))
    except (ValueError, RuntimeError) as err:  # a bad --backends / --width for the ops chosen
        parser.error(f"{type(err).__name__}: {err}")
    print(table(result))
    out = pathlib.Path(args.out)
    output.write_json(out / f"{result['graph']['name']}.json", result)
    note = plot(result, out / f"{result['graph']['name']}.png")
    print(f"\nwrote {out / result['graph']['name']}.json" + (f" and .png" if note is None else f"; {note}"))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="unigraph bench", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    argv = sys.argv[1:] if argv is None else argv
    return run_command(parser, parser.parse_args(argv), ["bench", *argv])


if __name__ == "__main__":
    sys.exit(main())
