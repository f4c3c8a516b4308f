"""Training on a graph whose data exceeds memory: :class:`OutOfCoreTrainer`.

The graph stays on disk (a chunked graph, :mod:`unigraph.storage.chunked`): its in-CSR, labels
and features are mapped, read through the page cache, never copied whole into the process. Each
step trains on a neighbour-sampled mini-batch from :class:`~unigraph.storage.loader.MappedNodeLoader`
(the next batch sampled and its feature pages read ahead in a background thread), with an optional
in-memory cache of the hottest feature rows (``cache_rows``). What the process itself allocates is
bounded by the batch, the cache, the model and the id lists of the training, validation and test
nodes (8 bytes each): not by the graph. (The per-node scratch array of the sampler, 8 bytes a node,
is the one per-node allocation; it is what lets the sampler relabel without a hash table.)

The batches are exactly :class:`~unigraph.sampling.NodeLoader`'s on the same graph in memory, so
training equals :class:`~unigraph.train.Trainer`'s mini-batch training step for step (the tests
compare the losses and weights with an in-memory run on the twin). Evaluation differs from
``Trainer``'s (which runs the whole graph at once): validation and test nodes are scored in
batches on blocks that keep every in-edge (``eval_fanouts=None``), which for GraphSAGE, GAT and
GIN's convolution is the same computation. It is a :class:`~unigraph.train.Trainer` otherwise:
``fit``, early stopping, checkpoints (``layout`` names the graph's manifest checksum).
"""
from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

from unigraph.data.checked_file import sha256_file
from unigraph.sampling import NeighborSampler
from unigraph.storage.chunked import MANIFEST, ChunkedGraph
from unigraph.storage.features import MappedFeatureStore
from unigraph.storage.loader import MappedNodeLoader
from unigraph.train.config import TrainConfig
from unigraph.train.early_stopping import EarlyStopping
from unigraph.train.layers import num_layers
from unigraph.train.metrics import EpochMetrics
from unigraph.train.trainer import Trainer, make_optimizer, resolve_fanouts

MASKS = ("train_mask", "val_mask", "test_mask")


def mask_ids(graph: ChunkedGraph, name: str) -> torch.Tensor:
    """The ids where the mask ``name`` is set, streamed a chunk at a time."""
    parts = [np.flatnonzero(block) + first for first, block in graph.chunks(name)]
    return torch.from_numpy(np.concatenate(parts).astype(np.int64)) if parts else torch.zeros(0, dtype=torch.int64)


def max_in_degree(graph: ChunkedGraph) -> int:
    indptr = graph.array("in_indptr")
    step, largest = 1 << 22, 0
    for a in range(0, graph.num_nodes, step):
        rows = np.asarray(indptr[a:a + step + 1])
        largest = max(largest, int(np.diff(rows).max())) if len(rows) > 1 else largest
    return largest


