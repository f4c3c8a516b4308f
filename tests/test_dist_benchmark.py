"""benchmarks/distributed.py: its arithmetic on known summaries, and (slow) a smoke run on small sizes."""
from __future__ import annotations

import json

import pytest

from benchmarks import distributed as bench


def trainer_summary(rows: int, remote: int, hits: int, feature_bytes: int, compute: float) -> dict:
    return {"epochs": 2, "test_acc": 0.75, "best_val_acc": 0.7, "losses": [1.0, 0.5], "num_batches": 10,
            "parameter_bytes": 1000, "seconds": 9.0, "peak_rss_bytes": 300 * 2**20,
            "cache": {"cached_rows": 5, "hits": hits, "misses": remote - hits},
            "training": {"bytes": feature_bytes + 100, "sample_bytes": 100, "feature_bytes": feature_bytes,
                         "sampler_bytes": 0, "rows": rows, "remote_rows": remote, "cache_hits": hits},
            "loader": {"sample_wait": 2.0, "fetch_wait": 1.0, "sample_work": 3.0, "sampler_bytes": 0},
            "timing": {"compute": compute, "steps": 20, "train_seconds": 10.0},
            "traffic": {"bytes_sent": 0, "bytes_received": 0}}


def test_the_report_adds_up():
    summaries = [trainer_summary(1000, 400, 100, 52_000, 6.0), trainer_summary(1000, 600, 50, 78_000, 7.0)]
    run = bench.describe_run(summaries, epochs=2, seeds_per_epoch=50)
    assert run["rpc_bytes_per_epoch"] == (52_100 + 78_100) / 2
    assert run["rows_per_seed"] == 2000 / 2 / 50 and run["remote_row_share"] == 0.5
    assert run["cache_hit_rate"] == 150 / 1000
    assert run["all_reduce_bytes_per_epoch_estimate"] == 2 * 1 * 1000 * 10       # ring: 2 (P-1) x gradient x steps
    step = run["per_step"][0]
    assert step["step_s"] == 0.5 and step["batches_per_s"] == 2.0
    assert step["shares"] == pytest.approx({"sampling": 0.2, "fetching": 0.1, "computing": 0.6, "other": 0.1})


@pytest.mark.slow
def test_quick_run_writes_its_results(tmp_path):
    pytest.importorskip("pymetis", reason="the benchmark partitions with METIS: the `partition` extra (pymetis)")
    assert bench.main(["--quick", "--epochs", "1", "--work", str(tmp_path / "work"), "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "distributed_cpu_quick.json").read_text())
    assert len(result["distributed"]["peak_rss_mib"]) == 4
    assert result["distributed"]["rpc_bytes_per_epoch"] > 0
    label = "quiet machine" if result["quiet"] else "TAKEN ON A LOADED MACHINE"
    assert result["quiet"] == bench.is_quiet(tuple(result["load_average"]))
    assert f"## Time per step ({label}" in (tmp_path / "distributed_cpu_quick.md").read_text()
