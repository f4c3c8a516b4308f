"""``benchmarks/kernels.py`` runs end to end (``--quick`` on a tiny graph) and reports every case
with the regret of ``auto``; its cost-model fit recovers known constants."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from conftest import REPO_ROOT
from unigraph import backends as registry
from unigraph.benchmarking import cost_fit

SCRIPT = REPO_ROOT / "benchmarks" / "kernels.py"
sys.path.insert(0, str(REPO_ROOT))
from benchmarks import kernels  # noqa: E402


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    command = [sys.executable, str(SCRIPT), "--quick", "--nodes", "64", "--degrees", "1", "4", "--widths", "16",
               "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_json_has_every_case_with_auto_and_its_regret(quick_run):
    result = json.loads((quick_run / "kernels_cpu.json").read_text())
    assert result["machine"]["cpu_count"] and result["versions"]["torch"] == torch.__version__
    expected = {(op, graph, degree, 16, mode) for op in kernels.OPS for graph in ("uniform", "rmat")
                for degree in (1, 4) for mode in kernels.MODES}
    cases = {(c["op"], c["graph"], c["degree"], c["width"], c["mode"]): c for c in result["cases"]}
    assert set(cases) == expected and len(result["cases"]) == len(expected)
    backends = [n for n, b in registry.all_backends().items()
                if registry.status_of(n).ok and b.contract.auto and not b.contract.interpreted_on_cpu]
    assert result["implementations"]["unigraph"] == backends
    for case in result["cases"]:
        assert set(backends) | {"auto"} <= set(case["timings_ms"]), case
        assert case["auto_choice"] in backends
        assert case["regret"] >= 1.0 and case["vs_best"] >= case["regret"] - 1e-3  # peers only add candidates
        assert case["best"] in case["timings_ms"]
        best = case["timings_ms"][case["best_unigraph"]]
        assert case["regret"] == pytest.approx(case["timings_ms"][case["auto_choice"]] / best, rel=1e-2)


def test_cases_are_timed_interleaved_with_bandwidth_figures(quick_run):
    result = json.loads((quick_run / "kernels_cpu.json").read_text())
    assert result["bandwidth"]["threads"] and result["bandwidth_gbps_used"] > 0
    assert result["environment"]["threads"]["torch_intra_op"] >= 1 and result["environment"]["loadavg_end"]
    for case in result["cases"]:
        assert case["bytes"] > 0 and case["floor_ms"] > 0
        for impl, runs in case["runs_ms"].items():
            assert case["timings_ms"][impl] == pytest.approx(min(runs), abs=1e-3)
            assert case["max_ms"][impl] == pytest.approx(max(runs), abs=1e-3)
            assert case["achieved_gbps"][impl] == pytest.approx(case["bytes"] / case["median_ms"][impl] / 1e6, rel=1e-2)
    text = (quick_run / "kernels_cpu.md").read_text()
    assert "STREAM-like bandwidth" in text and "Achieved GB/s" in text and "| copy_u/sum |" in text


def test_markdown_and_plot_are_written(quick_run):
    text = (quick_run / "kernels_cpu.md").read_text()
    assert "| auto chose | regret | vs best |" in text and "## Regret of `auto`" in text
    rows = [line for line in text.split("## All cases")[1].splitlines() if line.startswith("| copy_u/sum |")]
    assert len(rows) == 2 * 2 * 2  # graphs x degrees x modes at one width
    png = (quick_run / "kernels_cpu.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_fit_recovers_the_constants_that_generated_the_timings():
    from unigraph.backends.cost_model import spill_fraction
    truth = {"scatter": [40.0, 2.5, 3.0, 0.5, 1.5], "sparse": [60.0, 0.2, 10.0, 1.0, 0.0]}
    cases = []
    for degree in (1, 4, 16, 64):
        for width in (16, 64, 256):
            for nodes in (1000, 20_000, 100_000):  # tables within the cache and past it
                edges = nodes * degree
                gathers = edges * width
                timings = {b: (c[0] + (c[1] * gathers + c[2] * edges + c[3] * nodes * width
                                       + c[4] * gathers * spill_fraction(nodes, width)) / 1e3) / 1e3
                           for b, c in truth.items()}
                cases.append({"op": "copy_u/sum", "mode": "fwd", "edges": edges, "nodes": nodes, "width": width,
                              "timings_ms": timings})
    for backend, constants in truth.items():
        got = cost_fit.fit_row(cases, backend, "spmm_sum")
        assert [got[k] for k in cost_fit.COLUMNS] == pytest.approx(constants, rel=1e-3, abs=1e-3)
        assert got["source"] == f"fit: {len(cases)} fwd cases, median |relative error| 0%"


def test_quick_runs_never_write_the_committed_results(capsys):
    assert kernels.parse_args(["--quick"]).out == kernels.RESULTS / "scratch"  # git-ignored
    assert kernels.parse_args([]).out == kernels.RESULTS / "scratch"           # only an explicit --out replaces
    with pytest.raises(SystemExit):
        kernels.parse_args(["--quick", "--out", str(kernels.RESULTS)])
    assert "may not replace the committed results" in capsys.readouterr().err


def test_one_op_and_backend_by_name(capsys):
    args = kernels.parse_args(["--quick", "--ops", "u_mul_e/sum", "--backends", "numba"])
    assert args.ops == ["u_mul_e/sum"] and args.backends == ["numba"] and not args.auto
    assert kernels.unigraph_backends(torch.device("cpu"), args.backends) == (["numba"] if registry.status_of(
        "numba").ok else [])
    with pytest.raises(SystemExit):
        kernels.parse_args(["--backends", "warp"])
    assert "--backends: unknown ['warp']" in capsys.readouterr().err


def test_a_run_at_one_degree_is_drawn_as_bars_from_its_json(tmp_path, monkeypatch):
    """kernels_cpu_500k has one mean in-degree: lines would be one dot per implementation on a log
    axis, so the plot draws bars; --replot redraws a committed file without measuring."""
    pytest.importorskip("matplotlib")
    source = tmp_path / "one_degree.json"
    source.write_text((REPO_ROOT / "benchmarks" / "results" / "kernels_cpu_500k.json").read_text())
    drawn = []
    real = kernels._bars
    monkeypatch.setattr(kernels, "_bars", lambda *a, **k: drawn.append(a[3]) or real(*a, **k))
    monkeypatch.setattr(kernels, "run_benchmark", lambda args: pytest.fail("--replot must not measure"))
    kernels.main(["--replot", str(source)])
    assert (tmp_path / "one_degree.png").stat().st_size > 10_000
    assert drawn == [json.loads(source.read_text())["settings"]["ops"]]


def test_width_first_times_every_graph_at_that_width_before_the_others():
    args = kernels.parse_args(["--quick", "--degrees", "1", "4", "--widths", "8", "16", "32", "--width-first", "16",
                               "--degree-major"])
    assert kernels.width_passes(args) == [[16], [8, 32]]
    plans = [(widths, kind, degree) for widths in kernels.width_passes(args)
             for kind, degree, _ in kernels.graph_plan(args)]
    assert [p[2] for p in plans[:len(plans) // 2]] == sorted(p[2] for p in plans[:len(plans) // 2])  # densest last
    assert all(p[0] == [16] for p in plans[:len(plans) // 2])  # every density at 16 first
    assert kernels.width_passes(kernels.parse_args(["--quick", "--widths", "8", "16"])) == [[8, 16]]
    with pytest.raises(SystemExit):
        kernels.parse_args(["--quick", "--widths", "8", "--width-first", "64"])
