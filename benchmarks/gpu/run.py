"""The prepared GPU run: verify, tune and benchmark the Triton kernels in one command, within a
fixed time, writing at most 8 files into OUTDIR.

    benchmarks/gpu/run.sh OUTDIR                  # on the GPU machine (installs, then runs this)
    python -m benchmarks.gpu.run OUTDIR --dry-run # the same steps on the CPU, tiny sizes (tests)

Steps (:data:`STEPS`), each a process of its own with its own time budget, so that a failure or
a timeout in one does not stop the others:

=============  ==================  ===========================================================
step           file                what
=============  ==================  ===========================================================
environment    environment.json    versions, device, SM count, measured device-copy bandwidth
tests          tests.json          GPU-marked tests and the property tests on CUDA, every
                                   backend and dtype against float64 references
kernels        kernels.json        the kernel suite per density beside cuSPARSE (torch.sparse
                                   CSR), PyG and PyG under torch.compile, GB/s vs the bandwidth
tuning         tuning.json         the GPU cost model fitted to ``kernels.json`` with auto's
                                   held-out regret; Triton configurations swept; auto-tune
e2e            e2e.json            GAT and GCN full batch (Cora- and arxiv-sized generated
                                   graphs), a mini-batch GraphSAGE step: unigraph vs PyG
=============  ==================  ===========================================================

and the runner's own ``run.json`` (every step's status, exit code, wall time and budget),
``summary.md`` (rewritten after every step) and ``run.log`` (every line every step printed,
timestamped). ``python -m benchmarks.gpu.ingest OUTDIR`` turns them into committed results.

Budgets: each step gets ``budget_s`` (times ``--budget-scale``), capped by what is left of the
whole (:data:`TOTAL_BUDGET_S`). The step is told ``budget - STEP_MARGIN_S`` and plans to end by
then; at ``budget - KILL_GRACE_S`` the runner sends SIGTERM to its process group (the step saves
what it has and exits), at ``budget`` SIGKILL. Every step rewrites its JSON after each part it
finishes, so a killed step leaves its partial results. A step not started for lack of time is
``skipped``. This module imports no torch: it must survive whatever a step does.

``--dry-run`` runs the same steps with ``TRITON_INTERPRET=1`` and CUDA hidden
(``CUDA_VISIBLE_DEVICES=""``) on tiny sizes: the guard, in the default test suite
(``tests/test_gpu_run.py``), that the GPU run cannot fail on a typo.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import queue
import signal
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOTAL_BUDGET_S = 450.0  # the steps' sum; run.sh passes what its install left of WHOLE_BUDGET_S (470 s) instead
STEP_MARGIN_S = 12.0    # a step plans to end this long before its budget
KILL_GRACE_S = 6.0      # SIGTERM this long before the budget, SIGKILL at it
MIN_STEP_S = 15.0       # a step with less time than this left is skipped


@dataclasses.dataclass(frozen=True)
class Step:
    name: str
    module: str
    budget_s: float
    file: str


STEPS = (
    # budgets after the first H100 run (2026-11-26): environment took 5 s, tests 77 s (the first
    # part hit its share), e2e 43 s; tuning's 35 s left its auto-tune and config sweep no time
    Step("environment", "benchmarks.gpu.step_environment", 15.0, "environment.json"),
    Step("tests", "benchmarks.gpu.step_tests", 110.0, "tests.json"),
    Step("kernels", "benchmarks.gpu.step_kernels", 190.0, "kernels.json"),
    Step("tuning", "benchmarks.gpu.step_tuning", 80.0, "tuning.json"),
    Step("e2e", "benchmarks.gpu.step_e2e", 55.0, "e2e.json"),
)
RUN_FILES = ("run.json", "summary.md", "run.log")
OUTPUT_FILES = tuple(s.file for s in STEPS) + RUN_FILES  # 8: what the GPU machine gives back at most
assert len(OUTPUT_FILES) <= 8


class Log:
    """Timestamped lines to stdout and ``run.log``: ``HH:MM:SS +SECONDS [step] text``."""

    def __init__(self, path: pathlib.Path):
        self.start = time.monotonic()
        self.file = open(path, "a", encoding="utf-8", buffering=1)

    def __call__(self, step: str, text: str) -> None:
        line = f"{datetime.datetime.now():%H:%M:%S} +{time.monotonic() - self.start:6.1f}s [{step}] {text}"
        print(line, flush=True)
        self.file.write(line + "\n")

    def close(self) -> None:
        self.file.close()


def step_environment(dry_run: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    if dry_run:
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def run_step(step: Step, budget_s: float, out: pathlib.Path, dry_run: bool, log: Log) -> dict:
    """Run one step under its budget; its status record for ``run.json``."""
    command = [sys.executable, "-m", step.module, str(out / step.file), "--budget-s",
               f"{max(1.0, budget_s - STEP_MARGIN_S):.0f}"] + (["--dry-run"] if dry_run else [])
    log(step.name, f"start, budget {budget_s:.0f} s: {' '.join(command[1:])}")
    began = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, env=step_environment(dry_run), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    lines: queue.Queue = queue.Queue()

    def read():
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    signalled = None
    eof = False
    while not eof:
        elapsed = time.monotonic() - began
        if signalled is None and elapsed > budget_s - KILL_GRACE_S:
            signalled = "SIGTERM"
            log(step.name, f"over budget ({budget_s:.0f} s): SIGTERM to the step's process group")
            _signal_group(process, signal.SIGTERM)
        elif signalled == "SIGTERM" and elapsed > budget_s:
            signalled = "SIGKILL"
            log(step.name, "still running: SIGKILL")
            _signal_group(process, signal.SIGKILL)
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if signalled == "SIGKILL" and process.poll() is not None:
                break  # a grandchild may hold the pipe open; the step itself is gone
            continue
        if line is None:
            eof = True
        else:
            log(step.name, line)
    rc = process.wait()
    wall = time.monotonic() - began
    status = "ok" if rc == 0 and signalled is None else ("timed out" if signalled else "failed")
    log(step.name, f"end: {status} (exit code {rc}) after {wall:.1f} s")
    return {"name": step.name, "file": step.file, "status": status, "exit_code": rc, "wall_s": round(wall, 1),
            "budget_s": round(budget_s, 1), "signal": signalled}


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # the step and what it started (pytest-xdist workers, compilers)
    except ProcessLookupError:
        pass


def check_out_dir(out: pathlib.Path) -> None:
    """OUTDIR must be new, empty or a previous run's: nothing else in it is overwritten."""
    if out.exists() and not out.is_dir():
        raise SystemExit(f"{out} exists and is not a folder")
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in OUTPUT_FILES)
        if foreign:
            raise SystemExit(f"{out} holds files this run does not write ({', '.join(foreign[:5])}): give an empty "
                             "or new folder")
    out.mkdir(parents=True, exist_ok=True)


