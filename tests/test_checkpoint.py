"""Checkpoint and resume: a resumed run equals an uninterrupted one; files load with weights_only=True."""
from __future__ import annotations

import io
import random

import numpy as np
import pytest
import torch

from unigraph.data import planted_partition
from unigraph.train import TrainConfig, Trainer, build_node_classifier, load_checkpoint, save_checkpoint, seed_everything
from unigraph.data.checked_file import read_checked, save_torch
from unigraph.train.checkpoint import FILENAME, FORMAT, VERSION, CheckpointError, checkpoint_path
from unigraph.train.rng import capture_rng_state, restore_rng_state


@pytest.fixture(scope="module")
def dataset():
    return planted_partition(300, num_features=12, num_val=60, num_test=100, seed=6)


def run(dataset, model_seed=0, **config):
    """Train a GAT (dropout 0.6: the RNG matters) built under ``model_seed``."""
    seed_everything(model_seed)
    model = build_node_classifier("gat", dataset.num_features, dataset.num_classes, hidden_channels=4, heads=2)
    result = Trainer(model, dataset, TrainConfig(progress="off", **config)).fit()
    return result, model


MODES = {"full_graph": {}, "mini_batch": dict(batch_size=16, fanouts=(4, 4))}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_resumed_run_matches_an_uninterrupted_one(dataset, tmp_path, mode):
    common = dict(MODES[mode], patience=None, restore_best=False)
    uninterrupted, model = run(dataset, epochs=6, **common)
    run(dataset, epochs=3, checkpoint_dir=str(tmp_path), **common)  # "stopped" after epoch 3
    # a fresh process would build another model: a different seed proves the weights come from the file
    resumed, resumed_model = run(dataset, model_seed=123, epochs=6, checkpoint_dir=str(tmp_path), resume=True, **common)
    assert resumed.losses == uninterrupted.losses  # the whole history, bit for bit
    assert [m.val_acc for m in resumed.history] == [m.val_acc for m in uninterrupted.history]
    for (name, value), resumed_value in zip(model.state_dict().items(), resumed_model.state_dict().values()):
        assert torch.equal(value, resumed_value), name
    assert load_checkpoint(tmp_path)["epoch"] == 6


