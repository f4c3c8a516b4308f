"""DGL's own test files, run with ``dgl`` resolved to ``unigraph.dgl``: the pass/fail table.

    python -m benchmarks.peer_tests.dgl_swap                     # the five files, table to benchmarks/results
    python -m benchmarks.peer_tests.dgl_swap --files ops/test_edge_softmax.py -k unidirectional

What it does, in order:

1. extracts ``tests/`` of DGL at ``--tag`` (v2.1.0) from the git snapshot ``--dgl-repo`` into
   ``--work`` (a folder outside this repository: DGL's code is run, never copied in);
2. runs each test file with pytest in its own process, from that folder, with
   ``PYTHONPATH=<work>/shim:<work>/tests`` and ``DGLBACKEND=pytorch``: the shim
   package ``dgl`` (:mod:`benchmarks.peer_tests.dgl_shim`) hands every ``dgl.X`` to ``unigraph.dgl.X`` (see its docstring; DGL's tensor
   helpers ``dgl.backend`` stay DGL's, as its test helpers ``tests/backend`` and ``tests/utils``);
3. reads pytest's JUnit XML, sorts every failure into a category (the first line of its error
   with numbers and names of parametrized cases folded), lists the tests of DGL internals apart
   with the reason (:data:`INTERNALS`), and writes ``--out``.md / .json; with ``--baseline`` (an
   earlier .json) the table has a "before" column.

The test files are DGL's, verbatim. Nothing here edits them.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ElementTree

from benchmarks.peer_tests import dgl_shim

PROJECT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_REPO = "/work/.mirror/dmlc+dgl/repo"
DEFAULT_FILES = (
    "tests/python/common/function/test_basics.py",
    "tests/python/common/test_heterograph-specialization.py",
    "tests/python/common/test_heterograph-kernel.py",
    "tests/python/common/ops/test_ops.py",
    "tests/python/common/ops/test_edge_softmax.py",
    "tests/python/pytorch/nn/test_nn.py",
    "tests/python/common/test_readout.py",
    "tests/python/common/test_heterograph.py",
    "tests/python/common/test_batch-graph.py",
    "tests/python/common/test_batch-heterograph.py",
    "tests/python/common/test_subgraph.py",
    "tests/python/common/test_heterograph-remove.py",
    "tests/python/common/test_heterograph-update-all.py",
    "tests/python/common/test_heterograph-apply-edges.py",
    "tests/python/common/test_heterograph-misc.py",
    "tests/python/common/test_convert.py",
    "tests/python/common/test_traversal.py",
    "tests/python/common/test_propagate.py",
    "tests/python/common/sampling/test_sampling.py",
    "tests/python/common/test_merge.py",
    "tests/python/pytorch/geometry/test_geometry.py",
    "tests/python/common/transforms/test_transform.py",
)
# DGL functions a file imports at its top that unigraph lacks: stand-ins that raise when called
# (dgl_shim), so the file collects and only the tests that call them fail, by that name
STAND_INS: dict = {   # (test_nn.py needed dgl.shortest_dist until unigraph.dgl had it)
    "test_transform.py": ("partition.*",),   # METIS partitioning (dgl.partition): not offered
}

# Tests of DGL's internals rather than its API: (file name, test name prefix) -> why unigraph does not offer it.
INTERNALS = {
    ("test_ops.py", "test_use_libxsmm_switch"): "switches DGL's bundled LIBXSMM CPU kernels on and off "
                                                "(dgl.use_libxsmm); unigraph has no LIBXSMM",
    ("test_heterograph.py", "test_graph_index_is_unibipartite"): "reads DGL's C++ graph index (g._graph)",
    ("test_heterograph.py", "test_reverse"): "reads DGL's C++ graph index (g._graph); dgl.reverse itself is "
                                             "compared with DGL's in tests/unigraph_dgl",
    ("test_heterograph.py", "test_frame"): "reads DGL's frame objects (g._node_frames)",
}

# How a failure's first line is folded into a category: (pattern, replacement), applied in order.
_FOLDS = (
    (re.compile(r"0x[0-9a-f]+"), "0x.."),
    (re.compile(r"tensor\(.*", re.S), "tensor(...)"),
    (re.compile(r"\b\d+(\.\d+)?(e-?\d+)?\b"), "N"),
    (re.compile(r"\s+"), " "),
)


def extract(repo: str, tag: str, work: pathlib.Path) -> pathlib.Path:
    """``tests/`` of DGL at ``tag`` under ``work`` (fresh each run)."""
    if PROJECT in work.resolve().parents or work.resolve() == PROJECT:
        raise SystemExit(f"--work {work} is inside this repository; DGL's files must stay outside it")
    git_dir = repo if (pathlib.Path(repo) / "HEAD").exists() else str(pathlib.Path(repo) / ".git")
    target = work / f"dgl-{tag}"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "--git-dir", git_dir, "archive", tag, "tests"], check=True,
                             capture_output=True).stdout
    with tempfile.TemporaryFile() as handle:
        handle.write(archive)
        handle.seek(0)
        with tarfile.open(fileobj=handle) as tar:
            tar.extractall(target, filter="data")
    return target


def run_file(root: pathlib.Path, test_file: str, keyword: str | None, timeout: int) -> tuple[pathlib.Path, float, str]:
    """Run one DGL test file under the shim; returns the JUnit XML path, seconds and pytest's tail."""
    report = root / "reports" / (pathlib.Path(test_file).stem + ".xml")
    report.parent.mkdir(exist_ok=True)
    report.unlink(missing_ok=True)
    env = dict(os.environ, DGLBACKEND="pytorch", DGLTESTDEV="cpu",
               **{dgl_shim.STAND_INS: ",".join(STAND_INS.get(pathlib.Path(test_file).name, ()))},
               PYTHONPATH=os.pathsep.join([str(dgl_shim.write(root / "shim")), str(root / "tests"), str(PROJECT)]))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=line", "-o", "addopts=",
               f"--junitxml={report}", test_file] + (["-k", keyword] if keyword else [])
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
        tail = (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired as err:
        tail = f"timed out after {timeout} s\n{(err.stdout or b'')[-2000:]!r}"
    return report, time.perf_counter() - started, tail


def _category(message: str) -> str:
    first = next((line for line in message.strip().splitlines() if line.strip()), "(no message)")
    first = first.split(" - ", 1)[-1] if first.startswith("E ") else first
    for pattern, replacement in _FOLDS:
        first = pattern.sub(replacement, first)
    return first.strip()[:200]


def _internal_reason(file_name: str, test_name: str) -> str | None:
    for (name, prefix), reason in INTERNALS.items():
        if name == file_name and test_name.startswith(prefix):
            return reason
    return None


def read_report(report: pathlib.Path, test_file: str, tail: str) -> dict:
    """Counts, failure categories and internals of one file's JUnit XML."""
    file_name = pathlib.Path(test_file).name
    result = {"file": test_file, "passed": 0, "failed": 0, "skipped": 0, "internal": 0,
              "categories": collections.Counter(), "failures": [], "internals": [], "skips": collections.Counter()}
    if not report.exists():
        result["failed"] = 1
        result["categories"][f"no report: {_category(tail.splitlines()[-1] if tail else 'pytest did not run')}"] += 1
        result["tail"] = tail
        return result
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = case.get("name", "")
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        reason = _internal_reason(file_name, name)
        if reason is not None:
            result["internal"] += 1
            result["internals"].append({"test": name, "reason": reason,
                                        "outcome": "failed" if failure is not None else "skipped" if skipped is not None else "passed"})
        elif failure is not None:
            message = failure.get("message") or failure.text or ""
            if message.startswith("collection failure"):  # the cause is the last 'E ' line of the text
                causes = [line[1:].strip() for line in (failure.text or "").splitlines() if line.startswith("E ")]
                message = "collection failed: " + (causes[-1] if causes else message)
            result["failed"] += 1
            result["categories"][_category(message)] += 1
            result["failures"].append({"test": name, "category": _category(message)})
        elif skipped is not None:
            result["skipped"] += 1
            result["skips"][_category(skipped.get("message") or "")] += 1
        else:
            result["passed"] += 1
    if not (result["passed"] + result["failed"] + result["skipped"] + result["internal"]):
        result["failed"] = 1
        result["categories"][f"collection failed: {_category(tail)}"] += 1
        result["tail"] = tail
    return result


def write_table(results: list[dict], baseline: dict | None, out: pathlib.Path, meta: dict) -> None:
    before = {r["file"]: r for r in (baseline or {}).get("files", [])}
    lines = ["# DGL 2.1's own tests with `dgl` resolved to `unigraph.dgl`", "",
             f"Made by `python -m benchmarks.peer_tests.dgl_swap` ({meta['date']}, torch {meta['torch']}, "
             f"Python {meta['python']}). DGL's test files run verbatim from `{meta['tag']}`; only the import "
             "resolves to unigraph (`benchmarks/peer_tests/dgl_shim.py`). DGL's tensor helpers (`dgl.backend`, "
             "its `tests/backend`, `tests/utils`) stay DGL's.", "",
             "| file | passed | failed | skipped | DGL internals | " + ("before (passed / total) | " if baseline else "")
             + "seconds |",
             "| --- | ---: | ---: | ---: | ---: | " + ("---: | " if baseline else "") + "---: |"]
    for r in results:
        total = r["passed"] + r["failed"] + r["skipped"] + r["internal"]
        row = f"| `{r['file'].split('tests/python/')[-1]}` | {r['passed']} / {total} | {r['failed']} | {r['skipped']} | {r['internal']} | "
        if baseline:
            b = before.get(r["file"])
            row += (f"{b['passed']} / {b['passed'] + b['failed'] + b['skipped'] + b['internal']} | " if b else "- | ")
        lines.append(row + f"{r['seconds']:.0f} |")
    lines += ["", "## Failures by category", ""]
    any_failure = False
    for r in results:
        if not r["categories"]:
            continue
        any_failure = True
        lines.append(f"### `{r['file'].split('/')[-1]}` ({r['failed']} failed)")
        lines.append("")
        for category, count in sorted(r["categories"].items(), key=lambda kv: -kv[1]):
            examples = [f["test"] for f in r["failures"] if f["category"] == category][:2]
            lines.append(f"- {count} x `{category}` (e.g. {', '.join(f'`{e}`' for e in examples)})")
        lines.append("")
    if not any_failure:
        lines += ["None.", ""]
    internals = [(r["file"], i) for r in results for i in r["internals"]]
    lines += ["## Tests of DGL internals (not counted as passed or failed)", ""]
    lines += [f"- `{f.split('/')[-1]}::{i['test']}` ({i['outcome']}): {i['reason']}" for f, i in internals] or ["None."]
    skips = [(r["file"], reason, n) for r in results for reason, n in r["skips"].items()]
    if skips:
        lines += ["", "## Skipped by DGL's own conditions", ""]
        lines += [f"- `{f.split('/')[-1]}`: {n} x {reason}" for f, reason, n in skips]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    serial = [{**{k: v for k, v in r.items() if k not in ("categories", "skips")},
               "categories": dict(r["categories"]), "skips": dict(r["skips"])} for r in results]
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "files": serial}, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dgl-repo", default=DEFAULT_REPO, help="git snapshot of dmlc/dgl")
    parser.add_argument("--tag", default="v2.1.0")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "unigraph_dgl_tests"),
                        help="folder (outside this repository) that receives DGL's tests")
    parser.add_argument("--files", nargs="+", default=list(DEFAULT_FILES),
                        help="test files, relative to the DGL checkout (a bare name is looked up under tests/python)")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per file")
    parser.add_argument("--out", default=str(PROJECT / "benchmarks" / "results" / "dgl_tests"),
                        help="output path without suffix (.md and .json are written)")
    parser.add_argument("--baseline", default=None, help="an earlier .json for a 'before' column")
    args = parser.parse_args(argv)
    root = extract(args.dgl_repo, args.tag, pathlib.Path(args.work))
    files = []
    for name in args.files:
        if not (root / name).exists():
            found = sorted((root / "tests" / "python").rglob(pathlib.Path(name).name))
            if len(found) != 1:
                raise SystemExit(f"{name}: not found in DGL {args.tag}'s tests (matches: {found})")
            name = str(found[0].relative_to(root))
        files.append(name)
    results = []
    for test_file in files:
        report, seconds, tail = run_file(root, test_file, args.keyword, args.timeout)
        result = read_report(report, test_file, tail)
        result["seconds"] = seconds
        results.append(result)
        total = result["passed"] + result["failed"] + result["skipped"] + result["internal"]
        print(f"{test_file}: {result['passed']} / {total} passed, {result['failed']} failed, "
              f"{result['skipped']} skipped, {result['internal']} internal ({seconds:.0f} s)", flush=True)
    import torch  # noqa: PLC0415 - only for the versions in the table's header
    meta = {"tag": args.tag, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "python": platform.python_version(), "keyword": args.keyword}
    baseline = json.loads(pathlib.Path(args.baseline).read_text()) if args.baseline else None
    write_table(results, baseline, pathlib.Path(args.out), meta)
    print(f"wrote {args.out}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
