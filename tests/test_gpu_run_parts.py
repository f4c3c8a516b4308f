"""The GPU run's pieces, each alone and fast: budgets and their enforcement (a step over its budget
is stopped and its partial results kept), the pytest progress record, the target checks of the
summary, the GPU cost model's constants file, the install fallback of ``run.sh``, and that every
``mark.gpu`` test is in the run. (The whole run: ``tests/test_gpu_run.py``.)"""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import time

import pytest

from benchmarks.gpu import run, step_tests, summary
from unigraph.backends import cost_model
from unigraph.benchmarking import cost_fit

ROOT = pathlib.Path(__file__).resolve().parents[1]
RUN_SH = ROOT / "benchmarks" / "gpu" / "run.sh"


# ---------------------------------------------------------------------- budgets
def test_budgets_fit_in_eight_minutes():
    whole = int(re.search(r"^WHOLE_BUDGET_S=(\d+)", RUN_SH.read_text(), re.M).group(1))
    assert sum(s.budget_s for s in run.STEPS) <= run.TOTAL_BUDGET_S <= whole <= 8 * 60
    assert '--total-budget-s "$LEFT"' in RUN_SH.read_text()  # the steps get what the install left
    assert run.KILL_GRACE_S < run.STEP_MARGIN_S < min(s.budget_s for s in run.STEPS)
    assert len(run.OUTPUT_FILES) == len(set(run.OUTPUT_FILES)) <= 8
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", name) for name in run.OUTPUT_FILES)  # what the GPU machine returns


SLOW_STEP = """
import signal, sys, time
from benchmarks.gpu.common import parse_args, run_step
args = parse_args("slow", sys.argv[1:])
def body(results, deadline):
    if {ignore_term}:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    results["part"] = 1
    results.save()
    time.sleep(120)
sys.exit(run_step("slow", args, body))
"""


@pytest.mark.parametrize("ignore_term", [False, True], ids=["saves-on-sigterm", "killed"])
def test_a_step_over_its_budget_is_stopped_and_its_partial_results_kept(tmp_path, monkeypatch, ignore_term):
    (tmp_path / "slow_step.py").write_text(SLOW_STEP.format(ignore_term=ignore_term))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(run, "KILL_GRACE_S", 2.0)  # SIGTERM at 3 s, SIGKILL at 5 s
    log = run.Log(tmp_path / "run.log")
    budget = 5.0
    began = time.monotonic()
    status = run.run_step(run.Step("slow", "slow_step", budget, "slow.json"), budget, tmp_path, False, log)
    log.close()
    assert time.monotonic() - began < budget + 8
    assert status["status"] == "timed out" and status["signal"] == ("SIGKILL" if ignore_term else "SIGTERM")
    saved = json.loads((tmp_path / "slow.json").read_text())
    assert saved["part"] == 1 and saved["status"] == ("running" if ignore_term else "killed")
    assert "SIGTERM to the step's process group" in (tmp_path / "run.log").read_text()


def test_a_failing_part_is_recorded_and_the_next_one_runs(tmp_path):
    from benchmarks.gpu.common import PartsFailed, Results, run_parts
    results = Results(tmp_path / "step.json", "step", dry_run=True)
    ran = []

    def broken():
        raise KeyError("a bug")
    with pytest.raises(PartsFailed, match="parts failed: first"):
        run_parts("step", results, [("first", broken), ("second", lambda: ran.append("second"))])
    saved = json.loads((tmp_path / "step.json").read_text())
    assert ran == ["second"] and saved["first"]["status"] == "failed" and "KeyError: 'a bug'" in saved["first"]["error"]


def test_the_out_dir_holds_nothing_else(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match="holds files this run does not write"):
        run.check_out_dir(tmp_path)


def test_step_arguments_are_checked():
    with pytest.raises(SystemExit):
        run.parse_args(["out", "--steps", "kernels,warp"])
    assert [s.name for s in run.parse_args(["out", "--steps", "tests,e2e"]).selected] == ["tests", "e2e"]


# ---------------------------------------------------------------------- the tests step
def test_every_gpu_marked_test_file_is_in_the_gpu_run():
    marker = re.compile(r"pytest\.mark\.gpu\b")
    marked = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py") if marker.search(p.read_text())}
    assert marked <= set(step_tests.GPU_TEST_FILES), f"add {sorted(marked - set(step_tests.GPU_TEST_FILES))}"
    targets = [t.split("::")[0] for part in step_tests.PARTS for t in part.targets]
    assert set(step_tests.GPU_TEST_FILES) <= set(targets)
    assert all((ROOT / t).exists() for t in targets)