class OutOfCoreTrainer(Trainer):
    """Trains ``model`` on the chunked graph ``graph`` from disk (see the module docstring).

    Args:
        model: a node classifier taking blocks (GraphSAGE, GAT, GIN, ...).
        graph: a :class:`~unigraph.storage.chunked.ChunkedGraph` with ``x``, ``y``, the masks and
            the in-CSR.
        config: a :class:`~unigraph.train.TrainConfig` (``batch_size`` is required).
        cache_rows: feature rows of the highest out-degree nodes kept in memory.
        prefetch: batches prepared ahead in the background thread (0: none).
        advise: read each batch's feature pages ahead with ``madvise``.
        eval_fanouts: fanouts of evaluation (``None``: every in-edge).
        eval_batch_size: seeds per evaluation batch.
    """

    def __init__(self, model: torch.nn.Module, graph: ChunkedGraph, config: TrainConfig, *, cache_rows: int = 0,
                 prefetch: int = 1, advise: bool = True, eval_fanouts=None, eval_batch_size: int = 1024,
                 device: torch.device | str = "cpu"):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(graph, ChunkedGraph):
            raise TypeError(f"graph must be a ChunkedGraph, got {type(graph).__name__}")
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        if config.batch_size is None:
            raise ValueError("out-of-core training samples mini-batches: give config.batch_size")
        missing = [name for name in ("x", "y", *MASKS) if not graph.has(name)]
        if missing:
            raise ValueError(f"{graph.directory} lacks the arrays {missing} (features, labels and the split)")
        self.config, self.context, self.world_size, self.rank = config, None, 1, 0
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.dtype = next(model.parameters()).dtype
        self.graph = graph
        self.features = MappedFeatureStore(graph, cache_rows=cache_rows)
        self.train_nodes = mask_ids(graph, "train_mask")
        if not self.train_nodes.numel():
            raise ValueError(f"{graph.directory} has no training nodes")
        self.eval_nodes = [mask_ids(graph, "val_mask"), mask_ids(graph, "test_mask")]
        largest = max_in_degree(graph)
        self.fanouts = resolve_fanouts(config, model, largest)
        layers = len(self.fanouts)
        self.eval_fanouts = resolve_fanouts(TrainConfig(fanouts=eval_fanouts) if eval_fanouts is not None else
                                            TrainConfig(fanouts=(-1,) * layers), model, largest)
        self.eval_batch_size, self.prefetch, self.advise = eval_batch_size, prefetch, advise
        self.full_graph = False
        self.early_stopping = EarlyStopping(config.patience)
        self.history: list[EpochMetrics] = []
        self.stopped_early = False
        self.timing = {"compute": 0.0, "steps": 0, "train_seconds": 0.0}
        self._train_acc = float("nan")
        self._setup_training()

    def _setup_training(self) -> None:
        self.net = self.model
        self.optimizer = make_optimizer(self.model.parameters(), self.config)
        sampler = NeighborSampler(self.fanouts, replace=self.config.replace, seed=self.config.seed)
        self.loader = MappedNodeLoader(self.graph, self.train_nodes, sampler, features=self.features,
                                       batch_size=self.config.batch_size, shuffle=True, seed=self.config.seed,
                                       prefetch=self.prefetch, advise=self.advise)

    @property
    def layout(self) -> dict:
        return {"mode": "out_of_core", "world_size": 1, "graph": sha256_file(self.graph.directory / MANIFEST)}

    def train_epoch(self) -> float:
        self.net.train()
        total, correct, seen, steps = 0.0, 0, 0, 0
        began_epoch = time.perf_counter()
        for batch in self.loader:
            began = time.perf_counter()
            batch = batch.to(self.device)
            total += self.train_step(batch)
            correct += int((self._last_logits.argmax(-1) == batch.y).sum())
            seen += batch.y.numel()
            steps += 1
            self.timing["compute"] += time.perf_counter() - began
            self.timing["steps"] += 1
        self.timing["train_seconds"] += time.perf_counter() - began_epoch
        self._train_acc = correct / seen if seen else float("nan")
        return total / max(steps, 1)

    def train_step(self, batch) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.net(batch.blocks, batch.x.to(self.dtype))
        loss = F.cross_entropy(logits, batch.y)
        loss.backward()
        self.optimizer.step()
        self._last_logits = logits.detach()
        return float(loss.detach())

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float, float, float]:
        """``(train_acc, val_acc, test_acc, val_loss)``: train accuracy from the epoch's batches,
        the others on blocks (``eval_fanouts``)."""
        self.model.eval()
        scores = [self._score(nodes) for nodes in self.eval_nodes]
        (val_correct, val_count, val_loss), (test_correct, test_count, _) = scores
        return (self._train_acc, val_correct / val_count if val_count else 0.0,
                test_correct / test_count if test_count else 0.0, val_loss / val_count if val_count else float("nan"))

    def _score(self, nodes: torch.Tensor) -> tuple[float, int, float]:
        sampler = NeighborSampler(self.eval_fanouts, seed=self.config.seed)
        loader = MappedNodeLoader(self.graph, nodes, sampler, features=self.features, batch_size=self.eval_batch_size,
                                  shuffle=False, seed=self.config.seed, prefetch=min(self.prefetch, 1),
                                  advise=self.advise)
        correct, loss = 0, 0.0
        with loader:
            for batch in loader:
                batch = batch.to(self.device)
                logits = self.model(batch.blocks, batch.x.to(self.dtype))
                correct += int((logits.argmax(-1) == batch.y).sum())
                loss += float(F.cross_entropy(logits, batch.y, reduction="sum"))
        return correct, nodes.numel(), loss
