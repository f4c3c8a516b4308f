"""Fitting the CPU cost model behind ``auto`` to kernel-suite measurements, and scoring its choices.

The committed constants (``backends/cost_constants_cpu.json``, read by
:mod:`unigraph.backends.cost_model`) are exactly what :func:`fit_constants` computes from the
committed fit set, :data:`FIT_SET`; ``tests/test_cost_fit.py`` refits and compares. Regenerate them
after a new kernel run with ``python benchmarks/kernels.py --fit`` (prints and compares) and
``--fit --commit`` (rewrites the committed file).

Two tables (:data:`TABLES`): ``rows``, fitted to forward times, rank calls autograd will not
record; ``rows_with_backward``, fitted to forward + backward times, rank differentiated calls
(``Request.grad``). How a row is fitted: every case of the table's mode, backend and op family
(:data:`FIT_FAMILIES`) gives one equation ``launch + edge E F + index E + node N F + spill E F s = t`` (``s``:
``cost_model.spill_fraction``) (rates per thousand elements, times in
microseconds); the constants minimize the *relative* error over the cases, non-negative (scipy's
``nnls`` on the rows divided by ``t``), rounded to 4 significant digits. A backend-family pair
with fewer than :data:`MIN_CASES` cases is not fitted.

Rows no measurement covers are *derived* from fitted rows by the rules in :func:`_derive`
(named estimates such as :data:`ELEMENTWISE_NS` are written beside them in the JSON), so the file
says for every number whether it was measured or estimated.

GPU (:func:`fit_gpu_constants`): the same fit to a GPU kernel suite (``kernels_cuda.json``, from the
GPU run, ``benchmarks/gpu``), with the largest in-degree as the fifth term (``skew_ns``, the
node-parallel walk of the longest row or the atomics piling into it) instead of the CPU's cache
spill; ``spmm_binary`` is derived from ``spmm_weighted``, and a row without enough cases keeps the
estimate of :data:`unigraph.backends.cost_model.GPU_ESTIMATES`, saying so in its ``source``.
``python -m benchmarks.gpu.ingest`` writes the result as ``backends/cost_constants_cuda.json``.

Scoring (:func:`score`): for every case and mode of a results file, the regret of a policy is
the time of the backend it picks over the fastest candidate backend's, both from the same run.
Policies: ``auto`` as the run recorded it, the cost model with given constants (``model``), and
every "always X". ``python -m unigraph.benchmarking.cost_fit --crossval`` fits on one graph kind
of the committed fit set and scores on the other (no new measurement needed);
``--score RESULTS_JSON`` scores a held-out run (``benchmarks/results/selector_heldout_cpu.json``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import pathlib
import statistics
import types

import torch

from unigraph.backends import cost_model
from unigraph.benchmarking.op_cases import request_of

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
# 5,000-node suite (the rates), 64-node run (launch costs), 100,000-node run (rates where the
# gathered rows no longer fit in L2: a fit to 5,000-node graphs alone ordered torch's CSR SpMM
# ahead of numba at F = 16 on the 169k-node held-out graph, where it is 2x slower)
FIT_SET = ("benchmarks/results/kernels_cpu.json", "benchmarks/results/kernels_cpu_tiny.json",
           "benchmarks/results/kernels_cpu_large.json")
LAUNCH_RUN_NODES = 64  # a results file whose graphs are all this small measures launch costs
# suite mode -> the constants table fitted to it (cost_model: CPU_COSTS, CPU_GRAD_COSTS)
TABLES = {"fwd": "rows", "fwd+bwd": "rows_with_backward"}
HEAD_WIDTH = 16  # the kernel suite's GAT-shaped cases: width // 16 heads
MIN_CASES = 4
SIGNIFICANT = 4
# benchmark op -> cost-model family it calibrates
FIT_FAMILIES = {"copy_u/sum": "spmm_sum", "u_mul_e/sum": "spmm_weighted", "copy_u/mean": "spmm_sum",
                "copy_u/max": "spmm_extreme", "u_add_v": "sddmm", "u_dot_v": "sddmm",
                "edge_softmax": "edge_softmax", "gat": "gat_attention"}
# Estimates used by the derived rows (not measured; see _derive):
ELEMENTWISE_NS = 0.4  # one more E x F elementwise torch pass (read + write float32 at 2 threads)
ARG_PASS_NS = 2.0     # torch-native max/min's arg-extreme pass for backward: ~4 E x F passes at ~0.5 ns
PEER_ROWS = {"torch_native": "scatter_native"}  # peer of the suite -> the backend variant it stands for
COLUMNS = ("launch_us", "edge_ns", "index_ns", "node_ns", "spill_ns")
ROW_FIELDS = ("launch_us", "edge_ns", "index_ns", "node_ns", "spill_ns", "skew_ns")  # LinearCost's, CPU and GPU


def _round(x: float) -> float:
    return float(f"{x:.{SIGNIFICANT}g}") if x else 0.0


def sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def case_width(case: dict) -> int:
    """The feature width the cost model sees for a kernel-suite case."""
    return request_of(case["op"], case["width"], max(1, case["width"] // HEAD_WIDTH)).feature_width


def _features(case: dict) -> list[float]:
    width = case_width(case)
    gathers = case["edges"] * width / 1e3
    return [1.0, gathers, case["edges"] / 1e3, case["nodes"] * width / 1e3,
            gathers * cost_model.spill_fraction(case["nodes"], width)]


def _gpu_features(case: dict) -> list[float]:
    """The GPU terms: as the CPU's, with the largest in-degree in place of the cache spill."""
    width = case_width(case)
    return [1.0, case["edges"] * width / 1e3, case["edges"] / 1e3, case["nodes"] * width / 1e3,
            case["max_in_degree"] / 1e3]