def remove_temporaries(out: pathlib.Path) -> None:
    """The atomic writer's temporary files of steps that were killed mid-write (dot files the
    GPU machine would not give back, and which would count against its 8 files)."""
    for name in OUTPUT_FILES:
        for stale in out.glob(f".{name}.*.tmp"):
            stale.unlink(missing_ok=True)


def write_run_json(out: pathlib.Path, record: dict) -> None:
    tmp = out / ".run.json.partial.tmp"
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, out / "run.json")


def write_summary(out: pathlib.Path, log: Log) -> None:
    """summary.md from whatever the steps have written (a separate process: the summary imports
    nothing heavy, but a bug in it must not stop the run)."""
    result = subprocess.run([sys.executable, "-m", "benchmarks.gpu.summary", str(out)], cwd=ROOT,
                            env=step_environment(False), capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        log("summary", f"summary.md not written: {result.stderr.strip()[-500:]}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=pathlib.Path, help="folder for the 8 output files")
    parser.add_argument("--dry-run", action="store_true", help="on the CPU, tiny sizes, TRITON_INTERPRET=1")
    parser.add_argument("--steps", default=",".join(s.name for s in STEPS),
                        help=f"comma-separated steps to run (default all: {','.join(s.name for s in STEPS)})")
    parser.add_argument("--budget-scale", type=float, default=1.0,
                        help="multiply every step's budget (e.g. 0.5 for a short second run)")
    parser.add_argument("--total-budget-s", type=float, default=TOTAL_BUDGET_S,
                        help=f"the whole run's budget in seconds (default {TOTAL_BUDGET_S:.0f})")
    args = parser.parse_args(argv)
    names = [n for n in args.steps.split(",") if n]
    unknown = sorted(set(names) - {s.name for s in STEPS})
    if unknown or not names:
        parser.error(f"--steps: unknown {unknown or 'none given'}; choose from {', '.join(s.name for s in STEPS)}")
    if not args.budget_scale > 0 or not args.total_budget_s > 0:
        parser.error("--budget-scale and --total-budget-s must be > 0")
    args.selected = [s for s in STEPS if s.name in names]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    out = args.out.resolve()
    check_out_dir(out)
    remove_temporaries(out)
    log = Log(out / "run.log")
    began = time.monotonic()
    record = {"command": "python -m benchmarks.gpu.run " + " ".join(sys.argv[1:] if argv is None else argv),
              "dry_run": args.dry_run, "started": datetime.datetime.now().isoformat(timespec="seconds"),
              "total_budget_s": args.total_budget_s, "budget_scale": args.budget_scale,
              "budgets_s": {s.name: s.budget_s * args.budget_scale for s in STEPS}, "steps": []}
    log("run", f"{'DRY RUN (CPU, TRITON_INTERPRET=1) ' if args.dry_run else ''}into {out}; total budget "
               f"{args.total_budget_s:.0f} s; steps " + ", ".join(f"{s.name} {s.budget_s * args.budget_scale:.0f} s"
                                                              for s in args.selected))
    try:
        for step in args.selected:
            left = args.total_budget_s - (time.monotonic() - began)
            budget = min(step.budget_s * args.budget_scale, left)
            if budget < MIN_STEP_S:
                log(step.name, f"skipped: {left:.0f} s left of the whole budget")
                record["steps"].append({"name": step.name, "file": step.file, "status": "skipped", "exit_code": None,
                                        "wall_s": 0.0, "budget_s": round(budget, 1), "signal": None})
            else:
                record["steps"].append(run_step(step, budget, out, args.dry_run, log))
            record["wall_s"] = round(time.monotonic() - began, 1)
            write_run_json(out, record)
            write_summary(out, log)
    finally:
        remove_temporaries(out)
        record["wall_s"] = round(time.monotonic() - began, 1)
        record["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
        write_run_json(out, record)
        write_summary(out, log)
        statuses = ", ".join(f"{s['name']} {s['status']}" for s in record["steps"])
        log("run", f"done in {record['wall_s']:.0f} s: {statuses}; files: "
                   + ", ".join(sorted(p.name for p in out.iterdir())))
        log.close()
    return 0 if all(s["status"] == "ok" for s in record["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
