"""Turn a GPU run folder (``benchmarks/gpu/run.sh OUTDIR``) into committed results.

    python -m benchmarks.gpu.ingest OUTDIR

writes, from what the run's steps left in OUTDIR (a step that did not finish contributes what it
saved; a missing one, nothing):

* ``benchmarks/results/kernels_cuda.{json,md,png}``: the kernel suite, in the format and with the
  tables and plot of ``benchmarks/kernels.py``;
* ``benchmarks/results/gpu_run_cuda.{json,md}``: the run itself (steps, environment, test outcomes
  with every failure, tuning, end to end) and its summary (:mod:`benchmarks.gpu.summary`);
* ``benchmarks/results/selector_crossval_cuda.md``: the GPU cost model's held-out regret and
  auto-tune's measurements on held-out graphs;
* ``backends/cost_constants_cuda.json``: the GPU cost model fitted to the committed
  ``kernels_cuda.json`` and any ``--extra-suite`` results, committed beside it
  (:func:`unigraph.benchmarking.cost_fit.fit_gpu_constants`; ``auto`` reads it from then on, and
  ``tests/test_gpu_run.py`` checks that it refits exactly);
* the README's GPU rows, between ``<!-- gpu-results:begin`` and ``<!-- gpu-results:end -->``.

A dry run's folder is refused (its CPU figures must never become results) unless
``--allow-dry-run`` is given together with every target (``--results-dir``, ``--constants``,
``--readme``), as the tests do.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import re
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.gpu import summary  # noqa: E402

BEGIN = "<!-- gpu-results:begin"
END = "<!-- gpu-results:end -->"
COMPACT_TESTS_KEEP = ("failed", "error")


def compact_tests(tests: dict | None) -> dict | None:
    """The tests step without the passing tests' list (thousands of lines; counts stay)."""
    if tests is None:
        return None
    parts = {}
    for name, part in (tests.get("parts") or {}).items():
        parts[name] = {**{k: v for k, v in part.items() if k != "tests"},
                       "not_passed": [t for t in part.get("tests", []) if t["outcome"] != "passed"]}
    return {**{k: v for k, v in tests.items() if k != "parts"}, "parts": parts}


PEER_NAMES = {"torch_native": "torch scatter", "torch_sparse_csr": "cuSPARSE", "pyg": "PyG",
              "pyg_compiled": "PyG compiled"}


def suite_rows(suite: dict, file: str) -> list[str]:
    """The README rows of one kernel suite's targets (g-SpMM vs floor and peers, fused GAT vs PyG)."""
    out = []
    g = summary.gspmm_targets(suite)
    within = [r for r in g if r["x_floor"] is not None and r["x_floor"] <= summary.FLOOR_TARGET]
    ahead = [r for r in g if r["vs_peer"] is None or r["vs_peer"] >= 1.0]
    out.append(f"| Triton g-SpMM (copy_u/sum, u_mul_e/sum) at mean in-degree "
               f"{', '.join(str(d) for d in sorted({r['degree'] for r in g}))}: within {summary.FLOOR_TARGET}x of the "
                f"bandwidth floor in {len(within)} of {len(g)} cases, at least as fast as the best peer ("
                f"{', '.join(PEER_NAMES.get(p, p) for p in suite['implementations']['peers'])}) in {len(ahead)} of "
                f"{len(g)}; device copy "
                f"{suite.get('bandwidth_gbps_used')} GB/s | `{file}` | "
                f"{'met' if g and all(r['met'] for r in g) else 'not met everywhere'} |")
    a = summary.gat_targets(suite)
    if a:
        speedups = sorted(r["speedup_vs_pyg"] for r in a if r["speedup_vs_pyg"])
        out.append(f"| fused GAT forward+backward vs PyG: faster in {sum(r['met'] for r in a)} of {len(a)} cases"
                    + (f" (PyG / ours {speedups[0]:.2f}x to {speedups[-1]:.2f}x)" if speedups else "")
                    + f" | `{file}` | {'met' if all(r['met'] for r in a) else 'not met everywhere'} |")
    return out


