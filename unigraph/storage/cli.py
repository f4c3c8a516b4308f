"""The command line of graphs on disk: ``unigraph chunk ...`` and ``unigraph train --chunked DIR``.

    unigraph chunk generate --out G --nodes 24000000 --features 256 --degree 12   # straight to disk
    unigraph chunk convert --dataset synthetic --nodes 100000 --out G    # or --ogb NAME --root R, --npz F, --edge-list F
    unigraph chunk verify G                                               # every chunk's checksum and values
    unigraph chunk info G
    unigraph partition --chunked G --parts 4 --method ldg --out P         # bounded memory (see unigraph partition)
    unigraph train --chunked G --model sage --batch-size 1024 --fanouts 10,5 --cache-rows 100000

``cli.py`` wires these in; everything else is here.
"""
from __future__ import annotations

import argparse
import functools
import sys
import time

from unigraph.cli_common import USER_ERRORS, _print_summary, check_files, spec_from_args
from unigraph.storage.chunked import DEFAULT_CHUNK_BYTES, ChunkedGraph

_NOT_WITH_CHUNKED = {"dataset": "synthetic", "root": None, "nodes": 2000, "pipeline_stages": None,
                     "micro_batches": None, "balance": None, "num_workers": 0, "task": "node", "nproc": None,
                     "partitions": None, "num_samplers": 0, "cache_size": 0, "nnodes": 1, "log_dir": None}


def _chunk_bytes(args) -> int:
    if args.chunk_mib <= 0:
        raise ValueError(f"--chunk-mib must be > 0, got {args.chunk_mib}")
    return int(args.chunk_mib * 2 ** 20)


def add_chunk_command(commands) -> argparse.ArgumentParser:
    """``unigraph chunk``: write, convert, verify and describe chunked graphs (handler: ``args.run``)."""
    parser = commands.add_parser("chunk", help="graphs on disk in the chunked format: generate, convert, verify")
    sub = parser.add_subparsers(dest="chunk_command", metavar="{generate,convert,verify,info}", required=True)
    generate = sub.add_parser("generate", help="a planted-partition graph written a block at a time (any size)")
    generate.add_argument("--out", required=True, help="directory to write")
    generate.add_argument("--nodes", type=int, required=True)
    generate.add_argument("--features", type=int, default=128, help="default 128")
    generate.add_argument("--classes", type=int, default=4, help="default 4")
    generate.add_argument("--degree", type=int, default=16, help="mean in-degree (default 16)")
    generate.add_argument("--homophily", type=float, default=0.6, help="default 0.6")
    generate.add_argument("--separation", type=float, default=0.6, help="class separation of the features (0.6)")
    generate.add_argument("--train-fraction", type=float, default=0.1, help="default 0.1")
    generate.add_argument("--val-fraction", type=float, default=0.01, help="default 0.01")
    generate.add_argument("--test-fraction", type=float, default=0.01, help="default 0.01")
    generate.add_argument("--feature-dtype", default="float32", choices=["float16", "float32", "float64"])
    generate.add_argument("--seed", type=int, default=0)
    convert = sub.add_parser("convert", help="a dataset, OGB folder, npz or edge list into the chunked format")
    source = convert.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", help="a dataset `unigraph train` takes (synthetic, cora, ...)")
    source.add_argument("--ogb", help="an OGB node dataset name (ogbn-arxiv, ...), read from --root")
    source.add_argument("--npz", help="a .npz with edge_index (or src, dst) and optionally x, y, masks, num_nodes")
    source.add_argument("--edge-list", help="a text edge list (u v per line; # comments; gzip allowed), streamed")
    convert.add_argument("--out", required=True, help="directory to write")
    convert.add_argument("--root", help="the folder of --ogb, or of the Planetoid files of --dataset")
    convert.add_argument("--nodes", type=int, default=2000, help="nodes of --dataset synthetic (default 2000)")
    convert.add_argument("--num-nodes", type=int, help="nodes of --edge-list (default: largest id + 1)")
    convert.add_argument("--undirected", action="store_true", help="--edge-list: add every edge's reverse")
    for command in (generate, convert):
        command.add_argument("--chunk-mib", type=float, default=DEFAULT_CHUNK_BYTES / 2 ** 20,
                             help=f"bytes per chunk, in MiB (default {DEFAULT_CHUNK_BYTES >> 20})")
    verify = sub.add_parser("verify", help="read every chunk once: checksums, sizes and values")
    info = sub.add_parser("info", help="what a chunked graph holds")
    for command in (verify, info):
        command.add_argument("directory")
    parser.set_defaults(run=functools.partial(run_chunk, parser))
    return parser


def run_chunk(parser: argparse.ArgumentParser, args) -> int:
    began = time.perf_counter()
    try:
        graph = _chunk(args)
    except (*USER_ERRORS, OSError) as err:
        parser.error(str(err))
    print(f"{graph!r}\n({time.perf_counter() - began:.1f} s)", flush=True)
    return 0


