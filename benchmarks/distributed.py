"""Training across machines, simulated on one: 4 trainer processes on a partitioned graph beside one
process training on the whole graph.

Workload: the planted-partition graph (``unigraph.data.planted_partition``: 4 classes, homophily
0.6, class separation 0.6) with ``--nodes`` nodes, mean degree ``--avg-degree`` (both directions of every edge are stored,
so the graph holds about ``nodes * avg_degree`` directed edges) and ``--features`` float32 features;
10% of the nodes train, 1% validate, 1% test. GraphSAGE (2 layers, hidden 128, no dropout),
fanouts ``--fanouts`` (layer order), Adam, ``--epochs`` epochs, the same global batch everywhere.

Runs, each in fresh processes (peak RSS is each process's own ``ru_maxrss``):

1. **prepare**: generate the graph; write it as a dataset file and as two partition sets (METIS,
   ``--parts`` parts; and 1 part). Not measured beyond its own time and RSS.
2. **single (Trainer)**: one process loads the dataset file and trains with
   :class:`unigraph.train.Trainer` (mini-batches over the whole in-memory graph, exact full-graph
   evaluation): how unigraph trains on one machine without partitions.
3. **single (same code)**: one process trains on the 1-part set with the distributed trainer (no
   remote rows, no halo): the same loop, so the difference to (4) is the partitioning alone.
4. **distributed**: ``--parts`` trainer processes, one partition each (gloo + torch.distributed.rpc
   over loopback), the global batch split over them.

Reported beside each other: peak RSS per process, test accuracy (evaluation exact, every in-edge,
in both (3)/(4) and (2)), training traffic between processes per epoch (RPC payloads: request ids,
sampled rows, feature rows; plus the DDP gradient all-reduce, estimated as a ring all-reduce,
``2 (P-1)/P`` times the gradient bytes per trainer per step), the remote-feature cache hit rate,
each step's time split into waiting for sampling, waiting for features, computing (forward,
backward, optimizer, all-reduce) and the rest, and training batches per second.

Memory, traffic and accuracy do not depend on the machine's load; the time shares and batches per
second do: taken on a shared machine they are labelled so in the results.

    python benchmarks/distributed.py --work /tmp/dist-work --out benchmarks/results
        # the committed run: 2M nodes, 41M edges (~25-35 min on 2 busy cores; about 10 GB of memory
        # while preparing); without --out the results go to benchmarks/results/scratch
    python benchmarks/distributed.py --work /tmp/dist-work --reuse-work   # again, on the prepared files
    python benchmarks/distributed.py --quick   # a smoke run on small sizes (into scratch)
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import sys
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `python benchmarks/distributed.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import environment  # noqa: E402 - after the path set-up above

HIDDEN = 128
TRAIN_SHARE, VAL_SHARE, TEST_SHARE = 0.10, 0.01, 0.01
CLASSES = 4
# A task that is not trivially easy (the generator's defaults give 99.9% test accuracy here, which
# would hide any accuracy difference): 60% of a node's edges stay in its class, and class centroids
# lie 0.6 apart against unit feature noise (GraphSAGE reaches about 70-80%).
HOMOPHILY, SEPARATION = 0.6, 0.6


# ---------------------------------------------------------------------------------------------- the steps
def prepare(args: dict) -> dict:
    """(In a child process.) The graph, saved as a dataset file and as two partition sets."""
    import torch  # noqa: PLC0415
    from unigraph.data import planted_partition  # noqa: PLC0415
    from unigraph.data.storage import save_dataset  # noqa: PLC0415
    from unigraph.distributed.partition import format_report, partition_dataset  # noqa: PLC0415
    from unigraph.distributed.train import peak_rss_bytes  # noqa: PLC0415

    began = time.perf_counter()
    n = args["nodes"]
    dataset = planted_partition(n, CLASSES, args["features"], avg_degree=args["avg_degree"], homophily=HOMOPHILY,
                                class_separation=SEPARATION, train_per_class=int(n * TRAIN_SHARE / CLASSES), num_val=int(n * VAL_SHARE),
                                num_test=int(n * TEST_SHARE), seed=0)
    generated = time.perf_counter() - began
    work = pathlib.Path(args["work"])
    save_dataset(dataset, work / "dataset.pt")
    timings = {"generate_s": generated}
    reports = {}
    for name, parts, method in (("parts", args["parts"], args["method"]), ("whole", 1, "random")):
        began = time.perf_counter()
        info = partition_dataset(dataset, parts, work / name, method=method)
        timings[f"partition_{name}_s"] = time.perf_counter() - began
        reports[name] = {"report": info.report, "method": info.method, "parts": info.parts,
                         "text": format_report(info)}
    del dataset
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return {"num_nodes": n, "timings": timings, "reports": reports, "peak_rss_bytes": peak_rss_bytes()}


def single_trainer(args: dict) -> dict:
    """(In a child process.) unigraph's Trainer on the whole dataset, loaded from its file."""
    from unigraph.data.storage import load_dataset  # noqa: PLC0415
    from unigraph.distributed.train import peak_rss_bytes  # noqa: PLC0415
    from unigraph.train import Trainer, build_node_classifier, seed_everything  # noqa: PLC0415

    dataset = load_dataset(pathlib.Path(args["work"]) / "dataset.pt")
    config = train_config(args, args["batch_size"] * args["parts"])
    seed_everything(config.seed)
    model = build_node_classifier("sage", dataset.num_features, dataset.num_classes, hidden_channels=HIDDEN,
                                  dropout=0.0)
    began = time.perf_counter()
    result = Trainer(model, dataset, config).fit()
    return {"test_acc": result.test_acc, "val_acc": result.best_val_acc, "losses": result.losses,
            "seconds": time.perf_counter() - began, "peak_rss_bytes": peak_rss_bytes()}


