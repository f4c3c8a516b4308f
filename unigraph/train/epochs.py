"""The epoch loop the trainers share: train, evaluate, early stopping, history, progress.

Node, heterogeneous, graph-classification and link-prediction training differ only in what they
pass :func:`run_epochs`: how an epoch trains and evaluates, which metrics record it, what runs
after each epoch (a user callback, a checkpoint), what the stop message says and what to close.
"""
from __future__ import annotations

import time
from typing import Callable

import torch

from unigraph.train.config import TrainConfig
from unigraph.train.early_stopping import EarlyStopping
from unigraph.train.progress import Progress
from unigraph.train.rng import seed_everything

STOP_MESSAGE = "early stop: no better validation accuracy for {patience} epochs"
STOP_MESSAGE_WITH_BEST = STOP_MESSAGE + " (best at epoch {best_epoch})"


def run_epochs(config: TrainConfig, *, model: torch.nn.Module, train_epoch: Callable[[int], float],
               evaluate: Callable[[], tuple], metrics_type: type, early_stopping: EarlyStopping, history: list,
               stop_message: str = STOP_MESSAGE, eval_every: int = 1,
               after_epoch: Callable[[object, bool], None] | None = None, close: Callable[[], None] | None = None,
               seed: int | None = None, progress: Progress | None = None, start: int = 0,
               stopped: bool = False) -> bool:
    """Run epochs ``start + 1 .. config.epochs``; True when early stopping ended the run.

    Each epoch records ``metrics_type(epoch, train_epoch(epoch))``; every ``eval_every``-th epoch
    and the last, ``evaluate()``'s values fill the fields ``metrics_type.evaluated`` and early
    stopping sees the metrics' ``val_acc, val_loss, test_acc``. The epoch's metrics (timed over all
    of that) are appended to ``history``, shown by ``progress`` and passed to ``after_epoch(metrics,
    stopped)``. When early stopping says stop, ``stop_message`` (formatted with ``patience`` and
    ``best_epoch``) is shown and no further epoch runs; ``stopped=True`` on entry (a resumed run that
    had stopped) runs none. ``progress`` is closed and ``close()`` called however the loop ends
    (an exception included); after a normal end the best epoch's weights are loaded back into
    ``model`` when ``config.restore_best``.

    ``seed``: seed everything first (None: the caller has seeded or restored the RNG state).
    ``progress``: None makes one from ``config``.
    """
    if seed is not None:
        seed_everything(seed)
    if progress is None:
        progress = Progress(config.epochs, mode=config.progress, log_every=config.log_every)
    try:
        for epoch in range(start + 1, config.epochs + 1):
            if stopped:
                break
            began = time.perf_counter()
            metrics = metrics_type(epoch, train_epoch(epoch))
            if epoch % eval_every == 0 or epoch == config.epochs:
                for name, value in zip(metrics_type.evaluated, evaluate(), strict=True):
                    setattr(metrics, name, value)
                stopped = early_stopping.update(epoch, metrics.val_acc, metrics.val_loss, metrics.test_acc, model)
            metrics.seconds = time.perf_counter() - began
            history.append(metrics)
            progress.update(metrics)
            if after_epoch is not None:
                after_epoch(metrics, stopped)
        if stopped:
            progress.message(stop_message.format(patience=config.patience, best_epoch=early_stopping.best_epoch))
    finally:
        progress.close()
        if close is not None:
            close()
    if config.restore_best and early_stopping.best_state is not None:
        model.load_state_dict(early_stopping.best_state)
    return stopped