def test_checkpoint_holds_everything_as_plain_data(dataset, tmp_path):
    run(dataset, epochs=2, batch_size=32, fanouts=(3, 3), patience=5, checkpoint_dir=str(tmp_path))
    payload = read_checked(checkpoint_path(tmp_path), FORMAT)
    state = torch.load(io.BytesIO(payload), weights_only=True)  # no arbitrary object inside
    assert {"epoch", "model", "optimizer", "rng", "loader", "early_stopping", "history", "config", "world"} <= set(state)
    assert state["epoch"] == 2 and state["loader"] == {"epoch": 2, "seed": 0}
    assert state["world"] == {"mode": "blocks", "world_size": 1}
    rng = state["rng"][0]
    assert isinstance(rng["torch"], torch.Tensor) and isinstance(rng["numpy"]["keys"], torch.Tensor)
    assert state["early_stopping"]["patience"] == 5 and len(state["history"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILENAME]  # the temporary file was renamed


class Payload:
    def __reduce__(self):  # what a malicious file would carry
        return (print, ("this must never run",))


def test_a_file_with_arbitrary_objects_is_refused(tmp_path):
    # a correct checksum proves the bytes are what was written, not that the writer was friendly
    save_torch(checkpoint_path(tmp_path), FORMAT, {"format": FORMAT, "version": VERSION, "evil": Payload()})
    with pytest.raises(CheckpointError, match="refused by the safe loader"):
        load_checkpoint(tmp_path)


def test_checkpoint_errors_say_what_is_wrong(dataset, tmp_path):
    with pytest.raises(CheckpointError, match="last.pt: does not exist: there is no checkpoint to resume from"):
        load_checkpoint(tmp_path / "missing")
    torch.save(torch.ones(3), checkpoint_path(tmp_path))
    with pytest.raises(CheckpointError, match="no checksum header"):
        load_checkpoint(tmp_path)
    run(dataset, epochs=2, batch_size=16, fanouts=(3, 3), checkpoint_dir=str(tmp_path))
    with pytest.raises(ValueError, match="batch_size: saved 16, now 32"):
        run(dataset, epochs=4, batch_size=32, fanouts=(3, 3), checkpoint_dir=str(tmp_path), resume=True)
    with pytest.raises(CheckpointError, match="was written by a run with .*'mode': 'blocks'.* but this run has"):
        run(dataset, epochs=4, checkpoint_dir=str(tmp_path), resume=True)


@pytest.fixture(scope="module")
def saved_state(dataset, tmp_path_factory):
    """The state of a 2-epoch mini-batch run's checkpoint."""
    directory = tmp_path_factory.mktemp("saved")
    run(dataset, epochs=2, batch_size=16, fanouts=(3, 3), checkpoint_dir=str(directory))
    return dict(load_checkpoint(directory))


DROP = object()  # a key to leave out


def history_entry(epoch):
    return {"epoch": epoch, "loss": 1.0, "train_acc": 0.5, "val_acc": 0.5, "test_acc": 0.5, "val_loss": 1.0,
            "seconds": 0.1}


@pytest.mark.parametrize("change, match", [
    (dict(epoch=5), "has completed 5 epochs but this run trains 4 in total"),
    (dict(epoch=-3), "has completed -3 epochs; a checkpoint holds >= 1"),
    (dict(epoch=0), "has completed 0 epochs"),
    (dict(epoch=2.0), "has completed 2.0 epochs"),
    (dict(epoch=DROP), r"lacks the keys \['epoch'\]"),
    (dict(history=None), "has a history of NoneType entries for 2 completed epochs"),
    (dict(history=[history_entry(1)]), "has a history of 1 entries for 2 completed epochs"),
    (dict(history=[history_entry(1), history_entry(1)]), r"history\[1\] is for epoch 1, expected 2"),
    (dict(history=[history_entry(1), {"epoch": 2}]), r"history\[1\] should be a dict with the keys"),
    (dict(history=[history_entry(1), {**history_entry(2), "loss": "nan"}]), "is not a number"),
    (dict(rng=[]), "holds 0 RNG states for a world of 1 processes"),
    (dict(early_stopping={}), "has early_stopping keys"),
    (dict(model={"weight": [1, 2]}), "model state that is not a dict of tensors"),
    (dict(stopped_early="no"), "'stopped_early' of type str"),
    (dict(version=1), "has checkpoint version 1"),
])
def test_inconsistent_checkpoints_are_refused_before_resuming(dataset, saved_state, tmp_path, change, match):
    state = {**saved_state, **change}
    state = {key: value for key, value in state.items() if value is not DROP}
    save_torch(checkpoint_path(tmp_path), FORMAT, state)
    with pytest.raises(CheckpointError, match=match) as caught:
        run(dataset, epochs=4, batch_size=16, fanouts=(3, 3), checkpoint_dir=str(tmp_path), resume=True)
    assert caught.value.path == str(checkpoint_path(tmp_path))


def test_resuming_a_finished_run_trains_nothing_more(dataset, tmp_path):
    run(dataset, epochs=2, batch_size=16, fanouts=(3, 3), checkpoint_dir=str(tmp_path))
    resumed, _ = run(dataset, epochs=2, batch_size=16, fanouts=(3, 3), checkpoint_dir=str(tmp_path), resume=True)
    assert [m.epoch for m in resumed.history] == [1, 2]


def test_an_early_stopped_run_stays_stopped(dataset, tmp_path):
    first, _ = run(dataset, epochs=40, lr=0.0, patience=2, checkpoint_dir=str(tmp_path))
    assert first.stopped_early and first.epochs_run == 3
    again, _ = run(dataset, epochs=40, lr=0.0, patience=2, checkpoint_dir=str(tmp_path), resume=True)
    assert again.epochs_run == 3 and again.stopped_early and again.best_epoch == 1


def test_rng_states_round_trip():
    seed_everything(7)
    torch.rand(3), np.random.rand(2), random.random(), np.random.randn()  # leave numpy a cached gaussian
    state = capture_rng_state()
    expected = (torch.rand(4), np.random.randn(3), random.random())
    torch.manual_seed(0), np.random.seed(0), random.seed(0)
    restore_rng_state(state)
    got = (torch.rand(4), np.random.randn(3), random.random())
    assert torch.equal(got[0], expected[0]) and np.array_equal(got[1], expected[1]) and got[2] == expected[2]
    with pytest.raises(ValueError, match="has no 'numpy' entry"):
        restore_rng_state({"torch": state["torch"], "python": state["python"]})
