"""The command line of partitioned graphs: ``unigraph partition`` and ``unigraph train --partitions``.

    unigraph partition --dataset synthetic --parts 4 --out DIR [--method metis|lp|random]
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

from unigraph.data.planetoid import NAMES as PLANETOID_NAMES
from unigraph.distributed import format as fmt
from unigraph.distributed.partition import METHODS, format_report, partition_dataset


def add_partition_command(commands) -> argparse.ArgumentParser:
    """The ``unigraph partition`` sub-command (its handler is ``args.run``)."""
    parser = commands.add_parser("partition", help="cut a dataset into a partition set for training across machines")
    parser.add_argument("--dataset", default="synthetic", choices=("synthetic",) + PLANETOID_NAMES,
                        help="any dataset `unigraph train` takes (default: synthetic)")
    parser.add_argument("--root", help="folder with the Planetoid files for cora/citeseer/pubmed")
    parser.add_argument("--nodes", type=int, default=2000, help="nodes of the synthetic graph (default 2000)")
    parser.add_argument("--parts", type=int, required=True, help="number of partitions (= trainers)")
    parser.add_argument("--out", required=True, help="directory to write the partition set to")
    parser.add_argument("--method", default="metis", choices=METHODS,
                        help="metis (default; needs the `partition` extra: pymetis), lp (built-in: BFS + balanced "
                             "label propagation) or random")
    parser.add_argument("--seed", type=int, default=0, help="default 0")
    parser.set_defaults(run=functools.partial(run_partition, parser))
    return parser


def run_partition(parser: argparse.ArgumentParser, args) -> int:
    from unigraph.train import job as jobs  # noqa: PLC0415 - the dataset loader of `unigraph train`
    try:
        if args.nodes < 100:
            raise ValueError(f"--nodes must be >= 100, got {args.nodes}")
        dataset = jobs.load_dataset(jobs.JobSpec(dataset=args.dataset, root=args.root, synthetic_nodes=args.nodes))
        info = partition_dataset(dataset, args.parts, args.out, method=args.method, seed=args.seed)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as err:
        parser.error(str(err))
    print(format_report(info), flush=True)
    return 0
