"""PyG's own tests, run against unigraph's classes: the drop-in claim, measured.

For each PyG test file below, this script extracts it from the PyG snapshot (a git archive of a
tag, by default ``2.8.0`` of ``/work/.mirror/pyg-team+pytorch_geometric/repo``) into a folder
OUTSIDE the project (default ``/tmp/pyg_tests``), rewrites only the import of the classes under
test so they come from unigraph (``from torch_geometric.nn import MLPAggregation, SAGEConv``
becomes ``from torch_geometric.nn import MLPAggregation`` plus ``from unigraph.nn import
SAGEConv``; everything else, helpers and the other classes, stays PyG's), runs each file with
pytest in its own process with this interpreter, and writes the pass/fail table:

    benchmarks/results/pyg_tests.md    per file passed / failed / skipped, failures by category
    benchmarks/results/pyg_tests.json  the same, with every failed test, its category and message

A class unigraph does not have is replaced by a stand-in whose construction raises
``NotImplementedError`` (category ``missing in unigraph``), so the rest of the file still runs.
``--reference`` also runs the unmodified files (PyG's own classes) for the "PyG itself" column.
Nothing of PyG's is copied into the project; the extracted folder is scratch space.

Usage::

    .venv/bin/python -m benchmarks.peer_tests.pyg_swap [--out /tmp/pyg_tests] [--reference]
        [--only test_gcn_conv.py ...] [--results benchmarks/results]

Failure categories (first match wins, on the exception type and message pytest reports):
``missing in unigraph`` (the stand-in), ``TorchScript`` (``torch.jit``), ``torch.compile graph
breaks``, ``refusal missing`` (``DID NOT RAISE``), ``argument not accepted`` (TypeError about
arguments), ``raised an error`` (a TypeError, ValueError, NotImplementedError or RuntimeError),
``result differs`` (an assertion on values or shapes), ``repr differs`` (an assertion on
``str()``), ``attribute missing`` (AttributeError), and ``other``.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import io
import time
import xml.etree.ElementTree as ET
from pathlib import Path

MIRROR = "/work/.mirror/pyg-team+pytorch_geometric/repo"
TAG = "2.8.0"

# test file -> {class under test: unigraph module that provides it}
CONV = "unigraph.nn"
MODELS = "unigraph.nn.models"
AGGR = "unigraph.nn.aggr"
FILES: dict[str, dict[str, str]] = {
    "test/nn/conv/test_gcn_conv.py": {"GCNConv": CONV},
    "test/nn/conv/test_sage_conv.py": {"SAGEConv": CONV},
    "test/nn/conv/test_gat_conv.py": {"GATConv": CONV},
    "test/nn/conv/test_gatv2_conv.py": {"GATv2Conv": CONV},
    "test/nn/conv/test_gin_conv.py": {"GINConv": CONV, "GINEConv": CONV},
    "test/nn/conv/test_graph_conv.py": {"GraphConv": CONV},
    "test/nn/conv/test_edge_conv.py": {"EdgeConv": CONV, "DynamicEdgeConv": CONV},
    "test/nn/conv/test_rgcn_conv.py": {"RGCNConv": CONV, "FastRGCNConv": CONV},
    "test/nn/conv/test_hgt_conv.py": {"HGTConv": CONV},
    # HeteroConv and the layers it wraps that unigraph ships; GCN2Conv and MessagePassing stay PyG's
    "test/nn/conv/test_hetero_conv.py": {"HeteroConv": CONV, "GATConv": CONV, "GCNConv": CONV, "SAGEConv": CONV},
    "test/nn/conv/test_pna_conv.py": {"PNAConv": CONV},
    "test/nn/aggr/test_basic.py": {name: AGGR for name in ("SumAggregation", "MeanAggregation", "MaxAggregation",
                                                            "MinAggregation", "MulAggregation", "VarAggregation",
                                                            "StdAggregation", "SoftmaxAggregation",
                                                            "PowerMeanAggregation")},
    "test/nn/aggr/test_multi.py": {"MultiAggregation": AGGR},
    "test/nn/aggr/test_scaler.py": {"DegreeScalerAggregation": AGGR},
    "test/nn/aggr/test_lstm.py": {"LSTMAggregation": AGGR},
    "test/nn/aggr/test_mlp_aggr.py": {"MLPAggregation": AGGR},
    "test/nn/models/test_basic_gnn.py": {name: MODELS for name in ("GCN", "GraphSAGE", "GIN", "GAT", "EdgeCNN", "PNA")},
    # a user's own layer: PyG's MessagePassing base class (the aggregation modules stay PyG's)
    "test/nn/conv/test_message_passing.py": {"MessagePassing": CONV},
    "test/nn/norm/test_batch_norm.py": {"BatchNorm": CONV},
    "test/nn/norm/test_layer_norm.py": {"LayerNorm": CONV},
    "test/nn/norm/test_graph_norm.py": {"GraphNorm": CONV},
    "test/nn/norm/test_instance_norm.py": {"InstanceNorm": CONV},
    "test/nn/models/test_mlp.py": {"MLP": MODELS},
    "test/nn/models/test_jumping_knowledge.py": {"JumpingKnowledge": MODELS},
    # PyG's models (2026-11-28)
    "test/nn/models/test_autoencoder.py": {"GAE": MODELS, "VGAE": MODELS, "ARGA": MODELS, "ARGVA": MODELS},
    "test/nn/models/test_signed_gcn.py": {"SignedGCN": MODELS},
    "test/nn/models/test_deep_graph_infomax.py": {"DeepGraphInfomax": MODELS},
    "test/nn/models/test_label_prop.py": {"LabelPropagation": MODELS},
    "test/nn/models/test_correct_and_smooth.py": {"CorrectAndSmooth": MODELS},
    "test/nn/models/test_node2vec.py": {"Node2Vec": MODELS},
    "test/nn/models/test_metapath2vec.py": {"MetaPath2Vec": MODELS},
    "test/nn/models/test_deepgcn.py": {"DeepGCNLayer": MODELS},
    "test/nn/models/test_lightgcn.py": {"LightGCN": MODELS},
    "test/nn/models/test_linkx.py": {"LINKX": MODELS},
    "test/nn/models/test_pmlp.py": {"PMLP": MODELS},
    "test/nn/models/test_rect.py": {"RECT_L": MODELS},
    "test/nn/models/test_mask_label.py": {"MaskLabel": MODELS},
    "test/nn/models/test_meta.py": {"MetaLayer": MODELS},
    # PyG's convolutions written on unigraph's MessagePassing (2026-11-28)
    "test/nn/conv/test_cheb_conv.py": {"ChebConv": CONV},
    "test/nn/conv/test_sg_conv.py": {"SGConv": CONV},
    "test/nn/conv/test_ssg_conv.py": {"SSGConv": CONV},
    "test/nn/conv/test_appnp.py": {"APPNP": CONV},
    "test/nn/conv/test_tag_conv.py": {"TAGConv": CONV},
    "test/nn/conv/test_arma_conv.py": {"ARMAConv": CONV},
    "test/nn/conv/test_gcn2_conv.py": {"GCN2Conv": CONV},
    "test/nn/conv/test_lg_conv.py": {"LGConv": CONV},
    "test/nn/conv/test_simple_conv.py": {"SimpleConv": CONV},
    "test/nn/conv/test_mixhop_conv.py": {"MixHopConv": CONV},
    "test/nn/conv/test_cluster_gcn_conv.py": {"ClusterGCNConv": CONV},
    "test/nn/conv/test_le_conv.py": {"LEConv": CONV},
    "test/nn/conv/test_transformer_conv.py": {"TransformerConv": CONV},
    "test/nn/conv/test_agnn_conv.py": {"AGNNConv": CONV},
    "test/nn/conv/test_supergat_conv.py": {"SuperGATConv": CONV},
    "test/nn/conv/test_fa_conv.py": {"FAConv": CONV},
    "test/nn/conv/test_res_gated_graph_conv.py": {"ResGatedGraphConv": CONV},
    "test/nn/conv/test_gated_graph_conv.py": {"GatedGraphConv": CONV},
    "test/nn/conv/test_rgat_conv.py": {"RGATConv": CONV},
    "test/nn/conv/test_gen_conv.py": {"GENConv": CONV},
    "test/nn/conv/test_general_conv.py": {"GeneralConv": CONV},
    "test/nn/conv/test_film_conv.py": {"FiLMConv": CONV},
    "test/nn/conv/test_eg_conv.py": {"EGConv": CONV},
    "test/nn/conv/test_dir_gnn_conv.py": {"DirGNNConv": CONV},
    "test/nn/conv/test_antisymmetric_conv.py": {"AntiSymmetricConv": CONV},
    "test/nn/conv/test_gps_conv.py": {"GPSConv": CONV},
    "test/nn/conv/test_nn_conv.py": {"NNConv": CONV},
    "test/nn/conv/test_cg_conv.py": {"CGConv": CONV},
    "test/nn/conv/test_gmm_conv.py": {"GMMConv": CONV},
    "test/nn/conv/test_spline_conv.py": {"SplineConv": CONV},
    "test/nn/conv/test_pdn_conv.py": {"PDNConv": CONV},
    "test/nn/conv/test_mf_conv.py": {"MFConv": CONV},
    "test/nn/conv/test_feast_conv.py": {"FeaStConv": CONV},
    "test/nn/conv/test_point_conv.py": {"PointNetConv": CONV},
    "test/nn/conv/test_ppf_conv.py": {"PPFConv": CONV},
    "test/nn/conv/test_point_transformer_conv.py": {"PointTransformerConv": CONV},
    "test/nn/conv/test_point_gnn_conv.py": {"PointGNNConv": CONV},
    "test/nn/conv/test_gravnet_conv.py": {"GravNetConv": CONV},
    "test/nn/conv/test_hypergraph_conv.py": {"HypergraphConv": CONV},
    "test/nn/conv/test_signed_conv.py": {"SignedConv": CONV},
    "test/nn/conv/test_dna_conv.py": {"DNAConv": CONV},
    "test/nn/conv/test_wl_conv.py": {"WLConv": CONV},
    "test/nn/conv/test_wl_conv_continuous.py": {"WLConvContinuous": CONV},
    "test/nn/conv/test_heat_conv.py": {"HEATConv": CONV},
    "test/nn/conv/test_han_conv.py": {"HANConv": CONV},
    "test/nn/conv/test_pan_conv.py": {"PANConv": CONV},
}
SUPPORT = ["test/conftest.py"]  # PyG's fixtures (get_dataset, ...)

# our own pytest configuration for the scratch folder (PyG's markers; dataset tests need a download)
PYTEST_INI = """[pytest]
addopts = -m "not rag and not dataset" -p no:cacheprovider
markers =
    rag: RAG test
    dataset: needs a dataset download
