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


# ---------------------------------------------------------------- user mistakes: a message, never a traceback

def fails_cleanly(capsys, arguments, message):
    """``unigraph train ARGS`` exits with status 2 and ``message`` on stderr (no traceback)."""
    with pytest.raises(SystemExit) as stop:
        main(["train", *arguments])
    err = capsys.readouterr().err
    assert stop.value.code == 2, err
    assert message in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("arguments, message", [
    (["--lr", "nan"], "lr must be a number >= 0.0 (finite), got nan"),
    (["--lr", "inf"], "lr must be a number >= 0.0 (finite), got inf"),
    (["--weight-decay", "nan"], "weight_decay must be a number >= 0.0 (finite), got nan"),
    (["--timeout", "nan"], "timeout must be a number >= 1.0 (finite), got nan"),
    (["--timeout", "inf"], "timeout must be a number >= 1.0 (finite), got inf"),
    (["--pipeline-stages", "2", "--micro-batches", "0"], "micro_batches must be >= 1, got 0"),
    (["--nproc", "100000"], "--nproc 100000 is more than this machine's"),
    (["--threads", "100000"], "--threads 100000 is more than this machine's"),
])
def test_non_finite_and_zero_values_are_refused(capsys, arguments, message):
    fails_cleanly(capsys, arguments, message)


def test_checkpoint_path_that_cannot_hold_checkpoints(capsys, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    fails_cleanly(capsys, ["--checkpoint", str(a_file), *QUICK], f"{a_file}: is a file, not a directory")
    fails_cleanly(capsys, ["--checkpoint", str(a_file / "below"), *QUICK], f"{a_file / 'below'}: cannot hold checkpoints")
    assert a_file.read_text() == "x"


@pytest.fixture
def saved_run(tmp_path):
    """A checkpoint directory after a 2-epoch run."""
    directory = tmp_path / "run"
    assert main(["train", "--model", "sage", "--epochs", "2", "--checkpoint", str(directory), *QUICK]) == 0
    return directory


def test_resume_from_a_missing_corrupt_or_longer_checkpoint(capsys, saved_run, tmp_path):
    resume = ["--model", "sage", "--resume", *QUICK]
    fails_cleanly(capsys, [*resume, "--epochs", "4", "--checkpoint", str(tmp_path / "none")],
                  f"{tmp_path / 'none' / 'last.pt'}: does not exist")
    assert not (tmp_path / "none").exists()  # a failed resume creates nothing
    fails_cleanly(capsys, [*resume, "--epochs", "1", "--checkpoint", str(saved_run)],
                  "has completed 2 epochs but this run trains 1 in total")
    fails_cleanly(capsys, [*resume, "--epochs", "4", "--lr", "0.1", "--checkpoint", str(saved_run)],
                  "lr: saved 0.005, now 0.1")
    path = saved_run / "last.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    fails_cleanly(capsys, [*resume, "--epochs", "4", "--checkpoint", str(saved_run)], f"{path}: is corrupted")
    path.write_bytes(bytes(data[: len(data) // 3]))
    fails_cleanly(capsys, [*resume, "--epochs", "4", "--checkpoint", str(saved_run)], f"{path}: is truncated")


def test_malicious_and_truncated_planetoid_root(capsys, tmp_path):
    pytest.importorskip("scipy.sparse")
    import pickle

    from planetoid_files import tiny_parts, write_planetoid

    class OpensAFile:
        def __reduce__(self):
            return (open, (str(tmp_path / "pwned"), "w"))

    evil = write_planetoid(tmp_path / "evil", tx=pickle.dumps(OpensAFile(), protocol=2))
    fails_cleanly(capsys, ["--dataset", "cora", "--root", evil], "ind.cora.tx: refusing to load io.open")
    assert not (tmp_path / "pwned").exists()
    graph = pickle.dumps(tiny_parts()["graph"], protocol=2)
    truncated = write_planetoid(tmp_path / "cut", graph=graph[: len(graph) // 2])
    fails_cleanly(capsys, ["--dataset", "cora", "--root", truncated], "ind.cora.graph: is not a readable Planetoid "
                                                                      "pickle (damaged or truncated")


def test_a_real_process_prints_no_traceback(tmp_path):
    """The installed command, end to end: a corrupt checkpoint and a hostile file give one line each."""
    import subprocess
    import sys

    checkpoint = tmp_path / "run"
    checkpoint.mkdir()
    (checkpoint / "last.pt").write_bytes(b"unigraph checked file 1\n{\"kind\": \"unigraph.train.checkpoint\", "
                                         b"\"size\": 3, \"sha256\": \"00\"}\nabc")
    command = [sys.executable, "-m", "unigraph.cli", "train", "--resume", "--checkpoint", str(checkpoint), *QUICK]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert f"{checkpoint / 'last.pt'}: is corrupted: its checksum does not match" in run.stderr