def fit_row(cases: list[dict], impl: str, family: str, mode: str = "fwd", features=_features,
            columns=COLUMNS) -> dict | None:
    """The constants of one backend and family from the cases of ``mode``, with their median
    relative error and case count (``features``/``columns``: the CPU's terms, or the GPU's)."""
    import numpy as np
    from scipy.optimize import nnls
    rows, target = [], []
    for c in cases:
        if c["mode"] == mode and FIT_FAMILIES.get(c["op"]) == family and impl in c["timings_ms"]:
            rows.append(features(c))
            target.append(c["timings_ms"][impl] * 1e3)
    if len(rows) < MIN_CASES:
        return None
    a, b = np.array(rows), np.array(target)
    coef, _ = nnls(a / b[:, None], np.ones_like(b))
    coef = [_round(float(x)) for x in coef]
    error = float(np.median(np.abs(a @ np.array(coef) / b - 1)))
    return {**dict(zip(columns, coef)), "source": f"fit: {len(rows)} {mode} cases, median |relative error| "
                                                  f"{error:.0%}"}


def _derived(base: dict, note: str, **changes) -> dict:
    row = {k: base[k] for k in COLUMNS}
    row.update({k: _round(v) for k, v in changes.items()})
    return {**row, "source": f"derived: {note}"}


def _derive(rows: dict) -> None:
    """Rows no suite case measures, from fitted rows plus the named estimates (in place)."""
    # the binary ops (u_add_e, ...) walk two operands per edge as u_mul_e does (spmm_weighted)
    for name in ("scatter", "scatter_native"):
        if name in rows:
            rows[name]["spmm_binary"] = _derived(rows[name]["spmm_weighted"], f"{name} spmm_weighted: u_mul_e's "
                                                 "gather, elementwise op and scatter, another op")
    sp = rows["sparse"]
    sp["spmm_binary"] = _derived(sp["spmm_weighted"], "sparse spmm_weighted's launch; segment path: sparse sddmm's "
                                                      f"gather + one elementwise pass (ELEMENTWISE_NS {ELEMENTWISE_NS}, "
                                                      "estimate)",
                                 edge_ns=sp["sddmm"]["edge_ns"] + ELEMENTWISE_NS)
    nb = rows["numba"]
    nb["spmm_binary"] = _derived(nb["spmm_weighted"], "numba spmm_weighted; the generic-offset kernel at numba "
                                                      "sddmm's rate", edge_ns=nb["sddmm"]["edge_ns"])
    if "scatter_native" in rows:
        native, scatter = rows["scatter_native"], rows["scatter"]
        for family in list(native):
            note = "torch-native peer fit (same torch calls minus unigraph's dispatch); scatter's launch"
            changes = {"launch_us": scatter[family]["launch_us"]}
            if family in ("spmm_extreme", "edge_softmax", "gat_attention"):
                note += f" + the arg-extreme pass (ARG_PASS_NS {ARG_PASS_NS}, estimate)"
                changes["edge_ns"] = native[family]["edge_ns"] + ARG_PASS_NS
            native[family] = _derived(native[family], note, **changes)
        native["sddmm"] = _derived(scatter["sddmm"], "the same code as scatter's sddmm")
    extreme = sp["spmm_extreme"]
    rows["sparse_native"] = {"spmm_extreme": _derived(
        extreme, "without torch-sparse: sparse's segment path + the arg-extreme pass (estimate)",
        index_ns=0.0, edge_ns=sp["spmm_binary"]["edge_ns"] + ARG_PASS_NS)}


