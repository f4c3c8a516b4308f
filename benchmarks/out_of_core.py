"""Graphs bigger than memory: generate on disk, partition with bounded memory, train out of core.

For each size in ``--sizes`` (nodes) a planted-partition graph (:mod:`unigraph.storage.generate`:
``--features`` float32 features, mean in-degree ``--degree``, 4 classes, homophily 0.6, class
separation 0.6, ``--train-fraction`` training nodes (10% by default), ``--val-fraction`` and
``--test-fraction`` validating and testing, 1% each by default) goes through these phases, **each in
fresh processes whose memory is sampled from outside** every 0.1 s (``/proc/<pid>/status`` of the
phase's process and every descendant): the peak of ``RssAnon`` (private memory: what the phase
allocated) and of ``VmHWM`` (the kernel's peak resident set, mapped file pages included: page
cache the kernel takes back under pressure).

1. **generate** - ``unigraph chunk generate``: the graph straight to disk, a block at a time.
2. **partition** - ``unigraph partition --chunked G --method ldg --parts P --no-eids`` (streaming,
   bounded memory); and, for sizes up to ``--metis-max-nodes``, METIS on the same graph read into memory
   (``--method metis``), for the edge cut and balance beside it.
3. **out of core, 1 process** - :class:`unigraph.storage.train.OutOfCoreTrainer`: GraphSAGE (2
   layers, hidden 128, no dropout), fanouts ``--fanouts``, batch ``--batch-size``, Adam, ``--epochs``
   epochs, ``--cache-rows`` hot rows cached, exact evaluation (every in-edge).
4. **out of core, P machines** - the partitioned job (:mod:`unigraph.distributed.job`, as
   ``unigraph train --partitions`` runs it) on the streaming partition set, a machine per part
   (its graph server maps the part's node arrays from disk and copies the structure with the
   halo's in-edges; a trainer): the same model, global batch and epochs.
5. **in-memory twin** (sizes up to ``--twin-max-nodes``): the very same graph built in memory
   (:func:`unigraph.storage.generate.planted_stream_dataset`) trained by
   :class:`unigraph.train.Trainer` with the same batches (exact full-graph evaluation).

Reported per size: data on disk; each phase's seconds, peak RssAnon and VmHWM; edge cut and
balance of LDG (and METIS); training seconds per epoch and seeds per second; test accuracy.
``bounded``: the growth of each phase's peak RssAnon from the smallest size to the largest,
beside the growth of the data.

    python benchmarks/out_of_core.py --quick                       # smoke run, 2 small sizes (4x apart)
    python benchmarks/out_of_core.py --work /data/ooc --sizes 1000000,2000000,4000000,8000000 \\
        --features 128 --out benchmarks/results                    # the scaling table (see docs/out_of_core.md)
    python benchmarks/out_of_core.py --work /data/ooc --sizes 24000000 --features 256 --degree 12 \\
        --twin-max-nodes 0 --metis-max-nodes 0 --keep --out benchmarks/results --name out_of_core_big
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import environment  # noqa: E402

HIDDEN = 128
UNIGRAPH = [sys.executable, "-m", "unigraph.cli"]


# ---------------------------------------------------------------------------------------------- memory of a process tree
def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                out += [int(c) for c in handle.read().split()]
    except OSError:
        pass
    return out


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return "?"


class TreeMemory:
    """Peak ``RssAnon`` and ``VmHWM`` of a process and all its descendants, per pid, sampled."""

    def __init__(self, pid: int, interval: float = 0.1):
        from unigraph.storage.mapped import memory_status
        self.status, self.pid, self.interval = memory_status, pid, interval
        self.peaks: dict[int, dict[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            stack, seen = [self.pid], set()
            while stack:
                pid = stack.pop()
                if pid in seen:
                    continue
                seen.add(pid)
                status = self.status(pid)
                if status:
                    if pid not in self.peaks:
                        self.peaks[pid] = {"command": _command(pid)}
                    peak = self.peaks[pid]
                    for key in ("RssAnon", "VmHWM"):
                        peak[key] = max(peak.get(key, 0), status.get(key, 0))
                stack += _children(pid)
            self._stop.wait(self.interval)

    def __enter__(self) -> "TreeMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        """Peaks over the processes that ran Python work (the largest first), with their commands."""
        per = [p for p in sorted(self.peaks.values(), key=lambda p: -p.get("RssAnon", 0)) if p.get("RssAnon", 0) > 8 << 20]
        return {"peak_rss_anon_mib": [p["RssAnon"] >> 20 for p in per],
                "peak_vm_hwm_mib": [p.get("VmHWM", 0) >> 20 for p in per], "processes": [p["command"] for p in per]}


def run_phase(name: str, command: list[str], log: pathlib.Path) -> dict:
    """Run ``command``, sampling its process tree's memory; its stdout is kept for parsing."""
    began = time.perf_counter()
    with open(log, "w") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, cwd=REPO_ROOT)
        with TreeMemory(process.pid) as memory:
            stdout, _ = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"phase {name} failed ({process.returncode}): {' '.join(command)}\n{log.read_text()[-3000:]}")
    result = {"seconds": round(time.perf_counter() - began, 2), **memory.summary(), "stdout": stdout[-4000:]}
    print(f"  {name}: {result['seconds']} s, peak RssAnon {result['peak_rss_anon_mib']} MiB, VmHWM "
          f"{result['peak_vm_hwm_mib']} MiB", flush=True)
    return result


