"""The GPU run's tests step: the tests on CUDA, in two pytest runs (:data:`PARTS`).

* ``gpu-marked``: the tests that need a GPU (``@pytest.mark.gpu`` outside the property modules:
  half precision, large and hub graphs, ``auto`` choosing Triton, GPU sampling), with Triton's
  autotuning on, as users run it (every configuration of every kernel compiled and timed).
* ``properties``: the property tests on CUDA: every backend (scatter, sparse, triton_node,
  triton_edge, auto) in float64/float32/float16/bfloat16 against float64 references, forward and
  backward, with hub, empty and bipartite graphs (``tests/ops/test_device_backends.py``), and the
  Triton kernels' own suite (``tests/test_triton_kernels.py``, float64 on the GPU), under the
  bounded hypothesis profile ``gpu`` and with ``UNIGRAPH_TRITON_TUNING=off`` (hundreds of small
  shapes: autotuning each would take minutes; the first configuration of every kernel is checked
  here, all of them at scale in ``gpu-marked``).

pytest-xdist spreads each part over the machine's cores where it is installed (Triton compiles on
the CPU). Each part gets a share of the step's budget (the second also what the first left), a
per-test timeout, and reports through :mod:`benchmarks.gpu.pytest_progress` into a JSON that this
step merges into its own file while pytest runs. :data:`GPU_TEST_FILES` must name every test
file with a ``mark.gpu`` test (``tests/test_gpu_run.py`` checks it).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile

from benchmarks.gpu.common import Interrupted, log, repo_root, step_main

STEP = "tests"


@dataclasses.dataclass(frozen=True)
class Part:
    name: str
    targets: tuple[str, ...]
    env: dict
    share: float                 # of the step's budget (the last part takes what is left)
    workers: int                 # pytest-xdist processes (0: none)
    dry_run_k: str | None = None  # the dry run's -k selection (None: every test, all skipped on the CPU)


PARTS = (
    Part("gpu-marked",
         ("tests/test_triton_gpu.py", "tests/test_sampling_neighbor.py::test_gpu_blocks_equal_cpu_blocks",
          "tests/test_graph.py::test_degree_counts_statistics_and_csr_on_a_gpu_equal_the_cpu_and_count_without_waiting"),
         {}, share=0.5, workers=8),  # 14 tests, ~72 s of compiling and running in all
    Part("properties", ("tests/ops/test_device_backends.py", "tests/test_triton_kernels.py"),
         {"UNIGRAPH_TRITON_TUNING": "off"}, share=1.0, workers=8,
         dry_run_k="(test_fixed_graphs and bipartite and float16) or test_float32_matches_float64_reference"),
)
# every test file holding a mark.gpu test (the guard test greps for them)
GPU_TEST_FILES = ("tests/test_triton_gpu.py", "tests/test_sampling_neighbor.py", "tests/ops/test_device_backends.py",
                  "tests/test_graph.py")
TEST_TIMEOUT_S = {"gpu": 120, "dry_run": 300}
STOP_GRACE_S = 10


def pytest_command(part: Part, progress: pathlib.Path, dry_run: bool) -> list[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-p",
               "benchmarks.gpu.pytest_progress", "--progress-json", str(progress),
               "--timeout", str(TEST_TIMEOUT_S["dry_run" if dry_run else "gpu"]), *part.targets]
    if dry_run and part.dry_run_k:
        command += ["-k", part.dry_run_k]
    if part.workers and not dry_run and importlib.util.find_spec("xdist") is not None:
        command += ["-n", str(min(part.workers, os.cpu_count() or 1))]
    return command


def part_environment(part: Part, dry_run: bool) -> dict[str, str]:
    env = {**os.environ, **part.env, "UNIGRAPH_HYPOTHESIS_PROFILE": "dry_run" if dry_run else "gpu"}
    if dry_run:
        env["UNIGRAPH_DEVICE_TESTS"] = "1"  # tests/ops/test_device_backends.py on the CPU, interpreted
    return env


def read_progress(path: pathlib.Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def run_part(part: Part, budget_s: float, results, dry_run: bool, scratch: pathlib.Path) -> None:
    progress = scratch / f"{part.name}.json"
    command = pytest_command(part, progress, dry_run)
    log(STEP, f"{part.name}: {' '.join(command[3:])} (budget {budget_s:.0f} s)")
    record = results["parts"][part.name] = {"command": command[1:], "budget_s": round(budget_s, 1),
                                            "env": part.env, "status": "running"}
    process = subprocess.Popen(command, cwd=repo_root(), env=part_environment(part, dry_run))
    waited = 0.0
    try:
        while True:
            try:
                record["exit_code"] = process.wait(timeout=3.0)
                break
            except subprocess.TimeoutExpired:
                waited += 3.0
                record.update(read_progress(progress) or {})
                results.save()
                if waited >= budget_s:
                    record["timed_out"] = True
                    log(STEP, f"{part.name}: over its budget, stopping pytest")
                    _stop(process)
                    record["exit_code"] = process.returncode
                    break
    except Interrupted:
        _stop(process)
        raise
    finally:
        record.update(read_progress(progress) or {})
        record["status"] = "timed out" if record.get("timed_out") else record.get("status", "unknown")
        results.save()
    log(STEP, f"{part.name}: {record.get('status')}, exit code {record.get('exit_code')}, "
              f"counts {record.get('counts')}")


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM (pytest_progress ends the session and writes), then SIGKILL after a grace."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def body(results, deadline, dry_run: bool) -> None:
    results["parts"] = {}
    results["hypothesis_profile"] = "dry_run" if dry_run else "gpu"
    with tempfile.TemporaryDirectory(prefix="unigraph-gpu-tests-") as scratch:
        for part in PARTS:
            budget = deadline.left() * part.share - 2
            if budget < 10:
                results["parts"][part.name] = {"status": "skipped", "reason": f"{deadline.left():.0f} s left"}
                log(STEP, f"{part.name}: skipped, {deadline.left():.0f} s left")
                continue
            run_part(part, budget, results, dry_run, pathlib.Path(scratch))
    counts: dict[str, int] = {}
    for record in results["parts"].values():
        for outcome, n in (record.get("counts") or {}).items():
            counts[outcome] = counts.get(outcome, 0) + n
    results["counts"] = counts
    log(STEP, f"all parts: {counts}")


if __name__ == "__main__":
    sys.exit(step_main(STEP, __doc__, body))
