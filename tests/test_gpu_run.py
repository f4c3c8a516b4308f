"""The prepared GPU run (``benchmarks/gpu/run.sh``) as a CPU dry run: the guard that a GPU machine's
few minutes are never lost to a typo. Runs the very command the GPU machine runs, with
``--dry-run`` (tiny sizes, ``TRITON_INTERPRET=1``, CUDA hidden), then ``benchmarks.gpu.ingest`` on
its folder into temporary targets; checks every file, every step's status and what ingest makes of
them (results, the GPU cost model's constants file as ``auto`` reads it, refitted exactly, and the
README block)."""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from benchmarks.gpu import ingest, run, summary
from unigraph.backends import cost_model
from unigraph.benchmarking import cost_fit

ROOT = pathlib.Path(__file__).resolve().parents[1]
DRY_RUN_TIMEOUT_S = 900  # ~60 s alone on the 2-core machine; minutes when it is shared


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("gpu-run") / "out"
    env = {**os.environ, "PYTHON": sys.executable}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([str(ROOT / "benchmarks" / "gpu" / "run.sh"), str(out), "--dry-run"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=DRY_RUN_TIMEOUT_S)
    assert done.returncode == 0, f"dry run failed:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    return out


def test_the_dry_run_writes_the_eight_files_and_every_step_succeeds(dry_run):
    assert sorted(p.name for p in dry_run.iterdir()) == sorted(run.OUTPUT_FILES)
    record = json.loads((dry_run / "run.json").read_text())
    assert record["dry_run"] and [s["name"] for s in record["steps"]] == [s.name for s in run.STEPS]
    assert all(s["status"] == "ok" and s["exit_code"] == 0 for s in record["steps"]), record["steps"]
    for step in run.STEPS:
        data = json.loads((dry_run / step.file).read_text())
        assert data["status"] == "ok" and data["step"] == step.name and data["dry_run"], step.name
    log = (dry_run / "run.log").read_text()
    for step in run.STEPS:  # timestamped progress of every step
        assert re.search(rf"^\d\d:\d\d:\d\d \+ *[\d.]+s \[{step.name}\] end: ok", log, re.M), step.name
    assert "**DRY RUN**" in (dry_run / "summary.md").read_text()


def test_the_dry_run_exercises_every_part(dry_run):
    tests = json.loads((dry_run / "tests.json").read_text())
    assert set(tests["parts"]) == {"gpu-marked", "properties"}
    assert tests["counts"].get("passed", 0) > 0 and not tests["counts"].get("failed")
    suite = json.loads((dry_run / "kernels.json").read_text())["suite"]
    peers = {p for c in suite["cases"] for p in c["timings_ms"]} & {"pyg", "pyg_compiled", "torch_sparse_csr"}
    assert peers == {"pyg", "pyg_compiled", "torch_sparse_csr"}, "every GPU peer was timed"
    assert suite["bandwidth"]["kind"] == "device_copy"
    tuning = json.loads((dry_run / "tuning.json").read_text())
    assert tuning["cost_fit"]["status"] == "ok" and tuning["auto_tune"]["cases"]
    assert tuning["triton_configs"]["status"] == "ok" and tuning["triton_configs"]["kernels"]
    e2e = json.loads((dry_run / "e2e.json").read_text())
    assert e2e["full_batch"]["groups"] and e2e["mini_batch"]["status"] == "ok"
    # where a step's time goes, per row (the next GPU run's answer to "why slower on small graphs")
    profile = e2e["profile"]
    assert set(profile) == {"gcn full batch, cora_like", "gat full batch, cora_like", "GraphSAGE mini-batch step"}
    for rows in profile.values():
        assert len(rows) >= 2 and all(p["top"] and p["aten_calls_per_step"] > 0 for p in rows.values())
    assert "### Profile: GraphSAGE mini-batch step" in (dry_run / "summary.md").read_text()


def test_ingest_turns_the_folder_into_results_constants_and_readme_rows(dry_run, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text((ROOT / "README.md").read_text())
    constants = tmp_path / "cost_constants_cuda.json"
    results = tmp_path / "results"
    with pytest.raises(SystemExit, match="dry run"):  # never into the committed files
        ingest.main([str(dry_run)])
    with pytest.raises(SystemExit):
        ingest.main([str(dry_run), "--allow-dry-run"])
    ingest.main([str(dry_run), "--allow-dry-run", "--results-dir", str(results), "--constants", str(constants),
                 "--readme", str(readme)])
    for name in ("kernels_cuda.json", "kernels_cuda.md", "kernels_cuda.png", "gpu_run_cuda.json", "gpu_run_cuda.md",
                 "selector_crossval_cuda.md"):
        assert (results / name).stat().st_size > 0, name
    document = json.loads(constants.read_text())
    fwd, grad = (cost_model._gpu_rows(document, table) for table in ("rows", "rows_with_backward"))  # auto can read it
    assert set(fwd) == set(cost_model.GPU_BACKENDS) and set(grad) == set(cost_model.GPU_BACKENDS)
    refit = cost_fit.fit_gpu_constants([json.loads((results / "kernels_cuda.json").read_text())],
                                       [str(results / "kernels_cuda.json")], require_gpu=False)
    assert cost_fit.render(refit) == constants.read_text(), "the constants refit exactly from the results file"
    before, after = (ROOT / "README.md").read_text(), readme.read_text()
    assert after != before and "| the run: environment ok" in after
    outside = re.compile(re.escape(ingest.BEGIN) + ".*?" + re.escape(ingest.END), re.S)
    assert outside.sub("", after) == outside.sub("", before), "only the generated block changes"


def test_ingest_takes_extra_suites_of_the_same_gpu_into_the_fit_and_refuses_others(dry_run, tmp_path):
    suite = json.loads((dry_run / "kernels.json").read_text())["suite"]
    extra = tmp_path / "kernels_cuda_dense.json"
    extra.write_text(json.dumps(suite))
    targets = ["--allow-dry-run", "--results-dir", str(tmp_path / "results"), "--constants",
               str(tmp_path / "constants.json"), "--readme", str(tmp_path / "README.md")]
    (tmp_path / "README.md").write_text((ROOT / "README.md").read_text())
    ingest.main([str(dry_run), "--extra-suite", str(extra)] + targets)
    fitted_on = [entry["file"] for entry in json.loads((tmp_path / "constants.json").read_text())["fitted_on"]]
    assert [pathlib.Path(f).name for f in fitted_on] == ["kernels_cuda.json", "kernels_cuda_dense.json"]
    assert "Held out across the suites" in (tmp_path / "results" / "selector_crossval_cuda.md").read_text()
    assert "`kernels_cuda_dense.md`" in (tmp_path / "README.md").read_text()
    wrong_name = tmp_path / "dense.json"
    wrong_name.write_text(json.dumps(suite))
    other_gpu = tmp_path / "kernels_cuda_other.json"
    other_gpu.write_text(json.dumps({**suite, "machine": {**suite["machine"], "device": "cuda", "gpu": "another GPU"}}))
    for path, message in ((wrong_name, "expected a kernels_cuda_"), (other_gpu, "measured on another GPU")):
        with pytest.raises(SystemExit, match=message):
            ingest.main([str(dry_run), "--extra-suite", str(path)] + targets)


def test_committed_gpu_constants_refit_exactly():
    """Once a GPU run is committed: its constants are what the committed suite gives."""
    committed = ROOT / "backends" / "cost_constants_cuda.json"
    if not committed.exists():
        pytest.skip("no GPU run committed yet (backends/cost_constants_cuda.json)")
    sources = [entry["file"] for entry in json.loads(committed.read_text())["fitted_on"]]
    assert sources[0] == "benchmarks/results/kernels_cuda.json"
    refit = cost_fit.fit_gpu_constants([json.loads((ROOT / source).read_text()) for source in sources], sources)
    assert cost_fit.render(refit) == committed.read_text()


def test_summary_reads_a_partial_folder(tmp_path):
    """A run killed early leaves some files: the summary says what is missing instead of failing."""
    (tmp_path / "run.json").write_text(json.dumps({"command": "x", "steps": [], "dry_run": False}))
    text = summary.markdown(summary.load(tmp_path))
    assert "## Tests" in text and "No results" in text and "No suite results" in text


def test_the_host_profile_dry_run_reports_every_group(tmp_path):
    """``benchmarks/gpu/host_profile.py``, run on a warm GPU machine beside the prepared run, as a
    dry run: every group's line and tables."""
    out = tmp_path / "host_profile.txt"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu.host_profile", str(out), "--dry-run"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=DRY_RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text()
    for group in ("gcn full batch", "gat full batch", "GraphSAGE mini-batch step", "GAT op forward+backward"):
        assert re.search(rf"^## {re.escape(group)}.*: [\d.]+ ms / step unprofiled", text, re.M), group
    assert text.count("### own time, per step") == text.count("### unigraph's functions, cumulative, per step") >= 8


def test_the_ab_step_dry_run_times_both_variants_and_undoes_its_patch(tmp_path):
    """``benchmarks/gpu/ab_step.py`` (a change beside its baseline on one GPU machine), as a dry run
    in this process: both variants timed, the patch applied only around the patched steps."""
    import torch.nn.functional as F
    from benchmarks.gpu import ab_step
    original, seen = F.cross_entropy, []

    def recording(*args, **kwargs):
        seen.append(1)
        return original(*args, **kwargs)
    ab_step.recording_for_test = recording
    try:
        out = tmp_path / "ab.md"
        ab_step.main([str(out), "--dry-run", "--patch",
                      "torch.nn.functional.cross_entropy=benchmarks.gpu.ab_step.recording_for_test"])
    finally:
        del ab_step.recording_for_test
    assert F.cross_entropy is original and len(seen) == 2   # the patched variant's warm-up and timed step
    text = out.read_text()
    for variant in ("as is", "patched"):
        assert re.search(rf"^\| {variant} \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$", text, re.M), variant
    assert "patched / as is" in text
    from unigraph.message_passing.base import MessagePassing
    fast_path = MessagePassing.__dict__["_weighted_copy"]
    ab_step.main([str(out), "--dry-run", "--step", "gcn", "--patch",   # a class's method, switched off
                  "unigraph.message_passing.base.MessagePassing._weighted_copy=benchmarks.gpu.ab_step.no_fast_path"])
    assert MessagePassing.__dict__["_weighted_copy"] is fast_path and "full-batch GCN" in out.read_text()
    with pytest.raises(SystemExit, match="no attribute"):
        ab_step.main([str(out), "--dry-run", "--patch", "unigraph.graph.no_such=benchmarks.gpu.ab_step.bincount_count"])
