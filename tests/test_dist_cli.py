"""``unigraph train --partitions``: argument checks before any process starts, and one small run."""
from __future__ import annotations

import pytest

from unigraph.cli import main
from unigraph.data import planted_partition
from unigraph.distributed.partition import partition_dataset


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    directory = tmp_path_factory.mktemp("parts")
    partition_dataset(planted_partition(300, num_features=6, num_val=60, num_test=60, seed=0), 2, directory, method="random")
    return str(directory)


@pytest.mark.parametrize("arguments, message", [
    (["--dataset", "cora"], "--dataset does not apply with --partitions"),
    (["--num-workers", "2"], "--num-workers does not apply with --partitions"),
    (["--pipeline-stages", "2"], "--pipeline-stages does not apply with --partitions"),
    (["--task", "graph"], "--task does not apply with --partitions"),
    (["--log-dir", "logs"], "--log-dir does not apply with --partitions"),
    (["--nproc", "3"], "--nproc does not apply with --partitions (use --trainers-per-machine and --num-samplers)"),
    (["--nnodes", "3", "--master-port", "1234"], "2 partitions cannot be dealt out evenly to 3 machines"),
    (["--trainers-per-machine", "0"], "--trainers-per-machine must be >= 1"),
    (["--evaluation", "full"], "evaluation='full' needs the whole graph in one process"),
    (["--nnodes", "2", "--node-rank", "2", "--master-port", "1234"], "--node-rank must be in 0..--nnodes-1 = 0..1"),
    (["--nnodes", "2"], "--nnodes > 1 needs --master-port"),
    (["--num-samplers", "-1"], "--num-samplers must be >= 0"),
    (["--prefetch", "-1"], "--prefetch must be >= 0"),
    (["--fanouts", "5"], "--fanouts has 1 entries but the model has 2 layers"),
    (["--model", "rgcn"], "'rgcn' classifies the nodes of heterogeneous graphs"),
    (["--model", "gat", "--hidden", "0"], "GATConv out_channels must be a positive int, got 0"),
])
def test_bad_arguments_stop_before_any_process_starts(parts, capsys, arguments, message):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--partitions", parts, "--model", "sage", *arguments])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_a_missing_or_broken_partition_set_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--partitions", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert "partition directory" in err and "nowhere does not exist" in err
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit):
        main(["train", "--partitions", str(tmp_path / "empty")])
    assert "holds no partitions.json" in capsys.readouterr().err


def test_a_damaged_part_is_refused_before_any_process_starts(parts, tmp_path, capsys):
    import shutil  # noqa: PLC0415
    copy = tmp_path / "copy"
    shutil.copytree(parts, copy)
    path = copy / "part-1.npz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01                                 # one flipped bit inside an array
    path.write_bytes(bytes(data))
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--partitions", str(copy), "--model", "sage"])
    assert exit_.value.code == 2
    assert "part-1.npz: does not match partitions.json" in capsys.readouterr().err


def test_train_then_resume_refusing_another_partition_set_before_any_process_starts(tmp_path, capfd):
    """The whole command path (launcher, job, trainer, summary) on the smallest job, 1 process."""
    data = planted_partition(300, num_features=6, num_val=60, num_test=60, seed=0)
    first, second = tmp_path / "first", tmp_path / "second"
    partition_dataset(data, 1, first, method="random", seed=0)
    partition_dataset(data, 1, second, method="random", seed=1)
    run = ["--model", "sage", "--epochs", "1", "--batch-size", "32", "--fanouts", "3,3", "--progress", "off",
           "--checkpoint", str(tmp_path / "ckpt")]
    assert main(["train", "--partitions", str(first), *run, "--cache-size", "5"]) == 0   # the whole command path
    out = capfd.readouterr().out
    assert ("1 machine(s), each a graph server with 1 partition(s) and 1 trainer(s) with 0 sampler process(es) each, "
            "1 epochs") in out
    assert "machine 0: " in out and "MiB PSS at its peak" in out
    assert "done: 1 epochs" in out and "peak RSS per process (MiB)" in out
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--partitions", str(second), *run, "--epochs", "2", "--resume"])
    assert exit_.value.code == 2
    assert "last.pt: was written by a run with" in capfd.readouterr().err
    assert main(["train", "--partitions", str(first), *run, "--epochs", "2", "--resume", "--progress", "text"]) == 0
    assert "last.pt after epoch 1" in capfd.readouterr().err     # progress: "resumed from DIR/last.pt after epoch 1"


def _run_machines(commands: list[list[str]], within: float = 300.0) -> list[str]:
    """Start one process per simulated machine; all must exit 0 within ``within`` seconds (else
    every one is killed and the test fails with their output)."""
    import subprocess  # noqa: PLC0415
    started = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for c in commands]
    outputs = []
    try:
        for process in started:
            outputs.append(process.communicate(timeout=within)[0])
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()
    for process, out in zip(started, outputs):
        assert process.returncode == 0, out[-3000:]
    return outputs


@pytest.mark.slow
@pytest.mark.parametrize("starter", ["nproc", "node-rank", "torchrun"])
def test_the_command_lines_of_the_issue(tmp_path, starter):
    """`unigraph train --partitions DIR --trainers-per-machine 2` on one machine (a server and 2
    trainers); two simulated machines (--nnodes 2 --node-rank r --master-addr --master-port) with
    unigraph's own launcher and with torchrun (2 processes per machine: its server and trainer)."""
    import sys  # noqa: PLC0415

    from unigraph.train.launch import free_port  # noqa: PLC0415
    parts = 4 if starter == "nproc" else 2
    partition_dataset(planted_partition(400, num_features=6, num_val=60, num_test=60, seed=0), parts, tmp_path,
                      method="lp")
    unigraph = [sys.executable, "-m", "unigraph.cli"]
    job = ["train", "--partitions", str(tmp_path), "--model", "sage", "--epochs", "2", "--batch-size", "16",
           "--fanouts", "4,3", "--progress", "off"]
    port = str(free_port())
    if starter == "nproc":
        commands = [unigraph + job + ["--trainers-per-machine", "2"]]
    elif starter == "node-rank":
        commands = [unigraph + job + ["--nnodes", "2", "--node-rank", str(r), "--master-addr",
                                      "127.0.0.1", "--master-port", port] for r in range(2)]
    else:
        commands = [[sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2",
                     "--node-rank", str(r), "--master-addr", "127.0.0.1", "--master-port", port, "-m",
                     "unigraph.cli"] + job for r in range(2)]
    outputs = _run_machines(commands)
    assert f"on the partition set {tmp_path} ({parts} partitions" in outputs[0]
    assert "done: 2 epochs" in outputs[0], outputs[0][-2000:]
