"""``summary.md`` of a GPU run folder, and the figures the issue's targets are read from.

    python -m benchmarks.gpu.summary OUTDIR    # (re)writes OUTDIR/summary.md from the step files

Imports nothing heavy (JSON in, markdown out): the runner calls it after every step, and a
missing or partial step file gives a shorter summary, never an error. The target checks
(:func:`gspmm_targets`, :func:`gat_targets`, :func:`auto_regret`) are shared with
:mod:`benchmarks.gpu.ingest`, which quotes them in the README.

Targets (issue 31): Triton g-SpMM within 1.5x of the bandwidth floor and at least as fast as the
best peer at every density; fused GAT forward+backward faster than PyG's at every density;
``auto`` within 1.1x of the best backend, held out.
"""
from __future__ import annotations

import json
import math
import pathlib
import statistics
import sys

STEP_FILES = {"environment": "environment.json", "tests": "tests.json", "kernels": "kernels.json",
              "tuning": "tuning.json", "e2e": "e2e.json", "run": "run.json"}
TRITON = ("triton_node", "triton_edge")
GSPMM_OPS = ("copy_u/sum", "u_mul_e/sum")
FLOOR_TARGET, AUTO_TARGET = 1.5, 1.1
MAX_FAILURES_LISTED = 40


def load(out: pathlib.Path) -> dict[str, dict | None]:
    files = {}
    for name, file in STEP_FILES.items():
        try:
            files[name] = json.loads((pathlib.Path(out) / file).read_text())
        except (OSError, ValueError):
            files[name] = None
    return files


def suite_of(files: dict) -> dict | None:
    return (files.get("kernels") or {}).get("suite")


def _peers(suite: dict) -> list[str]:
    return list(suite["implementations"]["peers"])


# ---------------------------------------------------------------------- targets
def gspmm_targets(suite: dict) -> list[dict]:
    """Per g-SpMM sum case: the faster Triton backend against the bandwidth floor and the best peer
    (medians)."""
    rows = []
    for c in suite["cases"]:
        ours = {b: c["median_ms"][b] for b in TRITON if b in c["median_ms"]}
        peers = {p: c["median_ms"][p] for p in _peers(suite) if p in c["median_ms"]}
        if c["op"] not in GSPMM_OPS or not ours:
            continue
        best = min(ours, key=ours.get)
        peer = min(peers, key=peers.get) if peers else None
        floor = c.get("floor_ms")
        rows.append({"op": c["op"], "graph": c["graph"], "degree": c["degree"], "width": c["width"], "mode": c["mode"],
                     "triton": best, "triton_ms": ours[best], "floor_ms": floor,
                     "x_floor": round(ours[best] / floor, 2) if floor else None,
                     "gbps": c["achieved_gbps"].get(best), "best_peer": peer,
                     "peer_ms": peers.get(peer), "vs_peer": round(peers[peer] / ours[best], 2) if peer else None,
                     "met": bool(floor) and ours[best] / floor <= FLOOR_TARGET and (peer is None or
                                                                                   ours[best] <= peers[peer])})
    return rows


def gat_targets(suite: dict) -> list[dict]:
    """Per GAT forward+backward case: fused triton_node against PyG (and PyG compiled)."""
    rows = []
    for c in suite["cases"]:
        if c["op"] != "gat" or c["mode"] != "fwd+bwd" or "triton_node" not in c["median_ms"]:
            continue
        ours = c["median_ms"]["triton_node"]
        pyg = {p: c["median_ms"][p] for p in ("pyg", "pyg_compiled") if p in c["median_ms"]}
        rows.append({"graph": c["graph"], "degree": c["degree"], "width": c["width"], "triton_node_ms": ours,
                     **{f"{p}_ms": v for p, v in pyg.items()},
                     "speedup_vs_pyg": round(pyg["pyg"] / ours, 2) if "pyg" in pyg else None,
                     "met": bool(pyg) and all(ours < v for v in pyg.values())})
    return rows


def auto_regret(suite: dict) -> dict:
    """``auto``'s regret per mode over the suite (the best unigraph backend of each case)."""
    out = {}
    for mode in sorted({c["mode"] for c in suite["cases"]}):
        regrets = [c["regret"] for c in suite["cases"] if c["mode"] == mode and c.get("regret") is not None]
        if regrets:
            out[mode] = {"cases": len(regrets), "geomean": round(math.exp(statistics.fmean(map(math.log, regrets))), 3),
                         "worst": round(max(regrets), 2), "within": sum(r <= AUTO_TARGET for r in regrets)}
    return out


# ---------------------------------------------------------------------- markdown
def _table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join("-" if v is None else str(v) for v in row) + " |" for row in rows]
    return lines + [""]


