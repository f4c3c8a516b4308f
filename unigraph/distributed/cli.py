"""The command line of partitioned graphs: ``unigraph partition`` and ``unigraph train --partitions``.

    unigraph partition --dataset synthetic --parts 4 --out DIR [--method metis|lp|random]
    unigraph partition --chunked GRAPH --parts 4 --out DIR [--method ldg|fennel] [--workers W]   # bounded memory
    unigraph train --partitions DIR --model sage --epochs 2 --batch-size 256 --fanouts 10,5
        # one machine: its graph server (all parts) and one trainer
    unigraph train --partitions DIR --trainers-per-machine 2 --num-samplers 1 --cache-size 20000
    # two machines, each a server + its trainers (run on each machine, --node-rank 0 and 1):
    unigraph train --partitions DIR --nnodes 2 --node-rank 0 --master-addr HOST --master-port 29500
    # or all machines from one command (ssh; or --launch print to get the commands):
    unigraph train --partitions DIR --hosts hosts.txt --master-port 29500 [--ifname eth1] [--ship /tmp/parts]
    # or with torchrun on each machine (processes per machine = 1 + trainers x (1 + samplers)):
    torchrun --nnodes 2 --nproc-per-node 2 --node-rank 0 --master-addr HOST --master-port 29500 \\
        $(which unigraph) train --partitions DIR

``cli.py`` wires these in; everything else is here.
"""
from __future__ import annotations

import argparse
import functools
import os
import shlex
import sys

from unigraph import numa
from unigraph.cli_common import USER_ERRORS, _int_list, check_files, spec_from_args
from unigraph.cli_common import _print_summary as print_done
from unigraph.distributed import cluster
from unigraph.distributed import format as fmt
from unigraph.distributed.job import DistJobSpec, build_model, run_partitioned_job
from unigraph.distributed.layout import JobLayout
from unigraph.distributed.partition import DEFAULT_TOLERANCE, format_report, partition_dataset
from unigraph.distributed.streaming import METHODS, partition_chunked
from unigraph.distributed.train import check_evaluation, partitioned_layout
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
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                        help=f"METIS: bring each part's in-edges, training nodes and nodes within this x their mean "
                             f"(default {DEFAULT_TOLERANCE})")
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
    group.add_argument("--partitions", help="train on the partition set in DIR (`unigraph partition`): each machine "
                       "runs a graph server holding its parts in shared memory, and its trainers")
    group.add_argument("--trainers-per-machine", type=int, default=1, help="trainer processes per machine, each on "
                       "a share of the machine's training nodes (default 1)")
    group.add_argument("--num-samplers", type=int, default=0, help="sampler processes per trainer (default 0: sample "
                       "in the trainer, in a prefetch thread)")
    group.add_argument("--cache-size", type=int, default=0, help="halo feature rows each machine caches: those its "
                       "seeds are expected to read most (default 0)")
    group.add_argument("--prefetch", type=int, default=2, help="batches prepared ahead per trainer (default 2)")
    group.add_argument("--eval-fanouts", type=_int_list, help="evaluate on blocks sampled with these fanouts; "
                       "default: layer-wise, every in-edge (exact for sage, gat, gin)")
    group.add_argument("--nnodes", type=int, default=1, help="machines in the job (default 1)")
    group.add_argument("--node-rank", type=int, default=0, help="this machine's index, 0..nnodes-1 (default 0)")
    group.add_argument("--master-addr", default="127.0.0.1", help="address of machine 0, where the rendezvous store "
                       "listens (default 127.0.0.1: one machine). torch.distributed has no authentication: use a "
                       "private network (docs/security.md)")
    group.add_argument("--numa", action="store_true", help="one process per NUMA node, bound to its cores with a "
                       "thread per core (unigraph.numa; nothing changes on one node)")
    group.add_argument("--master-port", type=int, help="rendezvous port on machine 0 (default: a free port; give "
                       "one when --nnodes > 1)")
    group.add_argument("--ifname", help="network interface of every process's connections (sets GLOO_SOCKET_IFNAME "
                       "and TP_SOCKET_IFNAME)")
    cluster_group = train.add_argument_group("starting every machine from here (unigraph.distributed.cluster)")
    cluster_group.add_argument("--hosts", help="a file with one machine address per line: start the job on all of "
                               "them (machine 0, the first, hosts the rendezvous)")
    cluster_group.add_argument("--launch", default="ssh", choices=cluster.LAUNCHES, help="with --hosts: run each "
                               "machine's command over ssh (default), or print the commands")
    cluster_group.add_argument("--remote", help="with --hosts: run each machine's command through this template "
                               "instead of ssh ({host}, {index}, {command})")
    cluster_group.add_argument("--ship", metavar="REMOTE_DIR", help="with --hosts: copy each machine's parts and the "
                               "metadata there first (default: every machine reads --partitions: shared storage)")
    cluster_group.add_argument("--copy", help="with --ship: the copy command template instead of ssh mkdir + scp "
                               "({host}, {index}, {files}, {dest})")


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
                                     tolerance=args.tolerance, layout=args.layout or "npz")
    except (*USER_ERRORS, ImportError) as err:  # ImportError: --method metis without pymetis
        parser.error(str(err))
    print(format_report(info), flush=True)
    return 0