def test_the_progress_record_says_what_passed_and_failed(tmp_path):
    (tmp_path / "test_sample.py").write_text(textwrap.dedent("""
        import pytest
        def test_ok(): pass
        def test_bad(): assert 1 == 2, "wrong"
        @pytest.mark.skip(reason="not here")
        def test_skipped(): pass
        @pytest.fixture
        def broken(): raise RuntimeError("setup broke")
        def test_error(broken): pass
    """))
    record = tmp_path / "progress.json"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "benchmarks.gpu.pytest_progress",
                           "--progress-json", str(record), "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                           str(tmp_path / "test_sample.py")], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1, done.stdout
    data = json.loads(record.read_text())
    outcomes = {t["nodeid"].split("::")[1]: t["outcome"] for t in data["tests"]}
    assert outcomes == {"test_ok": "passed", "test_bad": "failed", "test_skipped": "skipped", "test_error": "error"}
    assert data["status"] == "finished" and data["counts"] == {"passed": 1, "failed": 1, "skipped": 1, "error": 1}
    bad = next(t for t in data["tests"] if t["outcome"] == "failed")
    assert "wrong" in bad["message"]


# ---------------------------------------------------------------------- summary targets
def case(op, mode, medians, floor_ms=1.0, graph="uniform", degree=16, width=64, regret=None):
    return {"op": op, "mode": mode, "graph": graph, "degree": degree, "width": width, "median_ms": medians,
            "floor_ms": floor_ms, "achieved_gbps": {k: 1.0 for k in medians}, "regret": regret}


def test_the_target_checks():
    suite = {"implementations": {"unigraph": ["scatter", "triton_node", "triton_edge"], "peers": ["pyg",
                                                                                                  "torch_sparse_csr"]},
             "cases": [case("copy_u/sum", "fwd", {"triton_node": 1.4, "triton_edge": 2.0, "pyg": 3.0}),
                       case("copy_u/sum", "fwd", {"triton_node": 1.6, "pyg": 3.0}),       # 1.6x the floor
                       case("u_mul_e/sum", "fwd", {"triton_edge": 1.2, "torch_sparse_csr": 1.1}),  # a peer ahead
                       case("gat", "fwd+bwd", {"triton_node": 2.0, "pyg": 3.0, "pyg_compiled": 1.5}),
                       case("gat", "fwd+bwd", {"triton_node": 2.0, "pyg": 3.0}, regret=1.2),
                       case("copy_u/max", "fwd", {"triton_node": 9.0}, regret=1.0)]}
    met = [(r["triton"], r["met"]) for r in summary.gspmm_targets(suite)]
    assert met == [("triton_node", True), ("triton_node", False), ("triton_edge", False)]
    assert [r["met"] for r in summary.gat_targets(suite)] == [False, True]
    assert summary.gat_targets(suite)[1]["speedup_vs_pyg"] == 1.5
    regret = summary.auto_regret(suite)
    assert regret["fwd"] == {"cases": 1, "geomean": 1.0, "worst": 1.0, "within": 1}
    assert regret["fwd+bwd"]["within"] == 0


# ---------------------------------------------------------------------- the GPU cost model's constants
def gpu_suite() -> dict:
    """A GPU-like suite: triton_node's time grows with the largest in-degree, triton_edge's with
    the edges; scatter and sparse slower."""
    cases = []
    for graph, max_in in (("uniform", 40), ("rmat", 4000)):
        for degree in (4, 16, 64):
            for width in (16, 64):
                for op in ("copy_u/sum", "u_mul_e/sum", "copy_u/max", "u_add_v", "edge_softmax", "gat"):
                    for mode in ("fwd", "fwd+bwd"):
                        e = 65536 * degree
                        ms = {"triton_node": 0.02 + 4e-9 * e * width + 3e-5 * max_in,
                              "triton_edge": 0.03 + 9e-9 * e * width + 1e-6 * max_in,
                              "scatter": 0.05 + 2e-8 * e * width, "sparse": 0.06 + 1e-8 * e * width}
                        ms = {k: v * (2.5 if mode == "fwd+bwd" else 1.0) for k, v in ms.items()}
                        cases.append({"op": op, "mode": mode, "graph": graph, "degree": degree, "width": width,
                                      "nodes": 65536, "edges": e, "max_in_degree": max_in, "timings_ms": ms,
                                      "auto_choice": "triton_node"})
    return {"machine": {"device": "cuda", "gpu": "a pretend GPU"},
            "implementations": {"unigraph": ["scatter", "sparse", "triton_node", "triton_edge"], "peers": []},
            "cases": cases}


