"""``auto-tune``: choose a backend by measuring instead of estimating (opt-in).

With ``unigraph.set_backend("auto-tune")`` (or ``use_backend("auto-tune")``, or
``UNIGRAPH_BACKEND=auto-tune``) the first call of each *kind* runs once on every backend that
``auto`` could pick, is timed on each, and the fastest is used from then on. A kind is the
graph's signature (its node, edge and degree statistics, not its edge list: graphs that look
alike to the cost model share a measurement), the operator, reduce, output feature width,
dtype and device.

Each candidate runs the real call with the real tensors, and what training runs: when the call
records gradients (grad mode on and an input that requires grad), forward *and* backward are
timed (the backward with a ones gradient, stopping at the call's inputs: nothing accumulates into
any ``.grad`` and nothing upstream of the call runs); otherwise the forward alone, under
``no_grad``. Every candidate first runs once to warm up (imports, numba or Triton compilation,
Triton's own autotuning, caches), then ``repeats`` rounds (default 3) run each candidate once, in
an order rotated every round so a slow spell of the machine hits all alike; a candidate's time is
its median. The measurement records what it timed (``fwd`` or ``fwd+bwd``). Winners are kept in
memory for the process. ``enable_disk_cache(path)`` (or ``UNIGRAPH_AUTOTUNE_CACHE=path``) also keeps them in a
JSON file, read at start and rewritten after each new measurement, so later processes skip the
measurement; it is plain JSON (never pickle), one entry per kind with every candidate's time.

A measurement is never taken while ``torch.compile`` traces (tensors have no data then): a
call of a kind not measured yet uses the cost model and says so in the log; run the model once
eagerly first to measure.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import statistics
import tempfile
import time
from typing import Callable

import torch

from unigraph.backends.base import Request

CACHE_ENV_VAR = "UNIGRAPH_AUTOTUNE_CACHE"
FORMAT_VERSION = 1
log = logging.getLogger("unigraph")


@dataclasses.dataclass
class Measurement:
    winner: str
    timings_us: dict[str, float]  # median per candidate
    timed: str = "fwd"            # "fwd" or "fwd+bwd"


def signature(stats, request: Request) -> str:
    """The kind of a call, as a readable string (also the JSON cache key); a differentiated call
    (timed with its backward) is another kind than the same call under no_grad (forward alone)."""
    device = request.device.type if request.device.type != "cuda" else f"cuda:{_device_name(request.device)}"
    return (f"src={stats.num_src_nodes} dst={stats.num_dst_nodes} edges={stats.num_edges} "
            f"max_in={stats.max_in_degree} max_out={stats.max_out_degree} cv={stats.cv_in_degree:.3f} | "
            f"{request.kind} {request.op} {request.reduce} width={request.feature_width} "
            f"{str(request.dtype).replace('torch.', '')} {device}" + (" +backward" if request.grad else ""))


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _tensors(out) -> list[torch.Tensor]:
    items = out if isinstance(out, (tuple, list)) else (out,)
    return [t for t in items if isinstance(t, torch.Tensor) and t.requires_grad]


def _input_edges(outputs: list[torch.Tensor], before: int) -> list:
    """The gradient edges where the autograd graph of the call meets what existed before it:
    nodes made by the call have sequence numbers above ``before``; a leaf's accumulator, or an
    older node, is where the call's backward stops."""
    from torch.autograd.graph import GradientEdge
    edges, seen, stack = [], set(), [t.grad_fn for t in outputs]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for child, index in node.next_functions:
            if child is None:
                continue
            if type(child).__name__ == "AccumulateGrad" or child._sequence_nr() <= before:
                edges.append(GradientEdge(child, index))
            else:
                stack.append(child)
    return edges


def _sequence_marker() -> int:
    """A sequence number no node made after this call can have (autograd numbers nodes in order)."""
    with torch.enable_grad():
        return torch.ones(1, requires_grad=True).mul(1).grad_fn._sequence_nr()


def _forward(run: Callable[[], object]) -> Callable[[], None]:
    def forward_only():
        with torch.no_grad():
            run()
    return forward_only


def _forward_backward(run: Callable[[], object]) -> Callable[[], None]:
    def forward_backward():
        _backward(*_recorded(run))
    return forward_backward


def _recorded(run: Callable[[], object]) -> tuple[list[torch.Tensor], int]:
    before = _sequence_marker()
    return _tensors(run()), before


def _backward(outputs: list[torch.Tensor], before: int) -> None:
    """The call's own backward (ones gradient), stopping at its inputs."""
    edges = _input_edges(outputs, before)
    if edges:
        torch.autograd.grad(outputs, edges, [torch.ones_like(t) for t in outputs])


def time_candidates_us(trial: Callable[[str], object], candidates: list[str], device: torch.device,
                       repeats: int) -> tuple[dict[str, float], str]:
    """Median wall time in microseconds of each candidate, and what was timed (``fwd`` or
    ``fwd+bwd``: the latter when the first warm-up call records gradients). Every candidate
    warms up once, then ``repeats`` rounds run each once in an order rotated by the round."""
    warmed = torch.is_grad_enabled()  # then the first candidate's warm-up runs here, recording
    outputs, before = _recorded(lambda: trial(candidates[0])) if warmed else ([], 0)
    timed = "fwd+bwd" if outputs else "fwd"
    make = _forward_backward if outputs else _forward
    steps = {name: make(lambda name=name: trial(name)) for name in candidates}
    if outputs:
        _backward(outputs, before)  # the first candidate's warm-up, completed
    elif not warmed:
        steps[candidates[0]]()
    for name in candidates[1:]:
        steps[name]()
    _synchronize(device)
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for r in range(repeats):
        shift = r % len(candidates)
        for name in candidates[shift:] + candidates[:shift]:
            start = time.perf_counter()
            steps[name]()
            _synchronize(device)
            times[name].append((time.perf_counter() - start) * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}, timed


