"""One training job as the command line describes it, runnable in any rank.

:class:`JobSpec` is plain data (it travels to spawned ranks); :func:`run_job` loads the dataset,
builds the model under the seed, picks the trainer (single process, data parallel, pipeline, data
x pipeline) and returns a summary. The same function runs in a single process, in each rank
started by :func:`unigraph.train.launch`, and in each rank started by ``torchrun``.
"""
from __future__ import annotations

import dataclasses
import time

import torch

import unigraph
from unigraph.data import NodeDataset, Planetoid, planted_partition
from unigraph.data.planetoid import NAMES as PLANETOID_NAMES
from unigraph.data.roots import planetoid_folder
from unigraph.train import hetero
from unigraph.train.config import ALL_NEIGHBOURS, PipelineConfig, TrainConfig
from unigraph.train.distributed import init_distributed, launched_by_environment, shutdown
from unigraph.train.models import ALIASES, MODELS, build_node_classifier
from unigraph.train.pipeline import PipelineTrainer
from unigraph.train.rng import seed_everything
from unigraph.train.trainer import Trainer

DATASETS = ("synthetic",) + PLANETOID_NAMES


@dataclasses.dataclass
class ModelSpec:
    name: str = "gat"
    num_layers: int = 2
    hidden_channels: int | None = None
    heads: int | None = None
    dropout: float | None = None


@dataclasses.dataclass
class JobSpec:
    """Everything a rank needs: the dataset (``synthetic`` or a Planetoid name with its ``root``),
    the model, the training and pipeline configuration, the backend choice and threads."""

    dataset: str = "synthetic"
    root: str | None = None
    synthetic_nodes: int = 2000
    model: ModelSpec = dataclasses.field(default_factory=ModelSpec)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    pipeline: PipelineConfig | None = None
    backend: str = "auto"
    threads: int | None = None
    world_size: int = 1


