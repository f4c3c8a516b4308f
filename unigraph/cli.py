"""The ``unigraph`` command: ``unigraph train ...`` and ``unigraph info``.

    unigraph train                                   # GAT on the built-in synthetic graph, no download
    unigraph train --model gat --dataset synthetic --backend auto --epochs 200
    unigraph train --dataset cora --root DIR         # Planetoid files from DIR
    unigraph train --nproc 2 --batch-size 64         # data parallel, 2 processes (or under torchrun)
    unigraph train --pipeline-stages 2 --micro-batches 4          # pipeline parallel
    unigraph train --pipeline-stages 2 --micro-batches 4 --nproc 4  # 2 pipeline replicas x 2 stages
    unigraph train --checkpoint DIR [--resume]       # checkpoint every epoch; continue a stopped run
    unigraph train --model rgcn [--batch-size 256 --fanouts 10,10]  # R-GCN on the heterogeneous academic graph
    unigraph train --task graph                      # GIN graph classifier on built-in motif graphs
    unigraph train --task link --dataset Cora --root DIR   # GAE link prediction (see train/task_jobs.py)
    unigraph train --log-dir DIR                     # per-epoch metrics.csv/.json and curves.png in DIR
    unigraph partition --parts 4 --out DIR           # a partition set; then: unigraph train --partitions DIR
    unigraph chunk generate --nodes N --out G        # a graph on disk; then: unigraph train --chunked G (out of core)
    unigraph info                                    # which kernels are available here
    unigraph bench GRAPH [--model gcn]               # time every backend (and DGL/PyG) on your graph

Every argument is checked before any process starts, and so are the files it names (the Planetoid
folder is read, the checkpoint directory proven writable, a checkpoint to resume from verified
against this run); a bad one ends the command with exit status 2 and a message naming it (and
the file), never a traceback: a sub-command reports errors of the kinds in ``USER_ERRORS`` (the
user's to fix) through its parser's ``error``.
"""
from __future__ import annotations

import argparse
import os
import sys

import unigraph
from unigraph.data.errors import DataFileError
from unigraph import bench, precompile
from unigraph.cli_common import USER_ERRORS, _int_list, _print_summary, check_files, spec_from_args
from unigraph.cli_parser import Parser
from unigraph.procs import exit_if_gloo_outlived
from unigraph.distributed import cli as partitioned
from unigraph.storage import cli as on_disk
from unigraph.train import job as jobs
from unigraph.train import task_jobs
from unigraph.train.config import SCHEDULES
from unigraph.train.distributed import launched_by_environment
from unigraph.train.launch import LaunchError, launch
from unigraph.train.models import HETERO_MODELS, model_names


def build_parser() -> argparse.ArgumentParser:
    return _build_parsers()[0]


def _build_parsers() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser, argparse.ArgumentParser]:
    """The top-level parser and its ``train`` and ``bench`` sub-parsers (whose ``error`` reports bad
    arguments)."""
    parser = Parser(prog="unigraph", description="unigraph: graph neural networks on the fastest "
                                     "kernels for your graph")
    commands = parser.add_subparsers(dest="command", metavar="{train,partition,chunk,info,bench,precompile}")
    commands.add_parser("info", help="print the kernels available here and the backend choice")
    commands.add_parser("precompile", help="compile the CPU kernels now (numba), not on first use",
                        description=precompile.__doc__.split("\n\n")[0])
    bench_parser = commands.add_parser("bench", help="time every backend (and DGL/PyG) on a graph",
                                       description=bench.__doc__.split("\n\n")[0])
    bench.add_arguments(bench_parser)
    partitioned.add_partition_command(commands)
    on_disk.add_chunk_command(commands)
    train = commands.add_parser("train", help="train a node classifier, a graph classifier or a link predictor")
    data = train.add_argument_group("data and model")
    data.add_argument("--task", default="node", choices=task_jobs.TASKS, help="node (default) classification, "
                      "graph classification or link prediction")
    data.add_argument("--dataset", default="synthetic", help="any letter case; 'synthetic' (default) is built in, "
                      "no download; else " + "; ".join(f"{t}: {task_jobs.dataset_choices(t)}" for t in task_jobs.TASKS))
    data.add_argument("--root", help="folder with the dataset's files (Planetoid's ind.cora.x, ...; PyG's root with "
                      "Cora/raw inside works too)")
    data.add_argument("--nodes", type=int, default=2000, help="nodes of the synthetic graph (default 2000; for "
                      "--model rgcn: papers of the built-in heterogeneous academic graph)")
    data.add_argument("--model", choices=model_names() + ["graphsage"] + list(HETERO_MODELS),
                      help="default: gat (node), gin (graph), gcn (link: the GAE encoder); rgcn trains on the "
                      "built-in heterogeneous academic graph")
    data.add_argument("--layers", type=int, help="graph layers (default 2; 4 for --task graph)")
    data.add_argument("--hidden", type=int, help="hidden width (per head for GAT); default: the model's")
    data.add_argument("--heads", type=int, help="attention heads (GAT); default 8")
    data.add_argument("--dropout", type=float, help="dropout probability; default: the model's")
    data.add_argument("--backend", default=os.environ.get("UNIGRAPH_BACKEND", "auto"),
                      help="kernel backend: auto (default), auto-tune or a name from `unigraph info`")
    opt = train.add_argument_group("optimization")
    opt.add_argument("--epochs", type=int, help="default 200 (100 for --task graph)")
    opt.add_argument("--lr", type=float, help="default 0.005 (0.01 for --task graph/link)")
    opt.add_argument("--weight-decay", type=float, help="default 5e-4 (0 for --task graph/link)")
    opt.add_argument("--optimizer", default="adam", choices=["adam", "sgd"], help="default: adam")
    opt.add_argument("--patience", type=int, default=100, help="early stopping patience in epochs (default 100; "
                     "0 disables it)")
    opt.add_argument("--seed", type=int, default=0, help="default 0")
    opt.add_argument("--evaluation", default="auto", choices=["auto", "full", "layerwise"],
                     help="full: the model on the whole graph; layerwise: one layer at a time in bounded batches "
                     "(exact for sage, gat, gin); auto (default): full in memory, layerwise on --partitions")
    batches = train.add_argument_group("mini-batches")
    batches.add_argument("--batch-size", type=int, help="seeds per mini-batch (per process); default: full batch")
    batches.add_argument("--fanouts", type=_int_list, help="neighbours per layer, e.g. 10,10; -1 keeps all; "
                         "default: all")
    batches.add_argument("--num-workers", type=int, default=0, help="sampling worker processes per rank (default 0)")
    scale = train.add_argument_group("scaling")
    scale.add_argument("--nproc", type=int, help="processes on this machine (data parallel, or pipeline replicas "
                       "x stages); under torchrun the job's world size is used")
    scale.add_argument("--pipeline-stages", type=int, help="cut the model into this many pipeline stages")
    scale.add_argument("--micro-batches", type=int, help="micro-batches per mini-batch (pipeline); default: stages")
    scale.add_argument("--balance", type=_int_list, help="layers per stage, e.g. 1,1; default: even")
    scale.add_argument("--schedule", default="gpipe", choices=SCHEDULES, help="pipeline schedule (default: gpipe)")
    scale.add_argument("--threads", type=int, help="intra-op threads per process; default: torch's (single "
                       "process) or the cores divided among the processes")
    scale.add_argument("--timeout", type=float, default=300.0, help="seconds a rank may wait for the others "
                       "(default 300)")
    run = train.add_argument_group("checkpoints and output")
    run.add_argument("--checkpoint", help="directory for last.pt (written every epoch)")
    run.add_argument("--resume", action="store_true", help="continue from --checkpoint/last.pt")
    run.add_argument("--progress", default="auto", choices=["auto", "bar", "text", "off"],
                     help="auto (default): a bar on a terminal, text lines otherwise")
    run.add_argument("--log-every", type=int, default=10, help="epochs between progress lines (default 10)")
    run.add_argument("--log-dir", help="write per-epoch metrics.csv and metrics.json here, and curves.png at the end "
                     "(needs matplotlib)")
    run.add_argument("--tensorboard", action="store_true", help="also write TensorBoard events to --log-dir "
                     "(needs tensorboard)")
    partitioned.add_train_arguments(train)
    on_disk.add_train_arguments(train)
    return parser, train, bench_parser