def train_config(args: dict, batch_size: int):
    from unigraph.train import TrainConfig  # noqa: PLC0415
    return TrainConfig(epochs=args["epochs"], lr=0.003, weight_decay=0.0, batch_size=batch_size,
                       fanouts=tuple(args["fanouts"]), patience=None, restore_best=False, progress="off",
                       eval_every=args["epochs"], seed=0, timeout=1800.0)


def partitioned(args: dict, name: str, processes: int, batch_size: int, cache_size: int) -> list[dict]:
    from unigraph.distributed.train import DistJobSpec, run_partitioned_job  # noqa: PLC0415
    from unigraph.train import launch  # noqa: PLC0415
    from unigraph.train.job import ModelSpec  # noqa: PLC0415

    spec = DistJobSpec(str(pathlib.Path(args["work"]) / name), ModelSpec("sage", 2, HIDDEN, None, 0.0),
                       train_config(args, batch_size), cache_size=cache_size, prefetch=args["prefetch"],
                       eval_batch_size=args["eval_batch_size"], threads=args["threads"])
    summaries = launch(run_partitioned_job, processes, args=(spec,), timeout=6 * 3600.0, threads=args["threads"])
    for summary in summaries:
        summary.pop("model_state", None)
    return summaries


# ---------------------------------------------------------------------------------------------- the report
def per_step(summary: dict) -> dict:
    """Seconds per training step: waiting for sampling, waiting for features, computing, the rest."""
    timing, loader = summary["timing"], summary["loader"]
    steps = max(timing["steps"], 1)
    waits = {"sampling": loader["sample_wait"] / steps, "fetching": loader["fetch_wait"] / steps,
             "computing": timing["compute"] / steps}
    total = timing["train_seconds"] / steps
    waits["other"] = max(total - sum(waits.values()), 0.0)
    return {"step_s": total, "shares": {k: v / total for k, v in waits.items()},
            "batches_per_s": steps / timing["train_seconds"], "sampling_work_s": loader["sample_work"] / steps}


def describe_run(summaries: list[dict], epochs: int, seeds_per_epoch: int) -> dict:
    """One run's figures; traffic and rows are training only (evaluation excluded), per epoch."""
    trainers = [s for s in summaries if "epochs" in s]
    parameters = trainers[0]["parameter_bytes"]
    world = len(trainers)
    steps_per_epoch = trainers[0]["num_batches"]
    samplers = [s for s in summaries if "epochs" not in s]

    def total(name: str) -> float:
        return sum(s["training"][name] for s in trainers) / epochs
    sampler_requests = sum(s["traffic"]["bytes_sent"] + s["traffic"]["bytes_received"] for s in samplers) / epochs
    rows, remote = total("rows"), total("remote_rows")
    return {"processes": len(summaries), "peak_rss_mib": [round(s["peak_rss_bytes"] / 2**20) for s in summaries],
            "test_acc": trainers[0]["test_acc"], "val_acc": trainers[0]["best_val_acc"],
            "losses": trainers[0]["losses"], "steps_per_epoch": steps_per_epoch, "seeds_per_epoch": seeds_per_epoch,
            "rpc_bytes_per_epoch": total("bytes") + sampler_requests,
            "feature_bytes_per_epoch": total("feature_bytes"), "sample_bytes_per_epoch": total("sample_bytes"),
            "all_reduce_bytes_per_epoch_estimate": 2 * (world - 1) * parameters * steps_per_epoch,
            "rows_per_seed": rows / seeds_per_epoch, "remote_row_share": remote / rows if rows else 0.0,
            "cache_rows_per_trainer": trainers[0]["cache"]["cached_rows"],
            "cache_hit_rate": total("cache_hits") / remote if remote else None,
            "per_step": [per_step(s) for s in trainers], "fit_seconds": trainers[0]["seconds"]}


