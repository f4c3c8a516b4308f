"""Per-epoch metrics and the result of a run."""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import torch
from torch import Tensor


def accuracy(logits: Tensor, labels: Tensor) -> float:
    """The fraction of rows whose arg-max is the label (0.0 for no rows)."""
    if labels.numel() == 0:
        return 0.0
    return float((logits.argmax(dim=-1) == labels).to(torch.float64).mean())


def epoch_line(metrics, total_epochs: int, scores: str) -> str:
    """One human-readable line for an epoch's metrics: its number, loss, ``scores`` and wall time."""
    return (f"epoch {metrics.epoch:>{len(str(total_epochs))}}/{total_epochs}  loss {metrics.loss:.4f}  {scores}  "
            f"{1000 * metrics.seconds:.1f} ms")


@dataclasses.dataclass
class EpochMetrics:
    """One epoch: the mean training loss over its batches, accuracies and validation loss from the
    evaluation after it (``nan`` on epochs without evaluation), and its wall time in seconds
    (training and evaluation)."""

    epoch: int
    loss: float
    train_acc: float = float("nan")
    val_acc: float = float("nan")
    test_acc: float = float("nan")
    val_loss: float = float("nan")
    seconds: float = 0.0

    # The fields a trainer's ``evaluate()`` returns, in its order (filled by the epoch loop).
    evaluated: ClassVar[tuple[str, ...]] = ("train_acc", "val_acc", "test_acc", "val_loss")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def line(self, total_epochs: int) -> str:
        """One human-readable line."""
        return epoch_line(self, total_epochs,
                          f"train {self.train_acc:.4f}  val {self.val_acc:.4f}  test {self.test_acc:.4f}")


@dataclasses.dataclass
class TrainResult:
    """What :meth:`Trainer.fit` returns.

    ``best_epoch`` is the epoch with the best validation accuracy (ties: lower validation loss);
    ``test_acc`` is the test accuracy measured at that epoch. ``stopped_early`` says whether early
    stopping ended the run before ``epochs``.
    """

    history: list[EpochMetrics]
    best_epoch: int
    best_val_acc: float
    test_acc: float
    stopped_early: bool

    @property
    def losses(self) -> list[float]:
        return [m.loss for m in self.history]

    @property
    def epochs_run(self) -> int:
        return len(self.history)
