"""Training across machines, simulated on one: partitioned runs beside one process on the whole graph.

Workload: the planted-partition graph (``unigraph.data.planted_partition``: 4 classes, homophily
0.6, class separation 0.6) with ``--nodes`` nodes, mean degree ``--avg-degree`` (both directions of
every edge are stored, so the graph holds about ``nodes * avg_degree`` directed edges) and
``--features`` float32 features; 10% of the nodes train, 1% validate, 1% test. GraphSAGE (2 layers,
hidden 128, no dropout), fanouts ``--fanouts`` (layer order), Adam, ``--epochs`` epochs, the same
global batch everywhere. **Every run evaluates layer-wise** (``unigraph.train.inference``: exact,
one layer at a time in batches of at most 65,536 in-edges, never the whole graph at once), once,
after the last epoch.

Runs, each in fresh processes:

1. **prepare**: generate the graph; write it as a dataset file and as two partition sets (METIS,
   ``--parts`` parts, balance checked per part; and 1 part). Not measured beyond its time and RSS.
2. **single (Trainer)**: one process loads the dataset file and trains with
   :class:`unigraph.train.Trainer` (mini-batches over the whole in-memory graph, layer-wise evaluation).
   Its *training peak* is its peak RSS when evaluation starts.
3. **single (same code)**: 1 machine on the 1-part set (a graph server and one trainer): the
   partitioned code with no remote rows.
4. **distributed**: ``--parts`` machines, each a graph server (one part in shared memory, a halo
   feature cache of ``--cache-share`` x its nodes) and one trainer (gloo + torch.distributed.rpc over
   loopback), the global batch split over the trainers.
5. **machines**: 2 machines (``--parts``/2 parts each) x (``--trainers-per-machine`` trainers, each
   with a sampler process): the machine's memory against one copy of its partition plus the
   processes' working sets.

Memory (``unigraph.distributed.memory``): RSS counts a shared page in every process that maps it,
so per process the peak RSS (``ru_maxrss``) is given and per machine the peak of the summed PSS
(sampled every 0.25 s by the machine's server; the single process samples itself). Ratios are
given against the single process's training peak *and* against the same-code run. Traffic: RPC
payloads per training epoch (evaluation excluded), and what the halo saved in the same run: halo
rows sampled here instead of asked for, and cached feature rows (each an 8-byte id out and a row
back): the same batches without the halo would have moved the sum.

Memory, traffic and accuracy do not depend on the machine's load; the time shares do: taken on a
shared machine they are labelled so in the results.

    python benchmarks/distributed.py --work /tmp/dist-work --out benchmarks/results
        # the committed run: 2M nodes, 41M edges (about 8-10 GiB of memory while preparing)
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
# The RPC payload per training epoch of the run committed before the halo (2M nodes, 4 METIS parts,
# no halo edges, 25,000 cached rows by out-degree): benchmarks/results/distributed_cpu.md of 2026-11-23.
BEFORE_HALO = {"nodes": 2_000_000, "parts": 4, "rpc_bytes_per_epoch": 3205.8 * 2**20}
MIB = 2**20


# ---------------------------------------------------------------------------------------------- the steps
def prepare(args: dict) -> dict:
    """(In a child process.) The graph, saved as a dataset file and as two partition sets."""
    from unigraph.data import planted_partition  # noqa: PLC0415
    from unigraph.data.storage import save_dataset  # noqa: PLC0415
    from unigraph.distributed.partition import format_report, partition_dataset  # noqa: PLC0415
    from unigraph.distributed.train import peak_rss_bytes  # noqa: PLC0415

    began = time.perf_counter()
    n = args["nodes"]
    dataset = planted_partition(n, CLASSES, args["features"], avg_degree=args["avg_degree"], homophily=HOMOPHILY,
                                class_separation=SEPARATION, train_per_class=int(n * TRAIN_SHARE / CLASSES),
                                num_val=int(n * VAL_SHARE), num_test=int(n * TEST_SHARE), seed=0)
    generated = time.perf_counter() - began
    work = pathlib.Path(args["work"])
    save_dataset(dataset, work / "dataset.pt")
    timings = {"generate_s": generated}
    reports = {}
    sets = (("parts", args["parts"], args["method"]), ("whole", 1, "random"))
    for name, parts, method in sets if args.get("whole", True) else sets[:1]:
        began = time.perf_counter()
        info = partition_dataset(dataset, parts, work / name, method=method)
        timings[f"partition_{name}_s"] = time.perf_counter() - began
        reports[name] = {"report": info.report, "method": info.method, "parts": info.parts,
                         "text": format_report(info)}
    return {"num_nodes": n, "num_edges": dataset.graph.num_edges, "timings": timings, "reports": reports,
            "peak_rss_bytes": peak_rss_bytes()}


def single_trainer(args: dict) -> dict:
    """(In a child process.) unigraph's Trainer on the whole dataset, loaded from its file."""
    from unigraph.data.storage import load_dataset  # noqa: PLC0415
    from unigraph.distributed.memory import MemoryMonitor  # noqa: PLC0415
    from unigraph.distributed.train import peak_rss_bytes  # noqa: PLC0415
    from unigraph.train import Trainer, build_node_classifier, seed_everything  # noqa: PLC0415

    monitor = MemoryMonitor(pids=[os.getpid()]).start()
    dataset = load_dataset(pathlib.Path(args["work"]) / "dataset.pt")
    config = train_config(args, args["batch_size"] * args["parts"])
    seed_everything(config.seed)
    model = build_node_classifier("sage", dataset.num_features, dataset.num_classes, hidden_channels=HIDDEN,
                                  dropout=0.0)
    trainer = Trainer(model, dataset, config)
    at_evaluation = {}
    evaluate = trainer.evaluate

    def evaluate_and_note():
        if not at_evaluation:
            at_evaluation.update(rss=peak_rss_bytes(), pss=dict(monitor.sample()), pss_peak=dict(monitor.peak))
        return evaluate()
    trainer.evaluate = evaluate_and_note
    began = time.perf_counter()
    result = trainer.fit()
    memory = monitor.stop()
    return {"test_acc": result.test_acc, "val_acc": result.best_val_acc, "losses": result.losses,
            "seconds": time.perf_counter() - began, "peak_rss_bytes": peak_rss_bytes(),
            "peak_rss_train_bytes": at_evaluation["rss"], "peak_pss_train_bytes": at_evaluation["pss_peak"]["Pss"],
            "peak_pss_bytes": memory["peak"]["Pss"]}