def markdown(result: dict) -> str:
    single, same, dist = result["single_trainer"], result["single_same_code"], result["distributed"]
    p = result["config"]["parts"]
    rss_single = single["peak_rss_bytes"] / 2**20
    rss_same = max(same["peak_rss_mib"])
    rss_dist = max(dist["peak_rss_mib"])
    mib = 2**20
    lines = [f"# Distributed training: {p} processes on a partitioned graph vs one process ({result['date']})", "",
             f"Graph: planted partition, {result['prepare']['num_nodes']:,} nodes, "
             f"{result['graph_edges']:,} directed edges, {result['config']['features']} float32 features; "
             f"GraphSAGE 2 layers, hidden {HIDDEN}, fanouts {result['config']['fanouts']}, "
             f"global batch {result['config']['batch_size'] * p}, {result['config']['epochs']} epoch(s). "
             f"Machine: {result['machine']['cpu']} ({result['machine']['cpu_count']} cores), "
             f"torch {result['versions']['torch']}.", "",
             "## Memory, accuracy, traffic (independent of the machine's load)", "",
             "| run | processes | peak RSS per process (MiB) | test accuracy |",
             "| --- | ---: | --- | ---: |",
             f"| single process, unigraph Trainer (whole graph in memory) | 1 | {rss_single:.0f} | "
             f"{single['test_acc']:.4f} |",
             f"| single process, same code as distributed (1 partition) | 1 | {rss_same} | {same['test_acc']:.4f} |",
             f"| distributed ({p} partitions, METIS) | {p} | {', '.join(map(str, dist['peak_rss_mib']))} | "
             f"{dist['test_acc']:.4f} |", "",
             f"Largest distributed process / single process: **{rss_dist / rss_single:.3f}** of the Trainer run, "
             f"{rss_dist / rss_same:.3f} of the same-code run (target <= 0.4). Test accuracy difference: "
             f"{100 * (dist['test_acc'] - single['test_acc']):+.2f} points vs the Trainer run, "
             f"{100 * (dist['test_acc'] - same['test_acc']):+.2f} vs the same-code run (target within 1).", "",
             f"Traffic per training epoch (all processes together): RPC payloads "
             f"{dist['rpc_bytes_per_epoch'] / mib:.1f} MiB (feature rows {dist['feature_bytes_per_epoch'] / mib:.1f}, "
             f"sampling {dist['sample_bytes_per_epoch'] / mib:.1f}), DDP gradient all-reduce (estimated) "
             f"{dist['all_reduce_bytes_per_epoch_estimate'] / mib:.1f} MiB; single process: 0. "
             f"{dist['seeds_per_epoch']:,} training seeds per epoch, {dist['rows_per_seed']:.1f} feature rows "
             f"gathered per seed, {100 * dist['remote_row_share']:.1f}% of them owned by another partition. "
             f"Remote-feature cache: {dist['cache_rows_per_trainer']} rows per trainer, hit rate "
             f"{dist['cache_hit_rate'] if dist['cache_hit_rate'] is None else round(dist['cache_hit_rate'], 3)}.", "",
             f"## Time per step ({'quiet machine' if result.get('quiet') else 'TAKEN ON A LOADED MACHINE: indicative only'})",
             "",
             "| run | step (ms) | waiting for sampling | waiting for features | computing | other | batches/s |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, run in (("single, same code", same), *((f"distributed, trainer {i}", {"per_step": [s]})
                                                      for i, s in enumerate(dist["per_step"]))):
        s = run["per_step"][0]
        sh = s["shares"]
        lines.append(f"| {name} | {1000 * s['step_s']:.1f} | {sh['sampling']:.2f} | {sh['fetching']:.2f} | "
                     f"{sh['computing']:.2f} | {sh['other']:.2f} | {s['batches_per_s']:.2f} |")
    lines += ["", f"Load average when the timed runs started: {result['load_average']}.", "",
              "Partition report:", "", "```", result["prepare"]["reports"]["parts"]["text"], "```", ""]
    return "\n".join(lines)