def _entry(path: str, index: int, entry, fix: str) -> tuple[str, Measurement]:
    """One checked entry of a cache file: ``(kind, measurement)``."""
    def refuse(problem: str) -> ValueError:
        return ValueError(f"{path}: auto-tune cache entry {index} {problem}{fix}")
    if not isinstance(entry, dict) or not {"kind", "winner", "timings_us"} <= set(entry) \
            or not set(entry) <= {"kind", "winner", "timings_us", "timed"}:
        raise refuse(f"must hold kind, winner, timings_us (and timed), got "
                     f"{sorted(entry)[:8] if isinstance(entry, dict) else type(entry).__name__}")
    kind, winner, timings, timed = entry["kind"], entry["winner"], entry["timings_us"], entry.get("timed", "fwd")
    if not isinstance(kind, str) or not isinstance(winner, str):
        raise refuse("has a kind or winner that is not a string")
    if not isinstance(timings, dict) or not all(
            isinstance(name, str) and isinstance(us, (int, float)) and not isinstance(us, bool) and math.isfinite(us)
            and us >= 0 for name, us in timings.items()):
        raise refuse("must map candidate names to finite times >= 0 (timings_us)")
    if winner not in timings:
        raise refuse(f"names the winner {winner!r:.40}, which it did not time")
    if timed not in ("fwd", "fwd+bwd"):
        raise refuse(f"says it timed {timed!r:.40}; 'fwd' or 'fwd+bwd' expected")
    return kind, Measurement(winner, dict(timings), timed)


class Tuner:
    """The measured winners of this process, optionally mirrored in a JSON file."""

    def __init__(self, repeats: int = 3):
        self.repeats = repeats
        self._memory: dict[str, Measurement] = {}
        self._path: str | None = None
        self._env_checked = False

    # ------------------------------------------------------------------ disk cache
    def enable_disk_cache(self, path: str | os.PathLike | None) -> None:
        """Keep measurements in the JSON file ``path`` (loaded now if it exists); None stops."""
        self._env_checked = True
        self._path = None if path is None else os.fspath(path)
        if self._path is not None and os.path.lexists(self._path):
            self._memory.update(self._read(self._path))

    def _check_env(self) -> None:
        if not self._env_checked:
            self._env_checked = True
            path = os.environ.get(CACHE_ENV_VAR, "").strip()
            if path:
                self.enable_disk_cache(path)

    @staticmethod
    def _read(path: str) -> dict[str, Measurement]:
        """The measurements in the cache file ``path``, checked as an untrusted file: a regular file
        of at most 64 MiB (``UNIGRAPH_MAX_LOAD_BYTES`` raises it; ``/dev/zero`` or a fifo is refused,
        not read forever), UTF-8 JSON nested at most as the format is, every entry of the format's
        keys and types. Anything else is a ``ValueError`` naming the file (never a KeyError or a
        RecursionError from deep inside)."""
        from unigraph.data import limits  # noqa: PLC0415 - unigraph.data sits above the backends; read lazily
        fix = f"; delete it or point {CACHE_ENV_VAR} to another file"
        data = limits.read_regular(path, limits.allowance(0), what="the auto-tune cache")
        try:
            data = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}: the auto-tune cache is not UTF-8 text ({err.reason} at byte {err.start}){fix}") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: the auto-tune cache is not valid JSON ({err}){fix}") from None
        except RecursionError:
            raise ValueError(f"{path}: the auto-tune cache is nested too deeply to be one{fix}") from None
        if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
            found = data.get("version") if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"{path} is not a unigraph auto-tune cache of format {FORMAT_VERSION} "
                             f"(found version {found!r:.80}){fix}")
        entries = data.get("entries")
        if not isinstance(entries, list):
            raise ValueError(f"{path}: the auto-tune cache has no list of entries (found {type(entries).__name__}){fix}")
        return dict(_entry(path, i, entry, fix) for i, entry in enumerate(entries))

    def _write(self) -> None:
        entries = [{"kind": kind, "winner": m.winner, "timings_us": m.timings_us, "timed": m.timed}
                   for kind, m in sorted(self._memory.items())]
        folder = os.path.dirname(os.path.abspath(self._path))
        os.makedirs(folder, exist_ok=True)
        # write-then-rename: a reader never sees half a file
        handle, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            json.dump({"version": FORMAT_VERSION, "entries": entries}, f, indent=1)
        os.replace(tmp, self._path)

    # ------------------------------------------------------------------ measuring
    def lookup(self, kind: str) -> Measurement | None:
        self._check_env()
        return self._memory.get(kind)

    def measure(self, kind: str, candidates: list[str], trial: Callable[[str], object],
                device: torch.device) -> Measurement:
        """Time ``trial(name)`` for every candidate (forward and backward when the call records
        gradients), remember and return the fastest."""
        self._check_env()
        timings, timed = time_candidates_us(trial, candidates, device, self.repeats)
        measurement = Measurement(min(timings, key=timings.get), timings, timed)
        self._memory[kind] = measurement
        log.info("auto-tune measured %s (%s): %s", kind, measurement.timed,
                 ", ".join(f"{n} {t:.0f} us" for n, t in timings.items()))
        if self._path is not None:
            self._write()
        return measurement

    def clear(self) -> None:
        """Forget every measurement held in memory (the disk file stays)."""
        self._memory.clear()


TUNER = Tuner()


def enable_disk_cache(path: str | os.PathLike | None) -> None:
    """Keep auto-tune measurements in the JSON file ``path`` across processes (None: memory only)."""
    TUNER.enable_disk_cache(path)