def readme_block(files: dict, extras: list[tuple[str, dict]] = ()) -> str:
    """The README's GPU rows: one line per target, each naming its file in ``benchmarks/results``."""
    env = files.get("environment") or {}
    device = (env.get("device") or {}).get("name", "?")
    run = files.get("run") or {}
    when = (run.get("started") or "?")[:10]
    rows = [f"GPU run on {device} ({when}; `benchmarks/gpu/run.sh`, how to read it: `docs/benchmarks.md`, "
            f"\"The GPU run\"):", "", "| what | result file | status |", "| --- | --- | --- |"]
    steps = ", ".join(f"{s['name']} {s['status']}" for s in run.get("steps", []))
    rows.append(f"| the run: {steps} | `gpu_run_cuda.md` | measured |")
    tests = files.get("tests") or {}
    counts = {}
    for part in (tests.get("parts") or {}).values():
        for outcome, n in (part.get("counts") or {}).items():
            counts[outcome] = counts.get(outcome, 0) + n
    if counts:
        rows.append("| tests on CUDA (every backend x float64/32/16/bfloat16 vs float64 references, GPU-marked "
                    "tests): " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + f" | `gpu_run_cuda.md` | "
                    f"{'all pass' if not counts.get('failed') and not counts.get('error') else 'FAILURES'} |")
    for name, suite in [("kernels_cuda", summary.suite_of(files))] + list(extras):
        if suite and suite.get("cases"):
            rows += suite_rows(suite, f"{name}.md")
    tuning = files.get("tuning") or {}
    regret = (tuning.get("auto_tune") or {}).get("regret") or {}
    if regret:
        parts = []
        for mode, policies in regret.items():
            for name in ("auto (as run)", "cost model"):
                if name in policies:
                    p = policies[name]
                    parts.append(f"{mode} {name} {p['geomean_regret']:.3f} (worst {p['max_regret']:.2f})")
        rows.append(f"| `auto`'s regret on held-out graphs (auto-tune's measurements; estimates as run, and the model "
                    f"fitted to the suite): " + "; ".join(parts) + f" | `selector_crossval_cuda.md` | measured |")
    e2e = files.get("e2e") or {}
    cells = []
    for group in (e2e.get("full_batch") or {}).get("groups", []):
        ours, peers = group["rows"][0], group["rows"][1:]
        if peers:
            best = min(peers, key=lambda r: r["median_ms"])
            cells.append(f"{group['model']} {group['graph']} {ours['median_ms']:.1f} vs PyG {best['median_ms']:.1f} ms "
                         f"({best['median_ms'] / ours['median_ms']:.2f}x; acc {ours['test_acc']:.3f} vs "
                         f"{best['test_acc']:.3f})")
    mini = (e2e.get("mini_batch") or {}).get("rows") or []
    if len(mini) > 1:
        cells.append(f"GraphSAGE mini-batch step {mini[0]['median_ms']:.1f} vs PyG {mini[1]['median_ms']:.1f} ms")
    if cells:
        rows.append("| end to end, ms/epoch (median): " + "; ".join(cells) + f" | `gpu_run_cuda.md` | measured |")
    return "\n".join(rows)


def replace_block(text: str, block: str, path: pathlib.Path) -> str:
    pattern = re.compile(re.escape(BEGIN) + r".*?-->\n.*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{path} has no {BEGIN} ... {END} block to fill")
    header = f"{BEGIN} (generated by python -m benchmarks.gpu.ingest {datetime.date.today()}; do not edit) -->"
    return pattern.sub(lambda _: f"{header}\n{block}\n{END}", text, count=1)


def relative(path: pathlib.Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path.resolve())


def check_extras(extras: list[tuple[str, dict]], suite: dict) -> list[tuple[str, dict]]:
    """The extra suites, refused unless each is a kernels_cuda_* result of the run's GPU."""
    device = lambda r: (r.get("machine") or {}).get("gpu") or (r.get("machine") or {}).get("device")  # noqa: E731
    for name, result in extras:
        if not name.startswith("kernels_cuda_") or not result.get("cases"):
            raise SystemExit(f"--extra-suite {name}: expected a kernels_cuda_*.json kernel-suite result with cases")
        if device(result) != device(suite):
            raise SystemExit(f"--extra-suite {name}: measured on {device(result)}, the run on {device(suite)}")
    return extras


