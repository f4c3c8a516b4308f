"""``unigraph train --task graph|link``: datasets, models and trainers of the tasks beyond node
classification, plus what every task shares on the command line (per-task defaults, dataset
names in any letter case, the metrics log).

    unigraph train --task graph                                  # GIN on the built-in motif graphs
    unigraph train --task graph --dataset MUTAG --root DIR       # a TU dataset (DIR/MUTAG_A.txt, ...)
    unigraph train --task link                                   # GAE on the built-in synthetic graph
    unigraph train --task link --dataset cora --root DIR         # GAE on Cora's link split
    unigraph train --dataset ogbn-arxiv --root DIR               # node classification on an OGB folder
    ... --log-dir runs/a [--tensorboard]                         # metrics.csv/.json, curves.png

Graph and link jobs run in one process (no data/pipeline parallelism, no checkpoints yet); the
flags that would need them are refused with a message.
"""
from __future__ import annotations

import argparse
import dataclasses
import time

from unigraph.data import Planetoid, motif_graphs, planted_partition, read_ogb_node, read_tu, split_graphs
from unigraph.data.planetoid import NAMES as PLANETOID_NAMES
from unigraph.data.roots import planetoid_folder, tu_location
from unigraph.models import GAE, GINClassifier
from unigraph.tasks.link import split_edges
from unigraph.train.config import TrainConfig
from unigraph.train.graph_trainer import GraphTrainer
from unigraph.train.link_trainer import LinkTrainer
from unigraph.train.metrics_log import MetricsLog
from unigraph.train.models import build_node_classifier
from unigraph.train.rng import seed_everything

TASKS = ("node", "graph", "link")
SYNTHETIC = "synthetic"
# Defaults that differ by task, for the flags left unset (None) on the command line.
TASK_DEFAULTS = {
    "node": dict(model="gat", layers=2, lr=0.005, weight_decay=5e-4, epochs=200),
    "graph": dict(model="gin", layers=4, lr=0.01, weight_decay=0.0, epochs=100, hidden=32, dropout=0.5),
    # PyG's examples/link_pred.py: GCN 128 -> 64, Adam lr 0.01, 100 epochs, fresh negatives per epoch
    "link": dict(model="gcn", layers=2, lr=0.01, weight_decay=0.0, epochs=100, hidden=128, dropout=0.0),
}
LINK_EMBEDDING = 64   # the link encoder's embedding width (PyG's link_pred.py)
HITS_K = 50


def apply_task_defaults(args: argparse.Namespace) -> None:
    """Fill the flags the user left unset with ``args.task``'s defaults."""
    for key, value in TASK_DEFAULTS[args.task].items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)


def dataset_choices(task: str) -> str:
    return {"node": f"{SYNTHETIC}, {', '.join(PLANETOID_NAMES)}, or an OGB node dataset (ogbn-arxiv, ...) with --root",
            "graph": f"{SYNTHETIC} (the built-in motif graphs) or a TU dataset name with --root",
            "link": f"{SYNTHETIC}, {', '.join(PLANETOID_NAMES)}"}[task]


def canonical_dataset(task: str, name: str) -> str:
    """The dataset name as the readers want it: known names in lower case (``Cora`` -> ``cora``,
    ``ogbn-Arxiv`` -> ``ogbn-arxiv``); a TU name as typed (its files are found in any case)."""
    lower = name.lower()
    known = {"node": (SYNTHETIC,) + PLANETOID_NAMES, "graph": (SYNTHETIC, "motifs"),
             "link": (SYNTHETIC,) + PLANETOID_NAMES}[task]
    if lower in known:
        return SYNTHETIC if lower == "motifs" else lower
    if task == "node" and lower.startswith("ogbn-"):
        return lower
    if task == "graph":
        return name
    raise ValueError(f"invalid choice: {name!r} for --task {task} (choose {dataset_choices(task)})")


def needs_root(task: str, dataset: str, root: str | None) -> None:
    if dataset != SYNTHETIC and root is None:
        where = {"graph": f"{dataset}_A.txt, ...", "link": f"ind.{dataset}.x, ...", "node": "its raw files"}[task]
        raise ValueError(f"--dataset {dataset} reads files from a folder: pass --root DIR (the folder holding {where}, "
                         "or PyG's root above it)")


def ogb_node_dataset(root: str | None, name: str):
    """An OGB node dataset as a NodeDataset (one class per node, features required)."""
    if root is None:
        raise ValueError(f"--dataset {name} reads OGB's unpacked folder: pass --root DIR (the folder holding "
                         f"{name.replace('-', '_')}/raw and /split)")
    return read_ogb_node(root, name).to_node_dataset()


def refuse_node_only_flags(args: argparse.Namespace) -> None:
    for flag, value in (("--nproc", args.nproc if args.nproc not in (None, 1) else None),
                        ("--pipeline-stages", args.pipeline_stages), ("--checkpoint", args.checkpoint),
                        ("--heads", args.heads)):
        if value is not None:
            raise ValueError(f"{flag} is not supported with --task {args.task} (one process, no checkpoints yet)")
    if args.task == "graph" and args.fanouts is not None:
        raise ValueError("--fanouts applies to --task node and --task link (graph classification batches whole graphs)")
    if args.fanouts is not None and len(args.fanouts) != args.layers:
        raise ValueError(f"--fanouts has {len(args.fanouts)} entries but the model has {args.layers} layers "
                         "(one fanout per layer)")


