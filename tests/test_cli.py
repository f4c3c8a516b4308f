"""The ``unigraph`` command: defaults that run the demo, clear errors, checkpoints, Planetoid, scaling flags."""
from __future__ import annotations

import pytest

from unigraph.cli import build_parser, main, spec_from_args

QUICK = ["--nodes", "300", "--progress", "text", "--log-every", "1"]


def test_info_prints_the_kernels(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "kernels:" in out and "backend choice:" in out


def test_no_arguments_is_the_demo_job():
    spec = spec_from_args(build_parser().parse_args(["train"]))
    assert (spec.model.name, spec.dataset, spec.backend, spec.train.epochs) == ("gat", "synthetic", "auto", 200)
    assert spec.train.full_graph and spec.pipeline is None and spec.world_size == 1


def test_train_runs_and_says_which_kernels(capsys):
    assert main(["train", "--model", "gat", "--dataset", "synthetic", "--backend", "auto", "--epochs", "3", *QUICK]) == 0
    captured = capsys.readouterr()
    assert "kernels: gat_attention on this graph -> " in captured.out
    assert "mode: 1 process; full graph; 3 epochs" in captured.out
    assert "done: 3 epochs" in captured.out
    assert "epoch 3/3  loss" in captured.err


@pytest.mark.parametrize("arguments, message", [
    (["--model", "resnet"], "invalid choice: 'resnet'"),
    (["--dataset", "imagenet"], "invalid choice: 'imagenet'"),
    (["--dataset", "cora"], "pass --root DIR"),
    (["--dataset", "cora", "--root", "/nonexistent/planetoid"], "/nonexistent/planetoid does not exist"),
    (["--pipeline-stages", "3"], "cannot cut 2 layers into 3 stages"),
    (["--pipeline-stages", "1"], "--pipeline-stages must be >= 2, got 1"),
    (["--pipeline-stages", "2", "--balance", "2,1"], "balance [2, 1] sums to 3 but the model has 2 layers"),
    (["--micro-batches", "4"], "--micro-batches and --balance need --pipeline-stages"),
    (["--pipeline-stages", "2", "--nproc", "3"], "--nproc must be a multiple of --pipeline-stages"),
    (["--pipeline-stages", "2", "--micro-batches", "1", "--schedule", "1f1b"], "1F1B schedule needs micro_batches >= stages"),
    (["--fanouts", "5"], "--fanouts has 1 entries but the model has 2 layers"),
    (["--fanouts", "5,x"], "expected comma-separated integers"),
    (["--resume"], "--resume needs --checkpoint DIR"),
    (["--backend", "nope"], "unknown backend 'nope'"),
    (["--epochs", "0"], "epochs must be >= 1, got 0"),
    (["--nproc", "0"], "--nproc must be >= 1"),
    (["--model", "gcn", "--heads", "4"], "--heads applies to --model gat only"),
    (["--dropout", "1.5"], "dropout"),
])
def test_bad_arguments_end_with_a_message(capsys, arguments, message):
    with pytest.raises(SystemExit) as stop:
        main(["train", *arguments])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_torchrun_world_size_wins(monkeypatch, capsys):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    spec = spec_from_args(build_parser().parse_args(["train", "--pipeline-stages", "2"]))
    assert spec.world_size == 2 and spec.pipeline.replicas == 1
    with pytest.raises(SystemExit):
        main(["train", "--nproc", "3"])
    assert "contradicts the WORLD_SIZE=2 torchrun set" in capsys.readouterr().err


def test_scaling_flags_build_data_x_pipeline():
    args = build_parser().parse_args(["train", "--pipeline-stages", "2", "--micro-batches", "5", "--nproc", "4",
                                      "--schedule", "1f1b", "--batch-size", "50", "--fanouts", "10,-1"])
    spec = spec_from_args(args)
    assert spec.world_size == 4
    assert (spec.pipeline.stages, spec.pipeline.replicas, spec.pipeline.micro_batches, spec.pipeline.schedule) == \
        (2, 2, 5, "1f1b")
    assert spec.train.fanouts == (10, -1) and spec.train.batch_size == 50


def test_checkpoint_and_resume(tmp_path, capsys):
    arguments = ["train", "--model", "sage", "--batch-size", "16", "--fanouts", "4,4", "--checkpoint", str(tmp_path), *QUICK]
    assert main([*arguments, "--epochs", "2"]) == 0
    capsys.readouterr()
    assert main([*arguments, "--epochs", "4", "--resume"]) == 0
    captured = capsys.readouterr()
    assert f"resumed from {tmp_path / 'last.pt'} after epoch 2" in captured.err
    assert "epoch 3/4" in captured.err and "epoch 1/4" not in captured.err
    assert "done: 4 epochs" in captured.out


def test_planetoid_from_root(planetoid_root, capsys):
    assert main(["train", "--dataset", "cora", "--root", str(planetoid_root), "--epochs", "2", "--progress", "off"]) == 0
    out = capsys.readouterr().out
    assert "NodeDataset('cora', num_nodes=2708" in out and "done: 2 epochs" in out


@pytest.mark.timeout(240)
def test_pipeline_job_from_the_command_line(capsys):
    assert main(["train", "--model", "sage", "--pipeline-stages", "2", "--micro-batches", "2", "--batch-size", "20",
                 "--fanouts", "3,3", "--epochs", "2", "--nodes", "200", "--progress", "off", "--timeout", "60"]) == 0
    out = capsys.readouterr().out
    assert "mode: pipeline: 2 stages x 1 replica(s), 2 micro-batches, gpipe schedule" in out
    assert "done: 2 epochs" in out


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_data_parallel_job_from_the_command_line(capsys):
    assert main(["train", "--model", "sage", "--nproc", "2", "--batch-size", "10", "--fanouts", "3,3", "--epochs", "2",
                 "--nodes", "200", "--progress", "off", "--timeout", "60"]) == 0
    out = capsys.readouterr().out
    assert "mode: data parallel: 2 processes" in out and "done: 2 epochs" in out