def held_out_tables(suites: list[tuple[str, dict]], committed: dict, auto_tune: dict | None = None) -> list[str]:
    """The GPU model fitted on the run's suite and scored on the extra suites (other densities),
    and back; fitted on one graph kind of all the suites together, scored on the other; and the
    ``committed`` tables (fitted to all the suites) scored on auto-tune's measurements of graphs
    no suite holds."""
    from unigraph.backends import cost_model
    from unigraph.benchmarking import cost_fit
    first, rest = suites[0][1], [r for _, r in suites[1:]]
    candidates = [b for b in first["implementations"]["unigraph"] if b in cost_model.GPU_BACKENDS]
    extra_cases = [c for r in rest for c in r["cases"]]
    names = ", ".join(f"`{n}.json`" for n, _ in suites[1:])
    out = ["## Held out across the suites", "",
           f"The committed constants are fitted to `kernels_cuda.json` and {names} together.", ""]
    out += cost_fit.scored(extra_cases, candidates, cost_fit.fit_gpu_tables([first]),
                           f"fitted on kernels_cuda.json, scored on {names}")
    out += cost_fit.scored(first["cases"], candidates, cost_fit.fit_gpu_tables(rest),
                           f"fitted on {names}, scored on kernels_cuda.json")
    out.append(cost_fit.crossval_gpu({**first, "cases": first["cases"] + extra_cases}))
    held = (auto_tune or {}).get("cases") or []
    if held:
        out += cost_fit.scored(held, auto_tune.get("candidates") or candidates, committed,
                               "the committed fit (all the suites), scored on auto-tune's held-out graphs")
    return out + [""]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=pathlib.Path, help="the GPU run's folder")
    parser.add_argument("--results-dir", type=pathlib.Path, help="default benchmarks/results")
    parser.add_argument("--constants", type=pathlib.Path, help="default backends/cost_constants_cuda.json")
    parser.add_argument("--readme", type=pathlib.Path, help="default README.md")
    parser.add_argument("--extra-suite", type=pathlib.Path, action="append", default=[], metavar="JSON",
                        help="a further kernels.py result (named kernels_cuda_*.json) measured on the same GPU model "
                             "(the densities the run's budget left out, or an earlier lease's suite): committed beside "
                             "kernels_cuda.json, part of the GPU constants' fit and of the held-out tables")
    parser.add_argument("--allow-dry-run", action="store_true",
                        help="accept a dry run's folder (tests), only with every target given")
    args = parser.parse_args(argv)
    targets = (args.results_dir, args.constants, args.readme)
    if args.allow_dry_run and any(t is None for t in targets):
        parser.error("--allow-dry-run needs --results-dir, --constants and --readme (never the committed files)")
    args.results_dir = args.results_dir or REPO_ROOT / "benchmarks" / "results"
    args.constants = args.constants or REPO_ROOT / "backends" / "cost_constants_cuda.json"
    args.readme = args.readme or REPO_ROOT / "README.md"
    return args


def main(argv=None) -> list[pathlib.Path]:
    args = parse_args(argv)
    files = summary.load(args.out)
    if files.get("run") is None:
        raise SystemExit(f"{args.out} has no run.json: not a GPU run folder")
    if files["run"].get("dry_run") and not args.allow_dry_run:
        raise SystemExit(f"{args.out} is a dry run (CPU figures): refusing to make results of it")
    from unigraph.benchmarking import cost_fit
    from unigraph.benchmarking.output import write_json, write_text
    results, written = args.results_dir, []
    suite = summary.suite_of(files)
    extras = [(path.stem, json.loads(path.read_text())) for path in args.extra_suite]
    held_out_md = []
    if suite and suite.get("cases"):
        from benchmarks import kernels
        suites = [("kernels_cuda", suite)] + check_extras(extras, suite)
        sources = []
        for name, result in suites:
            write_json(results / f"{name}.json", result)
            kernels.write_markdown(result, results / f"{name}.md")
            kernels.write_plot(result, results / f"{name}.png")
            written += [results / f"{name}{ext}" for ext in (".json", ".md", ".png")]
            sources.append(relative(results / f"{name}.json"))
        constants = cost_fit.fit_gpu_constants([result for _, result in suites], sources,
                                               require_gpu=not args.allow_dry_run)
        write_text(args.constants, cost_fit.render(constants))
        written.append(args.constants)
        if len(suites) > 1:
            held_out_md = held_out_tables(suites, {table: constants[table] for table in cost_fit.TABLES.values()},
                                          (files.get("tuning") or {}).get("auto_tune"))
    else:
        print(f"no kernel-suite cases in {args.out}: kernels_cuda.* and the GPU constants are left as they are")
    record = {"run": files["run"], "environment": files.get("environment"), "tests": compact_tests(files.get("tests")),
              "kernels_step": {k: v for k, v in (files.get("kernels") or {}).items() if k != "suite"},
              "tuning": files.get("tuning"), "e2e": files.get("e2e")}
    write_json(results / "gpu_run_cuda.json", record)
    write_text(results / "gpu_run_cuda.md", summary.markdown(files))
    tuning = files.get("tuning") or {}
    crossval = ["# The GPU cost model's held-out regret", "",
                f"From `{args.out}` (python -m benchmarks.gpu.ingest). Fitted on one graph kind of the GPU kernel "
                "suite, scored on the other; then auto-tune's measurements on graphs the suite never saw.", "",
                (tuning.get("cost_fit") or {}).get("crossval_md") or "(no fit: the kernels step left no cases)", "",
                (tuning.get("auto_tune") or {}).get("regret_md") or "(no auto-tune measurements)", ""] + held_out_md
    write_text(results / "selector_crossval_cuda.md", "\n".join(crossval))
    written += [results / "gpu_run_cuda.json", results / "gpu_run_cuda.md", results / "selector_crossval_cuda.md"]
    readme = args.readme.read_text()
    write_text(args.readme, replace_block(readme, readme_block(files, extras), args.readme))
    written.append(args.readme)
    for path in written:
        print(f"wrote {path}")
    return written


if __name__ == "__main__":
    main()