def _train(parser: argparse.ArgumentParser, args, argv: list[str] = ()) -> int:
    if args.partitions is not None:
        return partitioned.run_partitioned_train(parser, args, argv)
    if args.chunked is not None:
        return on_disk.run_chunked_train(parser, args)
    if args.task != "node":
        try:
            task_jobs.apply_task_defaults(args)
            args.dataset = task_jobs.canonical_dataset(args.task, args.dataset)
        except ValueError as err:
            parser.error(str(err))
        return task_jobs.run(parser, args)
    try:
        log = task_jobs.open_log(args) if int(os.environ.get("RANK", 0)) == 0 else None
        spec = spec_from_args(args)
        unigraph.set_backend(spec.backend)  # an unknown or unavailable backend fails here, before any work
        if args.model != "gat" and args.heads is not None:
            raise ValueError("--heads applies to --model gat only")
        dataset = jobs.load_dataset(spec)
        model = jobs.build_model(spec, dataset)  # bad widths, dropout, ...: fail before any process starts
        check_files(spec, model=model)  # after the options are known to fit the model: a refused run creates no directory
    except (*USER_ERRORS, RuntimeError, ImportError) as err:  # RuntimeError: torch refusing a size; ImportError: --tensorboard
        parser.error(str(err))
    rank = int(os.environ.get("RANK", 0))
    if rank == 0:
        print(jobs.describe(spec, dataset), flush=True)
        print(jobs.kernel_summary(spec, dataset), flush=True)
    if spec.world_size > 1 and not launched_by_environment():
        try:
            summaries = launch(jobs.run_job, spec.world_size, args=(spec,), threads=spec.threads,
                               timeout=max(3600.0, 10 * spec.train.timeout))
        except LaunchError as err:
            print(f"unigraph train: the job failed: {err}", file=sys.stderr, flush=True)
            return 1
        _print_summary(summaries[0])
        task_jobs.write_history(log, summaries[0]["history"])
        return 0
    try:
        summary = jobs.run_job(spec)
    except DataFileError as err:  # a file that changed or broke after the checks above
        parser.error(str(err))
    if rank == 0:
        _print_summary(summary)
        task_jobs.write_history(log, summary["history"])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser, train_parser, bench_parser = _build_parsers()
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if args.command == "info":
        print(unigraph.info())
        return 0
    if args.command == "precompile":
        precompile.precompile()
        return 0
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "bench":
        return bench.run_command(bench_parser, args, argv)
    if args.command in ("partition", "chunk"):
        return args.run(args)
    return _train(train_parser, args, argv)


def entry() -> int:
    """The ``unigraph`` command (and ``python -m unigraph.cli``): :func:`main`, then, in a process
    whose gloo group torch kept after the job (a pipeline rank under torchrun), an exit that skips
    the interpreter's teardown, which could abort it (:func:`unigraph.procs.exit_if_gloo_outlived`)."""
    code = main()
    exit_if_gloo_outlived(code)
    return code


if __name__ == "__main__":
    sys.exit(entry())
