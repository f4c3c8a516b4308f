"""benchmarks/distributed.py, dist_model.py and dist_scaling.py: their arithmetic on known summaries,
and (slow) smoke runs on small sizes."""
from __future__ import annotations

import json

import pytest

from benchmarks import dist_model as model
from benchmarks import distributed as bench

MIB = 2**20


def trainer_summary(rows: int, remote: int, hits: int, feature_bytes: int, compute: float) -> dict:
    return {"epochs": 2, "kind": "trainer", "test_acc": 0.75, "best_val_acc": 0.7, "losses": [1.0, 0.5],
            "num_batches": 10, "parameter_bytes": 1000, "seconds": 9.0, "peak_rss_bytes": 300 * MIB,
            "cache": {"cached_rows": 5, "hits": hits, "misses": remote - hits},
            "training": {"bytes": feature_bytes + 100, "sample_bytes": 100, "feature_bytes": feature_bytes,
                         "sampler_bytes": 0, "rows": rows, "remote_rows": remote, "cache_hits": hits,
                         "cache_saved_bytes": hits * 72, "halo_sample_rows": 30, "halo_sample_saved_bytes": 800},
            "loader": {"sample_wait": 2.0, "fetch_wait": 1.0, "sample_work": 3.0, "sampler_bytes": 0},
            "timing": {"compute": compute, "steps": 20, "train_seconds": 10.0, "eval_seconds": 1.0,
                       "peak_rss_train": 250 * MIB},
            "traffic": {"bytes_sent": 0, "bytes_received": 0}}


def server_summary(machine: int) -> dict:
    at_peak = {"Pss": 900 * MIB, "Uss": 500 * MIB, "Pss_Shmem": 300 * MIB, "Pss_File": 100 * MIB, "Rss": 1500 * MIB}
    return {"kind": "server", "machine": machine, "peak_rss_bytes": 200 * MIB,
            "traffic": {"bytes_sent": 10, "bytes_received": 20},
            "machine_memory": {"peak": dict(at_peak, Pss=950 * MIB), "at_peak": at_peak,
                               "shared_bytes": {"partition": 250 * MIB, "cache": 50 * MIB, "tables": 64 * MIB},
                               "shared_bytes_at_peak": {"partition": 250 * MIB, "cache": 50 * MIB, "tables": 0},
                               "processes": {f"server{machine}": {"Pss": 1, "Uss": 2, "Rss": 3, "Pss_Shmem": 4}}}}


def test_the_report_adds_up():
    summaries = [server_summary(0), trainer_summary(1000, 400, 100, 52_000, 6.0),
                 server_summary(1), trainer_summary(1000, 600, 50, 78_000, 7.0)]
    run = bench.describe_run(summaries, epochs=2, seeds_per_epoch=50)
    assert run["rpc_bytes_per_epoch"] == (52_100 + 78_100) / 2                 # servers' own requests: not training
    assert run["rows_per_seed"] == 2000 / 2 / 50 and run["remote_row_share"] == 0.5
    assert run["cache_hit_rate"] == 150 / 1000
    saved = run["halo_saved"]
    assert saved == {"sampled_rows": 30.0, "sample_bytes": 800.0, "cached_rows": 75.0, "feature_bytes": 75.0 * 72}
    assert run["rpc_bytes_without_halo_per_epoch"] == run["rpc_bytes_per_epoch"] + 800 + 75 * 72
    assert run["all_reduce_bytes_per_epoch_estimate"] == 2 * 1 * 1000 * 10       # ring: 2 (P-1) x gradient x steps
    assert run["trainer_peak_rss_mib"] == [300, 300] and run["trainer_peak_rss_train_mib"] == [250, 250]
    machine = run["machines"][1]
    assert machine["machine"] == 1 and machine["pss_peak"] == 950 * MIB
    # the peak PSS against one copy of the blocks that existed then (the table came later) + working sets
    assert machine["one_copy_plus_working_sets"] == (300 + 500) * MIB and machine["ratio"] == 900 / 800
    step = run["per_step"][0]
    assert step["step_s"] == 0.5 and step["batches_per_s"] == 2.0
    assert step["shares"] == pytest.approx({"sampling": 0.2, "fetching": 0.1, "computing": 0.6, "other": 0.1})