filterwarnings =
    ignore::DeprecationWarning
    ignore::UserWarning
"""

STAND_IN = '''

def _unigraph_missing(name):
    class Missing:
        def __init__(self, *args, **kwargs):
            raise NotImplementedError(f"unigraph has no {name} (pyg_swap stand-in)")
    Missing.__name__ = Missing.__qualname__ = name
    return Missing
'''

# failures that test PyG's internals, not behaviour a user relies on: listed with the reason in the table
OUT_OF_SCOPE = {
    "test_gcn_conv_with_decomposed_layers": "PyG internals: decomposed_layers splitting the messages (the fused "
                                            "path has no per-edge tensor to split; a message hook sees them whole) "
                                            "and the width its hook checks (GCNConv aggregates at the narrower "
                                            "width, the input's, where PyG's messages are the projection's); the "
                                            "generated GCNConv_propagate module, TorchScript",
    "test_jit": "TorchScript: the layers resolve their call form and build a Graph in Python, which torch.jit.script "
                "cannot compile (torch.compile works, with no graph breaks)",
    "test_my_conv_save": "PyG internals: the jinja-generated propagate (_jinja_propagate, _orig_propagate) that "
                         "PyG's MessagePassing compiles per class; torch.save/torch.load of the layer itself works",
    "test_pickle": "PyG internals: swaps the class's generated propagate for _orig_propagate before pickling",
    "test_packaging": "torch.package: the test externs PyG's modules by name (pe.extern('torch_geometric.nn.**')); "
                      "unigraph's would need pe.extern('unigraph.**'). Its first half, torch.save/torch.load of the "
                      "model, passes",
}

CATEGORIES = ("missing in unigraph", "TorchScript", "torch.compile graph breaks", "refusal missing",
              "argument not accepted", "raised an error", "repr differs", "result differs", "attribute missing",
              "other")


# ---------------------------------------------------------------------- extracting and rewriting
def git_dir(mirror: str) -> str:
    return os.path.join(mirror, ".git") if os.path.isdir(os.path.join(mirror, ".git")) else mirror


def extract(mirror: str, tag: str, paths: list[str], dest: Path) -> None:
    """``git archive tag paths`` unpacked under ``dest``."""
    archive = subprocess.run(["git", "--git-dir", git_dir(mirror), "archive", tag, *paths],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")


def swap_imports(source: str, swaps: dict[str, str]) -> tuple[str, list[str]]:
    """``source`` with every ``from torch_geometric... import`` of a name in ``swaps`` rewritten to
    import that name from unigraph instead (other names on the line stay PyG's). Returns the new
    text and the names swapped. A name unigraph lacks gets a stand-in (see module docstring)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []  # (first line, last line, replacement) for each import statement touched
    swapped: list[str] = []
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch_geometric"):
            continue
        ours = [a for a in node.names if a.name in swaps]
        if not ours:
            continue
        kept = [a for a in node.names if a.name not in swaps]
        text = ""
        if kept:
            names = ", ".join(a.name if a.asname is None else f"{a.name} as {a.asname}" for a in kept)
            text += f"from {node.module} import {names}\n"
        for alias in ours:
            local = alias.asname or alias.name
            text += (f"try:\n    from {swaps[alias.name]} import {alias.name} as {local}  # pyg_swap\n"
                     f"except ImportError:\n    {local} = _unigraph_missing({alias.name!r})\n")
            swapped.append(alias.name)
        edits.append((node.lineno - 1, node.end_lineno, text))
    for first, last, text in reversed(edits):
        lines[first:last] = [text]
    if not swapped:
        return source, swapped
    # the stand-in factory goes before the first rewritten import (after any __future__ import)
    first = min(first for first, _, _ in edits)
    return "".join(lines[:first]) + STAND_IN + "".join(lines[first:]), swapped


def prepare(out: Path, mirror: str, tag: str, files: list[str], swap: bool) -> dict[str, list[str]]:
    """A fresh copy of the test files (and PyG's conftest) under ``out``, swapped if ``swap``."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    extract(mirror, tag, files + SUPPORT, out)
    (out / "pytest.ini").write_text(PYTEST_INI)
    swapped = {}
    for path in files:
        target = out / path
        if swap:
            text, names = swap_imports(target.read_text(), FILES[path])
            missing = set(FILES[path]) - set(names)
            if missing:
                raise SystemExit(f"{path}: no torch_geometric import of {sorted(missing)} found to swap; "
                                 "the file changed upstream, update FILES")
            target.write_text(text)
            swapped[path] = names
    return swapped


# ---------------------------------------------------------------------- running and reading
def run_file(out: Path, path: str, timeout: float) -> tuple[list[dict], float, str]:
    """One test file in its own pytest process; its test cases from the JUnit XML report."""
    report = out / (path.replace("/", "_") + ".xml")
    cmd = [sys.executable, "-m", "pytest", "-q", "--rootdir", str(out), "-c", str(out / "pytest.ini"),
           f"--junitxml={report}", "-o", "junit_family=xunit1", path]
    # passive OpenMP waiters (as unigraph sets for itself, but pytest imports torch first): on a busy
    # machine spinning waiters make every small op wait for a scheduler slice, for PyG and unigraph alike
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=out, capture_output=True, text=True, timeout=timeout, env=env)
        tail = (proc.stdout + proc.stderr)[-3000:]
    except subprocess.TimeoutExpired:
        tail = f"timed out after {timeout} s"
    seconds = time.perf_counter() - start
    if not report.exists():
        return [{"name": path, "outcome": "failed", "category": "other", "message": tail}], seconds, tail
    return read_junit(report), seconds, tail


def read_junit(report: Path) -> list[dict]:
    cases = []
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name")
        outcome, message, text = "passed", "", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message, text = "failed", child.get("message") or "", child.text or ""
            elif child.tag == "skipped" and outcome == "passed":
                outcome, message = "skipped", child.get("message") or ""
        entry = {"name": name, "outcome": outcome}
        if outcome == "failed":
            entry["category"] = categorize(name, message, text)
            entry["message"] = _short(message or text)
        elif outcome == "skipped":
            entry["message"] = _short(message)
        cases.append(entry)
    return cases


def categorize(name: str, message: str, text: str) -> str:
    """The failure's category from the test name, pytest's one-line message (the exception) and,
    only for the stand-in and graph-break checks, the full traceback text."""
    head = message.strip()
    if "pyg_swap stand-in" in message + text:
        return "missing in unigraph"
    if "jit" in name or "torch.jit" in head or "TorchScript" in head or "__torch__." in head:  # (script's class names)
        return "TorchScript"
    if "graph_break" in name or "graph_break_count" in text:
        return "torch.compile graph breaks"
    if "DID NOT RAISE" in head:
        return "refusal missing"
    if head.startswith("AttributeError"):
        return "attribute missing"
    if re.match(r"TypeError: .*(argument|keyword)", head):
        return "argument not accepted"
    if re.match(r"(TypeError|ValueError|NotImplementedError|RuntimeError): ", head):
        return "raised an error"
    if re.match(r"(AssertionError: )?assert ['\"].*['\"] == ['\"]", head) or re.search(r"assert (str|repr)\(", head):
        return "repr differs"
    if head.startswith(("AssertionError", "assert ")):
        return "result differs"
    return "other"


def _short(message: str, limit: int = 300) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 3] + "..."


def summarize(cases: list[dict]) -> dict:
    counts = {k: sum(c["outcome"] == k for c in cases) for k in ("passed", "failed", "skipped")}
    categories: dict[str, int] = {}
    for case in cases:
        if case["outcome"] == "failed":
            categories[case["category"]] = categories.get(case["category"], 0) + 1
    return {**counts, "categories": categories}


GROUP_NAMES = 40  # test names kept per group of identical failures (the rest counted)


def group(cases: list[dict], outcome: str) -> list[dict]:
    """Cases of one outcome grouped by (category, message): parametrized tests failing alike
    make one entry with their count and (up to GROUP_NAMES) names."""
    groups: dict[tuple, dict] = {}
    for case in cases:
        if case["outcome"] != outcome:
            continue
        key = (case.get("category", ""), case["message"])
        entry = groups.setdefault(key, {"category": key[0], "message": key[1], "count": 0, "tests": []})
        entry["count"] += 1
        if len(entry["tests"]) < GROUP_NAMES:
            entry["tests"].append(case["name"])
    out = sorted(groups.values(), key=lambda g: -g["count"])
    if outcome == "skipped":
        for entry in out:
            del entry["category"]
    return out


# ---------------------------------------------------------------------- the table
def write_table(results: dict, reference: dict | None, meta: dict, md: Path, js: Path) -> None:
    md.parent.mkdir(parents=True, exist_ok=True)
    js.write_text(json.dumps({"meta": meta, "unigraph": results, "pyg": reference}, indent=1) + "\n")
    head = "| file | classes from unigraph | passed | failed | skipped |"
    rule = "| --- | --- | ---: | ---: | ---: |"
    if reference:
        head += " PyG itself (passed / failed) |"
        rule += " ---: |"
    baseline_file = md.parent / "pyg_tests_baseline.json"  # before issue 26, for a "before" column
    baseline = (json.loads(baseline_file.read_text())["unigraph"]
                if baseline_file.exists() and md.name == "pyg_tests.md" else None)
    if baseline:
        head += " before (passed / failed) |"
        rule += " ---: |"
    lines = ["# PyG's own tests with unigraph's classes", "",
             f"PyG tag `{meta['tag']}` test files, only the import of the classes under test swapped to unigraph "
             f"(`benchmarks/peer_tests/pyg_swap.py`). Run {meta['date']} on {meta['machine']}, "
             f"Python {meta['python']}, torch {meta['torch']}, torch_geometric {meta['torch_geometric']}."
             + (f" {meta['note']}." if meta.get("note") else ""), "",
             head, rule]
    total = {"passed": 0, "failed": 0, "skipped": 0}
    for path, entry in results.items():
        s = entry["summary"]
        for k in total:
            total[k] += s[k]
        row = (f"| `{path.split('/')[-1]}` | {', '.join(entry['classes'])} | {s['passed']} | {s['failed']} | "
               f"{s['skipped']} |")
        if reference:
            r = reference[path]["summary"]
            row += f" {r['passed']} / {r['failed']} |"
        if baseline:
            b = baseline.get(path, {}).get("summary")
            row += f" {b['passed']} / {b['failed']} |" if b else " |"
        lines.append(row)
    row = f"| **total** | | **{total['passed']}** | **{total['failed']}** | {total['skipped']} |"
    if reference:
        row += (f" {sum(r['summary']['passed'] for r in reference.values())} / "
                f"{sum(r['summary']['failed'] for r in reference.values())} |")
    if baseline:
        row += (f" {sum(b['summary']['passed'] for b in baseline.values())} / "
                f"{sum(b['summary']['failed'] for b in baseline.values())} |")
    out_of_scope = sum(1 for entry in results.values() for group in entry["failures"]
                       if group["count"] == 1 and group["tests"][0].split("[")[0] in OUT_OF_SCOPE)
    lines += [row, "", f"{out_of_scope} of the {total['failed']} failures test PyG's internals (marked out of scope "
              "below, with the reason). Skips are PyG's own (missing optional packages, `FULL_TEST`).", "",
              "## Failures by category", ""]
    categories: dict[str, int] = {}
    for entry in results.values():
        for k, v in entry["summary"]["categories"].items():
            categories[k] = categories.get(k, 0) + v
    lines += [f"- {k}: {categories[k]}" for k in CATEGORIES if k in categories] or ["- none"]
    lines += ["", "## Failed tests", ""]
    for path, entry in results.items():
        failed = entry["failures"]
        if not failed:
            continue
        lines.append(f"### `{path.split('/')[-1]}`")
        lines.append("")
        for entry in failed:
            names = ", ".join(f"`{n}`" for n in entry["tests"][:3])
            more = f" and {entry['count'] - 3} more" if entry["count"] > 3 else ""
            reason = OUT_OF_SCOPE.get(entry["tests"][0].split("[")[0]) if entry["count"] == 1 else None
            why = f" **Out of scope**: {reason}." if reason else ""
            lines.append(f"- {names}{more} ({entry['category']}): {entry['message'][:200]}{why}")
        lines.append("")
    md.write_text("\n".join(lines).rstrip() + "\n")


def run_all(out: Path, files: list[str], timeout: float, label: str) -> dict:
    results = {}
    for path in files:
        cases, seconds, tail = run_file(out, path, timeout)
        summary = summarize(cases)
        print(f"[{label}] {path}: {summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} "
              f"skipped ({seconds:.0f} s)", flush=True)
        results[path] = {"classes": sorted(FILES[path]), "summary": summary, "seconds": round(seconds, 1),
                         "failures": group(cases, "failed"), "skips": group(cases, "skipped")}
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", default=MIRROR)
    parser.add_argument("--tag", default=TAG)
    parser.add_argument("--out", default="/tmp/pyg_tests", help="scratch folder (outside the project)")
    parser.add_argument("--results", default=str(Path(__file__).resolve().parents[1] / "results"))
    parser.add_argument("--only", nargs="*", help="file names to run (e.g. test_gcn_conv.py)")
    parser.add_argument("--reference", action="store_true", help="also run PyG's unmodified files")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per file")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--table-only", action="store_true", help="rewrite the .md from the saved .json, run nothing")
    args = parser.parse_args(argv)
    if args.table_only:
        saved = json.loads((Path(args.results) / "pyg_tests.json").read_text())
        write_table(saved["unigraph"], saved["pyg"], saved["meta"], Path(args.results) / "pyg_tests.md",
                    Path(args.results) / "pyg_tests.json")
        return

    out = Path(args.out).resolve()
    project = Path(__file__).resolve().parents[2]
    if out == project or project in out.parents:
        raise SystemExit(f"--out {out} is inside the project; PyG's files must stay outside it")
    files = [p for p in FILES if not args.only or p.split("/")[-1] in args.only]
    if not files:
        raise SystemExit(f"--only {args.only} matches none of {[p.split('/')[-1] for p in FILES]}")

    import torch
    import torch_geometric
    meta = {"tag": args.tag, "date": time.strftime("%Y-%m-%d"), "machine": platform.machine() + " " + platform.node(),
            "python": platform.python_version(), "torch": torch.__version__,
            "torch_geometric": torch_geometric.__version__}
    reference = None
    try:
        if args.reference:
            prepare(out / "pyg", args.mirror, args.tag, files, swap=False)
            reference = run_all(out / "pyg", files, args.timeout, "pyg")
        prepare(out / "unigraph", args.mirror, args.tag, files, swap=True)
        results = run_all(out / "unigraph", files, args.timeout, "unigraph")
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    suffix = "" if not args.only else "_partial"
    write_table(results, reference, meta, Path(args.results) / f"pyg_tests{suffix}.md",
                Path(args.results) / f"pyg_tests{suffix}.json")
    print(f"wrote {Path(args.results) / f'pyg_tests{suffix}.md'}")


if __name__ == "__main__":
    main()