def fit_table(results: list[dict], mode: str) -> dict:
    """Every backend's rows fitted to the ``mode`` cases of ``results``, plus the derived rows."""
    cases = [c for r in results for c in r["cases"]]
    peers = [p for p in PEER_ROWS if p in results[0]["implementations"]["peers"]]
    rows: dict[str, dict] = {}
    for impl in results[0]["implementations"]["unigraph"] + peers:
        fitted = {f: fit_row(cases, impl, f, mode) for f in sorted(set(FIT_FAMILIES.values()))}
        fitted = {f: row for f, row in fitted.items() if row is not None}
        if fitted:
            rows[PEER_ROWS.get(impl, impl)] = fitted
    _derive(rows)
    return {name: dict(sorted(families.items())) for name, families in sorted(rows.items())}


def fit_constants(results: list[dict], sources: list[str]) -> dict:
    """The constants document for ``results`` (kernel-suite JSON) read from ``sources`` (paths)."""
    tables = {TABLES[mode]: fit_table(results, mode) for mode in TABLES}
    return {
        "about": "CPU cost-model constants LinearCost(launch_us, edge_ns, index_ns, node_ns, spill_ns) per backend and op "
                 "family, generated by unigraph.benchmarking.cost_fit (python benchmarks/kernels.py --fit --commit); "
                 "each row's source says whether it was fitted or derived",
        "fitted_on": [{"file": s, "sha256": sha256(REPO_ROOT / s)} for s in sources],
        "tables": {table: f"fitted to {mode} times" for mode, table in TABLES.items()},
        "machine": results[0]["machine"],
        "estimates": {"ELEMENTWISE_NS": ELEMENTWISE_NS, "ARG_PASS_NS": ARG_PASS_NS},
        "gather_cache_bytes": cost_model.GATHER_CACHE_BYTES,
        **tables,
    }


def fit_gpu_table(results: list[dict], mode: str) -> dict:
    """Every GPU backend's rows fitted to the ``mode`` cases of ``results`` (a GPU kernel suite):
    fitted where :data:`MIN_CASES` cases exist, ``spmm_binary`` derived from ``spmm_weighted``,
    the estimate otherwise (each row's ``source`` says which)."""
    cases = [c for r in results for c in r["cases"]]
    measured = set(results[0]["implementations"]["unigraph"])
    estimates = cost_model._estimated_tables()
    rows: dict[str, dict] = {}
    for backend in cost_model.GPU_BACKENDS:
        families = {}
        for family in cost_model.FAMILIES:
            row = (fit_row(cases, backend, family, mode, _gpu_features, cost_model.GPU_COLUMNS)
                   if backend in measured and family != "spmm_binary" else None)
            if row is None:
                estimate = estimates[backend][family]
                why = "not measured here" if backend not in measured else f"fewer than {MIN_CASES} {mode} cases"
                row = {**{k: getattr(estimate, k) for k in cost_model.GPU_COLUMNS}, "source": f"estimate: {why}"}
            families[family] = row
        weighted = families["spmm_weighted"]
        if weighted["source"].startswith("fit"):
            families["spmm_binary"] = {**{k: weighted[k] for k in cost_model.GPU_COLUMNS},
                                       "source": "derived: spmm_weighted (u_mul_e's two operands per edge, another op)"}
        rows[backend] = dict(sorted(families.items()))
    return rows


