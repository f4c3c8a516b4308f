"""Scaling of the partitioned runtime with the graph: memory, traffic and step time at several sizes,
against the written model (``benchmarks/dist_model.py``, docs/distributed.md), and the model's
extrapolation to DistDGL's graph (100M nodes, 3B edges, 16 machines).

For every size in ``--sizes`` (nodes; the graph and model of ``benchmarks/distributed.py``):
prepare the graph and its ``--parts`` METIS parts, run ``--parts`` machines x (server + trainer)
with a halo cache of ``--cache-share`` x each machine's nodes, and record each machine's peak PSS,
its shared blocks, the training traffic per epoch and the step time. The model's constants are
fitted at the **smallest** size only; the larger sizes are predictions checked against the runs.

    python benchmarks/dist_scaling.py --work /tmp/scaling --out benchmarks/results
        # 1M, 2M, 4M nodes (the 4M graph needs about 16-17 GiB while it is partitioned)
    python benchmarks/dist_scaling.py --quick      # 10k, 20k, 40k nodes (a smoke run, into scratch)
"""
from __future__ import annotations

import argparse
import datetime
import pathlib
import shutil
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import dist_model as model  # noqa: E402
from benchmarks import distributed as bench  # noqa: E402
from benchmarks import environment  # noqa: E402

MIB, GIB = 2**20, 2**30
EXTRAPOLATE = [(100e6, 3e9, m) for m in (4, 16, 64)]


def run_size(nodes: int, args, work: pathlib.Path) -> dict:
    """Prepare and run one size; returns the run's figures and its partition report."""
    from unigraph.train import launch  # noqa: PLC0415
    shared = {"nodes": nodes, "avg_degree": args.avg_degree, "features": args.features, "parts": args.parts,
              "method": "metis", "epochs": args.epochs, "batch_size": args.batch_size, "fanouts": args.fanouts,
              "prefetch": 2, "threads": 1, "work": str(work), "whole": False}
    work.mkdir(parents=True, exist_ok=True)
    prepared = bench.step_printer(f"prepare {nodes:,} nodes", lambda: launch(bench.prepare, 1, args=(shared,),
                                                                              timeout=6 * 3600.0)[0])
    seeds = sum(e["train"] for e in prepared["reports"]["parts"]["parts"])
    summaries = bench.step_printer(f"run {nodes:,} nodes", bench.partitioned, shared, "parts", args.parts,
                                   args.batch_size, int(args.cache_share * nodes / args.parts))
    run = bench.describe_run(summaries, args.epochs, seeds)
    run["parts"] = prepared["reports"]["parts"]["parts"]
    run["nodes"], run["edges"] = nodes, prepared["num_edges"]
    run["gradient_bytes"] = next(s["parameter_bytes"] for s in summaries if "epochs" in s)
    run["prepare_seconds"] = sum(prepared["timings"].values())
    if not args.keep_work:
        shutil.rmtree(work)
    return run


def table(runs: list[dict], args) -> tuple[list[str], model.Constants]:
    first = runs[0]
    graph = model.Graph(first["nodes"], first["edges"], args.features)
    constants = model.fit(first, graph, args.parts, bench.HIDDEN, first["gradient_bytes"])
    lines = ["| nodes | edges | machine PSS, measured | model | trainer peak RSS | RPC per epoch, measured | model | "
             "remote rows | cache hit rate | step (ms) |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
             "---: | ---: |"]
    for run in runs:
        g = model.Graph(run["nodes"], run["edges"], args.features)
        memory = model.memory_per_machine(g, args.parts, constants)
        traffic = model.bytes_per_epoch(run["seeds_per_epoch"], args.features, args.parts,
                                        args.batch_size * args.parts, constants)
        measured = max(m["pss_peak"] for m in run["machines"])
        step = sum(s["step_s"] for s in run["per_step"]) / len(run["per_step"])
        lines.append(f"| {run['nodes']:,} | {run['edges']:,} | {measured / MIB:,.0f} MiB | {memory / MIB:,.0f} MiB"
                     f"{' (fitted)' if run is first else ''} | {max(run['trainer_peak_rss_mib']):,} MiB | "
                     f"{run['rpc_bytes_per_epoch'] / MIB:,.1f} MiB | {traffic['rpc'] / MIB:,.1f} MiB"
                     f"{' (fitted)' if run is first else ''} | {100 * run['remote_row_share']:.1f}% | "
                     f"{run['cache_hit_rate'] or 0:.3f} | {1000 * step:.1f} |")
    return lines, constants


