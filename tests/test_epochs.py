"""The shared epoch loop (unigraph.train.epochs.run_epochs): the stop message and the break, the
closing on an exception raised mid-epoch, and a resumed run that had already stopped."""
from __future__ import annotations

import pytest
import torch

from unigraph.train import TrainConfig
from unigraph.train.early_stopping import EarlyStopping
from unigraph.train.epochs import STOP_MESSAGE_WITH_BEST, run_epochs
from unigraph.train.metrics import EpochMetrics
from unigraph.train.progress import Progress


class Recorder(Progress):
    """A text progress display that keeps its lines and says whether it was closed."""

    def __init__(self, epochs: int):
        self.lines: list[str] = []
        self.closed = False
        super().__init__(epochs, mode="text", log_every=1, write=self.lines.append)

    def close(self) -> None:
        self.closed = True
        super().close()


def run(config, model, val_accs, *, recorder, trained, closed, **kwargs):
    """run_epochs with epoch ``e`` setting the weight to ``e`` and validating at ``val_accs[e - 1]``."""
    def train_epoch(epoch):
        trained.append(epoch)
        with torch.no_grad():
            model.weight.fill_(epoch)
        return 1.0 / epoch

    history: list[EpochMetrics] = []
    stopped = run_epochs(config, model=model, train_epoch=train_epoch,
                         evaluate=lambda: (0.5, val_accs[trained[-1] - 1], 0.25, 1.0), metrics_type=EpochMetrics,
                         early_stopping=EarlyStopping(config.patience), history=history, progress=recorder,
                         close=lambda: closed.append(True), **kwargs)
    return stopped, history


def test_early_stop_shows_the_message_runs_no_further_epoch_and_restores_the_best():
    config = TrainConfig(epochs=10, patience=2, progress="off")
    model = torch.nn.Linear(1, 1, bias=False)
    recorder, trained, closed = Recorder(config.epochs), [], []
    stopped, history = run(config, model, [0.1, 0.6, 0.5, 0.4, 0.9, 0.9], recorder=recorder, trained=trained,
                           closed=closed, stop_message=STOP_MESSAGE_WITH_BEST)
    assert stopped is True
    assert trained == [1, 2, 3, 4]  # epochs 3 and 4 are no better than 2: patience 2 is spent
    assert [m.epoch for m in history] == [1, 2, 3, 4]
    assert recorder.lines[-1] == "early stop: no better validation accuracy for 2 epochs (best at epoch 2)"
    assert float(model.weight.detach()) == 2.0  # epoch 2's weights were loaded back
    assert recorder.closed and closed == [True]


def test_an_exception_mid_epoch_still_closes_progress_and_loader_and_keeps_the_weights():
    config = TrainConfig(epochs=5, patience=None, progress="off")
    model = torch.nn.Linear(1, 1, bias=False)
    recorder, trained, closed = Recorder(config.epochs), [], []
    val_accs = [0.9, 0.1]

    def after_epoch(metrics, stopped):
        assert stopped is False
        if metrics.epoch == 2:
            raise RuntimeError("callback failed in epoch 2")

    with pytest.raises(RuntimeError, match="callback failed in epoch 2"):
        run(config, model, val_accs, recorder=recorder, trained=trained, closed=closed, after_epoch=after_epoch)
    assert trained == [1, 2]
    assert recorder.closed and closed == [True]
    assert float(model.weight.detach()) == 2.0  # no restore of epoch 1's better weights after a failure


def test_a_run_that_had_stopped_runs_no_epoch_and_says_so():
    config = TrainConfig(epochs=10, patience=3, progress="off", restore_best=False)
    model = torch.nn.Linear(1, 1, bias=False)
    recorder, trained, closed = Recorder(config.epochs), [], []
    stopped, history = run(config, model, [], recorder=recorder, trained=trained, closed=closed, start=4,
                           stopped=True)
    assert stopped is True and trained == [] and history == []
    assert recorder.lines == ["early stop: no better validation accuracy for 3 epochs"]
    assert recorder.closed and closed == [True]