def run_child_phase(name: str, command: list[str], log: pathlib.Path) -> dict:
    """:func:`run_phase` of one of this script's own ``--child`` phases, with what the child printed
    (its last stdout line, JSON) added to the measurements."""
    result = run_phase(name, command, log)
    return {**result, **json.loads(result["stdout"].strip().splitlines()[-1])}


# ---------------------------------------------------------------------------------------------- phases run as children
def _train_config(args):
    from unigraph.train import TrainConfig
    return TrainConfig(epochs=args.epochs, batch_size=args.batch_size, fanouts=tuple(args.fanouts), lr=0.005,
                       weight_decay=0.0, seed=0, progress="off", patience=None)


def _model(num_features: int, num_classes: int):
    from unigraph.train import build_node_classifier
    from unigraph.train.rng import seed_everything
    seed_everything(0)
    return build_node_classifier("sage", num_features, num_classes, num_layers=2, hidden_channels=HIDDEN, dropout=0.0)


def _train_summary(trainer, result, seeds: int) -> dict:
    epochs = result.history
    train_seconds = trainer.timing["train_seconds"] if hasattr(trainer, "timing") else None
    per_epoch = (train_seconds / len(epochs)) if train_seconds else None
    return {"test_acc": result.test_acc, "val_acc": result.best_val_acc, "epochs": len(epochs),
            "epoch_seconds": [round(m.seconds, 2) for m in epochs], "train_seconds_per_epoch": per_epoch,
            "seeds_per_second": seeds / per_epoch if per_epoch else None}


def phase_train_ooc(args) -> dict:
    import torch
    from unigraph.storage.chunked import ChunkedGraph
    from unigraph.storage.train import OutOfCoreTrainer
    torch.set_num_threads(args.threads)
    graph = ChunkedGraph(args.graph, verify=not args.no_verify)
    trainer = OutOfCoreTrainer(_model(graph.num_features, graph.num_classes), graph, _train_config(args),
                               cache_rows=args.cache_rows, prefetch=2, eval_batch_size=args.eval_batch_size)
    result = trainer.fit()
    out = _train_summary(trainer, result, trainer.train_nodes.numel())
    out.update(cache_hit_rate=trainer.features.hit_rate, wait_seconds=trainer.loader.stats["wait"])
    return out