def fit_gpu_tables(results: list[dict]) -> dict:
    """Both GPU tables (``rows``, ``rows_with_backward``) fitted to kernel-suite ``results``."""
    return {TABLES[mode]: fit_gpu_table(results, mode) for mode in TABLES}


def fit_gpu_constants(results: list[dict], sources: list[str], require_gpu: bool = True) -> dict:
    """The GPU constants document (``backends/cost_constants_cuda.json``) for GPU kernel-suite
    ``results`` read from ``sources`` (paths relative to the repository, or absolute);
    ``require_gpu=False`` lets the GPU run's dry run fit its CPU figures (never committed)."""
    machine = results[0]["machine"]
    if require_gpu and torch.device(machine["device"]).type != "cuda":
        raise ValueError(f"{sources}: measured on {machine['device']}, not a GPU: the GPU constants need a GPU run")
    return {
        "about": "GPU cost-model constants LinearCost(launch_us, edge_ns, index_ns, node_ns, skew_ns) per backend and "
                 "op family, generated by unigraph.benchmarking.cost_fit.fit_gpu_constants (python -m "
                 "benchmarks.gpu.ingest); each row's source says whether it was fitted, derived or estimated",
        "fitted_on": [{"file": s, "sha256": sha256(REPO_ROOT / s)} for s in sources],
        "tables": {table: f"fitted to {mode} times" for mode, table in TABLES.items()},
        "machine": machine,
        **fit_gpu_tables(results),
    }


def crossval_gpu(result: dict) -> str:
    """:func:`crossval` for a GPU kernel suite: fit the GPU model on one graph kind, score on the
    other, against ``auto`` as it ran (the estimates) and every "always X"."""
    candidates = [b for b in result["implementations"]["unigraph"] if b in cost_model.GPU_BACKENDS]
    out = []
    for train, held in (("uniform", "rmat"), ("rmat", "uniform")):
        train_result = {**result, "cases": [c for c in result["cases"] if c["graph"] == train]}
        tables = fit_gpu_tables([train_result])
        held_cases = [c for c in result["cases"] if c["graph"] == held]
        out += scored(held_cases, candidates, tables, f"GPU model fitted on {train}, scored on {held}")
    return "\n".join(out)


def render(document: dict) -> str:
    return json.dumps(document, indent=1) + "\n"


def load_results(paths) -> list[dict]:
    return [json.loads((REPO_ROOT / p).read_text() if not pathlib.Path(p).is_absolute() else pathlib.Path(p).read_text())
            for p in paths]


def refit_committed() -> str:
    """The committed constants file's text as the committed fit set gives it."""
    return render(fit_constants(load_results(FIT_SET), list(FIT_SET)))