def extrapolation(constants: model.Constants, args) -> list[str]:
    lines = ["| nodes | edges | machines | shared blocks per machine | of which halo edges | memory per machine | "
             "RPC per machine per epoch (remote share as measured .. (M-1)/M) |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for nodes, edges, machines in EXTRAPOLATE:
        graph = model.Graph(nodes, edges, args.features)
        scaled = model.Constants(**{**constants.__dict__, "halo_edges": constants.halo_edges * (edges / nodes) /
                                    (args.avg_degree)})  # halo in-edges grow with the mean degree
        blocks = model.shared_bytes(graph, machines, scaled)
        seeds = 0.01 * nodes * 1.2   # ogbn-papers100M trains 1.2M of its 111M nodes: about 1.1%
        traffic = model.bytes_per_epoch(seeds, args.features, machines, 1024 * machines, scaled)
        worst = model.Constants(**{**scaled.__dict__, "remote_share": (machines - 1) / machines})  # random cut
        worst_traffic = model.bytes_per_epoch(seeds, args.features, machines, 1024 * machines, worst)
        lines.append(f"| {nodes / 1e6:,.0f}M | {edges / 1e9:,.0f}B | {machines} | {sum(blocks.values()) / GIB:,.1f} GiB | "
                     f"{4 * scaled.halo_edges * nodes / machines / GIB:,.1f} GiB | "
                     f"{model.memory_per_machine(graph, machines, scaled) / GIB:,.1f} GiB | "
                     f"{traffic['rpc'] / machines / 1e9:,.2f} .. {worst_traffic['rpc'] / machines / 1e9:,.2f} GB |")
    return lines


def markdown(result: dict, args) -> str:
    runs = result["runs"]
    lines, constants = table(runs, args)
    c = constants
    out = [f"# Scaling of the partitioned runtime ({result['date']})", "",
           f"{args.parts} machines (server + trainer each), METIS parts, halo cache {args.cache_share} x each machine's "
           f"nodes; planted-partition graphs of mean degree {args.avg_degree}, {args.features} features; GraphSAGE "
           f"hidden {bench.HIDDEN}, fanouts {args.fanouts}, batch {args.batch_size} per trainer, {args.epochs} epoch(s). "
           f"Load average at the start: {result['load_average']}"
           + ("" if result["quiet"] else " (**a loaded machine**: the step times are indicative only)") + ".", "",
           "The model (benchmarks/dist_model.py) is fitted at the smallest size; the rows below it are its "
           "predictions beside the measurements.", ""] + lines + [
           "", f"Fitted: fixed memory per machine C = {c.fixed_bytes / MIB:,.0f} MiB; halo {c.halo:.2f} nodes and "
           f"{c.halo_edges:.1f} in-edges per owned node; {c.rows_per_seed:.1f} feature rows per seed, "
           f"{100 * c.remote_share:.1f}% remote, cache hit rate {c.hit_rate:.3f}.", "",
           f"## Extrapolated to DistDGL's graph ({model.DISTDGL['nodes'] / 1e6:.0f}M nodes, "
           f"{model.DISTDGL['edges'] / 1e9:.0f}B edges)", "",
           "With the fitted constants (the halo ratios of this graph at 4 parts: more machines cut more edges, so "
           "read the halo as a lower bound), a training split of 1.2% of the nodes and a global batch of 1,024 per "
           "machine:", ""] + extrapolation(constants, args) + [
           "", f"DistDGL reports {model.DISTDGL['epoch_seconds']:.0f} s per epoch on {model.DISTDGL['machines']} machines "
           "for this size (its paper gives times, not memory per machine).", ""]
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=lambda t: [int(float(x)) for x in t.split(",")],
                        default=[1_000_000, 2_000_000, 4_000_000])
    parser.add_argument("--avg-degree", type=float, default=20.5)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--fanouts", type=lambda t: [int(x) for x in t.split(",")], default=[10, 5])
    parser.add_argument("--cache-share", type=float, default=1.0)
    parser.add_argument("--work", default="/tmp/unigraph-dist-scaling")
    parser.add_argument("--keep-work", action="store_true", help="keep each size's files (default: removed after)")
    parser.add_argument("--quick", action="store_true", help="10k, 20k, 40k nodes, 16 features (a smoke run)")
    environment.add_out_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.features, args.avg_degree, args.batch_size = [10_000, 20_000, 40_000], 16, 10.0, 64
    import torch  # noqa: PLC0415

    from unigraph.benchmarking import output  # noqa: PLC0415
    out = environment.out_dir(args)
    load = bench.settled_load(0.0 if args.quick else 240.0)
    runs = [run_size(nodes, args, pathlib.Path(args.work) / str(nodes)) for nodes in args.sizes]
    result = {"date": datetime.date.today().isoformat(), "config": {k: v for k, v in vars(args).items() if k != "out"},
              "machine": environment.machine(torch.device("cpu")), "versions": environment.versions(),
              "load_average": list(load) if load else None, "quiet": bench.is_quiet(load), "runs": runs}
    stem = "dist_scaling_cpu" + ("_quick" if args.quick else "")
    environment.write_report(result, out, stem, lambda result, path: output.write_text(path, markdown(result, args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