def load_dataset(spec: JobSpec) -> NodeDataset:
    """The job's dataset: the built-in planted-partition graph, or Planetoid files from ``root``
    (for a heterogeneous model: the built-in academic graph, see :mod:`unigraph.train.hetero`)."""
    if hetero.is_hetero_model(spec.model.name):
        return hetero.load_dataset(spec)
    if spec.dataset == "synthetic":  # planted_partition's own split at its default 2000 nodes; smaller graphs scale it
        rest = spec.synthetic_nodes - 4 * 20  # 20 training nodes for each of the 4 classes
        num_val = min(500, rest // 3)
        return planted_partition(spec.synthetic_nodes, seed=0, num_val=num_val, num_test=min(1000, rest - num_val))
    if spec.dataset.startswith("ogbn-"):
        from unigraph.train.task_jobs import ogb_node_dataset  # noqa: PLC0415 - the CLI's task module
        return ogb_node_dataset(spec.root, spec.dataset)
    if spec.dataset not in PLANETOID_NAMES:
        raise ValueError(f"unknown dataset {spec.dataset!r}; choose one of {', '.join(DATASETS)}")
    if spec.root is None:
        raise ValueError(f"--dataset {spec.dataset} reads the Planetoid files from a folder: pass --root DIR "
                         f"(the folder holding ind.{spec.dataset}.x, ind.{spec.dataset}.graph, ...)")
    return Planetoid(planetoid_folder(spec.root, spec.dataset), spec.dataset, normalize_features=True)


def build_model(spec: JobSpec, dataset: NodeDataset) -> torch.nn.Module:
    """The model, initialized under the job's seed (identical in every rank and every run)."""
    seed_everything(spec.train.seed)
    if hetero.is_hetero_model(spec.model.name):
        return hetero.build_model(spec, dataset)
    m = spec.model
    return build_node_classifier(m.name, dataset.num_features, dataset.num_classes, num_layers=m.num_layers,
                                 hidden_channels=m.hidden_channels, heads=m.heads, dropout=m.dropout)


def kernel_summary(spec: JobSpec, dataset: NodeDataset) -> str:
    """Which backend the model's main graph operation runs on for this graph, and why."""
    if hetero.is_hetero_model(spec.model.name):
        return hetero.kernel_summary(spec, dataset)
    name = ALIASES.get(spec.model.name, spec.model.name)
    defaults = MODELS[name][1]
    width = spec.model.hidden_channels or defaults["hidden_channels"]
    if name == "gat":
        op, reduce = "gat_attention", None
        width *= spec.model.heads or defaults["heads"]
    else:
        op, reduce = {"gcn": ("u_mul_e", "sum"), "sage": ("copy_u", "mean"), "gin": ("copy_u", "sum")}[name]
    explanation = unigraph.explain(dataset.graph, op, reduce, width)
    return f"kernels: {op} on this graph -> {explanation.backend} ({explanation.source}): {explanation.reason}"


def describe(spec: JobSpec, dataset: NodeDataset) -> str:
    config, pipeline = spec.train, spec.pipeline
    if pipeline is not None:
        mode = (f"pipeline: {pipeline.stages} stages x {pipeline.replicas} replica(s), {pipeline.micro_batches} "
                f"micro-batches, {pipeline.schedule} schedule")
    elif spec.world_size > 1:
        mode = f"data parallel: {spec.world_size} processes"
    else:
        mode = "1 process"
    fanouts = "all in-edges" if config.fanouts is None else "[" + ", ".join(
        "all" if f == ALL_NEIGHBOURS else str(f) for f in config.fanouts) + "]" + (
        " (all: every in-edge)" if ALL_NEIGHBOURS in config.fanouts else "")
    batches = ("full graph" if config.full_graph and spec.world_size == 1 and pipeline is None else
               f"mini-batches of {config.batch_size or 'all'} seeds, fanouts {fanouts}")
    return (f"unigraph train: {spec.model.name} ({spec.model.num_layers} layers) on {dataset!r}\n"
            f"mode: {mode}; {batches}; {config.epochs} epochs, seed {config.seed}; backend choice {spec.backend}")


def run_job(spec: JobSpec) -> dict:
    """Train as ``spec`` says in this process (one rank of the job); returns a summary dict.
    ``spec.threads`` applies while the job runs; the caller's thread count is restored after."""
    threads = torch.get_num_threads()
    if spec.threads is not None:
        torch.set_num_threads(spec.threads)
    unigraph.set_backend(spec.backend)
    distributed = launched_by_environment()
    try:
        context = init_distributed(timeout=spec.train.timeout) if distributed else None
        try:
            summary = _train(spec, context)  # the trainer (DDP, pipeline stages) is gone when it returns
        finally:
            if distributed:
                shutdown()  # after an error: nothing, no barrier (see its docstring)
    finally:
        if spec.threads is not None:
            torch.set_num_threads(threads)
    return {"rank": context.rank if context else 0, **summary}


def _train(spec: JobSpec, context) -> dict:
    dataset = load_dataset(spec)
    model = build_model(spec, dataset)
    began = time.perf_counter()
    if hetero.is_hetero_model(spec.model.name):
        trainer = hetero.HeteroTrainer(model, dataset, spec.train)
    elif spec.pipeline is not None:
        trainer = PipelineTrainer(model, dataset, spec.train, spec.pipeline, context=context)
    else:
        trainer = Trainer(model, dataset, spec.train, context=context)
    result = trainer.fit()
    epochs = result.history
    return {"epochs": len(epochs), "best_epoch": result.best_epoch, "best_val_acc": result.best_val_acc,
            "test_acc": result.test_acc, "stopped_early": result.stopped_early,
            "seconds": time.perf_counter() - began, "losses": result.losses,
            "history": [m.as_dict() for m in epochs],
            "mean_epoch_ms": 1000 * sum(m.seconds for m in epochs) / max(len(epochs), 1)}
