"""The command's mistakes of issue 28: each ends with exit status 2 and one line naming the problem
(plus where the usage is), never a traceback and never the whole usage block; and ``--fanouts``
says what -1 means."""
from __future__ import annotations

import pytest

from unigraph.cli import main, spec_from_args, build_parser
from unigraph.data import planted_partition
from unigraph.train import job as jobs


def _one_line(capsys, argv, message, prog="unigraph train"):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"{prog}: error: ") and message in lines[0], err
    assert lines[1] == f"(see `{prog} --help`)"


def test_a_log_dir_that_is_a_file(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    _one_line(capsys, ["train", "--log-dir", str(tmp_path / "file")], f"--log-dir {tmp_path / 'file'}: is a file")


def test_a_partition_out_that_is_a_file(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    _one_line(capsys, ["partition", "--parts", "2", "--nodes", "200", "--method", "random", "--out",
                       str(tmp_path / "file")], "is a file, not a directory", prog="unigraph partition")


def test_workers_on_a_full_graph_run(capsys):
    _one_line(capsys, ["train", "--num-workers", "99999"], "trains on the full graph")
    _one_line(capsys, ["train", "--num-workers", "99999", "--batch-size", "32"], "--num-workers 99999 is more than")


@pytest.mark.parametrize("argv, message", [
    (["train", "--epochs", "x"], "argument --epochs: invalid int value: 'x'"),
    (["train", "--model", "resnet"], "invalid choice: 'resnet'"),
    (["train", "--fanouts", "10,-2"], "fanouts[1] must be a positive int or -1 (every in-edge), got -2"),
])
def test_usage_errors_are_one_line(capsys, argv, message):
    _one_line(capsys, argv, message)


def test_fanouts_say_what_minus_one_means():
    args = build_parser().parse_args(["train", "--fanouts", "10,-1", "--batch-size", "64"])
    spec = spec_from_args(args)
    text = jobs.describe(spec, planted_partition(200, num_val=40, num_test=60, seed=0))
    assert "fanouts [10, all] (all: every in-edge)" in text