def train_config(args: dict, batch_size: int):
    from unigraph.train import TrainConfig  # noqa: PLC0415
    return TrainConfig(epochs=args["epochs"], lr=0.003, weight_decay=0.0, batch_size=batch_size,
                       fanouts=tuple(args["fanouts"]), patience=None, restore_best=False, progress="off",
                       eval_every=args["epochs"], seed=0, timeout=1800.0, evaluation="layerwise")


def partitioned(args: dict, name: str, machines: int, batch_size: int, cache_size: int, trainers: int = 1,
                samplers: int = 0) -> list[dict]:
    from unigraph.distributed.job import DistJobSpec, run_partitioned_job  # noqa: PLC0415
    from unigraph.train import launch  # noqa: PLC0415
    from unigraph.train.job import ModelSpec  # noqa: PLC0415

    spec = DistJobSpec(str(pathlib.Path(args["work"]) / name), ModelSpec("sage", 2, HIDDEN, None, 0.0),
                       train_config(args, batch_size), trainers_per_machine=trainers, num_samplers=samplers,
                       cache_size=cache_size, prefetch=args["prefetch"], threads=args["threads"])
    processes = machines * (1 + trainers * (1 + samplers))
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


def machine_memory(server: dict) -> dict:
    """A machine's memory from its server's summary: the peak of the summed PSS, the USS of its
    processes at that moment, one copy of the shared blocks, and the ratio of the first to the
    sum of the other two (1.0: nothing but one copy and the working sets)."""
    memory = server["machine_memory"]
    at_peak = memory["at_peak"] or memory["peak"]
    shared = sum(memory["shared_bytes_at_peak"].values())
    pss, uss = at_peak.get("Pss", 0), at_peak.get("Uss", 0)
    return {"machine": server["machine"], "pss_peak": memory["peak"].get("Pss", 0), "pss_at_peak": pss,
            "uss_at_peak": uss, "shmem_pss_at_peak": at_peak.get("Pss_Shmem", 0),
            "file_pss_at_peak": at_peak.get("Pss_File", 0), "rss_sum_at_peak": at_peak.get("Rss", 0),
            "shared_bytes": memory["shared_bytes"], "shared_bytes_at_peak": memory["shared_bytes_at_peak"],
            "one_copy_plus_working_sets": shared + uss,
            "ratio": pss / (shared + uss) if shared + uss else None,
            "processes": {name: {k: peaks.get(k, 0) for k in ("Pss", "Uss", "Rss", "Pss_Shmem")}
                          for name, peaks in memory["processes"].items()}}