def test_every_ratio_is_against_both_baselines():
    run = bench.describe_run([server_summary(0), trainer_summary(1000, 400, 100, 52_000, 6.0)], 2, 50)
    single = {"peak_rss_bytes": 1000 * MIB, "peak_rss_train_bytes": 600 * MIB, "peak_pss_train_bytes": 500 * MIB,
              "peak_pss_bytes": 950 * MIB}
    same = dict(run, trainer_peak_rss_mib=[400], machines=[dict(run["machines"][0], pss_peak=1900 * MIB)])
    r = bench.ratios({"single_trainer": single, "single_same_code": same, "distributed": run})
    assert r["trainer_rss_vs_single_training_rss"] == 300 / 600
    assert r["trainer_training_rss_vs_single_training_rss"] == 250 / 600
    assert r["trainer_rss_vs_single_peak_rss"] == 300 / 1000
    assert r["trainer_rss_vs_same_code_trainer_rss"] == 300 / 400
    assert r["machine_pss_vs_single_training_pss"] == 950 / 500 and r["machine_pss_vs_same_code_machine_pss"] == 0.5


def test_the_scaling_model_counts_what_a_machine_stores_and_moves():
    c = model.Constants(fixed_bytes=1e9, halo=2.0, halo_edges=40.0, cache_share=1.0, hidden=128, table_share=0.25,
                        rows_per_seed=60.0,
                        remote_share=0.5, hit_rate=0.5, sample_bytes_per_seed=0.0, gradient_bytes=1e5)
    graph = model.Graph(nodes=4e6, edges=80e6, features=128)
    blocks = model.shared_bytes(graph, 4, c)
    assert blocks == {"nodes": 1e6 * 547, "edges": 80e6, "halo": 1e6 * (48 + 160), "cache": 1e6 * 520,
                      "table": 0.25e6 * 512}
    assert model.memory_per_machine(graph, 4, c) == 1e9 + sum(blocks.values())
    traffic = model.bytes_per_epoch(seeds=1000, features=128, machines=4, batch=100, c=c)
    assert traffic["features"] == 1000 * 60 * 0.5 * 0.5 * 520 and traffic["all_reduce"] == 2 * 3 * 1e5 * 10
    run = {"parts": [{"halo": 2e6, "halo_edges": 40e6}, {"halo": 6e6, "halo_edges": 120e6}],
           "cache_rows_per_machine": 1e6, "rows_per_seed": 60.0, "remote_row_share": 0.5, "cache_hit_rate": 0.5,
           "sample_bytes_per_epoch": 0.0, "seeds_per_epoch": 1000,
           "machines": [{"pss_peak": 3e9, "shared_bytes": {"tables": 0.25e6 * 512}}]}
    fitted = model.fit(run, graph, 4, 128, 1e5)
    assert (fitted.halo, fitted.halo_edges, fitted.cache_share, fitted.table_share) == (2.0, 40.0, 1.0, 0.25)
    assert fitted.fixed_bytes == 3e9 - sum(blocks.values())                    # C: what the blocks do not explain


@pytest.mark.slow
def test_quick_run_writes_its_results(tmp_path):
    pytest.importorskip("pymetis", reason="the benchmark partitions with METIS: the `partition` extra (pymetis)")
    assert bench.main(["--quick", "--epochs", "1", "--work", str(tmp_path / "work"), "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "distributed_cpu_quick.json").read_text())
    assert len(result["distributed"]["peak_rss_mib"]) == 8                     # 4 machines x (server + trainer)
    assert result["distributed"]["rpc_bytes_per_epoch"] > 0
    assert result["distributed"]["rpc_bytes_without_halo_per_epoch"] > result["distributed"]["rpc_bytes_per_epoch"]
    assert len(result["machines"]["machines"]) == 2 and result["machines"]["processes"] == 10
    label = "quiet machine" if result["quiet"] else "TAKEN ON A LOADED MACHINE"
    assert result["quiet"] == bench.is_quiet(tuple(result["load_average"]))
    text = (tmp_path / "distributed_cpu_quick.md").read_text()
    assert f"## Time per step ({label}" in text and "PSS / (one copy + working sets)" in text


@pytest.mark.slow
def test_quick_scaling_run_writes_its_table(tmp_path):
    pytest.importorskip("pymetis", reason="the benchmark partitions with METIS: the `partition` extra (pymetis)")
    from benchmarks import dist_scaling
    assert dist_scaling.main(["--quick", "--work", str(tmp_path / "work"), "--out", str(tmp_path)]) == 0
    text = (tmp_path / "dist_scaling_cpu_quick.md").read_text()
    assert "(fitted)" in text and "| 100M | 3B | 16 |" in text
