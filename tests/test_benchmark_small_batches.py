"""``benchmarks/small_batches.py --quick``: every layer both libraries have runs one training step
per round on PyG's batches, unigraph's beside PyG's, at each thread count asked; rows carry
min/median/max and the speedup; a smoke run never replaces the committed results."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks import small_batches
from benchmarks.peers import load_pyg
from conftest import REPO_ROOT


@pytest.mark.timeout(300)
def test_quick_run_times_every_layer_at_each_thread_count(tmp_path):
    if load_pyg() is None:
        pytest.skip("the benchmark compares with PyG's layers")
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "small_batches.py"), "--quick",
                           "--threads", "1", "2", "--out", str(tmp_path)], capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "small_batches_cpu.json").read_text())
    assert [section["threads"] for section in result["sections"]] == [1, 2]
    for section in result["sections"]:
        assert [row["layer"] for row in section["rows"]] == list(small_batches.layers(32))
        for row in section["rows"]:
            for library in ("unigraph", "pyg"):
                timing = row[library]
                assert 0 < timing["ms_min"] <= timing["ms_median"] <= timing["ms_max"]
            assert row["speedup"] == pytest.approx(row["pyg"]["ms_median"] / row["unigraph"]["ms_median"])
    markdown = (tmp_path / "small_batches_cpu.md").read_text()
    assert "## 1 thread(s)" in markdown and "| `GINEConv` |" in markdown and "Versions:" in markdown


def test_arguments_are_checked(capsys):
    for argv, message in ((["--width", "6"], "--width must be a multiple of 4"),
                          (["--layers", "NoSuchConv"], "unknown layers"),
                          (["--steps", "0"], "--steps must be >= 1"),
                          (["--quick", "--out", str(small_batches.REPO_ROOT / "benchmarks" / "results")], "quick")):
        with pytest.raises(SystemExit):
            small_batches.main(argv)
        assert message in capsys.readouterr().err
