"""The timing rule of every unigraph benchmark: interleaved repeats, min / median / max.

A figure taken from one implementation's block of runs and then another's compares two different
moments of the machine (a neighbour's job, frequency scaling, the page cache). So every benchmark
times its implementations **interleaved**: repeat ``r`` calls each implementation once, in the
order ``names[r % n:] + names[:r % n]`` (each gets its turn to go first), and the result of each
is the list of its per-repeat times, summarized as min / median / max.

Calls much shorter than the timer's resolution are batched: ``min_run_s`` makes a repeat call the
same implementation ``k`` times back to back (``k`` calibrated once, in the warm-up) and records
the mean of those ``k``; :attr:`Timing.calls_per_run` says so.

    from unigraph.benchmarking.timing import interleaved
    timings = interleaved({"unigraph": step_a, "dgl": step_b}, repeats=10, warmup=2)
    timings["dgl"].median_ms / timings["unigraph"].median_ms
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import statistics
import time
from typing import Callable, Iterator, Mapping, Sequence

MAX_CALLS_PER_RUN = 10_000


@dataclasses.dataclass
class Timing:
    """One implementation's per-repeat times in milliseconds (each the mean over
    ``calls_per_run`` back-to-back calls)."""

    runs_ms: list[float]
    calls_per_run: int = 1

    def __post_init__(self) -> None:
        if not self.runs_ms:
            raise ValueError("a Timing needs at least one run")

    @property
    def min_ms(self) -> float:
        return min(self.runs_ms)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.runs_ms)

    @property
    def max_ms(self) -> float:
        return max(self.runs_ms)

    def grouped(self, size: int) -> "Timing":
        """Runs summed in consecutive groups of ``size`` (per-batch times -> per-epoch times);
        an incomplete last group is dropped."""
        if size < 1 or size > len(self.runs_ms):
            raise ValueError(f"group size must be in [1, {len(self.runs_ms)}], got {size}")
        whole = len(self.runs_ms) // size * size
        return Timing([sum(self.runs_ms[i:i + size]) for i in range(0, whole, size)], self.calls_per_run)

    def summary(self) -> dict:
        """What a results file records: min / median / max and every run."""
        return {"min_ms": round(self.min_ms, 4), "median_ms": round(self.median_ms, 4), "max_ms": round(self.max_ms, 4),
                "runs_ms": [round(r, 4) for r in self.runs_ms], "calls_per_run": self.calls_per_run}

    def __str__(self) -> str:
        return f"{self.median_ms:.3g} ms (min {self.min_ms:.3g}, max {self.max_ms:.3g}, {len(self.runs_ms)} runs)"


def rotation(names: Sequence[str], r: int) -> list[str]:
    """The order of repeat ``r``: the names rotated left by ``r``."""
    names = list(names)
    if not names:
        return names
    k = r % len(names)
    return names[k:] + names[:k]


def _run(call: Callable[[], object], times: int, sync: Callable[[], None] | None) -> float:
    start = time.perf_counter()
    for _ in range(times):
        call()
    if sync is not None:
        sync()
    return time.perf_counter() - start


def interleaved(calls: Mapping[str, Callable[[], object]], repeats: int, *, warmup: int = 1, min_run_s: float = 0.0,
                sync: Callable[[], None] | None = None, after: Callable[[str], None] | None = None,
                progress: Callable[[str], None] | None = None) -> dict[str, Timing]:
    """Time every call of ``calls`` ``repeats`` times, interleaved (see the module docstring).

    Args:
        calls: name -> zero-argument callable (one training step, one kernel call, ...).
        repeats: timed runs per name (>= 1).
        warmup: untimed interleaved rounds first (kernels compiled, pools started, caches filled).
        min_run_s: batch a call until one run takes at least this long (needs ``warmup >= 1``,
            which calibrates the batch size).
        sync: called before a run's clock stops (``torch.cuda.synchronize``).
        after: ``after(name)`` runs untimed after each run (evaluation, bookkeeping).
        progress: ``progress(name)`` after each timed run (a progress bar).

    Exceptions raised by a call propagate: a benchmark that wants to carry on without a broken
    implementation tries it first (in its own warm-up) and leaves it out, saying why.
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    if min_run_s < 0 or (min_run_s > 0 and warmup < 1):
        raise ValueError(f"min_run_s must be >= 0 and needs warmup >= 1 to calibrate, got min_run_s={min_run_s}, "
                         f"warmup={warmup}")
    names = list(calls)
    per_run = dict.fromkeys(names, 1)
    last = dict.fromkeys(names, 0.0)
    for w in range(warmup):
        for name in rotation(names, w):
            last[name] = _run(calls[name], 1, sync)
            if after is not None:
                after(name)
    if min_run_s > 0:
        for name in names:
            per_run[name] = min(MAX_CALLS_PER_RUN, max(1, math.ceil(min_run_s / max(last[name], 1e-9))))
    runs: dict[str, list[float]] = {name: [] for name in names}
    with _collector_set_aside():
        for r in range(repeats):
            for name in rotation(names, r):
                runs[name].append(_run(calls[name], per_run[name], sync) * 1e3 / per_run[name])
                if after is not None:
                    after(name)
                if progress is not None:
                    progress(name)
    return {name: Timing(runs[name], per_run[name]) for name in names}


@contextlib.contextmanager
def _collector_set_aside() -> Iterator[None]:
    """The timed rounds' garbage collector: the young generations collected, then every object
    alive frozen (``gc.freeze``) until the rounds end, so that a collection during the rounds
    walks only what they create. The imported modules (torch, dynamo, PyG: ~400k objects) never
    become garbage; a full ``gc.collect()`` before every timing walked them all (0.18 s a call
    here, most of a quick benchmark's time). Unfrozen afterwards, unless the caller had frozen
    objects itself (``benchmarks/gpu/common.freeze_imports``: its choice stays); old garbage
    waits for the next ordinary collection."""
    frozen_by_caller = gc.get_freeze_count() > 0
    gc.collect(1)
    gc.freeze()
    try:
        yield
    finally:
        if not frozen_by_caller:
            gc.unfreeze()


def ratio(numerator: Timing, denominator: Timing) -> float:
    """``numerator.median / denominator.median``: how many times faster the denominator is."""
    return numerator.median_ms / denominator.median_ms


def fastest(timings: Mapping[str, Timing], names: Sequence[str]) -> str:
    """The name among ``names`` with the lowest median (a peer's best configuration)."""
    present = [n for n in names if n in timings]
    if not present:
        raise ValueError(f"none of {list(names)} was timed (have {list(timings)})")
    return min(present, key=lambda n: timings[n].median_ms)
