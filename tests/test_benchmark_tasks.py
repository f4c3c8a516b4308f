"""benchmarks/tasks.py runs end to end (a smoke run) and writes its report."""
from __future__ import annotations

import json

import pytest


def test_tasks_benchmark_smoke_run(tmp_path):
    pytest.importorskip("torch_geometric")
    from benchmarks import tasks
    out = tmp_path / "tasks"
    tasks.main(["--quick", "--parts", "gin", "--out", str(out)])
    report = json.loads(out.with_suffix(".json").read_text())
    run = report["gin"]["runs"][0]
    assert 0.0 <= run["unigraph"] <= 1.0 and 0.0 <= run["pyg"] <= 1.0 and report["gae"] is None
    assert report["command"] == "python benchmarks/tasks.py --quick --parts gin --out " + str(out)
    text = out.with_suffix(".md").read_text()
    assert "| 0 |" in text and "GIN on the motif dataset" in text
