"""What every step of the prepared GPU run shares: its command line, timestamped progress lines,
its deadline, and a results file that always holds what the step has done so far.

A step is a process of its own, started by :mod:`benchmarks.gpu.run` with ``OUT_JSON
--budget-s S [--dry-run]``. It must end within ``S`` seconds: it watches :class:`Deadline` and
stops starting new work when too little time is left, and the runner kills it at ``S`` (SIGTERM,
then SIGKILL). Either way its :class:`Results` file holds every finished part: it is rewritten
atomically after each part, and on SIGTERM once more with ``status: "killed"``.
"""
from __future__ import annotations

import argparse
import atexit
import datetime
import gc
import json
import os
import pathlib
import signal
import sys
import time
import traceback
from typing import Callable

FORMAT = 1  # of every step's JSON (benchmarks.gpu.ingest checks it)


class Interrupted(BaseException):
    """SIGTERM arrived (the runner's budget is over): unwind, save, exit."""


def now() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")


def log(step: str, message: str) -> None:
    print(f"[{datetime.datetime.now():%H:%M:%S}] [{step}] {message}", flush=True)


def parse_args(description: str, argv=None, extra: Callable[[argparse.ArgumentParser], None] | None = None):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("out", type=pathlib.Path, help="the step's JSON results file")
    parser.add_argument("--budget-s", type=float, required=True, help="seconds this step may take in all")
    parser.add_argument("--dry-run", action="store_true",
                        help="tiny sizes on the CPU (TRITON_INTERPRET=1): the same code paths and outputs")
    if extra is not None:
        extra(parser)
    return parser.parse_args(argv)


class Deadline:
    """The step's end: ``budget_s`` seconds after it was made."""

    def __init__(self, budget_s: float):
        if not budget_s > 0:
            raise ValueError(f"budget_s must be > 0, got {budget_s!r}")
        self.budget_s = budget_s
        self.start = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.budget_s - self.elapsed()

    def allows(self, seconds: float) -> bool:
        """Whether ``seconds`` more fit before the end."""
        return self.left() > seconds


class Results:
    """A step's JSON file: ``{"format", "step", "status", "started", "updated", "dry_run", ...}``
    plus what the step adds, rewritten atomically by :meth:`save` (a kill never leaves half a
    file). ``status`` is ``running`` until the step ends: ``ok``, ``failed`` (an exception, its
    traceback under ``error``) or ``killed`` (SIGTERM from the runner)."""

    def __init__(self, path: pathlib.Path, step: str, dry_run: bool):
        self.path = pathlib.Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.step = step
        self.data: dict = {"format": FORMAT, "step": step, "status": "running", "started": now(), "dry_run": dry_run}

    def save(self) -> None:
        """Write-then-rename (no torch import: a step saves before its heavy imports). The
        temporary name is the one the runner removes if a kill leaves it behind."""
        self.data["updated"] = now()
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(self.data, indent=1, default=str) + "\n")
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)

    def __setitem__(self, key: str, value) -> None:
        self.data[key] = value

    def __getitem__(self, key: str):
        return self.data[key]

    def setdefault(self, key: str, default):
        return self.data.setdefault(key, default)


def run_step(step: str, args, body: Callable[[Results, Deadline], None]) -> int:
    """Run ``body(results, deadline)`` with SIGTERM turned into :class:`Interrupted`; the results
    are saved whatever happens. Returns the process exit code (0 ok, 1 failed, 143 killed)."""
    results = Results(args.out, step, args.dry_run)
    deadline = Deadline(args.budget_s)

    def on_sigterm(signum, frame):
        raise Interrupted()
    signal.signal(signal.SIGTERM, on_sigterm)
    code = 0
    try:
        results.save()
        body(results, deadline)
        results["status"] = "ok"
    except Interrupted:
        results["status"] = "killed"
        log(step, "SIGTERM: over budget; saving what is done")
        code = 143
    except Exception as err:  # noqa: BLE001 - the step's outcome is recorded in its JSON and its exit code
        results["status"] = "failed"
        results["error"] = "".join(traceback.format_exception(err))[-4000:]
        log(step, f"failed: {type(err).__name__}: {err}")
        traceback.print_exc()
        code = 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        results["wall_s"] = round(deadline.elapsed(), 1)
        results.save()
    return code


class PartsFailed(Exception):
    """Some parts of a step failed (each recorded under its own key); the others ran."""


def run_parts(step: str, results: Results, parts: list[tuple[str, Callable[[], None]]]) -> None:
    """Run a step's independent parts in order, each to its end: a part that raises has its
    traceback saved under ``results[name]["error"]`` and the next one still runs; the step then
    fails (:class:`PartsFailed`) naming them."""
    failed = []
    for name, part in parts:
        try:
            part()
        except Exception as err:  # noqa: BLE001 - recorded, printed, and the step fails at the end
            record = results.data.setdefault(name, {})
            record.update(status="failed", error="".join(traceback.format_exception(err))[-4000:])
            log(step, f"part {name} failed: {type(err).__name__}: {err}")
            traceback.print_exc()
            failed.append(name)
        results.save()
    if failed:
        raise PartsFailed(f"parts failed: {', '.join(failed)} (their tracebacks are in the results)")


def step_main(step: str, doc: str, body: Callable[[Results, Deadline, bool], None], argv=None) -> int:
    """A step's command line: ``OUT_JSON --budget-s S [--dry-run]``, then ``body(results,
    deadline, dry_run)`` under :func:`run_step`; returns the exit code."""
    args = parse_args(doc.split("\n\n")[0], argv)
    return run_step(step, args, lambda results, deadline: body(results, deadline, args.dry_run))


def freeze_imports() -> None:
    """Move every object alive now (the imported modules: torch, dynamo, PyG, ...) out of the
    garbage collector's sight for the rest of the step. The shared timing rule
    (``unigraph.benchmarking.timing``) sets them aside during its timed rounds itself; this keeps
    them out of every collection between those too (warm-ups, profiled steps: a full collection
    walks each of these ~400k objects, 0.2 s on a quiet CPU, seconds on a busy one), and they
    never become garbage. Call it after the step's heavy imports; it may be called again.
    Unfrozen at exit, so that extension modules' leak checks (nanobind's, in Triton) see a
    normal shutdown."""
    gc.collect()
    gc.freeze()
    if not getattr(freeze_imports, "registered", False):
        atexit.register(gc.unfreeze)
        freeze_imports.registered = True


def device_for(dry_run: bool):
    """The device the step measures on: the GPU, or the CPU in a dry run (which hides CUDA)."""
    import torch
    if dry_run:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: the GPU run needs one (use --dry-run to check the run on the CPU)")
    return torch.device("cuda")


def read_json(path: pathlib.Path) -> dict | None:
    """A step's results, or None when the file is missing or not JSON (a step killed before its
    first save)."""
    try:
        return json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError):
        return None


def repo_root() -> pathlib.Path:
    return pathlib.Path(__file__).resolve().parents[2]


def ensure_repo_on_path() -> None:
    """``benchmarks`` importable when a step runs as ``python -m`` from elsewhere."""
    root = str(repo_root())
    if root not in sys.path:
        sys.path.insert(0, root)


def environ_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "on", "yes")
