"""The shared benchmark rules (unigraph.benchmarking): interleaved timing, the results-folder rule,
atomic writes, the byte counts of every op on a graph small enough to count by hand, the STREAM-like
bandwidth measurement and what every report records about its machine."""
from __future__ import annotations

import json
import time

import pytest

from unigraph.benchmarking import bandwidth, environment, op_cases, output, traffic
from unigraph.benchmarking.timing import Timing, fastest, interleaved, rotation


# ---------------------------------------------------------------------- timing
def test_repeats_are_interleaved_round_robin_with_a_rotating_start():
    order = []
    calls = {name: (lambda n=name: order.append(n)) for name in "abc"}
    timings = interleaved(calls, repeats=3, warmup=1)
    assert order[:3] == list("abc")                               # the warm-up round
    assert order[3:] == list("abc") + list("bca") + list("cab")   # never one name's block after another's
    assert all(len(t.runs_ms) == 3 for t in timings.values())


def test_timings_measure_each_call_and_summarize_min_median_max():
    durations = {"fast": 0.001, "slow": 0.012}
    timings = interleaved({n: (lambda d=d: time.sleep(d)) for n, d in durations.items()}, repeats=3, warmup=0)
    for name, seconds in durations.items():
        assert min(timings[name].runs_ms) >= seconds * 1e3          # sleep never returns early
    assert fastest(timings, ["fast", "slow"]) == "fast"
    t = Timing([3.0, 1.0, 2.0, 10.0])
    assert (t.min_ms, t.median_ms, t.max_ms) == (1.0, 2.5, 10.0)
    assert t.summary()["runs_ms"] == [3.0, 1.0, 2.0, 10.0]
    assert t.grouped(2).runs_ms == [4.0, 12.0]                       # per-batch -> per-epoch
    assert Timing([1.0, 2.0, 3.0]).grouped(2).runs_ms == [3.0]       # an incomplete epoch is dropped


def test_short_calls_are_batched_to_the_minimum_run_time():
    counts = {"quick": 0}

    def quick():
        counts["quick"] += 1
    timings = interleaved({"quick": quick}, repeats=2, warmup=1, min_run_s=0.002)
    per_run = timings["quick"].calls_per_run
    assert per_run > 1 and counts["quick"] == 1 + 2 * per_run


def test_timing_arguments_are_checked():
    with pytest.raises(ValueError, match="repeats"):
        interleaved({"a": lambda: None}, repeats=0)
    with pytest.raises(ValueError, match="warmup"):
        interleaved({"a": lambda: None}, repeats=1, warmup=0, min_run_s=0.1)
    with pytest.raises(ValueError, match="at least one run"):
        Timing([])
    with pytest.raises(ValueError, match="none of"):
        fastest({"a": Timing([1.0])}, ["b"])
    assert rotation([], 3) == [] and rotation("abc", 4) == list("bca")


def test_an_error_in_a_call_propagates():
    def broken():
        raise RuntimeError("kernel failed")
    with pytest.raises(RuntimeError, match="kernel failed"):
        interleaved({"ok": lambda: None, "broken": broken}, repeats=1)


def test_the_timed_rounds_set_the_collectors_old_objects_aside_and_restore_it():
    """During the timed rounds every object alive before them is frozen (a collection walks only
    what the rounds create), afterwards nothing stays frozen, also when a call raised; a caller
    that froze objects itself keeps them frozen; garbage the rounds make is still collected."""
    import gc
    import weakref

    class Node:
        pass
    seen, survivors = [], []

    def call():
        seen.append(gc.get_freeze_count())
        cycle = Node()
        cycle.self = cycle
        survivors.append(weakref.ref(cycle))
        gc.collect()

    assert gc.get_freeze_count() == 0
    interleaved({"a": call}, repeats=2, warmup=0)
    assert min(seen) > 1000 and gc.get_freeze_count() == 0
    assert survivors[0]() is None   # the first round's cyclic garbage, collected in the second
    with pytest.raises(RuntimeError):
        interleaved({"a": lambda: (_ for _ in ()).throw(RuntimeError("x"))}, repeats=1, warmup=0)
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        interleaved({"a": lambda: None}, repeats=1, warmup=0)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