def _chunk(args) -> ChunkedGraph:
    from unigraph.storage import convert  # noqa: PLC0415
    if args.chunk_command == "verify":
        graph = ChunkedGraph(args.directory)
        graph.verify_all()
        return graph
    if args.chunk_command == "info":
        return ChunkedGraph(args.directory, verify=False)
    if args.chunk_command == "generate":
        from unigraph.storage.generate import PlantedSpec, planted_stream  # noqa: PLC0415
        spec = PlantedSpec(args.nodes, num_classes=args.classes, num_features=args.features, avg_degree=args.degree,
                           homophily=args.homophily, class_separation=args.separation,
                           train_fraction=args.train_fraction, val_fraction=args.val_fraction,
                           test_fraction=args.test_fraction, feature_dtype=args.feature_dtype, seed=args.seed)
        return planted_stream(args.out, spec, chunk_bytes=_chunk_bytes(args))
    chunk_bytes = _chunk_bytes(args)
    if args.dataset is not None:
        from unigraph.train import job as jobs  # noqa: PLC0415
        if args.nodes < 100:
            raise ValueError(f"--nodes must be >= 100, got {args.nodes}")
        dataset = jobs.load_dataset(jobs.JobSpec(dataset=args.dataset.lower(), root=args.root,
                                                 synthetic_nodes=args.nodes))
        return convert.write_dataset(dataset, args.out, chunk_bytes=chunk_bytes)
    if args.ogb is not None:
        if args.root is None:
            raise ValueError("--ogb needs --root (the folder holding the unpacked OGB dataset)")
        return convert.from_ogb(args.root, args.ogb, args.out, chunk_bytes=chunk_bytes)
    if args.npz is not None:
        return convert.from_npz(args.npz, args.out, chunk_bytes=chunk_bytes)
    return convert.from_edge_list(args.edge_list, args.out, num_nodes=args.num_nodes, undirected=args.undirected,
                                  chunk_bytes=chunk_bytes)


# ---------------------------------------------------------------------------------------------- training
def add_train_arguments(train: argparse.ArgumentParser) -> None:
    """``unigraph train`` options of out-of-core training."""
    group = train.add_argument_group("graphs on disk (out-of-core training)")
    group.add_argument("--chunked", help="train from the chunked graph in DIR (`unigraph chunk`), mapped from disk: "
                       "memory bounded by the batch and the cache, not the graph")
    group.add_argument("--cache-rows", type=int, default=0, help="feature rows of the highest out-degree nodes kept "
                       "in memory (default 0)")
    group.add_argument("--no-advise", action="store_true", help="do not read the next batch's feature pages ahead "
                       "(madvise)")


def run_chunked_train(parser: argparse.ArgumentParser, args) -> int:
    from unigraph.storage.mapped import PeakMemory  # noqa: PLC0415
    from unigraph.storage.train import OutOfCoreTrainer  # noqa: PLC0415
    from unigraph.train.models import build_node_classifier  # noqa: PLC0415
    from unigraph.train.rng import seed_everything  # noqa: PLC0415
    import unigraph  # noqa: PLC0415
    import torch  # noqa: PLC0415
    try:
        for name, default in _NOT_WITH_CHUNKED.items():
            if getattr(args, name, default) != default:
                raise ValueError(f"--{name.replace('_', '-')} does not apply with --chunked (one process; the data "
                                 "and its split come from the chunked graph)")
        if args.cache_rows < 0:
            raise ValueError(f"--cache-rows must be >= 0, got {args.cache_rows}")
        if args.prefetch < 0:
            raise ValueError(f"--prefetch must be >= 0, got {args.prefetch}")
        spec = spec_from_args(args)
        if spec.train.batch_size is None:
            raise ValueError("--chunked trains on mini-batches: give --batch-size (and --fanouts)")
        unigraph.set_backend(spec.backend)
        if spec.threads is not None:
            torch.set_num_threads(spec.threads)
        graph = ChunkedGraph(args.chunked)
        seed_everything(spec.train.seed)
        m = spec.model
        model = build_node_classifier(m.name, graph.num_features, graph.num_classes, num_layers=m.num_layers,
                                      hidden_channels=m.hidden_channels, heads=m.heads, dropout=m.dropout)
        trainer = OutOfCoreTrainer(model, graph, spec.train, cache_rows=args.cache_rows, prefetch=args.prefetch,
                                   advise=not args.no_advise, eval_fanouts=args.eval_fanouts)
        check_files(spec, layout=trainer.layout, model=model)
    except (*USER_ERRORS, RuntimeError) as err:
        parser.error(str(err))
    print(f"unigraph train: {m.name} ({m.num_layers} layers) out of core on {graph!r}\nfeature cache: "
          f"{trainer.features.cache_ids.numel():,} rows ({trainer.features.cache_bytes / 2**20:.1f} MiB), prefetch "
          f"{args.prefetch}, read-ahead advice {'off' if args.no_advise else 'on'}", flush=True)
    began = time.perf_counter()
    with PeakMemory() as peak:
        result = trainer.fit()
    seconds = time.perf_counter() - began
    epochs = result.history
    _print_summary({"stopped_early": result.stopped_early, "epochs": len(epochs), "seconds": seconds,
                    "mean_epoch_ms": 1000 * sum(e.seconds for e in epochs) / max(len(epochs), 1),
                    "best_epoch": result.best_epoch, "best_val_acc": result.best_val_acc,
                    "test_acc": result.test_acc})
    features, stats = trainer.features, trainer.loader.stats
    print(f"memory: peak private (RssAnon) {peak.peaks.get('RssAnon', 0) / 2**20:,.0f} MiB, peak resident "
          f"(VmHWM, mapped file pages included) {peak.peaks.get('VmHWM', 0) / 2**20:,.0f} MiB; feature cache hit rate "
          f"{features.hit_rate:.3f}; waited for batches {stats['wait']:.1f} s of {trainer.timing['train_seconds']:.1f} s",
          file=sys.stdout, flush=True)
    return 0