def describe_run(summaries: list[dict], epochs: int, seeds_per_epoch: int) -> dict:
    """One run's figures; traffic and rows are training only (evaluation excluded), per epoch."""
    trainers = [s for s in summaries if "epochs" in s]
    servers = [s for s in summaries if "machine_memory" in s]
    samplers = [s for s in summaries if s.get("kind") == "sampler"]
    parameters = trainers[0]["parameter_bytes"]
    world = len(trainers)
    steps_per_epoch = trainers[0]["num_batches"]

    def total(name: str) -> float:
        return sum(s["training"].get(name, 0) for s in trainers) / epochs
    sampler_requests = sum(s["traffic"]["bytes_sent"] + s["traffic"]["bytes_received"] for s in samplers) / epochs
    rows, remote = total("rows"), total("remote_rows")
    rpc = total("bytes") + sampler_requests
    saved = total("cache_saved_bytes") + total("halo_sample_saved_bytes")
    return {"processes": len(summaries), "trainers": world,
            "peak_rss_mib": [round(s["peak_rss_bytes"] / MIB) for s in summaries],
            "kinds": [s.get("kind", "trainer") for s in summaries],
            "trainer_peak_rss_mib": [round(s["peak_rss_bytes"] / MIB) for s in trainers],
            "trainer_peak_rss_train_mib": [round(s["timing"]["peak_rss_train"] / MIB) for s in trainers],
            "trainer_resident_mib": [{when: {kind: round(v / MIB) for kind, v in s["timing"].get(f"resident_{when}", {}).items()}
                                      for when in ("train", "eval")} for s in trainers],
            "machines": [machine_memory(s) for s in servers],
            "test_acc": trainers[0]["test_acc"], "val_acc": trainers[0]["best_val_acc"],
            "losses": trainers[0]["losses"], "steps_per_epoch": steps_per_epoch, "seeds_per_epoch": seeds_per_epoch,
            "rpc_bytes_per_epoch": rpc, "feature_bytes_per_epoch": total("feature_bytes"),
            "sample_bytes_per_epoch": total("sample_bytes"),
            "halo_saved": {"sampled_rows": total("halo_sample_rows"), "sample_bytes": total("halo_sample_saved_bytes"),
                           "cached_rows": total("cache_hits"), "feature_bytes": total("cache_saved_bytes")},
            "rpc_bytes_without_halo_per_epoch": rpc + saved,
            "all_reduce_bytes_per_epoch_estimate": 2 * (world - 1) * parameters * steps_per_epoch,
            "rows_per_seed": rows / seeds_per_epoch, "remote_row_share": remote / rows if rows else 0.0,
            "cache_rows_per_machine": trainers[0]["cache"]["cached_rows"],
            "cache_hit_rate": total("cache_hits") / remote if remote else None,
            "per_step": [per_step(s) for s in trainers], "fit_seconds": trainers[0]["seconds"],
            "eval_seconds": trainers[0]["timing"]["eval_seconds"]}


def ratios(result: dict) -> dict:
    """Every memory ratio of the report, against both baselines."""
    single, same, dist = result["single_trainer"], result["single_same_code"], result["distributed"]
    trainer_peak = max(dist["trainer_peak_rss_mib"]) * MIB
    machine_pss = max(m["pss_peak"] for m in dist["machines"])
    same_machine = max(m["pss_peak"] for m in same["machines"])
    return {"trainer_rss_vs_single_training_rss": trainer_peak / single["peak_rss_train_bytes"],
            "trainer_training_rss_vs_single_training_rss": max(dist["trainer_peak_rss_train_mib"]) * MIB /
            single["peak_rss_train_bytes"],
            "trainer_rss_vs_single_peak_rss": trainer_peak / single["peak_rss_bytes"],
            "trainer_rss_vs_same_code_trainer_rss": trainer_peak / (max(same["trainer_peak_rss_mib"]) * MIB),
            "machine_pss_vs_single_training_pss": machine_pss / single["peak_pss_train_bytes"],
            "machine_pss_vs_single_peak_pss": machine_pss / single["peak_pss_bytes"],
            "machine_pss_vs_same_code_machine_pss": machine_pss / same_machine}