def is_quiet(load: tuple[float, ...] | None) -> bool:
    """A machine is quiet for timing when, as the timed runs start, the 1-minute load average is
    under half its cores (other programs then use less than half of it)."""
    return load is not None and load[0] < 0.5 * (os.cpu_count() or 1)


def settled_load(longest_s: float = 240.0) -> tuple[float, ...] | None:
    """The load average once the preparation's own processes have faded from it (the 1-minute
    average decays by e per minute): wait up to ``longest_s`` for a quiet reading, then return the
    last one, quiet or not, so a machine busy with other programs is still labelled loaded."""
    deadline = time.monotonic() + longest_s
    load = environment.load_average()
    while not is_quiet(load) and load is not None and time.monotonic() < deadline:
        time.sleep(10)
        load = environment.load_average()
    return load


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--avg-degree", type=float, default=20.5)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument("--method", default="metis")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=256, help="seeds per trainer per step (the single "
                        "process takes parts x this)")
    parser.add_argument("--fanouts", type=lambda t: [int(x) for x in t.split(",")], default=[10, 5])
    parser.add_argument("--eval-batch-size", type=int, default=128)
    parser.add_argument("--cache-share", type=float, default=0.05, help="remote rows cached per trainer, as a share "
                        "of the nodes it owns (default 0.05)")
    parser.add_argument("--prefetch", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per process (default 1)")
    parser.add_argument("--work", default=None, help="scratch directory (default: a new one under /tmp)")
    environment.add_out_argument(parser)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--reuse-work", action="store_true", help="skip the prepare step: --work already holds "
                        "what an earlier run with the same sizes prepared (e.g. to re-time on a quiet machine)")
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.avg_degree, args.features, args.batch_size = 20_000, 10.0, 16, 64
    import tempfile  # noqa: PLC0415

    import torch  # noqa: PLC0415

    from benchmarks.environment import load_average, machine, versions  # noqa: PLC0415
    from unigraph.benchmarking import output  # noqa: PLC0415
    from unigraph.train import launch  # noqa: PLC0415

    out = environment.out_dir(args)  # a --quick run aimed at the committed results is refused before any work
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="unigraph-dist-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    config = {k: v for k, v in vars(args).items() if k not in ("work", "out")}
    shared = {**config, "work": str(work)}

    def step(name, function, *extra):
        began = time.perf_counter()
        print(f"[distributed benchmark] {name} ...", flush=True)
        value = function(*extra)
        print(f"[distributed benchmark] {name}: {time.perf_counter() - began:.0f} s", flush=True)
        return value

    if args.reuse_work:
        prepared = json.loads((work / "prepared.json").read_text())
        if {k: prepared["config"][k] for k in ("nodes", "avg_degree", "features", "parts", "method")} != \
                {k: config[k] for k in ("nodes", "avg_degree", "features", "parts", "method")}:
            raise SystemExit(f"{work} was prepared with {prepared['config']}; rerun without --reuse-work")
    else:
        prepared = step("prepare (generate, save, partition)", lambda: launch(prepare, 1, args=(shared,),
                                                                              timeout=6 * 3600.0)[0])
        prepared["config"] = config
        (work / "prepared.json").write_text(json.dumps(prepared))
    load = settled_load(0.0 if args.quick else 240.0)
    single = step("single process, Trainer", lambda: launch(single_trainer, 1, args=(shared,), timeout=6 * 3600.0,
                                                             threads=args.threads)[0])
    owned = args.nodes // args.parts
    same = step("single process, same code", partitioned, shared, "whole", 1, args.batch_size * args.parts, 0)
    dist = step(f"distributed, {args.parts} processes", partitioned, shared, "parts", args.parts, args.batch_size,
                int(args.cache_share * owned))
    seeds = sum(e["train"] for e in prepared["reports"]["parts"]["parts"])
    result = {"date": datetime.date.today().isoformat(), "config": config, "machine": machine(torch.device("cpu")),
              "versions": versions(), "load_average": list(load) if load else None, "prepare": prepared,
              "graph_edges": sum(e["edges"] for e in prepared["reports"]["parts"]["parts"]),
              "single_trainer": single, "single_same_code": describe_run(same, args.epochs, seeds),
              "distributed": describe_run(dist, args.epochs, seeds),
              "quiet": is_quiet(load)}
    result["timing_note"] = ("taken on a quiet machine" if result["quiet"] else
                             "time shares and batches/s were taken on a loaded machine: indicative only")
    stem = "distributed_cpu" + ("_quick" if args.quick else "")
    environment.write_report(result, out, stem, lambda result, path: output.write_text(path, markdown(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