# ---------------------------------------------------------------------- results folder, atomic writes
def test_runs_without_out_go_to_scratch_and_quick_runs_never_replace_committed_results(tmp_path):
    committed = tmp_path / "results"
    assert output.results_dir(None, committed, quick=False) == committed.resolve() / "scratch"
    assert output.results_dir(None, committed, quick=True) == committed.resolve() / "scratch"
    assert output.results_dir(committed, committed, quick=False) == committed.resolve()   # explicit: replaces
    with pytest.raises(ValueError, match="may not replace the committed results"):
        output.results_dir(committed, committed, quick=True)
    assert output.results_dir(tmp_path / "elsewhere", committed, quick=True) == (tmp_path / "elsewhere").resolve()


def test_benchmark_scripts_default_to_scratch(tmp_path):
    from benchmarks import environment as scripts
    import argparse
    parser = argparse.ArgumentParser()
    scripts.add_out_argument(parser)
    parser.add_argument("--quick", action="store_true")
    assert scripts.out_dir(parser.parse_args([])) == scripts.RESULTS / "scratch"
    with pytest.raises(ValueError):
        scripts.out_dir(parser.parse_args(["--quick", "--out", str(scripts.RESULTS)]))


def test_writes_are_atomic(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    output.write_json(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}

    def interrupted(*_):
        raise KeyboardInterrupt
    monkeypatch.setattr(output.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        output.write_json(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 1}                # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]        # and no temporary is left


# ---------------------------------------------------------------------- byte counts
# A graph of N = 3 nodes and E = 4 edges, F = 2 float32 values per row, int64 indices:
# indptr 4 x 8 = 32 B, one index per edge 4 x 8 = 32 B, gathered rows 4 x 2 x 4 = 32 B, node rows 3 x 2 x 4 = 24 B.
SHAPE = traffic.Shape(num_src=3, num_dst=3, num_edges=4, value_bytes=4, index_bytes=8)


def test_gspmm_bytes_on_a_tiny_graph():
    fwd = traffic.gspmm(SHAPE, "copy_u", "sum", u_width=2, backward=False)
    assert fwd == {"csr indptr": 32, "source ids": 32, "gathered u rows": 32, "output": 24}
    bwd = traffic.gspmm(SHAPE, "copy_u", "sum", u_width=2, backward=True)
    assert traffic.total(bwd) == 32 + 32 + 32 + 24            # reverse indptr, destination ids, grad_out rows, grad_u
    assert traffic.total(traffic.gspmm(SHAPE, "copy_u", "max", u_width=2)) == 120 + 3 * 2 * 8   # + arg record
    assert traffic.total(traffic.gspmm(SHAPE, "copy_u", "max", u_width=2, backward=True)) == \
        3 * 2 * (4 + 8) + 24 + 2 * 24                          # grad_out + arg, zero-filled grad_u, scattered RMW
    # u_mul_e with a scalar weight per edge (GCN): + edge ids 32 and edge values 4 x 1 x 4 = 16
    assert traffic.total(traffic.gspmm(SHAPE, "u_mul_e", "sum", u_width=2, e_width=1, out_width=2)) == 120 + 32 + 16
    bwd = traffic.gspmm(SHAPE, "u_mul_e", "sum", u_width=2, e_width=1, out_width=2, backward=True)
    grad_u = 32 + 32 + 32 + 32 + 16 + 24     # reverse indptr, destination ids, edge ids, grad_out rows, weights, grad_u
    grad_e = 32 + 32 + 4 * (8 + 8) + 16      # destination ids, grad_out rows, gathered u (ids + rows), grad_e
    assert traffic.total(bwd) == grad_u + grad_e
    mean = traffic.gspmm(SHAPE, "copy_u", "mean", u_width=2, backward=True)
    assert mean["grad_u: degrees"] == 32 and traffic.total(mean) == 120 + 32
    copy_e = traffic.gspmm(SHAPE, "copy_e", "sum", e_width=2)
    assert "gathered u rows" not in copy_e and copy_e["edge values"] == 32


def test_gsddmm_edge_softmax_and_gat_bytes_on_a_tiny_graph():
    dot = traffic.gsddmm(SHAPE, "dot", lhs_width=2, rhs_width=2, out_width=1)
    assert dot == {"lhs (u)": 32 + 32, "rhs (v)": 32 + 32, "output": 16}
    add_e = traffic.gsddmm(SHAPE, "add", lhs_width=2, rhs_width=2, out_width=2, rhs_target="e")
    assert add_e["rhs (e)"] == 32                              # edge operands are read in place, no index
    add_bwd = traffic.gsddmm(SHAPE, "add", lhs_width=2, rhs_width=2, out_width=2, backward=True)
    assert traffic.total(add_bwd) == 2 * (32 + (32 + 32) + 24)  # per side: grad_out, csr + edge ids, grad written
    softmax = traffic.edge_softmax(SHAPE, heads=1)
    assert softmax == {"csr by destination": 32 + 32, "scores": 16, "written": 16}
    assert traffic.total(traffic.edge_softmax(SHAPE, heads=1, backward=True)) == 64 + 32 + 16
    gat = traffic.gat_attention(SHAPE, heads=1, head_width=2)
    assert traffic.total(gat) == 32 + 32 + 32 + 16 + 12 + 24 + 24   # indptr, ids, h rows, el, er, out, stats
    assert op_cases.traffic_of("copy_u/sum", SHAPE, 2, 1, "fwd+bwd") == 240
    assert op_cases.traffic_of("edge_softmax", SHAPE, 2, 1, "fwd") == 96


def test_floor_and_achieved_bandwidth():
    assert traffic.floor_ms(10**9, 10.0) == pytest.approx(100.0)
    assert traffic.achieved_gbps(10**9, 100.0) == pytest.approx(10.0)
    with pytest.raises(ValueError):
        traffic.floor_ms(1, 0)
    with pytest.raises(ValueError, match="op must be one of"):
        traffic.gspmm(SHAPE, "u_pow_e", "sum")
    with pytest.raises(ValueError, match="u_width"):
        traffic.gspmm(SHAPE, "copy_u", "sum", u_width=0)
    with pytest.raises(ValueError, match="num_edges"):
        traffic.Shape(1, 1, -1)


# ---------------------------------------------------------------------- bandwidth, environment
def test_stream_bandwidth_reports_each_thread_count():
    measured = bandwidth.stream([1, 2], elements=1 << 16, repeats=2)
    assert set(measured["threads"]) == {1, 2}
    for row in measured["threads"].values():
        assert row["copy_gbps"] > 0 and row["triad_gbps"] > 0
        assert row["copy_gbps"] >= row["copy_gbps_median"]      # the best repeat is the figure
    assert measured["meets_stream_rule"] is False                # 512 KiB arrays sit in the cache: said so
    assert "a cache figure" in bandwidth.describe(measured)
    assert bandwidth.best_gbps(measured, 8) == measured["threads"][2]["copy_gbps"]
    with pytest.raises(ValueError):
        bandwidth.stream([0])


def test_every_report_records_machine_versions_threads_and_load():
    env = environment.finish(environment.describe("python x.py --flag"))
    assert env["command"] == "python x.py --flag"
    assert env["machine"]["cpu_count"] >= 1 and env["versions"]["torch"]
    assert env["threads"]["torch_intra_op"] >= 1
    assert len(env["loadavg_start"]) == 3 and len(env["loadavg_end"]) == 3
    assert env["peak_memory_gb"] > 0
