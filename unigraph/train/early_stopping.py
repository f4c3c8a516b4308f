"""Early stopping on validation accuracy, with the best weights kept."""
from __future__ import annotations

import math

import torch


class EarlyStopping:
    """Tracks the best validation epoch and says when ``patience`` epochs passed without a better one.

    An epoch is better when its validation accuracy is higher, or equal with a lower validation
    loss (accuracy alone ties often on small validation sets). The best epoch's weights are kept
    (a CPU copy) so the run can end on them. ``patience=None`` tracks the best epoch but never stops.
    """

    def __init__(self, patience: int | None):
        self.patience = patience
        self.best_acc = -math.inf
        self.best_loss = math.inf
        self.best_epoch = 0
        self.best_test_acc = float("nan")
        self.bad_epochs = 0
        self.best_state: dict | None = None

    def update(self, epoch: int, val_acc: float, val_loss: float, test_acc: float, model: torch.nn.Module) -> bool:
        """Record one evaluated epoch; True when training should stop."""
        if val_acc > self.best_acc or (val_acc == self.best_acc and val_loss < self.best_loss):
            self.best_acc, self.best_loss, self.best_epoch, self.best_test_acc = val_acc, val_loss, epoch, test_acc
            self.best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1
        return self.should_stop

    @property
    def should_stop(self) -> bool:
        return self.patience is not None and self.bad_epochs >= self.patience

    def state_dict(self) -> dict:
        return {"patience": self.patience, "best_acc": self.best_acc, "best_loss": self.best_loss,
                "best_epoch": self.best_epoch, "best_test_acc": self.best_test_acc, "bad_epochs": self.bad_epochs,
                "best_state": self.best_state}

    def load_state_dict(self, state: dict) -> None:
        for key in ("best_acc", "best_loss", "best_epoch", "best_test_acc", "bad_epochs", "best_state"):
            setattr(self, key, state[key])
