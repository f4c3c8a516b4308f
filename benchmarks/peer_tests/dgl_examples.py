"""DGL's own examples (``examples/pytorch/gcn``, ``gat``, ``graphsage``) run twice, on the real
DGL and with ``dgl`` resolved to ``unigraph.dgl``, and their test accuracies side by side.

    python -m benchmarks.peer_tests.dgl_examples --runs 3            # every example, both libraries
    python -m benchmarks.peer_tests.dgl_examples --examples gcn --datasets cora --peers unigraph

The example files are extracted from the DGL snapshot into ``--work`` (outside this repository)
and run unmodified, with two exceptions, both printed in the report:

* the Planetoid examples read Cora/CiteSeer through ``dgl.data`` from ``$DGL_DOWNLOAD_DIR``
  (``--planetoid``), which unigraph's ``dgl.data`` reads as local Planetoid files; the real DGL's
  ``dgl.data`` would download them, so for DGL's runs the ``CoraGraphDataset(...)`` /
  ``CiteseerGraphDataset(...)`` call is replaced by the same data through
  :mod:`benchmarks.peer_tests.planetoid_for_dgl` (one expression per file, the ``transform`` kept);
* the mini-batch GraphSAGE example (``graphsage/node_classification.py``) loads ogbn-products with
  ``ogb``: its two ``DglNodePropPredDataset`` lines are replaced by the generated stand-in of
  :mod:`benchmarks.peer_tests.products_like` (same degree, features, classes and split, fewer
  nodes: ``UNIGRAPH_PRODUCTS_SCALE``), built through the ``dgl`` in use.

unigraph's runs put the shim package of :mod:`benchmarks.peer_tests.dgl_shim` first on ``PYTHONPATH`` (see its
docstring); DGL's runs import the real DGL with the graphbolt stub of ``benchmarks/peers.py``.
Accuracies vary with the seed in both libraries: compare means over ``--runs``.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

from benchmarks.peer_tests import dgl_shim

PROJECT = pathlib.Path(__file__).resolve().parents[2]
OGB_IMPORT = "from ogb.nodeproppred import DglNodePropPredDataset\n"
OGB_DATASET = 'AsNodePredDataset(DglNodePropPredDataset("ogbn-products"))'
STAND_IN = "__import__('benchmarks.peer_tests.products_like', fromlist=['x']).dataset(dgl)"
# example name -> (file, arguments per dataset, dataset names)
EXAMPLES = {
    "gcn": ("gcn/train.py", lambda d: ["--dataset", d], ("cora", "citeseer")),
    "gat": ("gat/train.py", lambda d: ["--dataset", d], ("cora", "citeseer")),
    "sage_full": ("graphsage/train_full.py", lambda d: ["--dataset", d], ("cora", "citeseer")),
    "sage_minibatch": ("graphsage/node_classification.py", lambda d: ["--mode", "cpu"], ("products_like",)),
}
# test accuracy DGL's README files state for the Planetoid examples (v2.1.0), for runs DGL cannot
# make here (its dgl.data downloads the datasets)
DGL_README = {("gcn", "cora"): "~0.810", ("gcn", "citeseer"): "~0.707", ("gat", "cora"): "~0.821",
              ("gat", "citeseer"): "~0.710", ("sage_full", "cora"): "~0.8330", ("sage_full", "citeseer"): "~0.7110"}
# the runner of one example: DGL's graphbolt stub for the real DGL, nothing for the shim
RUNNER = ("import runpy, sys, types\n"
          "if {real}: sys.modules.setdefault('dgl.graphbolt', types.ModuleType('dgl.graphbolt'))\n"
          "import torch; torch.manual_seed({seed})\n"
          "import dgl; dgl.seed({seed})\n"
          "sys.argv = {argv!r}\n"
          "runpy.run_path({path!r}, run_name='__main__')\n")


def extract(repo: str, tag: str, work: pathlib.Path) -> pathlib.Path:
    if PROJECT in work.resolve().parents or work.resolve() == PROJECT:
        raise SystemExit(f"--work {work} is inside this repository; DGL's files must stay outside it")
    git_dir = repo if (pathlib.Path(repo) / "HEAD").exists() else str(pathlib.Path(repo) / ".git")
    target = work / f"dgl-examples-{tag}"
    target.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "--git-dir", git_dir, "archive", tag, "examples/pytorch/gcn",
                              "examples/pytorch/gat", "examples/pytorch/graphsage"], check=True, capture_output=True).stdout
    with tempfile.TemporaryFile() as handle:
        handle.write(archive)
        handle.seek(0)
        with tarfile.open(fileobj=handle) as tar:
            tar.extractall(target, filter="data")
    minibatch = target / "examples/pytorch/graphsage/node_classification.py"
    text = minibatch.read_text()
    if OGB_IMPORT in text and OGB_DATASET in text:
        minibatch.with_name("node_classification_standin.py").write_text(
            text.replace(OGB_IMPORT, "").replace(OGB_DATASET, STAND_IN))
    return target / "examples/pytorch"


PLANETOID_CALL = re.compile(r"(Cora|Citeseer)GraphDataset\(transform=transform\)")
PLANETOID_FOR_DGL = ("__import__('benchmarks.peer_tests.planetoid_for_dgl', fromlist=['x']).dataset(dgl, '{name}', "
                     "transform)")


def dgl_copy(path: pathlib.Path) -> pathlib.Path:
    """The Planetoid example with its dataset call reading the local files for the real DGL."""
    text = PLANETOID_CALL.sub(lambda m: PLANETOID_FOR_DGL.format(name=m.group(1).lower()), path.read_text())
    copy = path.with_name(path.stem + "_dgl_local.py")
    copy.write_text(text)
    return copy


def run_one(root: pathlib.Path, example: str, dataset: str, peer: str, seed: int, planetoid: str,
            timeout: int) -> dict:
    file, arguments, _ = EXAMPLES[example]
    path = root / file
    if example == "sage_minibatch":
        path = path.with_name("node_classification_standin.py")
    elif peer == "dgl":
        path = dgl_copy(path)
    env = dict(os.environ, DGLBACKEND="pytorch", DGL_DOWNLOAD_DIR=planetoid,
               PYTHONPATH=os.pathsep.join(([str(dgl_shim.write(root.parent.parent / "shim"))] if peer == "unigraph"
                                           else []) + [str(PROJECT)]))
    code = RUNNER.format(real=peer == "dgl", seed=seed, argv=[str(path)] + arguments(dataset), path=str(path))
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=path.parent, env=env, capture_output=True,
                              text=True, timeout=timeout)
        output, status = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired:
        output, status = f"timed out after {timeout} s", -1
    found = re.findall(r"Test [Aa]ccuracy:? ([0-9.]+)", output)
    return {"example": example, "dataset": dataset, "peer": peer, "seed": seed, "seconds": time.perf_counter() - started,
            "accuracy": float(found[-1]) if found else None,
            "error": None if found and status == 0 else output.strip().splitlines()[-1][:300] if output.strip() else
            f"exit {status}"}


def write(results: list[dict], out: pathlib.Path, meta: dict) -> None:
    lines = ["# DGL's examples on the real DGL and on `unigraph.dgl`", "",
             f"`python -m benchmarks.peer_tests.dgl_examples` ({meta['date']}, n seeds per row, CPU). "
             "The example files are DGL's, unmodified for unigraph.dgl except the mini-batch GraphSAGE example's "
             "dataset (ogbn-products through `ogb` replaced by the generated stand-in of "
             f"`benchmarks/peer_tests/products_like.py` at scale {meta['products_scale']}); for the real DGL the "
             "Planetoid dataset call reads the same local files (`benchmarks/peer_tests/planetoid_for_dgl.py`: "
             "DGL's `dgl.data` downloads). Seconds per run are wall times on a shared machine at the load it had at "
             "the time of each run (they include imports and evaluation every epoch): not a speed comparison.", "",
             "| example | dataset | DGL's README | DGL test accuracy | unigraph.dgl test accuracy | DGL s/run | "
             "unigraph s/run |",
             "| --- | --- | --- | --- | --- | ---: | ---: |"]
    keys = sorted({(r["example"], r["dataset"]) for r in results}, key=lambda k: (list(EXAMPLES).index(k[0]), k[1]))
    for example, dataset in keys:
        cells = []
        for peer in ("dgl", "unigraph"):
            runs = [r for r in results if (r["example"], r["dataset"], r["peer"]) == (example, dataset, peer)]
            accs = [r["accuracy"] for r in runs if r["accuracy"] is not None]
            if not runs:
                cells.append(("not run", ""))
            elif not accs:
                cells.append((f"failed: {runs[0]['error']}", ""))
            else:
                spread = f" ± {statistics.stdev(accs):.3f}" if len(accs) > 1 else ""
                cells.append((f"{statistics.mean(accs):.3f}{spread} (n={len(accs)})",
                              f"{statistics.mean(r['seconds'] for r in runs):.0f}"))
        lines.append(f"| {example} | {dataset} | {DGL_README.get((example, dataset), '-')} | {cells[0][0]} | "
                     f"{cells[1][0]} | {cells[0][1]} | {cells[1][1]} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "runs": results}, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dgl-repo", default="/work/.mirror/dmlc+dgl/repo")
    parser.add_argument("--tag", default="v2.1.0")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "unigraph_dgl_examples"))
    parser.add_argument("--planetoid", default=os.environ.get("DGL_DOWNLOAD_DIR", "/work/shared/datasets/planetoid"),
                        help="folder holding the Planetoid raw files (DGL_DOWNLOAD_DIR for the examples)")
    parser.add_argument("--examples", nargs="+", default=list(EXAMPLES), choices=list(EXAMPLES))
    parser.add_argument("--datasets", nargs="+", default=None, help="Planetoid datasets (default: cora citeseer)")
    parser.add_argument("--peers", nargs="+", default=["dgl", "unigraph"], choices=["dgl", "unigraph"])
    parser.add_argument("--runs", type=int, default=1, help="seeds per example and library")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + runs - 1")
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--out", default=str(PROJECT / "benchmarks" / "results" / "dgl_examples"))
    parser.add_argument("--keep", action="store_true", help="add to the runs already in --out.json")
    args = parser.parse_args(argv)
    root = extract(args.dgl_repo, args.tag, pathlib.Path(args.work))
    out = pathlib.Path(args.out)
    results = json.loads(out.with_suffix(".json").read_text())["runs"] if args.keep and out.with_suffix(
        ".json").exists() else []
    meta = {"date": time.strftime("%Y-%m-%d"), "runs": args.runs, "tag": args.tag,
            "products_scale": os.environ.get("UNIGRAPH_PRODUCTS_SCALE", "0.02")}
    for example in args.examples:
        datasets = EXAMPLES[example][2] if example == "sage_minibatch" or not args.datasets else args.datasets
        for dataset in datasets:
            for seed in range(args.first_seed, args.first_seed + args.runs):
                for peer in args.peers:
                    result = run_one(root, example, dataset, peer, seed, args.planetoid, args.timeout)
                    results.append(result)
                    print(f"{example} {dataset} {peer} seed {seed}: accuracy {result['accuracy']} "
                          f"({result['seconds']:.0f} s){' ' + result['error'] if result['error'] else ''}", flush=True)
                    write(results, out, meta)  # after every run: a long session keeps what it measured
    print(f"wrote {args.out}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