# ---------------------------------------------------------------------- scoring
def model_choice(tables: dict, case: dict, candidates: list[str]) -> str:
    """The candidate a cost model with ``tables`` (a constants document's, by table name) picks
    for a suite case: forward cases by ``rows``, forward + backward by ``rows_with_backward``, as
    ``auto`` ranks a call without and with autograd (ties: candidate order)."""
    rows = tables[TABLES[case["mode"]]]
    stats = types.SimpleNamespace(num_src_nodes=case["nodes"], num_dst_nodes=case["nodes"], num_edges=case["edges"],
                                  max_in_degree=case.get("max_in_degree", 0))
    family = cost_model.op_family(request_of(case["op"], case["width"], max(1, case["width"] // HEAD_WIDTH)))
    costs = {b: cost_model.LinearCost(**{k: rows[b][family][k] for k in ROW_FIELDS if k in rows[b][family]}).us(
             stats, case_width(case)) for b in candidates if b in rows}
    return min(costs, key=costs.get)


def score(cases: list[dict], candidates: list[str], tables: dict | None = None) -> dict:
    """Per mode and policy: cases, geometric-mean and worst regret, share within 1.1x of the best."""
    policies: dict[str, callable] = {"auto (as run)": lambda c: c.get("auto_choice")}
    if tables is not None:
        policies["cost model"] = lambda c: model_choice(tables, c, candidates)
    policies.update({f"always {b}": (lambda c, b=b: b) for b in candidates})
    summary: dict = {}
    for mode in sorted({c["mode"] for c in cases}):
        for name, pick in policies.items():
            regrets = []
            for c in cases:
                times = {b: c["timings_ms"][b] for b in candidates if b in c["timings_ms"]}
                chosen = pick(c)
                if c["mode"] != mode or len(times) < len(candidates) or chosen not in times:
                    continue
                regrets.append(times[chosen] / min(times.values()))
            if regrets:
                summary.setdefault(mode, {})[name] = {
                    "cases": len(regrets),
                    "geomean_regret": round(math.exp(statistics.fmean(math.log(r) for r in regrets)), 3),
                    "max_regret": round(max(regrets), 2),
                    "within_1.1x": round(sum(r <= 1.1 for r in regrets) / len(regrets), 3)}
    return summary


def markdown(summary: dict, title: str) -> str:
    lines = [f"### {title}", "", "| mode | policy | cases | geomean regret | worst | within 1.1x |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for mode, policies in summary.items():
        for name, s in policies.items():
            lines.append(f"| {mode} | {name} | {s['cases']} | {s['geomean_regret']:.3f} | {s['max_regret']:.2f} | "
                         f"{s['within_1.1x']:.0%} |")
    return "\n".join(lines) + "\n"


def _launch_run(result: dict) -> bool:
    return all(c["nodes"] <= LAUNCH_RUN_NODES for c in result["cases"])


def crossval(paths=FIT_SET) -> str:
    """Fit on one graph kind of the fit set (default: the committed one), score on the other: every
    file's cases of the other kind are held out, except a launch-cost run's (64 nodes), which
    stays whole in the fit."""
    results = load_results(paths)
    candidates = results[0]["implementations"]["unigraph"]
    out = []
    for train, held in (("uniform", "rmat"), ("rmat", "uniform")):
        train_results = [r if _launch_run(r) else {**r, "cases": [c for c in r["cases"] if c["graph"] == train]}
                         for r in results]
        tables = fit_constants(train_results, list(paths))
        held_cases = [c for r in results if not _launch_run(r) for c in r["cases"] if c["graph"] == held]
        out += scored(held_cases, candidates, tables, f"fitted on {train} (+ tiny), scored on {held}")
    return "\n".join(out)


def scored(cases: list[dict], candidates: list[str], tables: dict | None, title: str) -> list[str]:
    """Tables for every candidate, and without numba (an optional extra: then the model must
    choose between the torch backends, where it is really tested; auto's recorded choice is
    then not among the candidates and only the model is scored)."""
    out = [markdown(score(cases, candidates, tables), title)]
    if "numba" in candidates and tables is not None:
        rest = [b for b in candidates if b != "numba"]
        out.append(markdown(score(cases, rest, tables), f"{title}, without numba"))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--crossval", nargs="*", metavar="RESULTS_JSON",
                       help="fit on uniform, score on R-MAT, and back (default: the committed fit set)")
    group.add_argument("--score", metavar="RESULTS_JSON", help="score auto, the committed model and always-X on a run")
    parser.add_argument("--write", type=pathlib.Path, metavar="MD", help="also write the tables to this file (atomically)")
    args = parser.parse_args(argv)
    text = crossval(args.crossval or FIT_SET) if args.crossval is not None else score_file(args.score)
    print(text)
    if args.write is not None:
        from unigraph.benchmarking.output import write_text
        write_text(args.write, text)


def score_file(path: str) -> str:
    """Tables scoring a kernel-suite run (held-out graphs) with the committed constants."""
    result = json.loads(pathlib.Path(path).read_text())
    candidates = [b for b in result["implementations"]["unigraph"] if b in cost_model.CPU_COSTS]
    tables = json.loads(cost_model.CPU_CONSTANTS_PATH.read_text())
    if torch.device(result["machine"]["device"]).type != "cpu":
        tables = None  # the GPU model is not this file's
    return "\n".join(scored(result["cases"], candidates, tables, path))


if __name__ == "__main__":
    main()
