"""Link prediction training on a :class:`~unigraph.tasks.link.LinkSplit`.

Each epoch draws fresh negatives for the training edges (as many as positives) and minimises the
binary cross-entropy of the decoder's logits. Two modes, as for node classification:

* **full graph** (``config.batch_size`` is None): one step on the embeddings of the whole
  message-passing graph (the GAE recipe); negatives are distinct non-edges of that graph
  (:func:`~unigraph.tasks.link.negative_pairs`).
* **mini-batches**: a :class:`~unigraph.tasks.link.LinkNeighborLoader` over the training edges
  with ``config.fanouts`` (every in-edge where -1 or None), one corrupted destination per
  positive, and the seed edges excluded from their own blocks (both directions when undirected).

Evaluation embeds the whole message-passing graph (exact) and scores the fixed validation and
test pairs: ROC-AUC (early stopping on validation AUC, ties by lower validation loss) and Hits@K.
The test pairs are scored on ``split.test_graph`` when the split has one (training plus
validation edges, as PyG's ``RandomLinkSplit`` evaluates), the validation pairs on ``split.graph``.
Uses :class:`TrainConfig`'s ``epochs, lr, weight_decay, optimizer, batch_size, fanouts, patience,
restore_best, seed, progress, log_every``; checkpoints are refused (not yet supported here).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.sampling import NeighborSampler
from unigraph.tasks.link.loader import LinkNeighborLoader
from unigraph.tasks.link.negative import negative_pairs
from unigraph.tasks.link.split import LinkSplit
from unigraph.tasks.metrics import hits_at_k, link_auc
from unigraph.train.config import TrainConfig
from unigraph.train.early_stopping import EarlyStopping
from unigraph.train.epochs import run_epochs
from unigraph.train.metrics import epoch_line
from unigraph.train.trainer import make_optimizer, resolve_fanouts


@dataclasses.dataclass
class LinkEpochMetrics:
    """One epoch: mean training loss, validation/test ROC-AUC and Hits@K, validation loss, seconds."""

    epoch: int
    loss: float
    val_auc: float = float("nan")
    test_auc: float = float("nan")
    val_hits: float = float("nan")
    test_hits: float = float("nan")
    val_loss: float = float("nan")
    seconds: float = 0.0

    # The fields :meth:`LinkTrainer.evaluate` returns, in its order (filled by the epoch loop).
    evaluated: ClassVar[tuple[str, ...]] = ("val_auc", "test_auc", "val_hits", "test_hits", "val_loss")

    # The progress display shows a run's headline scores under these names.
    @property
    def val_acc(self) -> float:
        return self.val_auc

    @property
    def test_acc(self) -> float:
        return self.test_auc

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def line(self, total_epochs: int) -> str:
        return epoch_line(self, total_epochs, f"val auc {self.val_auc:.4f}  test auc {self.test_auc:.4f}  "
                                              f"val hits {self.val_hits:.4f}  test hits {self.test_hits:.4f}")


@dataclasses.dataclass
class LinkResult:
    """The best validation epoch and its test scores."""

    history: list[LinkEpochMetrics]
    best_epoch: int
    best_val_auc: float
    test_auc: float
    test_hits: float
    stopped_early: bool


def _bce(pos: Tensor, neg: Tensor) -> Tensor:
    logits = torch.cat([pos, neg])
    return F.binary_cross_entropy_with_logits(logits, torch.cat([torch.ones_like(pos), torch.zeros_like(neg)]))


class LinkTrainer:
    """Trains ``model`` (``model.encode(graph_or_blocks, x)``, ``model.decode(z, pairs)``, e.g.
    :class:`~unigraph.models.GAE`) on ``split`` with node features ``x``; ``hits_k`` is the K of
    the reported Hits@K."""

    def __init__(self, model: torch.nn.Module, split: LinkSplit, x: Tensor, config: TrainConfig, *,
                 hits_k: int = 50, device: torch.device | str | None = None,
                 on_epoch: Callable[[LinkEpochMetrics], None] | None = None):
        if not isinstance(split, LinkSplit):
            raise TypeError(f"split must be a unigraph.tasks.link.LinkSplit, got {type(split).__name__}")
        if not isinstance(x, Tensor) or x.dim() != 2 or x.shape[0] != split.graph.num_nodes:
            raise ValueError(f"x must be node features [{split.graph.num_nodes}, F], got {list(getattr(x, 'shape', []))}")
        if config.checkpoint_dir is not None or config.resume:
            raise ValueError("checkpoints are not supported for link prediction yet; drop checkpoint_dir")
        if split.val_pos.shape[1] == 0 or split.test_pos.shape[1] == 0:
            raise ValueError(f"the split needs validation and test edges, got {split!r}")
        self.config, self.split, self.hits_k, self.on_epoch = config, split, hits_k, on_epoch
        self.device = torch.device(device or "cpu")
        self.model = model.to(self.device)
        self.x = x.to(device=self.device, dtype=next(model.parameters()).dtype)
        self.graph = split.graph.to(self.device)
        self.test_graph = split.test_graph.to(self.device) if split.test_graph is not None else self.graph
        self.optimizer = make_optimizer(self.model.parameters(), config)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.loader = None
        if config.batch_size is not None or config.fanouts is not None:
            sampler = NeighborSampler(resolve_fanouts(config, model.encoder, split.graph), seed=config.seed)
            self.loader = LinkNeighborLoader(split.graph, sampler, split.train_pos,
                                             batch_size=config.batch_size or split.train_pos.shape[1],
                                             exclude="reverse" if split.undirected else "self",
                                             features=x, seed=config.seed, device=device)
        self.early_stopping = EarlyStopping(config.patience)
        self.history: list[LinkEpochMetrics] = []

    def train_epoch(self) -> float:
        self.model.train()
        if self.loader is None:
            self.optimizer.zero_grad(set_to_none=True)
            z = self.model.encode(self.graph, self.x)
            pos = self.split.train_pos.to(self.device)
            neg = negative_pairs(self.split.graph, pos.shape[1], undirected=self.split.undirected,
                                 generator=self.generator).to(self.device)
            loss = _bce(self.model.decode(z, pos), self.model.decode(z, neg))
            loss.backward()
            self.optimizer.step()
            return float(loss.detach())
        total, steps = 0.0, 0
        for batch in self.loader:
            self.optimizer.zero_grad(set_to_none=True)
            z = self.model.encode(batch.blocks, batch.x.to(self.x.dtype))
            scores = self.model.decode(z, batch.edge_label_index)
            loss = F.binary_cross_entropy_with_logits(scores, batch.edge_label)
            loss.backward()
            self.optimizer.step()
            total, steps = total + float(loss.detach()), steps + 1
        return total / max(steps, 1)

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float, float, float, float]:
        """``(val_auc, test_auc, val_hits, test_hits, val_loss)`` on the fixed held-out pairs."""
        self.model.eval()
        z = self.model.encode(self.graph, self.x)
        z_test = z if self.test_graph is self.graph else self.model.encode(self.test_graph, self.x)
        scores = {name: self.model.decode(z_test if name.startswith("test") else z,
                                          getattr(self.split, name).to(self.device)).cpu()
                  for name in ("val_pos", "val_neg", "test_pos", "test_neg")}
        return (link_auc(scores["val_pos"], scores["val_neg"]), link_auc(scores["test_pos"], scores["test_neg"]),
                hits_at_k(scores["val_pos"], scores["val_neg"], self.hits_k),
                hits_at_k(scores["test_pos"], scores["test_neg"], self.hits_k),
                float(_bce(scores["val_pos"], scores["val_neg"])))

    def fit(self) -> LinkResult:
        stopped = run_epochs(self.config, model=self.model, train_epoch=lambda _epoch: self.train_epoch(),
                             evaluate=self.evaluate, metrics_type=LinkEpochMetrics, early_stopping=self.early_stopping,
                             history=self.history, seed=self.config.seed,
                             stop_message="early stop: no better validation AUC for {patience} epochs",
                             after_epoch=None if self.on_epoch is None else lambda metrics, _: self.on_epoch(metrics))
        best = self.early_stopping.best_epoch
        test_hits = self.history[best - 1].test_hits if best else math.nan
        return LinkResult(self.history, best, self.early_stopping.best_acc, self.early_stopping.best_test_acc,
                          test_hits, stopped)
