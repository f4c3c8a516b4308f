"""Graph classification: mini-batches of whole graphs, cross-entropy on pooled logits.

One process; each epoch shuffles the training graphs into :class:`~unigraph.loader.GraphLoader`
batches, then evaluates accuracy on the training, validation and test graphs (exact: every graph
whole), with early stopping on validation accuracy (ties: lower validation loss) and the best
epoch's weights restored at the end, as the node trainer does. Uses :class:`TrainConfig`'s
``epochs, lr, weight_decay, optimizer, batch_size, num_workers, patience, restore_best, seed,
progress, log_every``; its sampling fields do not apply, and checkpoints are refused (not yet
supported for this task) rather than ignored.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.data.graph_dataset import GraphDataset, check_graph_ids
from unigraph.loader import GraphLoader
from unigraph.train.config import TrainConfig
from unigraph.train.early_stopping import EarlyStopping
from unigraph.train.epochs import run_epochs
from unigraph.train.metrics import EpochMetrics, TrainResult
from unigraph.train.trainer import make_optimizer

DEFAULT_GRAPH_BATCH = 32


def with_features(dataset: GraphDataset) -> GraphDataset:
    """``dataset`` with a constant feature 1 per node when it has no ``x`` (featureless TU sets)."""
    if dataset.x is not None:
        return dataset
    return dataclasses.replace(dataset, x=torch.ones(int(dataset.node_ptr[-1]), 1))


class GraphTrainer:
    """Trains a graph classifier (``model(graph_batch) -> [num_graphs, C]`` logits, e.g.
    :class:`~unigraph.models.GINClassifier`) on ``dataset`` with the graph ids ``splits = (train,
    val, test)``."""

    def __init__(self, model: torch.nn.Module, dataset: GraphDataset, splits: tuple, config: TrainConfig, *,
                 device: torch.device | str | None = None, on_epoch: Callable[[EpochMetrics], None] | None = None):
        if not isinstance(dataset, GraphDataset):
            raise TypeError(f"dataset must be a unigraph.data.GraphDataset, got {type(dataset).__name__}")
        if dataset.y.dim() != 1:
            raise ValueError("GraphTrainer trains classifiers; this dataset holds regression targets")
        if config.checkpoint_dir is not None or config.resume:
            raise ValueError("checkpoints are not supported for graph classification yet; drop checkpoint_dir")
        if len(splits) != 3:
            raise ValueError(f"splits must be (train_ids, val_ids, test_ids), got {len(splits)} parts")
        self.config = config
        self.device = torch.device(device or "cpu")
        self.model = model.to(self.device)
        self.dataset = with_features(dataset)
        self.splits = [check_graph_ids(ids, len(dataset)) for ids in splits]
        if self.splits[0].numel() == 0:
            raise ValueError("the training split holds no graphs")
        self.on_epoch = on_epoch
        self.optimizer = make_optimizer(self.model.parameters(), config)
        batch_size = config.batch_size or DEFAULT_GRAPH_BATCH
        device_arg = None if self.device.type == "cpu" else self.device
        self.train_loader = GraphLoader(self.dataset, self.splits[0], batch_size=batch_size, shuffle=True,
                                        num_workers=config.num_workers, seed=config.seed, device=device_arg,
                                        timeout=config.timeout)
        self.eval_loaders = [GraphLoader(self.dataset, ids, batch_size=max(batch_size, 256), device=device_arg)
                             for ids in self.splits]
        self.early_stopping = EarlyStopping(config.patience)
        self.history: list[EpochMetrics] = []

    def train_epoch(self) -> float:
        """One pass over the training graphs; the mean loss per graph."""
        self.model.train()
        total, count = 0.0, 0
        for batch in self.train_loader:
            self.optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(self.model(batch), batch.y)
            loss.backward()
            self.optimizer.step()
            total += float(loss.detach()) * batch.num_graphs
            count += batch.num_graphs
        return total / max(count, 1)

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float, float, float]:
        """``(train_acc, val_acc, test_acc, val_loss)``; an empty split gives ``nan``."""
        self.model.eval()
        results = []
        for loader in self.eval_loaders:
            logits, labels = self._predict(loader)
            acc = float((logits.argmax(-1) == labels).double().mean()) if labels.numel() else float("nan")
            loss = float(F.cross_entropy(logits, labels)) if labels.numel() else float("nan")
            results.append((acc, loss))
        return results[0][0], results[1][0], results[2][0], results[1][1]

    def _predict(self, loader: GraphLoader) -> tuple[Tensor, Tensor]:
        outputs = [(self.model(batch), batch.y) for batch in loader]
        if not outputs:
            return torch.empty(0, 1), torch.empty(0, dtype=torch.int64)
        return torch.cat([o for o, _ in outputs]), torch.cat([y for _, y in outputs])

    def fit(self) -> TrainResult:
        stopped = run_epochs(self.config, model=self.model, train_epoch=lambda _epoch: self.train_epoch(),
                             evaluate=self.evaluate, metrics_type=EpochMetrics, early_stopping=self.early_stopping,
                             history=self.history, seed=self.config.seed, close=self.train_loader.close,
                             after_epoch=None if self.on_epoch is None else lambda metrics, _: self.on_epoch(metrics))
        return TrainResult(self.history, self.early_stopping.best_epoch, self.early_stopping.best_acc,
                           self.early_stopping.best_test_acc, stopped)
