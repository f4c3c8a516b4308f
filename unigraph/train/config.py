"""What a training run needs to know, checked once, before any work starts."""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

OPTIMIZERS = ("adam", "sgd")
PROGRESS_MODES = ("auto", "bar", "text", "off")
SCHEDULES = ("gpipe", "1f1b")
EVALUATIONS = ("auto", "full", "layerwise")
ALL_NEIGHBOURS = -1  # a fanout of -1 keeps every in-edge (the exact computation tree)


def _int(name: str, value, minimum: int, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int{' or None' if allow_none else ''}, got {type(value).__name__} ({value!r})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def _number(name: str, value, minimum: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
        raise ValueError(f"{name} must be a number >= {minimum} (finite), got {value!r}")


def _choice(name: str, value, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


def check_fanouts(fanouts) -> tuple[int, ...] | None:
    """``None`` (every in-edge at every layer) or positive ints / ``-1`` (every in-edge), one per layer."""
    if fanouts is None:
        return None
    if isinstance(fanouts, (str, bytes)) or not isinstance(fanouts, Sequence) or len(fanouts) == 0:
        raise TypeError(f"fanouts must be None or a non-empty list of ints (one per layer), got {fanouts!r}")
    for i, fanout in enumerate(fanouts):
        if isinstance(fanout, bool) or not isinstance(fanout, int):
            raise TypeError(f"fanouts[{i}] must be an int, got {type(fanout).__name__} ({fanout!r})")
        if fanout < 1 and fanout != ALL_NEIGHBOURS:
            raise ValueError(f"fanouts[{i}] must be a positive int or {ALL_NEIGHBOURS} (every in-edge), got {fanout}")
    return tuple(fanouts)


@dataclasses.dataclass
class TrainConfig:
    """Hyperparameters and bookkeeping of one node-classification run.

    Fields:
        epochs: epochs to train (a resumed run trains up to this many in total).
        lr, weight_decay, optimizer: the optimizer (``"adam"`` or ``"sgd"``).
        batch_size: seeds per mini-batch (per rank under data parallelism). ``None`` means one
            batch of all training nodes (full batch).
        fanouts: neighbours sampled per layer, in layer order (``NeighborSampler``'s convention);
            ``-1`` keeps every in-edge. ``None`` keeps every in-edge at every layer. With
            ``batch_size=None`` and ``fanouts=None`` a single process trains on the whole graph
            directly (``model(graph, x)``); every other combination trains on sampled blocks.
        replace: sample neighbours with replacement.
        num_workers: sampling worker processes per rank (0: sample in the training process).
        patience: stop after this many epochs without a better validation accuracy (ties broken
            by a lower validation loss); ``None`` never stops early.
        restore_best: at the end, load the weights of the best validation epoch.
        seed: fixes the model's training randomness (dropout), the shuffling and the sampling.
        eval_every: evaluate every this many epochs (and always on the last one).
        progress: ``"auto"`` (a tqdm bar on a terminal, else text lines), ``"bar"``, ``"text"``, ``"off"``.
        log_every: epochs between text progress lines.
        checkpoint_dir: where ``last.pt`` is written (``None``: no checkpoints).
        checkpoint_every: epochs between checkpoints (the last epoch is always saved).
        resume: continue from ``checkpoint_dir/last.pt``.
        timeout: seconds a collective may wait for the other ranks before failing; it must exceed
            the longest stretch one rank works alone (rank 0 evaluates while the others wait).
        evaluation: how the model is evaluated: ``"full"`` (``model(graph, x)`` on the whole
            graph), ``"layerwise"`` (one layer at a time in bounded batches, exact for GraphSAGE,
            GAT and GIN: :mod:`unigraph.train.inference`), or ``"auto"``: full for a graph in
            memory, layer-wise for a partitioned one (which cannot hold the whole graph).
    """

    epochs: int = 200
    lr: float = 0.005
    weight_decay: float = 5e-4
    optimizer: str = "adam"
    batch_size: int | None = None
    fanouts: tuple[int, ...] | None = None
    replace: bool = False
    num_workers: int = 0
    patience: int | None = 100
    restore_best: bool = True
    seed: int = 0
    eval_every: int = 1
    progress: str = "auto"
    log_every: int = 10
    checkpoint_dir: str | None = None
    checkpoint_every: int = 1
    resume: bool = False
    timeout: float = 300.0
    evaluation: str = "auto"

    def __post_init__(self) -> None:
        _int("epochs", self.epochs, 1)
        _number("lr", self.lr, 0.0)
        _number("weight_decay", self.weight_decay, 0.0)
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _int("batch_size", self.batch_size, 1, allow_none=True)
        self.fanouts = check_fanouts(self.fanouts)
        if not isinstance(self.replace, bool):
            raise TypeError(f"replace must be a bool, got {type(self.replace).__name__}")
        _int("num_workers", self.num_workers, 0)
        _int("patience", self.patience, 1, allow_none=True)
        _int("seed", self.seed, 0)
        _int("eval_every", self.eval_every, 1)
        _choice("progress", self.progress, PROGRESS_MODES)
        _int("log_every", self.log_every, 1)
        _int("checkpoint_every", self.checkpoint_every, 1)
        if self.resume and self.checkpoint_dir is None:
            raise ValueError("resume=True needs checkpoint_dir (the directory holding last.pt)")
        _number("timeout", self.timeout, 1.0)
        _choice("evaluation", self.evaluation, EVALUATIONS)

    @property
    def full_graph(self) -> bool:
        """Train on the whole graph directly (no sampled blocks)."""
        return self.batch_size is None and self.fanouts is None

    def to_dict(self) -> dict:
        """Plain values only (stored in checkpoints, loadable with ``weights_only=True``)."""
        out = dataclasses.asdict(self)
        out["fanouts"] = None if self.fanouts is None else list(self.fanouts)
        return out


@dataclasses.dataclass
class PipelineConfig:
    """How the model is cut into stages and each mini-batch into micro-batches.

    Fields:
        stages: pipeline stages (one process each).
        micro_batches: micro-batches per mini-batch; each carries its own sampled blocks.
        balance: layers per stage (GPipe's ``balance``), summing to the number of layers;
            ``None`` spreads them evenly (earlier stages get the extra layers).
        schedule: ``"gpipe"`` (all forwards, then all backwards) or ``"1f1b"`` (one forward, one
            backward in the steady state; needs ``micro_batches >= stages``).
        replicas: pipeline replicas (data x pipeline): ``replicas * stages`` processes, matching
            stages average their gradients.
    """

    stages: int
    micro_batches: int
    balance: tuple[int, ...] | None = None
    schedule: str = "gpipe"
    replicas: int = 1

    def __post_init__(self) -> None:
        _int("stages", self.stages, 1)
        _int("micro_batches", self.micro_batches, 1)
        _int("replicas", self.replicas, 1)
        _choice("schedule", self.schedule, SCHEDULES)
        if self.schedule == "1f1b" and self.micro_batches < self.stages:
            raise ValueError(f"the 1F1B schedule needs micro_batches >= stages, got {self.micro_batches} micro-batches "
                             f"for {self.stages} stages; use schedule='gpipe' or more micro-batches")
        if self.balance is not None:
            if isinstance(self.balance, (str, bytes)) or not isinstance(self.balance, Sequence):
                raise TypeError(f"balance must be None or a list of ints (layers per stage), got {self.balance!r}")
            if len(self.balance) != self.stages:
                raise ValueError(f"balance has {len(self.balance)} entries but there are {self.stages} stages")
            for i, count in enumerate(self.balance):
                _int(f"balance[{i}]", count, 1)
            self.balance = tuple(self.balance)

    @property
    def world_size(self) -> int:
        return self.stages * self.replicas