def phase_train_parts(args) -> dict:
    """The partitioned job on the partition set, one machine per part (a graph server mapping its
    part's node arrays, and a trainer: unigraph.distributed.job)."""
    from unigraph.distributed import format as fmt
    from unigraph.distributed.job import DistJobSpec, run_partitioned_job
    from unigraph.distributed.layout import JobLayout
    from unigraph.train import TrainConfig
    from unigraph.train.job import ModelSpec
    from unigraph.train.launch import free_port, launch
    info = fmt.read_metadata(args.graph)
    config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size // info.num_parts, fanouts=tuple(args.fanouts),
                         lr=0.005, weight_decay=0.0, seed=0, progress="off", patience=None, timeout=3600.0)
    spec = DistJobSpec(args.graph, ModelSpec("sage", 2, HIDDEN, None, 0.0), config, prefetch=2,
                       eval_batch_size=args.eval_batch_size, verify=not args.no_verify)
    threads = max(1, args.threads // info.num_parts)
    processes = JobLayout(info.num_parts, info.num_parts).processes_per_machine * info.num_parts
    summaries = launch(run_partitioned_job, processes, args=(spec,), threads=threads,
                       env={"MASTER_PORT": str(free_port())}, timeout=36000.0)
    trainers = [s for s in summaries if "epochs" in s]
    train_seconds = max(s["timing"]["train_seconds"] for s in trainers) / max(trainers[0]["epochs"], 1)
    seeds = sum(info.count(p, "train") for p in range(info.num_parts))
    return {"test_acc": trainers[0]["test_acc"], "epochs": trainers[0]["epochs"],
            "train_seconds_per_epoch": train_seconds, "seeds_per_second": seeds / train_seconds,
            "ru_maxrss_mib": [s["peak_rss_bytes"] >> 20 for s in summaries]}


def phase_twin(args) -> dict:
    import time as clock

    import torch
    from unigraph.storage.chunked import ChunkedGraph
    from unigraph.storage.generate import PlantedSpec, planted_stream_dataset
    from unigraph.train import Trainer
    torch.set_num_threads(args.threads)
    meta = {k: v for k, v in ChunkedGraph(args.graph, verify=False).meta.items() if k != "generator"}
    dataset = planted_stream_dataset(PlantedSpec(**meta))
    trainer = Trainer(_model(dataset.num_features, dataset.num_classes), dataset, _train_config(args))
    trainer.timing = {"train_seconds": 0.0}
    train_epoch = trainer.train_epoch

    def timed_epoch():   # training time only, as the out-of-core trainer counts it (evaluation apart)
        began = clock.perf_counter()
        loss = train_epoch()
        trainer.timing["train_seconds"] += clock.perf_counter() - began
        return loss
    trainer.train_epoch = timed_epoch
    result = trainer.fit()
    return _train_summary(trainer, result, int(dataset.train_mask.sum()))


PHASES = {"train-ooc": phase_train_ooc, "train-parts": phase_train_parts, "twin": phase_twin}


# ---------------------------------------------------------------------------------------------- the parent
def _partition_report(directory: pathlib.Path) -> dict:
    from unigraph.distributed import format as fmt
    info = fmt.read_metadata(directory)
    return {"method": info.method.get("name"), "edge_cut_fraction": info.report["edge_cut_fraction"],
            "balance": info.report["balance"], "halo_per_node": sum(info.report["halo_fraction"]) / info.num_parts,
            "seconds_assign": info.method.get("seconds_assign"), "seconds_write": info.method.get("seconds_write")}


class _Progress(dict):
    """The size's results so far, rewritten to ``path`` after every phase: a run of hours that is
    stopped part-way still leaves the phases it finished (the report itself is written at the end)."""

    def __init__(self, path: pathlib.Path, **items):
        super().__init__(**items)
        self.path = path

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.path.write_text(json.dumps(self, indent=1, default=str))


def _earlier_phases(path: pathlib.Path) -> dict:
    """``generate`` and ``partition`` as an earlier run measured them (its progress file), marked
    ``reused``: with ``--reuse`` their outputs are kept, and so are their figures."""
    if not path.is_file():
        return {}
    saved = json.loads(path.read_text())
    return {name: {**saved[name], "reused": True} for name in ("generate", "partition") if name in saved}


def run_size(args, nodes: int, work: pathlib.Path, logs: pathlib.Path) -> dict:
    from unigraph.storage.chunked import ChunkedGraph
    graph, parts = work / f"graph-{nodes}", work / f"parts-{nodes}"
    print(f"size {nodes:,} nodes", flush=True)
    out: dict = _Progress(work / f"progress-{nodes}.json", nodes=nodes)
    earlier = _earlier_phases(work / f"progress-{nodes}.json") if args.reuse else {}
    if not (args.reuse and (graph / "graph.json").is_file()):
        out["generate"] = run_phase("generate", UNIGRAPH + [
            "chunk", "generate", "--out", str(graph), "--nodes", str(nodes), "--features", str(args.features),
            "--degree", str(args.degree), "--chunk-mib", str(args.chunk_mib), "--train-fraction", str(args.train_fraction),
            "--val-fraction", str(args.val_fraction),
            "--test-fraction", str(args.test_fraction)], logs / f"generate-{nodes}.log")
    chunked = ChunkedGraph(graph, verify=False)
    out["graph"] = {"edges": chunked.num_edges, "data_gib": round(chunked.nbytes() / 2 ** 30, 3),
                    "features_gib": round(chunked.nbytes("x") / 2 ** 30, 3)}
    if nodes <= args.metis_max_nodes:
        metis = work / f"metis-{nodes}"
        out["partition_metis"] = {**run_phase("partition (METIS, in memory)", UNIGRAPH + [
            "partition", "--chunked", str(graph), "--parts", str(args.parts), "--out", str(metis), "--method", "metis",
            "--chunk-mib", str(args.chunk_mib)], logs / f"metis-{nodes}.log"), **_partition_report(metis)}
        shutil.rmtree(metis, ignore_errors=True)
    if "generate" in earlier and "generate" not in out:
        out["generate"] = earlier["generate"]
    if not args.skip_partitions and "partition" in earlier and (parts / "partitions.json").is_file():
        out["partition"] = earlier["partition"]   # --reuse: the set this run trains on, measured when it was made
    elif not args.skip_partitions:
        out["partition"] = {**run_phase("partition (LDG, streaming)", UNIGRAPH + [
            "partition", "--chunked", str(graph), "--parts", str(args.parts), "--out", str(parts), "--method", "ldg",
            "--workers", str(args.workers), "--chunk-mib", str(args.chunk_mib), "--no-eids"],
            logs / f"partition-{nodes}.log"), **_partition_report(parts)}
    child = [sys.executable, str(pathlib.Path(__file__).resolve()), "--child", "--graph", str(graph),
             "--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--fanouts",
             ",".join(map(str, args.fanouts)), "--cache-rows", str(args.cache_rows), "--threads", str(args.threads),
             "--eval-batch-size", str(args.eval_batch_size)]
    out["train_ooc"] = run_child_phase("train out of core (1 process)", child + ["--phase", "train-ooc"],
                                       logs / f"ooc-{nodes}.log")
    if not args.skip_partitions:
        out["train_parts"] = run_child_phase(f"train out of core ({args.parts} partitions)",
                                             child[:3] + ["--graph", str(parts)] + child[5:] + ["--phase", "train-parts"],
                                             logs / f"parts-{nodes}.log")
    if nodes <= args.twin_max_nodes:
        out["twin"] = run_child_phase("in-memory twin (Trainer)", child + ["--phase", "twin"], logs / f"twin-{nodes}.log")
    for phase in out.values():
        if isinstance(phase, dict):
            phase.pop("stdout", None)
    if not args.keep:
        shutil.rmtree(parts, ignore_errors=True)
        if not args.reuse:
            shutil.rmtree(graph, ignore_errors=True)
    return dict(out)


def bounded(sizes: list[dict]) -> dict:
    """Growth of each phase's peak private memory from the smallest size to the largest."""
    if len(sizes) < 2:
        return {}
    first, last = sizes[0], sizes[-1]
    out = {"data_growth": round(last["graph"]["data_gib"] / max(first["graph"]["data_gib"], 1e-9), 2)}
    for phase in ("generate", "partition", "train_ooc", "train_parts"):
        if phase in first and phase in last and first[phase]["peak_rss_anon_mib"] and last[phase]["peak_rss_anon_mib"]:
            a, b = max(first[phase]["peak_rss_anon_mib"]), max(last[phase]["peak_rss_anon_mib"])
            out[phase] = {"peak_rss_anon_mib": [a, b], "growth": round(b / max(a, 1), 3)}
    return out


def write_markdown(result: dict, path: pathlib.Path) -> None:
    env = result["environment"]
    lines = [f"# Out-of-core graphs ({env['machine']['cpu_count']} cores, {env['machine']['memory_gb']} GB)", "",
             f"Command: `{env['command']}`; load average at start {env['loadavg_start']}, end {env.get('loadavg_end')}.",
             "Memory: peak RssAnon (private) / peak VmHWM (resident incl. mapped file pages), MiB, per process.", "",
             "| nodes | edges | data GiB | phase | seconds | RssAnon | VmHWM | test acc | seeds/s | cut | balance |",
             "| ---: | ---: | ---: | --- | ---: | --- | --- | ---: | ---: | ---: | --- |"]
    for size in result["sizes"]:
        g = size["graph"]
        for phase in ("generate", "partition", "partition_metis", "train_ooc", "train_parts", "twin"):
            if phase not in size:
                continue
            p = size[phase]
            acc = f"{p['test_acc']:.4f}" if "test_acc" in p else ""
            rate = f"{p['seeds_per_second']:,.0f}" if p.get("seeds_per_second") else ""
            cut = f"{p['edge_cut_fraction']:.3f}" if "edge_cut_fraction" in p else ""
            balance = ", ".join(f"{k} {v:.3f}" for k, v in p.get("balance", {}).items())
            label = f"{phase} (earlier run, reused)" if p.get("reused") else phase
            lines.append(f"| {size['nodes']:,} | {g['edges']:,} | {g['data_gib']} | {label} | {p['seconds']} | "
                         f"{p['peak_rss_anon_mib']} | {p['peak_vm_hwm_mib']} | {acc} | {rate} | {cut} | {balance} |")
    lines += ["", f"Growth from the smallest to the largest size: `{json.dumps(result['bounded'])}`"]
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="250000,1000000", help="node counts, comma-separated")
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--degree", type=int, default=16)
    parser.add_argument("--train-fraction", type=float, default=0.1)
    parser.add_argument("--val-fraction", type=float, default=0.01)
    parser.add_argument("--test-fraction", type=float, default=0.01)
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument("--workers", type=int, default=1, help="processes of the streaming partitioner")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=1024, help="global batch")
    parser.add_argument("--fanouts", default="10,5")
    parser.add_argument("--cache-rows", type=int, default=100_000)
    parser.add_argument("--eval-batch-size", type=int, default=256, help="seeds per evaluation batch (every in-edge "
                        "is kept: its receptive field, not the graph, sets evaluation's memory)")
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 1)))
    parser.add_argument("--chunk-mib", type=float, default=64.0)
    parser.add_argument("--twin-max-nodes", type=int, default=1_000_000)
    parser.add_argument("--metis-max-nodes", type=int, default=1_000_000)
    parser.add_argument("--skip-partitions", action="store_true")
    parser.add_argument("--work", type=pathlib.Path, help="where the graphs go (default: a new folder under /tmp)")
    parser.add_argument("--reuse", action="store_true", help="keep and reuse generated graphs and streaming "
                        "partition sets in --work (with the figures their runs measured)")
    parser.add_argument("--keep", action="store_true", help="keep every graph and partition set in --work")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 small sizes 4x apart, 1 epoch")
    parser.add_argument("--name", default="out_of_core_cpu")
    environment.add_out_argument(parser)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--graph", help=argparse.SUPPRESS)
    parser.add_argument("--no-verify", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.fanouts = [int(f) for f in str(args.fanouts).split(",")]
    if args.child:
        print(json.dumps(PHASES[args.phase](args)), flush=True)
        return 0
    if args.quick:
        args.sizes, args.features, args.epochs, args.cache_rows = "20000,80000", 32, 1, 2000
        args.chunk_mib, args.batch_size = 1.0, 512
    sizes = [int(s) for s in args.sizes.split(",")]
    out = environment.out_dir(args)
    env = environment.describe(" ".join(["python", "benchmarks/out_of_core.py", *(argv or sys.argv[1:])]))
    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="unigraph-ooc-"))
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    try:
        results = [run_size(args, n, work, logs) for n in sizes]
    finally:
        if args.work is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    result = {"environment": environment.finish(env), "settings": {k: v for k, v in vars(args).items()
                                                                   if k not in ("child", "phase", "graph", "out")},
              "sizes": results, "bounded": bounded(results)}
    result["settings"]["work"] = str(work)
    environment.write_report(result, out, args.name, write_markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