def markdown(result: dict) -> str:
    single, same, dist, machines = (result["single_trainer"], result["single_same_code"], result["distributed"],
                                    result["machines"])
    config = result["config"]
    p = config["parts"]
    r = ratios(result)
    quiet = result.get("quiet")
    lines = [f"# Distributed training: {p} machines on a partitioned graph vs one process ({result['date']})", "",
             f"Graph: planted partition, {result['prepare']['num_nodes']:,} nodes, {result['graph_edges']:,} "
             f"directed edges, {config['features']} float32 features; GraphSAGE 2 layers, hidden {HIDDEN}, fanouts "
             f"{config['fanouts']}, global batch {config['batch_size'] * p}, {config['epochs']} epoch(s), "
             "layer-wise evaluation (exact) in every run. "
             f"Machine: {result['machine']['cpu']} ({result['machine']['cpu_count']} cores), torch "
             f"{result['versions']['torch']}. Load average when the timed runs started: {result['load_average']}"
             + ("" if quiet else " (**a loaded machine**: memory, traffic and accuracy hold; the times do not)") + ".",
             "", "## Memory and accuracy", "",
             "| run | processes | peak RSS per process (MiB) | trainers' RSS when evaluation began (MiB) | "
             "machine PSS at its peak (MiB) | test accuracy |", "| --- | ---: | --- | --- | --- | ---: |",
             f"| 1 process, unigraph Trainer (whole graph in memory) | 1 | {single['peak_rss_bytes'] / MIB:.0f} | "
             f"{single['peak_rss_train_bytes'] / MIB:.0f} | {single['peak_pss_bytes'] / MIB:.0f} | "
             f"{single['test_acc']:.4f} |"]
    for name, run in (("1 machine, the partitioned code on a 1-part set (server + trainer)", same),
                      (f"{p} machines (METIS parts), each server + trainer", dist)):
        lines.append(f"| {name} | {run['processes']} | {', '.join(map(str, run['peak_rss_mib']))} | "
                     f"{', '.join(map(str, run['trainer_peak_rss_train_mib']))} | "
                     f"{', '.join(str(round(m['pss_peak'] / MIB)) for m in run['machines'])} | {run['test_acc']:.4f} |")
    lines += ["", f"Against the single process's **training** peak (RSS when evaluation began, "
              f"{single['peak_rss_train_bytes'] / MIB:.0f} MiB): the largest trainer's peak RSS is "
              f"**{r['trainer_rss_vs_single_training_rss']:.3f}x** (target <= 0.4), its training peak "
              f"{r['trainer_training_rss_vs_single_training_rss']:.3f}x; a whole machine (server + trainer, PSS) is "
              f"{r['machine_pss_vs_single_training_pss']:.3f}x of the single process's training-peak PSS. Against "
              f"the single process's overall peak (evaluation included): trainer {r['trainer_rss_vs_single_peak_rss']:.3f}x, "
              f"machine {r['machine_pss_vs_single_peak_pss']:.3f}x. Against the same-code 1-machine run: trainer "
              f"{r['trainer_rss_vs_same_code_trainer_rss']:.3f}x, machine {r['machine_pss_vs_same_code_machine_pss']:.3f}x. "
              f"Test accuracy: {100 * (dist['test_acc'] - single['test_acc']):+.2f} points against the Trainer, "
              f"{100 * (dist['test_acc'] - same['test_acc']):+.2f} against the same-code run (target within 1).", "",
              "## Traffic per training epoch (all processes together)", ""]
    saved = dist["halo_saved"]
    lines += [f"RPC payloads: **{dist['rpc_bytes_per_epoch'] / MIB:.1f} MiB** (feature rows "
              f"{dist['feature_bytes_per_epoch'] / MIB:.1f}, sampling {dist['sample_bytes_per_epoch'] / MIB:.1f}); "
              f"the DDP all-reduce adds about {dist['all_reduce_bytes_per_epoch_estimate'] / MIB:.1f} MiB (estimated). "
              f"The halo saved, in the same batches: {saved['sampled_rows']:,.0f} rows sampled here instead of asked "
              f"for ({saved['sample_bytes'] / MIB:.1f} MiB) and {saved['cached_rows']:,.0f} feature rows served by "
              f"the cache of {dist['cache_rows_per_machine']:,} rows per machine ({saved['feature_bytes'] / MIB:.1f} "
              f"MiB; hit rate {dist['cache_hit_rate'] if dist['cache_hit_rate'] is None else round(dist['cache_hit_rate'], 3)}). "
              f"Without the halo the same batches would have moved {dist['rpc_bytes_without_halo_per_epoch'] / MIB:.1f} "
              f"MiB: **{dist['rpc_bytes_without_halo_per_epoch'] / max(dist['rpc_bytes_per_epoch'], 1):.2f}x** more."]
    before = result.get("before_halo")
    if before:
        lines.append(f"The run committed before the halo (same graph, {before['parts']} parts) moved "
                     f"{before['rpc_bytes_per_epoch'] / MIB:.1f} MiB per epoch: "
                     f"**{before['rpc_bytes_per_epoch'] / max(dist['rpc_bytes_per_epoch'], 1):.2f}x** this run's "
                     "(target >= 2).")
    lines += ["", f"{dist['seeds_per_epoch']:,} training seeds per epoch, {dist['rows_per_seed']:.1f} feature rows "
              f"gathered per seed, {100 * dist['remote_row_share']:.1f}% of them owned by another machine.", "",
              f"## Several trainers per machine: {len(machines['machines'])} machines x "
              f"({config['trainers_per_machine']} trainers + {config['trainers_per_machine']} sampler processes)", "",
              "Machine memory = the peak of the summed PSS of its processes; one copy = the shared blocks that "
              "existed then (partition with its halo, cache; the inference table once evaluation began); working "
              "sets = the processes' USS at that moment (what each holds alone: a private copy of the partition "
              "would show there, in the per-process USS below); shared memory's PSS = the touched pages of "
              "every shared-memory mapping, counted once: the blocks, and TensorPipe's rings between the "
              "machine's processes.", "",
              "| machine | PSS at its peak (MiB) | one copy (MiB) | working sets (MiB) | shared memory's PSS (MiB) | "
              "libraries' PSS (MiB) | RSS summed (MiB) | PSS / (one copy + working sets) |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for m in machines["machines"]:
        shared = sum(m["shared_bytes_at_peak"].values())
        lines.append(f"| {m['machine']} | {m['pss_at_peak'] / MIB:.0f} | {shared / MIB:.0f} | "
                     f"{m['uss_at_peak'] / MIB:.0f} | {m['shmem_pss_at_peak'] / MIB:.0f} | "
                     f"{m['file_pss_at_peak'] / MIB:.0f} | "
                     f"{m['rss_sum_at_peak'] / MIB:.0f} | **{m['ratio']:.3f}** |")
    lines += ["", "Per process (peaks): " + "; ".join(
        f"{name} PSS {v['Pss'] / MIB:.0f} / USS {v['Uss'] / MIB:.0f} / RSS {v['Rss'] / MIB:.0f} MiB"
        for m in machines["machines"][:1] for name, v in m["processes"].items()) + ".", "",
              f"Test accuracy {machines['test_acc']:.4f}.", "",
              f"## Time per step ({'quiet machine' if quiet else 'TAKEN ON A LOADED MACHINE: indicative only'})", "",
              "| run | step (ms) | waiting for sampling | waiting for features | computing | other | batches/s |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, run in (("single, same code", same), *((f"distributed, trainer {i}", {"per_step": [s]})
                                                      for i, s in enumerate(dist["per_step"]))):
        s = run["per_step"][0]
        sh = s["shares"]
        lines.append(f"| {name} | {1000 * s['step_s']:.1f} | {sh['sampling']:.2f} | {sh['fetching']:.2f} | "
                     f"{sh['computing']:.2f} | {sh['other']:.2f} | {s['batches_per_s']:.2f} |")
    lines += ["", f"Layer-wise evaluation took {dist['eval_seconds']:.1f} s in the distributed run.", "",
              "Partition report (balance checked per part: nodes, stored edges, training nodes):", "", "```",
              result["prepare"]["reports"]["parts"]["text"], "```", ""]
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


