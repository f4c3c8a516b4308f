"""A checkpoint whose checksum was recomputed after its content was changed (anyone can): every
value a run never holds is refused with a CheckpointError naming the file and the field, before
anything is restored, in the trainer and in ``unigraph train --resume`` (one line, exit 2)."""
from __future__ import annotations

import copy
import io
import math

import pytest
import torch

from unigraph.cli import main
from unigraph.data import planted_partition
from unigraph.data.checked_file import read_checked, save_torch
from unigraph.train import TrainConfig, Trainer, build_node_classifier, seed_everything
from unigraph.train.checkpoint import FORMAT, CheckpointError, checkpoint_path

SETTINGS = dict(epochs=2, batch_size=32, fanouts=(3, 3), patience=5, progress="off")


def _trainer(dataset, directory, resume=False, epochs=2):
    seed_everything(0)
    model = build_node_classifier("sage", dataset.num_features, dataset.num_classes, hidden_channels=8)
    config = TrainConfig(**{**SETTINGS, "epochs": epochs}, checkpoint_dir=str(directory), resume=resume)
    return Trainer(model, dataset, config)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(dataset, the state of a real 2-epoch checkpoint)."""
    dataset = planted_partition(200, num_features=6, num_val=40, num_test=60, seed=3)
    directory = tmp_path_factory.mktemp("run")
    _trainer(dataset, directory).fit()
    state = torch.load(io.BytesIO(read_checked(checkpoint_path(directory), FORMAT)), weights_only=True)
    return dataset, state


def _param(state):
    return state["optimizer"]["state"][0]


EDITS = {
    "lr nan": (lambda s: s["optimizer"]["param_groups"][0].update(lr=math.nan), r"optimizer.param_groups\[0\].lr"),
    "lr 1e30": (lambda s: s["optimizer"]["param_groups"][0].update(lr=1e30), r"optimizer.param_groups\[0\].lr"),
    "betas out of range": (lambda s: s["optimizer"]["param_groups"][0].update(betas=(5.0, -1.0)),
                           r"optimizer.param_groups\[0\].betas"),
    "unknown param-group key": (lambda s: s["optimizer"]["param_groups"][0].update(momentum_decay=3.0),
                                r"optimizer.param_groups\[0\] has the keys"),
    "NaN optimizer state": (lambda s: _param(s)["exp_avg"].view(-1).__setitem__(0, math.nan),
                            r"optimizer.state\[0\]\['exp_avg'\] holds NaN"),
    "negative exp_avg_sq": (lambda s: _param(s)["exp_avg_sq"].view(-1).__setitem__(0, -1.0),
                            r"optimizer.state\[0\]\['exp_avg_sq'\] holds negative"),
    "wrong optimizer-state shape": (lambda s: _param(s).update(exp_avg=torch.zeros(3, 3)),
                                    r"optimizer.state\[0\]\['exp_avg'\] has shape \[3, 3\]"),
    "negative step": (lambda s: _param(s).update(step=torch.tensor(-4.0)), r"optimizer.state\[0\]\['step'\]"),
    "fractional step": (lambda s: _param(s).update(step=torch.tensor(2.5)), r"optimizer.state\[0\]\['step'\]"),
    "foreign optimizer state": (lambda s: _param(s).update(momentum_buffer=torch.zeros(1)), "keeps only"),
    "best_acc inf": (lambda s: s["early_stopping"].update(best_acc=math.inf), "early_stopping.best_acc"),
    "bad_epochs negative": (lambda s: s["early_stopping"].update(bad_epochs=-10**9), "early_stopping.bad_epochs"),
    "best_epoch beyond": (lambda s: s["early_stopping"].update(best_epoch=7), "early_stopping.best_epoch"),
    "best_state extra key": (lambda s: s["early_stopping"]["best_state"].update(extra=torch.zeros(1)),
                             r"early_stopping.best_state does not match this run's model: unexpected keys \['extra'\]"),
    "best_state NaN": (lambda s: next(iter(s["early_stopping"]["best_state"].values())).view(-1).__setitem__(
        0, math.nan), "early_stopping.best_state"),
    "extra model key": (lambda s: s["model"].update(extra=torch.zeros(1)), r"model does not match .* unexpected keys"),
    "missing model key": (lambda s: s["model"].pop(next(iter(s["model"]))), r"model does not match .* missing keys"),
    "model shape": (lambda s: s["model"].update({k: torch.zeros(2, 2) for k in list(s["model"])[:1]}),
                    r"model\[.*\] has shape \[2, 2\]"),
    "NaN weights": (lambda s: next(iter(s["model"].values())).view(-1).__setitem__(0, math.nan), "model.*NaN"),
    "short torch RNG state": (lambda s: s["rng"][0].update(torch=s["rng"][0]["torch"][:100]), r"rng\[0\].torch"),
    "short numpy RNG keys": (lambda s: s["rng"][0]["numpy"].update(keys=s["rng"][0]["numpy"]["keys"][:10]),
                             r"rng\[0\].numpy.keys"),
    "numpy RNG position": (lambda s: s["rng"][0]["numpy"].update(pos=10**6), r"rng\[0\].numpy.pos"),
    "python RNG words": (lambda s: s["rng"][0]["python"].update(words=torch.full((625,), -1)),
                         r"rng\[0\].python.words"),
    "loader epoch negative": (lambda s: s["loader"].update(epoch=-1), "loader.epoch"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_value_no_run_holds_is_refused_naming_the_field(saved, tmp_path, edit):
    dataset, state = saved
    state = copy.deepcopy(state)
    change, message = EDITS[edit]
    change(state)
    save_torch(checkpoint_path(tmp_path), FORMAT, state)   # a valid checksum over the changed content
    trainer = _trainer(dataset, tmp_path, resume=True, epochs=4)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    with pytest.raises(CheckpointError, match=message) as refused:
        trainer.fit()
    assert str(refused.value).startswith(str(checkpoint_path(tmp_path)))
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())  # nothing restored


def test_the_untouched_checkpoint_resumes(saved, tmp_path):
    dataset, state = saved
    save_torch(checkpoint_path(tmp_path), FORMAT, copy.deepcopy(state))
    assert len(_trainer(dataset, tmp_path, resume=True, epochs=3).fit().history) == 3


def test_a_group_key_an_older_torch_did_not_write_is_filled_in_by_torch(saved, tmp_path):
    dataset, state = saved
    state = copy.deepcopy(state)
    del state["optimizer"]["param_groups"][0]["maximize"]     # torch's Adam.__setstate__ restores its default
    save_torch(checkpoint_path(tmp_path), FORMAT, state)
    trainer = _trainer(dataset, tmp_path, resume=True, epochs=3)
    assert len(trainer.fit().history) == 3 and trainer.optimizer.param_groups[0]["maximize"] is False


@pytest.mark.parametrize("edit", ["lr 1e30", "wrong optimizer-state shape", "short torch RNG state", "extra model key"])
def test_the_command_line_refuses_in_one_line_before_training(tmp_path, capsys, edit):
    argv = ["train", "--model", "sage", "--nodes", "200", "--epochs", "1", "--hidden", "8", "--batch-size", "32",
            "--fanouts", "3,3", "--progress", "off", "--checkpoint", str(tmp_path)]
    assert main(argv) == 0
    capsys.readouterr()
    state = torch.load(io.BytesIO(read_checked(checkpoint_path(tmp_path), FORMAT)), weights_only=True)
    EDITS[edit][0](state)
    save_torch(checkpoint_path(tmp_path), FORMAT, state)
    with pytest.raises(SystemExit) as stop:
        main([*argv[:argv.index("--epochs") + 1], "2", *argv[argv.index("--epochs") + 2:], "--resume"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    assert f"{checkpoint_path(tmp_path)}: " in err and len(err.strip().splitlines()) <= 2, err
