"""``benchmarks/ports.py --quick``: every ported example runs with unigraph's layers and the
original library's, interleaved, at the thread count asked; rows carry train-step and evaluation
min/median/max and a score; comparisons are against the library's best eager row; the smoke run
never replaces the committed results."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from benchmarks import ports
from benchmarks.environment import RESULTS
from benchmarks.peers import load_dgl, load_pyg
from conftest import REPO_ROOT


# The default run smokes one port of each kind (PyG full batch with its opt-in row, DGL's script on
# unigraph.dgl, PyG's DataLoader of small graphs: ~7 s); every port (~14 s) runs with -m slow.
DEFAULT_PORTS = ("pyg_gcn", "dgl_gcn", "pyg_gin")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("chosen", [DEFAULT_PORTS, pytest.param(ports.PORTS, marks=pytest.mark.slow)],
                         ids=["some", "every"])
def test_quick_run_reports_each_port_asked(tmp_path, chosen):
    pyg, dgl = load_pyg(), load_dgl()
    if pyg is None or dgl is None:
        pytest.skip("the ports compare with PyG and DGL; both must be installed")
    # a process of its own: PyG keeps state per layer class (its generated propagate) that other
    # tests' layers change, and the run sets thread counts
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "ports.py"), "--quick", "--threads", "1",
                           "--ports", *chosen, "--out", str(tmp_path)], capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "ports_cpu.json").read_text())
    markdown = (tmp_path / "ports_cpu.md").read_text()
    expected = set(chosen)
    if importlib.util.find_spec("torch_sparse") is None and importlib.util.find_spec("pyg_lib") is None:
        expected.discard("pyg_sage_neighbor")   # PyG's NeighborLoader cannot sample without them
    assert {e["port"] for e in result["results"]} == expected
    if "user_arxiv" in chosen:
        assert {e["model"] for e in result["results"] if e["port"] == "user_arxiv"} == {"gcn", "sage", "gat"}
    for entry in result["results"]:
        assert entry["threads"] == 1 and entry["loadavg_start"] is not None
        rows = {r["impl"]: r for r in entry["rows"]}
        assert "unigraph" in rows and len(rows) >= 2
        for r in entry["rows"]:
            for part in ("train", "eval"):
                s = r[part]
                assert s["min_ms"] <= s["median_ms"] <= s["max_ms"] and len(s["runs_ms"]) >= 1
            assert 0.0 <= r["score"] <= 1.0
        assert {c["ours"] for c in entry["comparisons"]} == {r["impl"] for r in entry["rows"] if r["library"] == "unigraph"}
        for c in entry["comparisons"]:
            group = [r for r in entry["rows"] if r["library"] == rows[c["vs"]]["library"]
                     and ("compiled" in r["impl"]) == (c["kind"] == "compiled")]
            best = min(group, key=lambda r: r["train"]["median_ms"])
            assert c["vs"] == best["impl"]   # the library at its best
            assert c["train_speedup"] == pytest.approx(best["train"]["median_ms"] / rows[c["ours"]]["train"]["median_ms"],
                                                       rel=1e-2)
            assert c["met"] == (c["train_speedup"] >= c["target"])
            assert c["counted"] == (c["ours"] == "unigraph" and c["kind"] == "eager")
    with_opt_in = {e["port"] for e in result["results"] if ports.OPT_IN in {r["impl"] for r in e["rows"]}}
    assert with_opt_in == {"pyg_gcn", "pyg_gat", "dgl_gcn", "dgl_gat", "dgl_sage", "user_arxiv"} & set(chosen)
    env = result["environment"]
    assert env["versions"]["torch"] and env["machine"]["cpu_count"]
    assert "--quick smoke run: not a measurement" in markdown and "Versions:" in markdown


def test_quick_run_may_not_replace_the_committed_results():
    with pytest.raises(SystemExit):
        ports.parse_args(["--quick", "--out", str(RESULTS)])