def parse_args(argv=None) -> argparse.Namespace:
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
    parser.add_argument("--cache-share", type=float, default=1.0, help="halo feature rows cached per machine, as a "
                        "share of the nodes it owns (default 1.0)")
    parser.add_argument("--trainers-per-machine", type=int, default=2, help="trainers per machine of the "
                        "'machines' run (each with one sampler process; default 2)")
    parser.add_argument("--prefetch", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per process (default 1)")
    parser.add_argument("--work", default=None, help="scratch directory (default: a new one under /tmp)")
    parser.add_argument("--skip", default="", help="comma-separated runs to leave out (single, same, machines)")
    environment.add_out_argument(parser)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--reuse-work", action="store_true", help="skip the prepare step: --work already holds "
                        "what an earlier run with the same sizes prepared (e.g. to re-time on a quiet machine)")
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.avg_degree, args.features, args.batch_size = 20_000, 10.0, 16, 64
    return args


def prepared_work(args, step) -> tuple[pathlib.Path, dict, dict]:
    """The work folder, the prepare step's result (run now or read back) and the shared arguments."""
    import tempfile  # noqa: PLC0415

    from unigraph.train import launch  # noqa: PLC0415
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="unigraph-dist-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    config = {k: v for k, v in vars(args).items() if k not in ("work", "out")}
    shared = {**config, "work": str(work)}
    keys = ("nodes", "avg_degree", "features", "parts", "method")
    if args.reuse_work:
        prepared = json.loads((work / "prepared.json").read_text())
        if {k: prepared["config"][k] for k in keys} != {k: config[k] for k in keys}:
            raise SystemExit(f"{work} was prepared with {prepared['config']}; rerun without --reuse-work")
    else:
        prepared = step("prepare (generate, save, partition)", lambda: launch(prepare, 1, args=(shared,),
                                                                              timeout=6 * 3600.0)[0])
        prepared["config"] = config
        (work / "prepared.json").write_text(json.dumps(prepared))
    return work, prepared, shared