def test_fitted_gpu_constants_drive_auto_and_a_bad_file_fails_loudly(tmp_path, monkeypatch):
    suite = gpu_suite()
    source = tmp_path / "kernels_cuda.json"
    source.write_text(json.dumps(suite))
    with pytest.raises(ValueError, match="not a GPU"):
        cost_fit.fit_gpu_constants([{**suite, "machine": {"device": "cpu"}}], [str(source)])
    document = cost_fit.fit_gpu_constants([suite], [str(source)])
    node = document["rows"]["triton_node"]["spmm_sum"]
    assert node["source"].startswith("fit") and node["skew_ns"] > 0
    assert document["rows"]["triton_node"]["spmm_binary"]["source"].startswith("derived")
    path = tmp_path / "cost_constants_cuda.json"
    path.write_text(cost_fit.render(document))
    monkeypatch.setattr(cost_model, "CUDA_CONSTANTS_PATH", path)
    fwd, grad, source_text = cost_model._gpu_tables()
    assert "fitted" in source_text and "a pretend GPU" in source_text
    assert grad["triton_node"]["spmm_sum"].launch_us > fwd["triton_node"]["spmm_sum"].launch_us  # its own table
    def faster(max_in_degree: int) -> str:
        stats = type("Stats", (), {"num_src_nodes": 65536, "num_dst_nodes": 65536, "num_edges": 65536 * 16,
                                   "max_in_degree": max_in_degree})()
        return min(("triton_node", "triton_edge"), key=lambda b: fwd[b]["spmm_sum"].us(stats, 64))
    # the suite's own law: node-parallel ahead until the longest row costs more than the edge-parallel atomics
    assert faster(40) == "triton_node" and faster(40_000) == "triton_edge"
    held_out = cost_fit.crossval_gpu(suite)
    assert "GPU model fitted on uniform, scored on rmat" in held_out and "cost model" in held_out
    broken = json.loads(path.read_text())
    del broken["rows"]["sparse"]
    path.write_text(json.dumps(broken))
    with pytest.raises(ValueError, match="cost_constants_cuda.json.*every family"):
        cost_model._gpu_tables()


def test_without_a_constants_file_the_gpu_model_is_the_estimates():
    if cost_model.CUDA_CONSTANTS_PATH.exists():
        pytest.skip("a GPU run is committed")
    assert cost_model.GPU_SOURCE.startswith("estimates") and cost_model.GPU_COSTS is cost_model.GPU_GRAD_COSTS
    row = cost_model.GPU_COSTS["triton_node"]["spmm_sum"]
    assert row.skew_ns == cost_model.NODE_SERIAL_NS and cost_model.GPU_COSTS["scatter"]["sddmm"].skew_ns == 0


# ---------------------------------------------------------------------- run.sh's install
def test_run_sh_runs_from_the_checkout_where_pip_cannot_install(tmp_path):
    """No editable install visible (python -S) and a pip that fails: run.sh links backends/ and
    kernels/ into unigraph/ for the run, and removes the links afterwards."""
    import site
    site_packages = site.getsitepackages()[0]
    fake = tmp_path / "python"
    fake.write_text(textwrap.dedent(f"""\
        #!/bin/bash
        for a in "$@"; do [ "$a" = pip ] && {{ echo "no pip here" >&2; exit 1; }}; done
        PYTHONPATH="{site_packages}${{PYTHONPATH:+:$PYTHONPATH}}" exec {sys.executable} -S "$@"
        """))
    fake.chmod(0o755)
    out = tmp_path / "out"
    done = subprocess.run([str(RUN_SH), str(out), "--install-only"], cwd=ROOT,
                          env={**os.environ, "PYTHON": str(fake)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "running from the checkout through the links" in (out / "run.log").read_text()
    assert not (ROOT / "unigraph" / "backends").exists() and not (ROOT / "unigraph" / "kernels").exists()


@pytest.mark.slow
def test_every_triton_kernel_compiles_for_sm90():
    """tests/triton_aot.py --full: every kernel variant the launchers make, every configuration,
    through ptxas for an H100, without a GPU (minutes)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "triton_aot.py"), "--full", "--int64"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=3000)
    assert done.returncode == 0, done.stdout[-5000:]