def train_config(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(epochs=args.epochs, lr=args.lr, weight_decay=args.weight_decay, optimizer=args.optimizer,
                       batch_size=args.batch_size, fanouts=args.fanouts, num_workers=args.num_workers,
                       patience=args.patience or None, seed=args.seed, progress=args.progress,
                       log_every=args.log_every, timeout=args.timeout)


@dataclasses.dataclass
class TaskJob:
    """A loaded graph or link job: ``fit()`` trains and returns the summary line."""

    describe: str
    fit: object


def prepare(args: argparse.Namespace, on_epoch) -> TaskJob:
    """Load the data and build the model and trainer; every user mistake raises ValueError/
    TypeError/FileNotFoundError here, before training."""
    refuse_node_only_flags(args)
    config = train_config(args)
    needs_root(args.task, args.dataset, args.root)
    seed_everything(args.seed)
    if args.task == "graph":
        return _graph_job(args, config, on_epoch)
    return _link_job(args, config, on_epoch)


def _graph_job(args, config: TrainConfig, on_epoch) -> TaskJob:
    if args.model not in ("gin",):
        raise ValueError(f"--task graph trains --model gin (GINClassifier); got --model {args.model}")
    if args.dataset == SYNTHETIC:
        dataset = motif_graphs(1000, seed=0)
    else:
        folder, prefix = tu_location(args.root, args.dataset)
        dataset = read_tu(folder, prefix)
    if dataset.y.dim() != 1:
        raise ValueError(f"{dataset.name} holds regression targets; --task graph trains classifiers")
    splits = split_graphs(len(dataset), (0.8, 0.1, 0.1), seed=args.seed, labels=dataset.y)
    model = GINClassifier(dataset.num_features, hidden_channels=args.hidden, num_classes=dataset.num_classes,
                          num_layers=args.layers, dropout=args.dropout)
    trainer = GraphTrainer(model, dataset, splits, config, on_epoch=on_epoch)

    def fit() -> str:
        result = trainer.fit()
        return (f"best epoch {result.best_epoch}: val acc {result.best_val_acc:.4f}, test acc {result.test_acc:.4f}")

    return TaskJob(f"unigraph train --task graph: GINClassifier ({args.layers} layers of {args.hidden}) on {dataset!r}; "
                   f"{config.epochs} epochs, batches of {config.batch_size or 32} graphs, seed {config.seed}", fit)


def _link_job(args, config: TrainConfig, on_epoch) -> TaskJob:
    if args.dataset == SYNTHETIC:
        data = planted_partition(2000, seed=0)
    else:
        data = Planetoid(planetoid_folder(args.root, args.dataset), args.dataset, normalize_features=True)
    split = split_edges(data.graph, 0.05, 0.1, seed=args.seed)
    encoder = build_node_classifier(args.model, data.num_features, LINK_EMBEDDING, num_layers=args.layers,
                                    hidden_channels=args.hidden, dropout=args.dropout)
    trainer = LinkTrainer(GAE(encoder), split, data.x, config, hits_k=HITS_K, on_epoch=on_epoch)

    def fit() -> str:
        result = trainer.fit()
        return (f"best epoch {result.best_epoch}: val AUC {result.best_val_auc:.4f}, test AUC {result.test_auc:.4f}, "
                f"test Hits@{HITS_K} {result.test_hits:.4f}")

    mode = "full graph" if trainer.loader is None else f"batches of {config.batch_size} edges"
    return TaskJob(f"unigraph train --task link: GAE with a {args.model} encoder ({args.layers} layers) on "
                   f"{data.name}: {split!r}; {mode}; {config.epochs} epochs, seed {config.seed}", fit)


def open_log(args: argparse.Namespace) -> MetricsLog | None:
    if args.log_dir is None:
        if args.tensorboard:
            raise ValueError("--tensorboard needs --log-dir DIR (where the event files go)")
        return None
    return MetricsLog(args.log_dir, tensorboard=args.tensorboard)


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The whole ``--task graph|link`` command; a user mistake ends it through ``parser.error``."""
    try:
        log = open_log(args)
        job = prepare(args, on_epoch=None if log is None else (lambda metrics: log.log(metrics.as_dict())))
    except (ValueError, TypeError, FileNotFoundError, ImportError) as err:
        parser.error(str(err))
    print(job.describe, flush=True)
    began = time.perf_counter()
    try:
        summary = job.fit()
    finally:
        if log is not None:
            log.close()
    print(f"done in {time.perf_counter() - began:.1f} s; {summary}", flush=True)
    return 0


def write_history(log: MetricsLog | None, history: list[dict]) -> None:
    """The node task's per-epoch history (from the job's summary) into the log, then close it."""
    if log is None:
        return
    for row in history:
        log.log(row)
    log.close()

