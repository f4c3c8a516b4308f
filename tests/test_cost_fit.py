"""The CPU cost model's constants are what the committed measurements give, and its choices are scored
on cases the fit never saw (unigraph.benchmarking.cost_fit)."""
import json
import types

import pytest

from unigraph.backends import cost_model
from unigraph.benchmarking import cost_fit

pytest.importorskip("scipy", reason="the fit uses scipy's nnls (test extra)")


def test_refit_from_the_committed_measurements_gives_the_committed_constants_exactly():
    committed = cost_model.CPU_CONSTANTS_PATH.read_text(encoding="utf-8")
    assert cost_fit.refit_committed() == committed, (
        "backends/cost_constants_cpu.json is not what the committed kernel results give: "
        "run `python benchmarks/kernels.py --fit --commit`")


@pytest.mark.parametrize("mode, table, costs, without_torch_sparse", [
    ("fwd", "rows", cost_model.CPU_COSTS, cost_model.SPARSE_EXTREME_WITHOUT_TORCH_SPARSE),
    ("fwd+bwd", "rows_with_backward", cost_model.CPU_GRAD_COSTS, cost_model.SPARSE_EXTREME_WITHOUT_TORCH_SPARSE_GRAD)])
def test_the_model_uses_every_row_of_the_file_and_each_says_where_it_comes_from(mode, table, costs,
                                                                                 without_torch_sparse):
    rows = json.loads(cost_model.CPU_CONSTANTS_PATH.read_text())[table]
    for backend, families in rows.items():
        for family, row in families.items():
            assert row["source"].startswith(("fit: ", "derived: ")), (backend, family)
            if backend == "sparse_native":
                continue
            cost = costs[backend][family]
            assert (cost.launch_us, cost.edge_ns, cost.index_ns, cost.node_ns, cost.spill_ns) == tuple(
                row[k] for k in cost_fit.COLUMNS)
    # the measured core: every unigraph backend's measured families are fits to this table's mode
    for backend in ("scatter", "sparse", "numba"):
        for family in ("spmm_sum", "spmm_weighted", "spmm_extreme", "sddmm", "edge_softmax", "gat_attention"):
            assert rows[backend][family]["source"].startswith(f"fit: ") and f" {mode} cases" in rows[backend][family]["source"]
    assert without_torch_sparse.edge_ns == rows["sparse_native"]["spmm_extreme"]["edge_ns"]


def test_backward_rates_exceed_forward_rates():
    """A forward + backward row costs more than the forward row on the same call (the fit is of
    a different quantity, not a copy)."""
    stats = types.SimpleNamespace(num_src_nodes=100_000, num_dst_nodes=100_000, num_edges=1_600_000)
    for backend in ("scatter", "sparse", "numba"):
        for family in ("spmm_sum", "spmm_weighted", "spmm_extreme", "sddmm", "edge_softmax", "gat_attention"):
            fwd = cost_model.CPU_COSTS[backend][family].us(stats, 64)
            assert cost_model.CPU_GRAD_COSTS[backend][family].us(stats, 64) > fwd, (backend, family)


def _case(op, mode, times, auto, nodes=1000, edges=16000, width=64):
    return {"op": op, "mode": mode, "timings_ms": times, "auto_choice": auto, "nodes": nodes, "edges": edges,
            "width": width}


def test_regret_is_the_chosen_time_over_the_fastest_candidate():
    cases = [_case("copy_u/sum", "fwd", {"a": 2.0, "b": 1.0}, "a"),
             _case("copy_u/sum", "fwd", {"a": 1.0, "b": 4.0}, "a"),
             _case("copy_u/sum", "fwd", {"a": 1.0}, "a")]  # b missing: not scored
    summary = cost_fit.score(cases, ["a", "b"])["fwd"]
    assert summary["auto (as run)"] == {"cases": 2, "geomean_regret": round(2 ** 0.5, 3), "max_regret": 2.0,
                                        "within_1.1x": 0.5}
    assert summary["always b"]["max_regret"] == 4.0 and summary["always a"]["geomean_regret"] == round(2 ** 0.5, 3)


def _row(launch_us, edge_ns):
    return {"spmm_sum": dict(launch_us=launch_us, edge_ns=edge_ns, index_ns=0.0, node_ns=0.0, spill_ns=0.0)}


def test_model_choice_follows_the_constants_of_the_case_mode():
    forward = {"x": _row(1.0, 1.0), "y": _row(100.0, 0.0)}
    tables = {"rows": forward, "rows_with_backward": {"x": forward["y"], "y": forward["x"]}}  # the other order
    small, large = _case("copy_u/sum", "fwd", {}, None, edges=10), _case("copy_u/sum", "fwd", {}, None, edges=10**6)
    assert cost_fit.model_choice(tables, small, ["x", "y"]) == "x"
    assert cost_fit.model_choice(tables, large, ["x", "y"]) == "y"
    assert cost_fit.model_choice(tables, {**small, "mode": "fwd+bwd"}, ["x", "y"]) == "y"
    assert cost_fit.model_choice(tables, {**large, "mode": "fwd+bwd"}, ["x", "y"]) == "x"


