"""The command line of partitioned graphs: ``unigraph partition`` and ``unigraph train --partitions``.

    unigraph partition --dataset synthetic --parts 4 --out DIR [--method metis|lp|random]
    unigraph partition --chunked GRAPH --parts 4 --out DIR [--method ldg|fennel] [--workers W]   # bounded memory
    unigraph train --partitions DIR --nproc 4 --model sage --epochs 2 --batch-size 256 --fanouts 10,5
    unigraph train --partitions DIR --nproc 2 --num-samplers 1        # a sampler process per trainer
    # two machines, two trainers each (run on each machine, --node-rank 0 and 1):
    unigraph train --partitions DIR --nproc 2 --nnodes 2 --node-rank 0 --master-addr HOST --master-port 29500
    # or with torchrun on each machine (processes per machine = trainers x (1 + samplers)):
    torchrun --nnodes 2 --nproc-per-node 2 --node-rank 0 --master-addr HOST --master-port 29500 \\
        $(which unigraph) train --partitions DIR

``cli.py`` wires these in; everything else is here.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys

from unigraph import numa
from unigraph.cli_common import USER_ERRORS, _int_list, check_files, spec_from_args
from unigraph.cli_common import _print_summary as print_done
from unigraph.distributed import format as fmt
from unigraph.distributed.partition import format_report, partition_dataset
from unigraph.distributed.streaming import METHODS, partition_chunked
from unigraph.distributed.train import DistJobSpec, build_model, partitioned_layout, run_partitioned_job
from unigraph.train import job as jobs
from unigraph.train.distributed import launched_by_environment, listen_on_master, resolve_master
from unigraph.train.launch import LaunchError, free_port, launch

# train options that describe an in-memory dataset or another kind of parallelism
_NOT_WITH_PARTITIONS = {"dataset": "synthetic", "root": None, "nodes": 2000, "pipeline_stages": None,
                        "micro_batches": None, "balance": None, "num_workers": 0, "task": "node", "log_dir": None,
                        "tensorboard": False}


def add_partition_command(commands) -> argparse.ArgumentParser:
    """The ``unigraph partition`` sub-command (its handler is ``args.run``)."""
    parser = commands.add_parser("partition", help="cut a dataset into a partition set for training across machines")
    parser.add_argument("--dataset", default="synthetic", choices=jobs.DATASETS,
                        help="any dataset `unigraph train` takes (default: synthetic)")
    parser.add_argument("--root", help="folder with the Planetoid files for cora/citeseer/pubmed")
    parser.add_argument("--nodes", type=int, default=2000, help="nodes of the synthetic graph (default 2000)")
    parser.add_argument("--parts", type=int, required=True, help="number of partitions (= trainers)")
    parser.add_argument("--out", required=True, help="directory to write the partition set to")
    parser.add_argument("--method", choices=METHODS,
                        help="metis (default; needs the `partition` extra: pymetis), lp (built-in: BFS + balanced "
                             "label propagation) or random; with --chunked also ldg (its default) or fennel: streaming, "
                             "memory bounded by the chunk size")
    parser.add_argument("--seed", type=int, default=0, help="default 0")
    chunked = parser.add_argument_group("graphs on disk (unigraph.distributed.streaming)")
    chunked.add_argument("--chunked", help="partition the chunked graph in DIR (`unigraph chunk`) into a set of "
                         "chunked parts (mapped when trained on)")
    chunked.add_argument("--layout", choices=["npz", "chunked"], help="parts as .npz files or chunked directories "
                         "(default: npz; chunked with --chunked)")
    chunked.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    chunked.add_argument("--passes", type=int, default=1, help="streaming passes (restreaming; default 1)")
    chunked.add_argument("--imbalance", type=float, default=0.05, help="streaming: parts hold at most (1 + this) "
                         "times the mean nodes and training nodes (default 0.05)")
    chunked.add_argument("--no-eids", action="store_true", help="leave the original edge ids out of chunked parts "
                         "(8 bytes an edge; training does not read them)")
    chunked.add_argument("--chunk-mib", type=float, default=64.0, help="rows per block of the streaming passes, "
                         "in MiB of features (default 64)")
    parser.set_defaults(run=functools.partial(run_partition, parser))
    return parser


def add_train_arguments(train: argparse.ArgumentParser) -> None:
    """``unigraph train`` options of partitioned training."""
    group = train.add_argument_group("partitioned graphs (training across machines)")
    group.add_argument("--partitions", help="train on the partition set in DIR (`unigraph partition`): one trainer "
                       "per partition, each holding only its partition")
    group.add_argument("--num-samplers", type=int, default=0, help="sampler processes per trainer (default 0: sample "
                       "in the trainer, in a prefetch thread)")
    group.add_argument("--cache-size", type=int, default=0, help="remote nodes whose features each trainer caches "
                       "(the halo nodes of highest degree; default 0)")
    group.add_argument("--prefetch", type=int, default=2, help="batches prepared ahead per trainer (default 2)")
    group.add_argument("--eval-fanouts", type=_int_list, help="fanouts of evaluation; default: every in-edge (exact)")
    group.add_argument("--nnodes", type=int, default=1, help="machines in the job (default 1)")
    group.add_argument("--node-rank", type=int, default=0, help="this machine's index, 0..nnodes-1 (default 0)")
    group.add_argument("--master-addr", default="127.0.0.1", help="address of machine 0, where the rendezvous store "
                       "listens (default 127.0.0.1: one machine). torch.distributed has no authentication: use a "
                       "private network (docs/security.md)")
    group.add_argument("--numa", action="store_true", help="one process per NUMA node, bound to its cores with a "
                       "thread per core (unigraph.numa; nothing changes on one node)")
    group.add_argument("--master-port", type=int, help="rendezvous port on machine 0 (default: a free port; give "
                       "one when --nnodes > 1)")


def run_partition(parser: argparse.ArgumentParser, args) -> int:
    try:
        if args.chunked is not None:
            if args.layout == "npz":
                raise ValueError("--chunked writes chunked parts (drop --layout npz)")
            info = partition_chunked(args.chunked, args.parts, args.out, method=args.method or "ldg", seed=args.seed,
                                     passes=args.passes, imbalance=args.imbalance, workers=args.workers,
                                     chunk_bytes=int(args.chunk_mib * 2 ** 20), eids=not args.no_eids)
        else:
            if args.nodes < 100:
                raise ValueError(f"--nodes must be >= 100, got {args.nodes}")
            if args.method in ("ldg", "fennel"):
                raise ValueError(f"--method {args.method} streams a graph on disk: give --chunked DIR (`unigraph chunk`)")
            dataset = jobs.load_dataset(jobs.JobSpec(dataset=args.dataset, root=args.root, synthetic_nodes=args.nodes))
            info = partition_dataset(dataset, args.parts, args.out, method=args.method or "metis", seed=args.seed,
                                     layout=args.layout or "npz")
    except (*USER_ERRORS, ImportError) as err:  # ImportError: --method metis without pymetis
        parser.error(str(err))
    print(format_report(info), flush=True)
    return 0


def _spec(parser: argparse.ArgumentParser, args) -> tuple[DistJobSpec, fmt.PartitionSetInfo, int]:
    """The job, the set's metadata and the processes to start on this machine; the files it reads
    and writes are checked here, before any process starts: the metadata, the parts this machine's
    trainers load (checksums, set ids, finite features), the master address and port, the checkpoint
    directory and a checkpoint to resume."""
    for name, default in _NOT_WITH_PARTITIONS.items():
        if getattr(args, name) != default:
            raise ValueError(f"--{name.replace('_', '-')} does not apply with --partitions (the data and its "
                             "split come from the partition set)")
    info = fmt.read_metadata(args.partitions)
    for name in ("num_samplers", "cache_size"):
        if getattr(args, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if args.nnodes < 1 or not 0 <= args.node_rank < args.nnodes:
        raise ValueError(f"--node-rank must be in 0..--nnodes-1 = 0..{args.nnodes - 1}, got {args.node_rank}")
    if args.nnodes > 1 and args.master_port is None:
        raise ValueError("--nnodes > 1 needs --master-port (and --master-addr): the same on every machine")
    _check_master(args)
    group = 1 + args.num_samplers
    if launched_by_environment():
        nproc = None
    else:
        trainers_here = args.nproc if args.nproc is not None else info.num_parts // args.nnodes
        if trainers_here * args.nnodes != info.num_parts:
            raise ValueError(f"the partition set has {info.num_parts} partitions (one trainer each), but --nproc "
                             f"{trainers_here} x --nnodes {args.nnodes} = {trainers_here * args.nnodes} trainers")
        nproc = trainers_here * group
    train = spec_from_args(argparse.Namespace(**{**vars(args), "nproc": None}))
    spec = DistJobSpec(args.partitions, train.model, train.train, num_samplers=args.num_samplers,
                       cache_size=args.cache_size, prefetch=args.prefetch, eval_fanouts=args.eval_fanouts,
                       backend=train.backend, threads=args.threads,
                       rank_offset=args.node_rank * (nproc or 0))
    if spec.prefetch < 0:
        raise ValueError(f"--prefetch must be >= 0, got {spec.prefetch}")
    model = build_model(spec, info)  # a model that does not fit the set's features and classes: fail now
    if nproc is not None:  # (under torchrun every process checks its own part as it loads it)
        trainers_here = nproc // group
        for part in range(args.node_rank * trainers_here, (args.node_rank + 1) * trainers_here):
            fmt.load_part_arrays(info, part, names=("x",))  # checksums, and features finite (one part at a time)
    check_files(train, layout=partitioned_layout(info), model=model)
    return spec, info, nproc


def _check_master(args) -> None:
    """--master-addr must resolve and --master-port lie in 1..65535; on machine 0 (which hosts the
    rendezvous store) the address must be this machine's and the port free. Checked before any
    process starts: a typo would otherwise end only when the ranks' timeout does."""
    if args.master_port is not None and not 1 <= args.master_port <= 65535:
        raise ValueError(f"--master-port must be in 1..65535, got {args.master_port}")
    try:
        if args.node_rank == 0 and int(os.environ.get("RANK", 0)) == 0 and not launched_by_environment():
            listen_on_master(args.master_addr, args.master_port).close()
        else:
            resolve_master(args.master_addr, args.master_port)
    except ValueError as err:
        where = f"--master-addr {args.master_addr}" + (f" --master-port {args.master_port}" if args.master_port else "")
        raise ValueError(f"{where}: {err}") from None