def section_run(files: dict) -> list[str]:
    run, env = files.get("run") or {}, files.get("environment") or {}
    device = (env.get("device") or {})
    title = f"# GPU run on {device.get('name', 'an unknown device')}"
    lines = [title, ""]
    if run.get("dry_run") or env.get("dry_run"):
        lines += ["**DRY RUN** on the CPU (tiny sizes, `TRITON_INTERPRET=1`): figures mean nothing; this checks "
                  "that the run works.", ""]
    lines += [f"Command: `{run.get('command', '?')}`; started {run.get('started', '?')}, "
              f"{run.get('wall_s', '?')} s of a {run.get('total_budget_s', '?')} s budget.", ""]
    lines += _table(["step", "status", "wall s", "budget s", "exit code"],
                    [[s["name"], s["status"], s["wall_s"], s["budget_s"], s["exit_code"]]
                     for s in run.get("steps", [])])
    if env:
        versions = env.get("versions") or {}
        lines += [f"Device: {device.get('name')}, {device.get('sm_count')} SMs, {device.get('memory_gb')} GB, "
                  f"L2 {device.get('l2_cache_mb')} MB, capability {device.get('capability')}; "
                  f"nvidia-smi: {env.get('nvidia_smi')}.", "",
                  "Versions: python " + str(env.get("python")) + ", " + ", ".join(
                      f"{k} {v}" for k, v in versions.items() if v), ""]
        if env.get("bandwidth"):
            b = env["bandwidth"]
            lines += [f"Device copy: {b['copy_gbps']} GB/s (median {b['copy_gbps_median']}; bytes read + written, "
                      f"{b['array_mb']} MiB arrays).", ""]
    return lines


def section_tests(files: dict) -> list[str]:
    tests = files.get("tests")
    if not tests:
        return ["## Tests", "", "No results (the step did not run or wrote nothing).", ""]
    lines = ["## Tests", "", f"Status {tests.get('status')}; hypothesis profile {tests.get('hypothesis_profile')}.", ""]
    rows, failures = [], []
    for name, part in (tests.get("parts") or {}).items():
        rows.append([name, part.get("status"), part.get("exit_code"), json.dumps(part.get("counts") or {}),
                     part.get("wall_s")])
        failures += [t for t in part.get("tests", []) if t["outcome"] in ("failed", "error")]
        failures += [{"nodeid": e["nodeid"], "outcome": "collection error", "message": e["message"]}
                     for e in part.get("collect_errors", [])]
    lines += _table(["part", "status", "exit code", "counts", "wall s"], rows)
    if failures:
        lines += [f"Failures ({len(failures)}; the first {MAX_FAILURES_LISTED}, last line of each report):", ""]
        for t in failures[:MAX_FAILURES_LISTED]:
            last = [line for line in (t.get("message") or "").splitlines() if line.strip()]
            lines.append(f"- `{t['nodeid']}` ({t['outcome']}): {last[-1][:300] if last else ''}")
        lines.append("")
    return lines


def section_kernels(files: dict) -> list[str]:
    step, suite = files.get("kernels"), suite_of(files)
    if not suite:
        return ["## Kernels", "", f"No suite results (step status {(step or {}).get('status')}).", ""]
    lines = ["## Kernels", "", f"{len(suite['cases'])} cases, {len(suite.get('skipped', []))} over the memory budget, "
             f"{len(suite.get('not_run', []))} not run for time; step status {step.get('status')}. Bandwidth used for "
             f"the floors: {suite.get('bandwidth_gbps_used')} GB/s. Command: `{step.get('suite_command')}`.", ""]
    g = gspmm_targets(suite)
    if g:
        met = sum(r["met"] for r in g)
        lines += [f"### Triton g-SpMM: within {FLOOR_TARGET}x of the floor and at least as fast as the best peer "
                  f"({met} of {len(g)} met)", ""]
        lines += _table(["op", "graph", "deg", "F", "mode", "triton", "ms", "floor ms", "x floor", "GB/s", "best peer",
                         "peer ms", "peer/triton", "met"],
                        [[r["op"], r["graph"], r["degree"], r["width"], r["mode"], r["triton"], r["triton_ms"],
                          r["floor_ms"], r["x_floor"], r["gbps"], r["best_peer"], r["peer_ms"], r["vs_peer"],
                          "yes" if r["met"] else "NO"] for r in g])
    a = gat_targets(suite)
    if a:
        lines += [f"### Fused GAT forward+backward faster than PyG ({sum(r['met'] for r in a)} of {len(a)} met)", ""]
        lines += _table(["graph", "deg", "F", "triton_node ms", "pyg ms", "pyg_compiled ms", "PyG / ours", "met"],
                        [[r["graph"], r["degree"], r["width"], r["triton_node_ms"], r.get("pyg_ms"),
                          r.get("pyg_compiled_ms"), r["speedup_vs_pyg"], "yes" if r["met"] else "NO"] for r in a])
    regret = auto_regret(suite)
    if regret:
        lines += ["### `auto` in the suite (the estimates; held out: Tuning below)", ""]
        lines += _table(["mode", "cases", "geomean regret", "worst", f"within {AUTO_TARGET}x"],
                        [[m, r["cases"], r["geomean"], r["worst"], r["within"]] for m, r in regret.items()])
    errors = sorted({f"{impl} on {c['op']} {c['mode']}: {msg}" for c in suite["cases"]
                     for impl, msg in c.get("errors", {}).items()})
    if errors:
        lines += ["Errors (implementation could not run the case):", ""] + [f"- {e}" for e in errors[:30]] + [""]
    return lines


