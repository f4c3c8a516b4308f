"""The GPU run's tuning step: what the measurements say about unigraph's choices, three parts, the
cheap and most useful first (each saved when done; the budget cuts the later ones short):

1. ``cost_fit``: the GPU cost model fitted to the kernel step's suite
   (:func:`unigraph.benchmarking.cost_fit.fit_gpu_constants`, what ``ingest`` commits), and its
   held-out regret: fitted on uniform graphs and scored on R-MAT ones and back, beside ``auto``
   as it ran (the estimates) and every "always X".
2. ``auto_tune``: ``unigraph.set_backend("auto-tune")`` on graphs the suite never saw (other
   sizes, degrees and widths): every candidate timed on the real call; the regret there of ``auto``
   (estimates, as ``explain`` says before tuning), of the fitted model, and of every "always X".
3. ``triton_configs``: every Triton kernel's autotune configurations, plus a few more
   (:data:`EXTRA`), each timed alone on representative workloads; which wins, what the autotuner
   picks among the committed ones, and whether an extra one would be faster (then the kernel's
   ``CONFIGS`` list should grow).

Between 1 and 2, ``call_overhead`` (:mod:`benchmarks.gpu.call_overhead`, a few seconds): the
host's time and the device kernels per call of one small copy_u/sum, per way of calling it.
"""
from __future__ import annotations

import contextlib
import json
import pathlib
import sys
import tempfile

from benchmarks.gpu.common import device_for, log, run_parts, step_main

STEP = "tuning"
HELD_OUT = dict(nodes=100_000, degrees=[8, 32], widths=[32, 128], ops=["copy_u/sum", "u_mul_e/sum", "copy_u/max",
                                                                        "u_add_v", "edge_softmax", "gat"])
HELD_OUT_DRY = dict(nodes=24, degrees=[3], widths=[8], ops=["copy_u/sum", "gat"])
# candidate configurations beyond each kernel's CONFIGS: (BLOCK_E, num_warps)
EXTRA = {"spmm_node_kernel": [(16, 2), (32, 8), (128, 8)], "spmm_edge_kernel": [(32, 2), (64, 8), (256, 8)],
         "sddmm_kernel": [(32, 2), (64, 8), (256, 8)], "sddmm_dot_kernel": [(16, 4), (64, 8)],
         "edge_softmax_kernel": [(16, 4), (128, 8)], "gat_forward_kernel": [(8, 4), (16, 8), (32, 8)],
         "gat_backward_scores_kernel": [(8, 4), (32, 8)], "gat_backward_h_kernel": [(8, 4), (32, 8)]}
# kernel -> (backend, op, mode) that launches it
LAUNCHED_BY = {"spmm_node_kernel": ("triton_node", "copy_u/sum", "fwd"),
               "spmm_edge_kernel": ("triton_edge", "copy_u/sum", "fwd"),
               "sddmm_kernel": ("triton_node", "u_add_v", "fwd"), "sddmm_dot_kernel": ("triton_node", "u_dot_v", "fwd"),
               "edge_softmax_kernel": ("triton_node", "edge_softmax", "fwd"),
               "gat_forward_kernel": ("triton_node", "gat", "fwd"),
               "gat_backward_scores_kernel": ("triton_node", "gat", "fwd+bwd"),
               "gat_backward_h_kernel": ("triton_node", "gat", "fwd+bwd")}
SWEEP = dict(nodes=65_536, workloads=[("uniform", 16, 64), ("rmat", 16, 64), ("uniform", 4, 256)], repeats=5,
             min_run_ms=2.0)
SWEEP_DRY = dict(nodes=16, workloads=[("uniform", 2, 4)], repeats=1, min_run_ms=0.0,
                 kernels=["spmm_node_kernel", "gat_forward_kernel"], configs=2)


# ---------------------------------------------------------------------- 1. cost fit
def part_cost_fit(results, kernels_json: pathlib.Path, dry_run: bool) -> None:
    from unigraph.benchmarking import cost_fit
    step = json.loads(kernels_json.read_text()) if kernels_json.exists() else None
    suite = (step or {}).get("suite")
    if not suite or not suite.get("cases"):
        results["cost_fit"] = {"status": "no kernel-suite cases to fit (did the kernels step run?)"}
        log(STEP, results["cost_fit"]["status"])
        return
    constants = cost_fit.fit_gpu_constants([suite], [str(kernels_json)], require_gpu=not dry_run)
    results["cost_fit"] = {"status": "ok", "cases": len(suite["cases"]), "constants": constants,
                           "crossval_md": cost_fit.crossval_gpu(suite),
                           "as_run_md": "\n".join(cost_fit.scored(suite["cases"], [
                               b for b in suite["implementations"]["unigraph"] if b in constants["rows"]],
                               None, "auto as it ran (the estimates) on the suite itself"))}
    log(STEP, "cost model fitted to the suite; held-out regret (cross-validation by graph kind):\n"
        + results["cost_fit"]["crossval_md"])