def _spec(parser: argparse.ArgumentParser, args) -> tuple[DistJobSpec, fmt.PartitionSetInfo, JobLayout, int | None]:
    """The job, the set's metadata, its layout and the processes to start on this machine; the
    files it reads and writes are checked here, before any process starts: the metadata, the
    parts this machine's server loads (checksums, set ids, finite features), the master address
    and port, the checkpoint directory and a checkpoint to resume."""
    for name, default in {**_NOT_WITH_PARTITIONS, "nproc": None}.items():
        if getattr(args, name) != default:
            hint = " (use --trainers-per-machine and --num-samplers)" if name == "nproc" else \
                " (the data and its split come from the partition set)"
            raise ValueError(f"--{name.replace('_', '-')} does not apply with --partitions{hint}")
    info = fmt.read_metadata(args.partitions)
    for name in ("num_samplers", "cache_size"):
        if getattr(args, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if args.trainers_per_machine < 1:
        raise ValueError(f"--trainers-per-machine must be >= 1, got {args.trainers_per_machine}")
    if args.nnodes < 1 or not 0 <= args.node_rank < args.nnodes:
        raise ValueError(f"--node-rank must be in 0..--nnodes-1 = 0..{args.nnodes - 1}, got {args.node_rank}")
    if args.nnodes > 1 and args.master_port is None:
        raise ValueError("--nnodes > 1 needs --master-port (and --master-addr): the same on every machine")
    _check_master(args)
    layout = JobLayout(info.num_parts, args.nnodes, args.trainers_per_machine, args.num_samplers)
    nproc = None if launched_by_environment() else layout.processes_per_machine
    train = spec_from_args(argparse.Namespace(**{**vars(args), "nproc": None}))
    spec = DistJobSpec(args.partitions, train.model, train.train, trainers_per_machine=args.trainers_per_machine,
                       num_samplers=args.num_samplers, cache_size=args.cache_size, prefetch=args.prefetch,
                       eval_fanouts=args.eval_fanouts, backend=train.backend, threads=args.threads,
                       rank_offset=args.node_rank * (nproc or 0))
    if spec.prefetch < 0:
        raise ValueError(f"--prefetch must be >= 0, got {spec.prefetch}")
    model = build_model(spec, info)  # a model that does not fit the set's features and classes: fail now
    check_evaluation(spec.train)
    if nproc is not None:  # (under torchrun every server checks its parts as it loads them)
        for part in layout.machine_parts(args.node_rank):
            fmt.load_part_arrays(info, part, names=("x",))  # checksums, and features finite (one part at a time)
    check_files(train, layout=partitioned_layout(info, layout.num_trainers), model=model)
    return spec, info, layout, nproc


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


def interface_env(ifname: str | None) -> dict[str, str]:
    """The environment that makes gloo and TensorPipe connect through interface ``ifname``."""
    return {} if not ifname else {"GLOO_SOCKET_IFNAME": ifname, "TP_SOCKET_IFNAME": ifname}


def run_partitioned_train(parser: argparse.ArgumentParser, args, argv: list[str] = ()) -> int:
    """``unigraph train --partitions``: this machine's processes (or, with ``--hosts``, every machine's
    ``unigraph train``; ``argv``: the command line after ``train``, passed on to them)."""
    if args.hosts is not None:
        return run_cluster(parser, args, list(argv)[list(argv).index("train") + 1:] if "train" in argv else [])
    try:
        spec, info, layout, nproc = _spec(parser, args)
    except USER_ERRORS as err:
        parser.error(str(err))
    if args.node_rank == 0 and int(os.environ.get("RANK", 0)) == 0:
        print(f"unigraph train: {spec.model.name} ({spec.model.num_layers} layers) on the partition set "
              f"{info.directory} ({info.num_parts} partitions of {info.dataset}: {info.num_nodes} nodes, "
              f"{info.num_edges} edges)\nmode: {layout.num_machines} machine(s), each a graph server with "
              f"{layout.parts_per_machine} partition(s) and {layout.trainers_per_machine} trainer(s) with "
              f"{spec.num_samplers} sampler process(es) each, {spec.train.epochs} epochs, seed {spec.train.seed}",
              flush=True)
    if nproc is None:  # torchrun started this process
        os.environ.update(interface_env(args.ifname))
        summary = run_partitioned_job(spec)
        if summary["rank"] == 1:
            _print_summary([summary])
        return 0
    env = {"WORLD_SIZE": str(nproc * args.nnodes), "MASTER_ADDR": args.master_addr,
           "MASTER_PORT": str(args.master_port or free_port(args.master_addr)), **interface_env(args.ifname)}
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


def run_cluster(parser: argparse.ArgumentParser, args, argv: list[str]) -> int:
    """``--hosts``: one ``unigraph train`` per machine (:mod:`unigraph.distributed.cluster`)."""
    try:
        hosts = cluster.read_hosts(args.hosts)
        info = fmt.read_metadata(args.partitions)
        layout = JobLayout(info.num_parts, len(hosts), args.trainers_per_machine, args.num_samplers)
        if args.nnodes != 1 or args.node_rank != 0:
            raise ValueError("--hosts starts every machine itself: leave out --nnodes and --node-rank")
        if args.master_port is None:
            raise ValueError("--hosts needs --master-port: a port free on the first machine")
        if args.launch == "print" and args.ship:
            raise ValueError("--ship copies with the commands it runs; with --launch print, copy the parts yourself")
    except (*USER_ERRORS, FileNotFoundError) as err:
        parser.error(str(err))
    partitions = args.ship or str(info.directory.resolve())
    commands = cluster.machine_commands(argv, hosts, args.master_port, partitions)
    if args.launch == "print" and args.remote is None:
        for m, command in enumerate(commands):
            print(f"# machine {m} ({hosts[m]})\n{shlex.join(command)}", flush=True)
        return 0
    template = args.remote or cluster.SSH
    if args.ship:
        plan = cluster.ship_plan(info, layout)
        copies = []
        for m, host in enumerate(hosts):
            files = " ".join(shlex.quote(str(f)) for f in plan[m])
            if args.copy:
                copies.append(shlex.split(args.copy.format(host=host, index=m, files=files,
                                                                      dest=shlex.quote(args.ship))))
            else:
                copies.append(["sh", "-c", f"{cluster.SSH.format(host=host, command='mkdir -p ' + args.ship)} && "
                               f"{cluster.SCP.format(files=files, host=host, dest=args.ship)}"])
        code = cluster.run_commands(copies, timeout=3600.0, names=hosts)
        if code:
            print("unigraph train: copying the partition set failed", file=sys.stderr, flush=True)
            return code
    wrapped = [cluster.wrap(template, host, m, command) for m, (host, command) in enumerate(zip(hosts, commands))]
    return cluster.run_commands(wrapped, timeout=max(3600.0, 10 * args.timeout), names=hosts)


def _print_summary(summaries: list[dict]) -> None:
    trainers = [s for s in summaries if "epochs" in s]
    servers = [s for s in summaries if "machine_memory" in s]
    sent = sum(s["traffic"]["bytes_sent"] + s["traffic"]["bytes_received"] for s in summaries) + \
        sum(s["loader"]["sampler_bytes"] for s in trainers)
    if trainers:
        print_done(trainers[0])
    hits = sum(s["cache"]["hits"] for s in trainers)
    looked_up = hits + sum(s["cache"]["misses"] for s in trainers)
    rate = f"{hits / looked_up:.3f}" if looked_up else "n/a"
    memory = "; ".join(f"machine {s['machine']}: {s['machine_memory']['peak'].get('Pss', 0) / 2**20:.1f} MiB PSS at "
                       f"its peak (shared partition {s['machine_memory']['shared_bytes']['partition'] / 2**20:.1f} MiB)"
                       for s in servers)
    print(f"traffic asked for by the {len(summaries)} process(es) reported here (request and reply payloads): "
          f"{sent / 2**20:.1f} MiB; halo feature cache hit rate {rate}; peak RSS per process (MiB): "
          f"{', '.join(str(s['peak_rss_bytes'] >> 20) for s in summaries)}" + (f"; {memory}" if memory else ""),
          flush=True)