def section_tuning(files: dict) -> list[str]:
    tuning = files.get("tuning")
    if not tuning:
        return ["## Tuning", "", "No results.", ""]
    lines = ["## Tuning", "", f"Step status {tuning.get('status')}.", ""]
    fit = tuning.get("cost_fit") or {}
    lines += ["### GPU cost model: held-out regret (fitted on one graph kind, scored on the other)", "",
              fit.get("crossval_md") or fit.get("status") or "not run", ""]
    overhead = tuning.get("call_overhead") or {}
    for label, part in overhead.items():
        g = part["graph"]
        rows = [[name, *(("error: " + r["error"][:60], "-", "-", "-", "-") if "error" in r else
                         (r["host_us"], r["latency_us"], r["kernels_per_call"], r["syncs_per_call"],
                          ", ".join(f"{k} x{v}" for k, v in list(r["kernels"].items())[:3])))]
                for name, r in part["calls"].items()]
        lines += [f"### One copy_u/sum call, {label} graph ({g['nodes']:,} nodes, {g['edges']:,} edges, F={g['width']})",
                  ""]
        lines += _table(["call", "host us / call", "latency us", "device kernels / call", "host waits / call",
                         "kernels"], rows)
        for name, r in part["calls"].items():
            if r.get("python_top"):
                lines += [f"Python's own time per call, {name} (cProfile):", "", "```", *r["python_top"], "```", ""]
    tune = tuning.get("auto_tune") or {}
    if tune:
        lines += [f"### auto-tune on held-out graphs ({len(tune.get('cases', []))} calls, {tune.get('status')})", "",
                  tune.get("regret_md") or "", ""]
    configs = (tuning.get("triton_configs") or {}).get("kernels") or {}
    if configs:
        rows = []
        for kernel, entries in configs.items():
            for e in entries:
                if "error" in e:
                    rows.append([kernel, e["workload"], e["config"], "error: " + e["error"][:80], "-", "-"])
                    continue
                w = e["workload"]
                rows.append([kernel, f"{w['graph']} d={w['degree']} F={w['width']} {w['mode']}", e["best"],
                             e["median_ms"].get(e["best"]), "yes" if e["best_is_extra"] else "no",
                             e["autotuner_regret"]])
        lines += ["### Triton configurations (each timed alone; an extra winning means CONFIGS should grow)", ""]
        lines += _table(["kernel", "workload", "best config", "ms", "best is an extra", "autotuner's pick / best"],
                        rows)
    return lines


def section_e2e(files: dict) -> list[str]:
    e2e = files.get("e2e")
    if not e2e:
        return ["## End to end", "", "No results.", ""]
    lines = ["## End to end", "", f"Step status {e2e.get('status')}.", ""]
    rows = []
    for group in (e2e.get("full_batch") or {}).get("groups", []):
        for r in group["rows"]:
            rows.append([f"{group['model']} full batch", f"{group['graph']} ({group['nodes']:,} nodes, "
                         f"{group['edges']:,} edges)", r["impl"], r["median_ms"], r["test_acc"],
                         r.get("time_over_unigraph")])
    mini = e2e.get("mini_batch") or {}
    for r in mini.get("rows", []):
        rows.append(["GraphSAGE mini-batch step", "arxiv_like", r["impl"], r["median_ms"], r["test_acc"],
                     r.get("time_over_unigraph")])
    lines += _table(["what", "graph", "implementation", "median ms", "test acc", "time / unigraph's"], rows)
    if mini.get("sample_ms"):
        lines += [f"unigraph's GPU sampling of a batch: {mini['sample_ms']} ms; {mini.get('note', '')}.", ""]
    if e2e.get("profile"):
        from benchmarks.gpu.profiling import markdown as profile_markdown
        lines += profile_markdown(e2e["profile"])
    return lines


def markdown(files: dict) -> str:
    lines = section_run(files) + section_tests(files) + section_kernels(files) + section_tuning(files) + \
        section_e2e(files)
    return "\n".join(lines).rstrip() + "\n"


def write(out: pathlib.Path) -> pathlib.Path:
    path = pathlib.Path(out) / "summary.md"
    tmp = path.with_name(".summary.md.partial.tmp")
    tmp.write_text(markdown(load(out)))
    tmp.replace(path)
    return path


if __name__ == "__main__":
    print(write(pathlib.Path(sys.argv[1])))