def run_partitioned_train(parser: argparse.ArgumentParser, args) -> int:
    try:
        spec, info, nproc = _spec(parser, args)
    except USER_ERRORS as err:
        parser.error(str(err))
    if args.node_rank == 0 and int(os.environ.get("RANK", 0)) == 0:
        print(f"unigraph train: {spec.model.name} ({spec.model.num_layers} layers) on the partition set "
              f"{info.directory} ({info.num_parts} partitions of {info.dataset}: {info.num_nodes} nodes, "
              f"{info.num_edges} edges)\nmode: one trainer per partition, {spec.num_samplers} sampler process(es) "
              f"each, {spec.train.epochs} epochs, seed {spec.train.seed}", flush=True)
    if nproc is None:  # torchrun started this process
        summary = run_partitioned_job(spec)
        if summary["rank"] == 0:
            _print_summary([summary])
        return 0
    env = {"WORLD_SIZE": str(nproc * args.nnodes), "MASTER_ADDR": args.master_addr,
           "MASTER_PORT": str(args.master_port or free_port(args.master_addr))}
    if args.numa and args.threads is not None:
        parser.error("--numa sets the threads of each process (its node's cores): drop --threads")
    try:
        start = numa.launch if args.numa else launch
        summaries = start(run_partitioned_job, nproc, args=(spec,), threads=spec.threads, env=env,
                          timeout=max(3600.0, 10 * spec.train.timeout))
    except LaunchError as err:
        print(f"unigraph train: the job failed: {err}", file=sys.stderr, flush=True)
        return 1
    _print_summary(summaries)
    return 0


def _print_summary(summaries: list[dict]) -> None:
    trainers = [s for s in summaries if "epochs" in s]
    sent = sum(s["traffic"]["bytes_sent"] + s["traffic"]["bytes_received"] for s in summaries) + \
        sum(s["loader"]["sampler_bytes"] for s in trainers)
    print_done(trainers[0])
    hits = sum(s["cache"]["hits"] for s in trainers)
    looked_up = hits + sum(s["cache"]["misses"] for s in trainers)
    rate = f"{hits / looked_up:.3f}" if looked_up else "n/a"
    print(f"traffic asked for by the {len(summaries)} process(es) reported here (request and reply payloads): "
          f"{sent / 2**20:.1f} MiB; "
          f"remote-feature cache hit rate {rate}; peak RSS per process (MiB): "
          f"{', '.join(str(s['peak_rss_bytes'] >> 20) for s in summaries)}", flush=True)
