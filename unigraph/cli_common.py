"""What ``unigraph train`` and ``unigraph train --partitions`` share: which errors are the user's,
how a comma list of integers is read, the job a train command's arguments describe, the files it
names checked before any process starts, and the "done: ..." line of a run.

``unigraph.cli`` (the command) and ``unigraph.distributed.cli`` (partitioned training, which
``cli`` wires in) both import it, so neither imports the other back.
"""
from __future__ import annotations

import argparse
import os

from unigraph.data.errors import DataFileError
from unigraph.train import checkpoint as ckpt
from unigraph.train import job as jobs
from unigraph.train import task_jobs
from unigraph.train.config import PipelineConfig, TrainConfig
from unigraph.train.distributed import launched_by_environment
from unigraph.train.layers import stage_bounds
from unigraph.train.trainer import check_resume_config, make_optimizer

# What a user's mistake raises (a bad argument, a missing, damaged or hostile file): a message, no traceback.
# DataFileError (a ValueError) covers every file a loader refuses, naming it.
USER_ERRORS = (ValueError, TypeError, FileNotFoundError, DataFileError)


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 10,10; got {text!r}") from None


def _at_most_per_core(flag: str, value: int) -> None:
    """Processes or threads beyond a few per core only thrash (and --nproc 100000 would fork that many)."""
    limit = max(64, 4 * (os.cpu_count() or 1))
    if value > limit:
        raise ValueError(f"{flag} {value} is more than this machine's {os.cpu_count()} cores can run (at most {limit})")


def _world_size(args) -> int:
    """Processes in the job: torchrun's world size, ``--nproc``, or the pipeline's stages."""
    if launched_by_environment():
        world = int(os.environ["WORLD_SIZE"])
        if args.nproc is not None and args.nproc != world:
            raise ValueError(f"--nproc {args.nproc} contradicts the WORLD_SIZE={world} torchrun set; drop --nproc")
        return world
    if args.nproc is not None:
        if args.nproc < 1:
            raise ValueError(f"--nproc must be >= 1, got {args.nproc}")
        _at_most_per_core("--nproc", args.nproc)
        return args.nproc
    return args.pipeline_stages or 1


def spec_from_args(args) -> jobs.JobSpec:
    """The job the arguments describe; ValueError/TypeError name a bad argument."""
    task_jobs.apply_task_defaults(args)
    args.dataset = task_jobs.canonical_dataset(args.task, args.dataset)
    if args.pipeline_stages is None and (args.micro_batches is not None or args.balance is not None):
        raise ValueError("--micro-batches and --balance need --pipeline-stages")
    if args.layers < 1:
        raise ValueError(f"--layers must be >= 1, got {args.layers}")
    if args.nodes < 100:
        raise ValueError(f"--nodes must be >= 100 (the synthetic graph's split needs them), got {args.nodes}")
    world = _world_size(args)
    pipeline = None
    if args.pipeline_stages is not None:
        if args.pipeline_stages < 2:
            raise ValueError(f"--pipeline-stages must be >= 2, got {args.pipeline_stages} (for one model per "
                             "process use --nproc: data parallel)")
        if world % args.pipeline_stages:
            raise ValueError(f"{world} processes cannot hold whole pipelines of {args.pipeline_stages} stages; "
                             "--nproc must be a multiple of --pipeline-stages")
        micro_batches = args.pipeline_stages if args.micro_batches is None else args.micro_batches
        pipeline = PipelineConfig(stages=args.pipeline_stages, micro_batches=micro_batches,
                                  balance=args.balance, schedule=args.schedule, replicas=world // args.pipeline_stages)
        stage_bounds(args.layers, pipeline.stages, pipeline.balance)  # S > layers, a bad balance: fail now
    if args.fanouts is not None and len(args.fanouts) != args.layers:
        raise ValueError(f"--fanouts has {len(args.fanouts)} entries but the model has {args.layers} layers "
                         "(one fanout per layer)")
    if args.resume and args.checkpoint is None:
        raise ValueError("--resume needs --checkpoint DIR (the directory holding last.pt)")
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
        _at_most_per_core("--threads", args.threads)
    if args.num_workers > 0:
        if args.batch_size is None and args.fanouts is None and world == 1 and pipeline is None:
            raise ValueError(f"--num-workers {args.num_workers}: sampling workers prepare mini-batches, but this run "
                             "trains on the full graph (give --batch-size, or drop --num-workers)")
        _at_most_per_core("--num-workers", args.num_workers)
    config = TrainConfig(epochs=args.epochs, lr=args.lr, weight_decay=args.weight_decay, optimizer=args.optimizer,
                         batch_size=args.batch_size, fanouts=args.fanouts, num_workers=args.num_workers,
                         patience=args.patience or None, seed=args.seed, progress=args.progress,
                         log_every=args.log_every, checkpoint_dir=args.checkpoint, resume=args.resume,
                         timeout=args.timeout, evaluation=args.evaluation)
    model = jobs.ModelSpec(args.model, args.layers, args.hidden, args.heads, args.dropout)
    return jobs.JobSpec(dataset=args.dataset, root=args.root, synthetic_nodes=args.nodes, model=model, train=config,
                        pipeline=pipeline, backend=args.backend, threads=args.threads, world_size=world)


def check_files(spec: jobs.JobSpec, layout: dict | None = None, model=None) -> None:
    """The files the job will write or resume from, checked now rather than after an epoch: the
    checkpoint directory must be writable, a checkpoint to resume must be intact, complete and
    written by a run with these settings, no more epochs than this one trains, when given the
    trainers' ``layout`` (e.g. the same partition set) and, given the job's ``model``, restorable
    into it and a fresh optimizer (keys, shapes, hyperparameters: see ``checkpoint_checks``)."""
    config = spec.train
    if config.checkpoint_dir is None:
        return
    if config.resume:
        state = ckpt.load_checkpoint(config.checkpoint_dir, epochs=config.epochs)
        if layout is not None:
            ckpt.check_compatible(state, layout)
        check_resume_config(state["config"], config)
        if model is not None:
            ckpt.check_restorable(state, model, make_optimizer(model.parameters(), config))
    ckpt.prepare_directory(config.checkpoint_dir)


def _print_summary(summary: dict) -> None:
    stop = " (early stop)" if summary["stopped_early"] else ""
    print(f"done: {summary['epochs']} epochs{stop} in {summary['seconds']:.1f} s "
          f"({summary['mean_epoch_ms']:.1f} ms per epoch); best epoch {summary['best_epoch']}: "
          f"val acc {summary['best_val_acc']:.4f}, test acc {summary['test_acc']:.4f}", flush=True)