# ---------------------------------------------------------------------- call overhead
def part_call_overhead(results, device, dry_run: bool) -> None:
    from benchmarks.gpu import call_overhead
    results["call_overhead"] = call_overhead.measure(device, dry_run, ["scatter", "sparse", "triton_node",
                                                                       "triton_edge"], lambda m: log(STEP, m))
    results.save()


# ---------------------------------------------------------------------- 2. auto-tune on held-out graphs
def part_auto_tune(results, deadline, device, dry_run: bool, reserve_s: float) -> None:
    """Stops when only ``reserve_s`` of the step's budget is left (part 3's share)."""
    import torch

    import unigraph
    from benchmarks import kernels
    from unigraph.backends import autotune
    from unigraph.benchmarking import cost_fit, op_cases
    plan = HELD_OUT_DRY if dry_run else HELD_OUT
    record = results["auto_tune"] = {"plan": plan, "cases": [], "status": "running"}
    fitted = (results.data.get("cost_fit") or {}).get("constants")
    with tempfile.TemporaryDirectory(prefix="unigraph-autotune-") as scratch:
        cache = pathlib.Path(scratch) / "autotune.json"
        autotune.enable_disk_cache(cache)
        try:
            for degree in plan["degrees"]:  # both kinds at a degree first: a budget cut drops the densest
                for kind in ("uniform", "rmat"):
                    g = kernels.make_graph(kind, plan["nodes"], degree, seed=7, device=device).to(device).prepare()
                    stats = g.stats()
                    for op in plan["ops"]:
                        for width in plan["widths"]:
                            for mode in ("fwd", "fwd+bwd"):
                                if not deadline.allows(reserve_s + 10):
                                    record["status"] = "cut short by the step's budget"
                                    return
                                leaves = op_cases.make_inputs(op, g, width, max(1, width // 16), device)
                                estimated = op_cases.explain(op, g, leaves, mode=mode).backend
                                before = _entries(cache)
                                with unigraph.use_backend("auto-tune"):
                                    op_cases.in_mode(lambda: op_cases.unigraph_call(op, g, leaves), leaves, mode)()
                                torch.cuda.synchronize() if device.type == "cuda" else None
                                new = [e for k, e in _entries(cache).items() if k not in before]
                                case = {"op": op, "graph": kind, "degree": degree, "width": width, "mode": mode,
                                        "nodes": stats.num_dst_nodes, "edges": stats.num_edges,
                                        "max_in_degree": stats.max_in_degree, "auto_choice": estimated,
                                        "measurements": new}
                                call = [e for e in new if e["timed"] == ("fwd+bwd" if mode == "fwd+bwd" else "fwd")]
                                if call:  # the op's own measurement (GAT and softmax measure their parts too)
                                    case["timings_ms"] = {b: t / 1e3 for b, t in call[0]["timings_us"].items()}
                                    case["winner"] = call[0]["winner"]
                                record["cases"].append(case)
                                results.save()
            record["status"] = "ok"
        finally:
            autotune.enable_disk_cache(None)
            scorable = [c for c in record["cases"] if "timings_ms" in c]
            # the candidates auto-tune timed (those auto considers on this device)
            candidates = sorted(set.intersection(*(set(c["timings_ms"]) for c in scorable))) if scorable else []
            record["candidates"] = candidates
            tables = {t: fitted[t] for t in cost_fit.TABLES.values()} if fitted else None
            record["regret"] = cost_fit.score(scorable, candidates, tables) if scorable else {}
            record["regret_md"] = cost_fit.markdown(record["regret"], "auto-tune's measurements on held-out graphs")
            log(STEP, record["regret_md"])


def _entries(cache: pathlib.Path) -> dict:
    if not cache.exists():
        return {}
    return {e["kind"]: e for e in json.loads(cache.read_text())["entries"]}


# ---------------------------------------------------------------------- 3. Triton configurations
@contextlib.contextmanager
def only_config(kernel, config):
    """The autotuned ``kernel`` with ``config`` alone (its cache emptied), restored afterwards."""
    configs, cache = kernel.configs, dict(kernel.cache)
    kernel.configs, kernel.cache = [config], {}
    try:
        yield
    finally:
        kernel.configs, kernel.cache = configs, cache


def part_triton_configs(results, deadline, device, dry_run: bool) -> None:
    import triton

    from benchmarks import kernels
    from unigraph.benchmarking import op_cases
    from unigraph.benchmarking.environment import synchronize
    from unigraph.benchmarking.timing import interleaved
    from unigraph.kernels.triton import edge_softmax, gat, sddmm, spmm_edge, spmm_node
    modules = (spmm_node, spmm_edge, sddmm, edge_softmax, gat)
    by_name = {name: getattr(m, name) for m in modules for name in LAUNCHED_BY if hasattr(m, name)}
    plan = SWEEP_DRY if dry_run else SWEEP
    names = plan.get("kernels", list(LAUNCHED_BY))
    record = results["triton_configs"] = {"plan": {k: v for k, v in plan.items()}, "kernels": {}, "status": "running"}
    for kind, degree, width in plan["workloads"]:
        g = kernels.make_graph(kind, plan["nodes"], degree, seed=3, device=device).to(device).prepare()
        for name in names:
            kernel = by_name[name]
            backend, op, mode = LAUNCHED_BY[name]
            committed = list(kernel.configs)
            extra = [triton.Config({"BLOCK_E": e}, num_warps=w) for e, w in EXTRA[name]]
            candidates = (committed + extra)[: plan.get("configs", len(committed) + len(extra))]
            if not deadline.allows(15 + 2 * len(candidates)):
                record["status"] = "cut short by the step's budget"
                return
            leaves = op_cases.make_inputs(op, g, width, max(1, width // 16), device)
            call = op_cases.in_mode(lambda: op_cases.unigraph_call(op, g, leaves, backend), leaves, mode)
            runs = {}
            for config in candidates:
                def run(config=config):
                    with only_config(kernel, config):
                        return call()
                try:
                    run()  # compiles
                except kernels.implementation_errors() as err:  # a configuration that fails is recorded, not ranked
                    record["kernels"].setdefault(name, []).append({
                        "workload": [kind, degree, width], "config": str(config),
                        "error": f"{type(err).__name__}: {err}"[:300]})
                    continue
                runs[str(config)] = run
            timings = interleaved(runs, plan["repeats"], warmup=1 if plan["min_run_ms"] else 0,
                                  min_run_s=plan["min_run_ms"] / 1e3, sync=lambda: synchronize(device))
            ms = {c: round(t.median_ms, 4) for c, t in timings.items()}
            call()  # the autotuner's own pick among the committed configurations
            picked = str(kernel.best_config) if getattr(kernel, "best_config", None) is not None else None
            best = min(ms, key=ms.get) if ms else None
            entry = {"workload": {"graph": kind, "degree": degree, "width": width, "backend": backend, "op": op,
                                  "mode": mode}, "median_ms": ms, "best": best,
                     "best_is_extra": best not in {str(c) for c in committed} if best else None,
                     "autotuner_pick": picked,
                     "autotuner_regret": round(ms[picked] / ms[best], 3) if picked in ms and best else None}
            record["kernels"].setdefault(name, []).append(entry)
            results.save()
            log(STEP, f"{name} on {kind} d={degree} F={width}: best {best} ({ms.get(best)} ms), autotuner picked "
                      f"{picked} (regret {entry['autotuner_regret']})")
    record["status"] = "ok"


def body(results, deadline, dry_run: bool) -> None:
    device = device_for(dry_run)
    run_parts(STEP, results, [
        ("cost_fit", lambda: part_cost_fit(results, pathlib.Path(results.path).with_name("kernels.json"), dry_run)),
        ("call_overhead", lambda: part_call_overhead(results, device, dry_run)),
        ("auto_tune", lambda: part_auto_tune(results, deadline, device, dry_run, reserve_s=0.45 * deadline.budget_s)),
        ("triton_configs", lambda: part_triton_configs(results, deadline, device, dry_run))])


if __name__ == "__main__":
    sys.exit(step_main(STEP, __doc__, body))