def step_printer(name, function, *extra):
    began = time.perf_counter()
    print(f"[distributed benchmark] {name} ...", flush=True)
    value = function(*extra)
    print(f"[distributed benchmark] {name}: {time.perf_counter() - began:.0f} s", flush=True)
    return value


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch  # noqa: PLC0415

    from benchmarks.environment import machine, versions  # noqa: PLC0415
    from unigraph.benchmarking import output  # noqa: PLC0415
    from unigraph.train import launch  # noqa: PLC0415

    out = environment.out_dir(args)  # a --quick run aimed at the committed results is refused before any work
    skip = set(filter(None, args.skip.split(",")))
    work, prepared, shared = prepared_work(args, step_printer)
    load = settled_load(0.0 if args.quick else 240.0)
    owned = args.nodes // args.parts
    seeds = sum(e["train"] for e in prepared["reports"]["parts"]["parts"])
    result = {"date": datetime.date.today().isoformat(), "config": prepared["config"],
              "machine": machine(torch.device("cpu")), "versions": versions(),
              "load_average": list(load) if load else None, "prepare": prepared,
              "graph_edges": prepared["num_edges"], "quiet": is_quiet(load)}
    if "single" not in skip:
        result["single_trainer"] = step_printer("single process, Trainer", lambda: launch(
            single_trainer, 1, args=(shared,), timeout=6 * 3600.0, threads=args.threads)[0])
    if "same" not in skip:
        result["single_same_code"] = describe_run(step_printer(
            "single machine, same code", partitioned, shared, "whole", 1, args.batch_size * args.parts, 0),
            args.epochs, seeds)
    result["distributed"] = describe_run(step_printer(
        f"distributed, {args.parts} machines", partitioned, shared, "parts", args.parts, args.batch_size,
        int(args.cache_share * owned)), args.epochs, seeds)
    if "machines" not in skip:
        t = args.trainers_per_machine
        result["machines"] = describe_run(step_printer(
            f"2 machines x ({t} trainers + {t} samplers)", partitioned, shared, "parts", 2,
            args.batch_size * args.parts // (2 * t), int(args.cache_share * 2 * owned), t, 1), args.epochs, seeds)
    if args.nodes == BEFORE_HALO["nodes"] and args.parts == BEFORE_HALO["parts"]:
        result["before_halo"] = BEFORE_HALO
    result["timing_note"] = ("taken on a quiet machine" if result["quiet"] else
                             "time shares and batches/s were taken on a loaded machine: indicative only")
    stem = "distributed_cpu" + ("_quick" if args.quick else "")
    if skip:
        output.write_json(out / f"{stem}.json", result)
        print(json.dumps({k: v for k, v in result.items() if k != "prepare"}, indent=1, default=str)[:20000])
        return 0
    result["ratios"] = ratios(result)
    environment.write_report(result, out, stem, lambda result, path: output.write_text(path, markdown(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
