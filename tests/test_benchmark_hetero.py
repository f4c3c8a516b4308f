"""The heterogeneous benchmarks run in their smoke modes and report every implementation."""
from __future__ import annotations

import json

import pytest

from benchmarks import hetero, segment_matmul


def test_hetero_benchmark_reports_each_library_and_its_accuracy(tmp_path):
    hetero.main(["--quick", "--papers", "200", "--epochs", "2", "--out", str(tmp_path),
                 "--name", "smoke"])
    result = json.loads((tmp_path / "smoke.json").read_text())
    impls = {(r["model"], r["impl"]) for r in result["rows"]}
    assert {("rgcn", "unigraph"), ("heteroconv", "unigraph")} <= impls
    assert all(r["ms_per_epoch"] > 0 and 0 <= r["test_acc"] <= 1 for r in result["rows"])
    peers = {impl for _, impl in impls} & {"pyg", "dgl"}
    if not peers:
        pytest.skip("neither PyG nor DGL is importable: no comparisons to check")
    for c in result["comparisons"]:
        mine = next(r for r in result["rows"] if r["model"] == c["model"] and r["impl"] == "unigraph")
        peer = next(r for r in result["rows"] if r["model"] == c["model"] and r["impl"] == c["peer"])
        assert c["speedup"] == pytest.approx(peer["ms_per_epoch"] / mine["ms_per_epoch"])
        assert c["equal_accuracy"] == (c["accuracy_gap"] <= hetero.ACCURACY_TOLERANCE)
    assert "equal accuracy" in (tmp_path / "smoke.md").read_text()


def test_segment_matmul_benchmark_checks_each_method_against_the_loop(tmp_path):
    segment_matmul.main(["--quick", "--out", str(tmp_path), "--name", "smoke"])
    rows = json.loads((tmp_path / "smoke.json").read_text())["rows"]
    assert {r["method"] for r in rows} >= {"loop", "bmm"}
    assert all(r["max_abs_diff_vs_loop"] < 1e-4 for r in rows)
    assert all(r["speedup_forward"] == 1.0 for r in rows if r["method"] == "loop")
