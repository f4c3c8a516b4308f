"""Training on heterogeneous graphs: the R-GCN classifier on the built-in academic graph, full batch
or on typed mini-batches (``unigraph train --model rgcn``).

:class:`HeteroTrainer` is the heterogeneous twin of :class:`~unigraph.train.Trainer` for one
process: each epoch is one step on the whole graph (``batch_size`` and ``fanouts`` unset) or one
step per batch of shuffled training nodes of the target type, each batch a set of typed blocks
from :class:`~unigraph.hetero.HeteroNeighborSampler` (``fanouts`` per layer for every relation;
``-1`` or unset keeps every in-edge). Evaluation runs on the whole graph. It shares the run's
configuration (:class:`~unigraph.train.TrainConfig`), early stopping, progress and metrics with the
homogeneous trainer. Data parallelism, pipelines, sampling workers and checkpoints are not
available for heterogeneous models yet and are refused by name.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import unigraph
from unigraph.data.hetero_synthetic import HeteroNodeDataset, academic_graph
from unigraph.hetero.relational import hetero_layout
from unigraph.hetero.sampling import ALL, HeteroNeighborSampler
from unigraph.models.rgcn import RGCN
from unigraph.train.config import TrainConfig
from unigraph.train.early_stopping import EarlyStopping
from unigraph.train.epochs import STOP_MESSAGE_WITH_BEST, run_epochs
from unigraph.train.metrics import EpochMetrics, TrainResult, accuracy
from unigraph.train.models import HETERO_MODELS
from unigraph.train.trainer import make_optimizer


def is_hetero_model(name: str) -> bool:
    return str(name).lower() in HETERO_MODELS


def check_supported(spec) -> None:
    """Refuse, by name, what heterogeneous training does not do yet."""
    unsupported = [("--dataset " + spec.dataset, spec.dataset != "synthetic"),
                   ("data parallelism (--nproc / torchrun)", spec.world_size > 1),
                   ("--pipeline-stages", spec.pipeline is not None),
                   ("--checkpoint / --resume", spec.train.checkpoint_dir is not None),
                   ("--num-workers", spec.train.num_workers > 0),
                   ("--heads", spec.model.heads is not None)]
    refused = [what for what, present in unsupported if present]
    if refused:
        raise ValueError(f"--model {spec.model.name} trains on the built-in heterogeneous academic graph (--dataset "
                         f"synthetic) in one process; not supported with it: {', '.join(refused)}")


def load_dataset(spec) -> HeteroNodeDataset:
    """The academic graph with ``spec.synthetic_nodes`` papers."""
    check_supported(spec)
    return academic_graph(spec.synthetic_nodes, seed=0)


def build_model(spec, dataset: HeteroNodeDataset) -> RGCN:
    """The model for ``spec`` (seeded by the caller)."""
    defaults = HETERO_MODELS[spec.model.name.lower()]
    hidden = spec.model.hidden_channels or defaults["hidden_channels"]
    dropout = spec.model.dropout if spec.model.dropout is not None else defaults["dropout"]
    return RGCN(dataset.num_features, hidden, dataset.num_classes, dataset.graph.relations, dataset.target,
                num_layers=spec.model.num_layers, dropout=dropout)


def kernel_summary(spec, dataset: HeteroNodeDataset) -> str:
    """Which backend aggregates the relations (one g-SpMM over all of them) and why."""
    width = spec.model.hidden_channels or HETERO_MODELS[spec.model.name.lower()]["hidden_channels"]
    gather = hetero_layout(dataset.graph).gather_graph()
    explanation = unigraph.explain(gather, "copy_u", "mean", width)
    return (f"kernels: copy_u/mean over all {len(dataset.graph.relations)} relations at once -> "
            f"{explanation.backend} ({explanation.source}): {explanation.reason}")


class HeteroTrainer:
    """Trains a heterogeneous node classifier (``model(graph_or_blocks, x_dict)`` returning the
    target type's logits, e.g. :class:`~unigraph.models.RGCN`) as ``config`` says (see the module
    docstring). Features are cast to the model's parameter dtype."""

    def __init__(self, model: torch.nn.Module, dataset: HeteroNodeDataset, config: TrainConfig, *,
                 device: torch.device | str | None = None):
        for value, kind, name in ((model, torch.nn.Module, "model"), (dataset, HeteroNodeDataset, "dataset"),
                                  (config, TrainConfig, "config")):
            if not isinstance(value, kind):
                raise TypeError(f"{name} must be a {kind.__module__}.{kind.__name__}, got {type(value).__name__}")
        if config.checkpoint_dir is not None or config.num_workers:
            raise ValueError("HeteroTrainer does not write checkpoints or start sampling workers yet; leave "
                             "checkpoint_dir=None and num_workers=0")
        self.config = config
        self.device = torch.device(device or "cpu")
        self.model = model.to(self.device)
        self.dataset = dataset.to(self.device)
        dtype = next(model.parameters()).dtype
        self.graph = self.dataset.graph
        self.x = {t: x.to(dtype) for t, x in self.dataset.x_dict.items()}
        self.y = self.dataset.y
        self.train_nodes = self.dataset.train_mask.nonzero().flatten()
        self.full_graph = config.full_graph
        self.optimizer = make_optimizer(model.parameters(), config)
        self.sampler = None
        if not self.full_graph:
            layers = getattr(model, "num_layers", None)
            fanouts = list(config.fanouts) if config.fanouts is not None else [ALL] * (layers or 1)
            if layers is not None and len(fanouts) != layers:
                raise ValueError(f"fanouts has {len(fanouts)} entries but the model has {layers} layers")
            self.sampler = HeteroNeighborSampler(fanouts, replace=config.replace, seed=config.seed)
        self.early_stopping = EarlyStopping(config.patience)
        self.history: list[EpochMetrics] = []

    def batches(self, epoch: int):
        """This epoch's seed batches: the training nodes shuffled under ``(seed, epoch)``."""
        gen = torch.Generator().manual_seed(self.config.seed * 1_000_003 + epoch)
        order = self.train_nodes[torch.randperm(self.train_nodes.numel(), generator=gen).to(self.device)]
        size = self.config.batch_size or max(order.numel(), 1)
        return order.split(size)

    def train_epoch(self, epoch: int) -> float:
        self.model.train()
        if self.full_graph:
            return self._step(self.model(self.graph, self.x)[self.train_nodes], self.y[self.train_nodes])
        total, steps = 0.0, 0
        target = self.dataset.target
        for seeds in self.batches(epoch):
            batch = self.sampler.sample(self.graph, {target: seeds})
            x = {t: self.x[t][nodes] for t, nodes in batch.input_nodes.items()}
            total += self._step(self.model(batch.blocks, x), self.y[seeds])
            steps += 1
        return total / max(steps, 1)

    def _step(self, logits: torch.Tensor, labels: torch.Tensor) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float, float, float]:
        """``(train_acc, val_acc, test_acc, val_loss)`` on the whole graph."""
        self.model.eval()
        out = self.model(self.graph, self.x)
        masks = (self.dataset.train_mask, self.dataset.val_mask, self.dataset.test_mask)
        values = [accuracy(out[m], self.y[m]) for m in masks]
        val = masks[1]
        val_loss = float(F.cross_entropy(out[val], self.y[val])) if bool(val.any()) else math.nan
        return values[0], values[1], values[2], val_loss

    def fit(self) -> TrainResult:
        stopped = run_epochs(self.config, model=self.model, train_epoch=self.train_epoch, evaluate=self.evaluate,
                             metrics_type=EpochMetrics, early_stopping=self.early_stopping, history=self.history,
                             seed=self.config.seed, eval_every=self.config.eval_every,
                             stop_message=STOP_MESSAGE_WITH_BEST)
        return TrainResult(self.history, self.early_stopping.best_epoch, self.early_stopping.best_acc,
                           self.early_stopping.best_test_acc, stopped)