def test_each_table_is_fitted_to_its_own_mode():
    """Forward cases say nothing to the forward + backward table and back: doubling every
    fwd+bwd time doubles that table's rates and leaves the forward table as it was."""
    results = cost_fit.load_results(cost_fit.FIT_SET)
    doubled = [{**r, "cases": [c if c["mode"] == "fwd" else {**c, "timings_ms": {k: 2 * v for k, v in c["timings_ms"].items()}}
                               for c in r["cases"]]} for r in results]
    before, after = cost_fit.fit_constants(results, []), cost_fit.fit_constants(doubled, [])
    assert after["rows"] == before["rows"]
    fitted_before = before["rows_with_backward"]["numba"]["gat_attention"]
    fitted_after = after["rows_with_backward"]["numba"]["gat_attention"]
    assert fitted_after["launch_us"] == pytest.approx(2 * fitted_before["launch_us"], rel=1e-3)
    assert fitted_after["edge_ns"] == pytest.approx(2 * fitted_before["edge_ns"], rel=1e-3)


def test_crossval_scores_held_out_graphs_from_the_committed_run():
    text = cost_fit.crossval()
    assert "fitted on uniform (+ tiny), scored on rmat" in text and "without numba" in text
    # the held-out kind's cases of the 5,000- and 100,000-node files (99 + 32), never the 64-node run's
    assert "| fwd | cost model | 131 |" in text and "| fwd+bwd | cost model | 131 |" in text


@pytest.mark.parametrize("train, held", [("uniform", "rmat"), ("rmat", "uniform")])
def test_differentiated_calls_are_not_ranked_by_forward_time(train, held):
    """Held out, forward + backward: ranked by forward time (before the second table, with u_mul_e
    in copy_u's row) the model picked torch's CSR SpMM for u_mul_e/sum at F = 16 on dense graphs,
    6.5x slower than numba with the backward; the forward + backward table keeps every pick within
    1.2x of the fastest, better than the forward table's ranking of the same cases."""
    results = cost_fit.load_results(cost_fit.FIT_SET)
    fit = [r if cost_fit._launch_run(r) else {**r, "cases": [c for c in r["cases"] if c["graph"] == train]}
           for r in results]
    tables = cost_fit.fit_constants(fit, [])
    held_cases = [c for r in results if not cost_fit._launch_run(r) for c in r["cases"]
                  if c["graph"] == held and c["mode"] == "fwd+bwd"]
    candidates = results[0]["implementations"]["unigraph"]
    worst = cost_fit.score(held_cases, candidates, tables)["fwd+bwd"]["cost model"]["max_regret"]
    assert worst < 1.2
    forward_only = {"rows": tables["rows"], "rows_with_backward": tables["rows"]}   # ranked by forward time
    assert cost_fit.score(held_cases, candidates, forward_only)["fwd+bwd"]["cost model"]["max_regret"] > worst


def test_kernels_fit_reports_identical_and_run_all_refuses_to_overwrite(capsys):
    import subprocess
    import sys
    sys.path.insert(0, str(cost_fit.REPO_ROOT))
    from benchmarks import kernels
    kernels.refit([], commit=False)
    assert "identical to the committed cost_constants_cpu.json" in capsys.readouterr().out
    script = str(cost_fit.REPO_ROOT / "benchmarks" / "run_all.sh")
    for args in (["--quick", "--commit"], ["--quick", "--out", "x"], ["--commit", "--out", "x"], ["--bogus"]):
        done = subprocess.run(["bash", script, *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "run_all.sh:" in done.stderr, (args, done.stderr)


def test_the_constants_were_fitted_with_the_cache_size_the_model_uses():
    document = json.loads(cost_model.CPU_CONSTANTS_PATH.read_text())
    assert document["gather_cache_bytes"] == cost_model.GATHER_CACHE_BYTES
    assert [f["file"] for f in document["fitted_on"]] == list(cost_fit.FIT_SET)


def test_spill_term_charges_only_the_gathers_beyond_the_cache():
    cache = cost_model.GATHER_CACHE_BYTES
    assert cost_model.spill_fraction(0, 16) == 0.0
    assert cost_model.spill_fraction(cache // 64, 16) == 0.0          # the table exactly fits
    assert cost_model.spill_fraction(cache // 16, 16) == 0.75          # four times the cache
    stats = types.SimpleNamespace(num_src_nodes=cache // 16, num_dst_nodes=10, num_edges=1000)
    plain = cost_model.LinearCost(1.0, 0.5)
    spilling = cost_model.LinearCost(1.0, 0.5, spill_ns=2.0)
    assert spilling.us(stats, 16) - plain.us(stats, 16) == pytest.approx(2.0 * 1000 * 16 * 0.75 / 1000)
    small = types.SimpleNamespace(num_src_nodes=100, num_dst_nodes=100, num_edges=1000)
    assert spilling.us(small, 16) == plain.us(small, 16)


def test_a_fit_set_without_large_graphs_cannot_tell_the_spill_rates_apart():
    # the 5,000-node file alone leaves the spill column unconstrained for F <= 64 (every table fits)
    results = cost_fit.load_results(cost_fit.FIT_SET)
    assert all(cost_model.spill_fraction(c["nodes"], cost_fit.case_width(c)) == 0.0
               for c in results[0]["cases"] if c["width"] <= 64)
    assert any(cost_model.spill_fraction(c["nodes"], cost_fit.case_width(c)) > 0.5 for c in results[2]["cases"])
