"""Node-classification training on one process or many (data parallel).

One loop serves every case:

* **Full graph** (``batch_size=None, fanouts=None`` on one process): each epoch is one step on
  ``model(graph, x)`` with the loss over the training nodes.
* **Sampled blocks** (any other setting, and always under data parallelism): a
  :class:`~unigraph.sampling.NodeLoader` turns the training nodes into mini-batches of
  neighbour-sampled blocks (``fanouts``; ``-1`` or ``None`` keeps every in-edge, the exact
  computation tree of the seeds).
* **Data parallel**: started by ``torchrun`` or :func:`unigraph.train.launch` (the process group
  must be initialized, see :func:`~unigraph.train.distributed.init_distributed`). Every rank has
  its own loader over its own disjoint share of each epoch's shuffled seeds (``NodeLoader``'s
  ``num_replicas``/``rank``: every rank shuffles with the same seed and takes every
  ``world_size``-th seed), samples in its own process or its own workers (no pool is shared
  between ranks), and ``DistributedDataParallel`` averages the gradients. Because the sampler
  keys its draws by (batch, hop, node), rank ``r``'s batch ``b`` holds exactly the computation
  trees those seeds have in batch ``b`` of one process with ``world_size`` times the batch size,
  and the ranks' equal shares make the mean of their mean losses the global mean: the loss curve
  equals single-process training with the same global batch, up to floating-point summation
  order (``tests/test_distributed.py`` checks 2 ranks against 1 process). Each epoch leaves out
  fewer than ``world_size`` seeds (different ones each epoch) so that all ranks take equally many
  steps. Rank 0 evaluates and broadcasts the metrics, so every rank takes the same early-stopping
  decision.

Evaluation runs the model on the whole graph (exact, no sampling), or, with
``evaluation="layerwise"``, one layer at a time in batches of at most
:data:`~unigraph.train.inference.BATCH_EDGES` in-edges (:mod:`unigraph.train.inference`: the same
result for GraphSAGE, GAT and GIN, without the whole graph's messages at once; the partitioned
trainers evaluate the same way). Layers whose output at a node depends only on that node's
in-edges (GAT, GraphSAGE, GIN's convolution) compute the same on blocks as on the graph. GCN on a block normalizes by each source's out-degree *within the block*
(DGL's convention), and GIN's batch normalization uses the statistics of the batch, so those two
see slightly different functions in block mode than on the whole graph.

Checkpoints (``checkpoint_dir``) hold the model, the optimizer, the epoch, every rank's RNG state,
the early-stopping state, the loader's epoch and the history (:mod:`unigraph.train.checkpoint`);
a resumed run continues exactly where the saved one stopped (same losses, bit for bit, on the
same machine and thread count).
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

from unigraph.data import NodeDataset
from unigraph.sampling import NeighborSampler, NodeLoader
from unigraph.train import checkpoint as ckpt
from unigraph.train.config import ALL_NEIGHBOURS, TrainConfig
from unigraph.train.distributed import DistContext, all_reduce_sum, broadcast_values, current_context
from unigraph.train.early_stopping import EarlyStopping
from unigraph.train.epochs import STOP_MESSAGE_WITH_BEST, run_epochs
from unigraph.train.layers import num_layers
from unigraph.train.inference import graph_outputs
from unigraph.train.metrics import EpochMetrics, TrainResult, accuracy
from unigraph.train.progress import Progress
from unigraph.train.rng import capture_rng_state, restore_rng_state, seed_everything

# Settings a resumed run must share with the run that wrote the checkpoint (else it is another run).
RESUME_MUST_MATCH = ("lr", "weight_decay", "optimizer", "batch_size", "fanouts", "replace", "seed")


def make_optimizer(parameters, config: TrainConfig) -> torch.optim.Optimizer:
    if config.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=config.lr, weight_decay=config.weight_decay)
    return torch.optim.SGD(parameters, lr=config.lr, weight_decay=config.weight_decay)


def resolve_fanouts(config: TrainConfig, model: torch.nn.Module, graph) -> list[int]:
    """Concrete fanouts for :class:`NeighborSampler`: ``-1`` (and ``None``) become the largest
    in-degree, which keeps every in-edge (``graph``: a Graph, or its largest in-degree)."""
    fanouts = config.fanouts if config.fanouts is not None else (ALL_NEIGHBOURS,) * num_layers(model)
    everything = max(1, graph if isinstance(graph, int) else graph.stats().max_in_degree)
    return [everything if f == ALL_NEIGHBOURS else f for f in fanouts]


def check_resume_config(saved: dict, config: TrainConfig) -> None:
    current = config.to_dict()
    different = {key: (saved.get(key), current[key]) for key in RESUME_MUST_MATCH if saved.get(key) != current[key]}
    if different:
        described = ", ".join(f"{key}: saved {old!r}, now {new!r}" for key, (old, new) in different.items())
        raise ValueError(f"cannot resume: the checkpoint was written with different settings ({described})")


class Trainer:
    """Trains ``model`` on ``dataset`` as ``config`` says (see the module docstring for the modes).

    Args:
        model: any node classifier called as ``model(graph_or_blocks, x)`` (a
            :mod:`unigraph.models` model, or your own). Build it after seeding if two runs should
            match (:func:`unigraph.train.build_node_classifier` under ``seed_everything``).
        dataset: a :class:`~unigraph.data.NodeDataset`.
        config: a :class:`TrainConfig`.
        context: the data-parallel context; ``None`` uses the initialized process group if there
            is one (``torchrun``), else trains on one process.
        device: where to train when not distributed (default: the CPU). Under data parallelism
            the context's device is used.

    Features are cast to the model's parameter dtype (so a ``model.double()`` trains in float64).
    """

    group = None  # the ranks' process group (None: the default group); DistTrainer trains on a subgroup

    def __init__(self, model: torch.nn.Module, dataset: NodeDataset, config: TrainConfig, *,
                 context: DistContext | None = None, device: torch.device | str | None = None):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(dataset, NodeDataset):
            raise TypeError(f"dataset must be a unigraph.data.NodeDataset, got {type(dataset).__name__}")
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
        self.config = config
        self.context = context if context is not None else current_context()
        self.world_size = self.context.world_size if self.context else 1
        self.rank = self.context.rank if self.context else 0
        self.device = self.context.device if self.context else torch.device(device or "cpu")
        self.model = model.to(self.device)
        self.dataset = dataset
        dtype = next(model.parameters()).dtype
        self.x = dataset.x.to(dtype)
        self.train_nodes = dataset.train_mask.nonzero().flatten()
        if self.train_nodes.numel() < self.world_size:
            raise ValueError(f"{self.train_nodes.numel()} training nodes cannot be shared by {self.world_size} ranks")
        self.full_graph = config.full_graph and self.world_size == 1
        self.eval_graph = dataset.graph.to(self.device)
        self.eval_x = self.x.to(self.device)
        self.eval_y = dataset.y.to(self.device)
        self.early_stopping = EarlyStopping(config.patience)
        self.history: list[EpochMetrics] = []
        self.stopped_early = False
        self._setup_training()

    def _setup_training(self) -> None:
        """The model as trained (DDP-wrapped under data parallelism), the optimizer and the loader."""
        self.net = self.model
        if self.world_size > 1:
            device_ids = [self.device] if self.device.type == "cuda" else None
            self.net = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=device_ids)
        self.optimizer = make_optimizer(self.model.parameters(), self.config)
        self.loader = None if self.full_graph else self._make_loader()

    # ------------------------------------------------------------------ data
    def _make_loader(self) -> NodeLoader:
        config = self.config
        graph = self.dataset.graph
        sampler = NeighborSampler(resolve_fanouts(config, self.model, graph), replace=config.replace, seed=config.seed)
        return NodeLoader(graph, self.train_nodes, sampler, batch_size=self.batch_size(self.world_size), shuffle=True,
                          features=self.x, labels=self.dataset.y,
                          device=None if self.device.type == "cpu" else self.device, num_workers=config.num_workers,
                          timeout=config.timeout, seed=config.seed, num_replicas=self.world_size, rank=self.rank)

    def batch_size(self, replicas: int) -> int:
        """Seeds per batch and replica: ``config.batch_size``, or a replica's whole share."""
        return self.config.batch_size or math.ceil(self.train_nodes.numel() / replicas)

    @property
    def layout(self) -> dict:
        """What a checkpoint must match to be resumed by this trainer."""
        return {"mode": "full_graph" if self.full_graph else "blocks", "world_size": self.world_size}

    # ------------------------------------------------------------------ one epoch
    def train_epoch(self) -> float:
        """One epoch of steps; returns the mean loss over its batches (over all ranks)."""
        self.net.train()
        if self.full_graph:
            self.optimizer.zero_grad(set_to_none=True)
            train = self.train_nodes.to(self.device)
            loss = F.cross_entropy(self.net(self.eval_graph, self.eval_x)[train], self.eval_y[train])
            loss.backward()
            self.optimizer.step()
            return float(loss.detach())
        total, steps = 0.0, 0
        for batch in self.loader:
            total += self.train_step(batch)
            steps += 1
        if self.world_size > 1:
            total, steps = all_reduce_sum([total, steps], self.device)
        return total / max(steps, 1)

    def train_step(self, batch) -> float:
        """One optimizer step on a mini-batch of blocks; returns this rank's batch loss."""
        self.optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.net(batch.blocks, batch.x), batch.y)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float, float, float]:
        """``(train_acc, val_acc, test_acc, val_loss)`` of the model on the whole graph, computed on
        rank 0 and broadcast (every rank then takes the same decisions)."""
        values = self._evaluate_model() if self.rank == 0 else [0.0, 0.0, 0.0, 0.0]
        if self.world_size > 1:
            values = broadcast_values(values, src=0, device=self.device)
        return tuple(values)

    def _evaluate_model(self) -> list[float]:
        self.model.eval()
        masks = [m.to(self.device) for m in (self.dataset.train_mask, self.dataset.val_mask, self.dataset.test_mask)]
        if self.config.evaluation == "layerwise":
            nodes = torch.nonzero(masks[0] | masks[1] | masks[2]).squeeze(1)
            logits = graph_outputs(self.model, self.eval_graph, self.eval_x, nodes)
            out = logits.new_zeros(self.dataset.num_nodes, logits.shape[1])
            out[nodes] = logits
        else:
            out = self.model(self.eval_graph, self.eval_x)
        values = [accuracy(out[m], self.eval_y[m]) for m in masks]
        val = masks[1]
        values.append(float(F.cross_entropy(out[val], self.eval_y[val])) if bool(val.any()) else float("nan"))
        return values

    # ------------------------------------------------------------------ checkpoints
    def _rng_states(self) -> list[dict]:
        state = capture_rng_state()
        if self.world_size == 1:
            return [state]
        gathered: list = [None] * self.world_size
        dist.all_gather_object(gathered, state, group=self.group)
        return gathered

    def save_checkpoint(self, epoch: int) -> None:
        rng = self._rng_states()  # a collective: every rank takes part
        if self.rank != 0:
            return
        ckpt.save_checkpoint(self.config.checkpoint_dir, {
            "epoch": epoch, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "rng": rng,
            "loader": self.loader.state_dict() if self.loader is not None else None,
            "early_stopping": self.early_stopping.state_dict(), "stopped_early": self.stopped_early,
            "history": [m.as_dict() for m in self.history], "config": self.config.to_dict(), "world": self.layout})

    def load_checkpoint(self) -> int:
        """Restore everything from ``checkpoint_dir/last.pt``; returns the epochs it had completed."""
        state = ckpt.load_checkpoint(self.config.checkpoint_dir, epochs=self.config.epochs)
        ckpt.check_compatible(state, self.layout)
        check_resume_config(state["config"], self.config)
        ckpt.check_restorable(state, self.model, self.optimizer)  # before anything changes: all or nothing
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.early_stopping.load_state_dict(state["early_stopping"])
        self.stopped_early = state["stopped_early"]
        self.history = [EpochMetrics(**m) for m in state["history"]]
        if self.loader is not None:
            self.loader.load_state_dict(state["loader"])
        restore_rng_state(state["rng"][self.rank])
        return state["epoch"]

    # ------------------------------------------------------------------ the run
    def _end_epoch(self, metrics: EpochMetrics, stopped: bool) -> None:
        """After each epoch: record the stop (a checkpoint holds it) and checkpoint when due."""
        self.stopped_early = stopped
        config, epoch = self.config, metrics.epoch
        if config.checkpoint_dir is not None and (epoch % config.checkpoint_every == 0 or epoch == config.epochs
                                                  or stopped):
            self.save_checkpoint(epoch)

    def fit(self) -> TrainResult:
        config = self.config
        start = 0
        if config.resume:
            start = self.load_checkpoint()
        else:
            seed_everything(config.seed + self.rank)
        progress = Progress(config.epochs, mode=config.progress if self.rank == 0 else "off",
                            log_every=config.log_every, start_epoch=start)
        if start:
            progress.message(f"resumed from {ckpt.checkpoint_path(config.checkpoint_dir)} after epoch {start}")
        self.stopped_early = run_epochs(
            config, model=self.model, train_epoch=lambda _epoch: self.train_epoch(), evaluate=self.evaluate,
            metrics_type=EpochMetrics, early_stopping=self.early_stopping, history=self.history,
            eval_every=config.eval_every, after_epoch=self._end_epoch, progress=progress, start=start,
            stopped=self.stopped_early, stop_message=STOP_MESSAGE_WITH_BEST,
            close=None if self.loader is None else self.loader.close)
        return TrainResult(self.history, self.early_stopping.best_epoch, self.early_stopping.best_acc,
                           self.early_stopping.best_test_acc, self.stopped_early)
