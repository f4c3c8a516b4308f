"""``auto-tune``: choose a backend by measuring instead of estimating (opt-in).

With ``unigraph.set_backend("auto-tune")`` (or ``use_backend("auto-tune")``, or
``UNIGRAPH_BACKEND=auto-tune``) the first call of each *kind* runs once on every backend that
``auto`` could pick, is timed on each, and the fastest is used from then on. A kind is the
graph's signature (its node, edge and degree statistics, not its edge list: graphs that look
alike to the cost model share a measurement), the operator, reduce, output feature width,
dtype and device.

Each candidate runs the real call with the real tensors (gradients off): once to warm up, which
absorbs one-time costs (imports, numba or Triton compilation, Triton's own autotuning), then
``repeats`` times (default 3); its time is the median. Winners are kept in memory for the
process. ``enable_disk_cache(path)`` (or ``UNIGRAPH_AUTOTUNE_CACHE=path``) also keeps them in a
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


def signature(stats, request: Request) -> str:
    """The kind of a call, as a readable string (also the JSON cache key)."""
    device = request.device.type if request.device.type != "cuda" else f"cuda:{_device_name(request.device)}"
    return (f"src={stats.num_src_nodes} dst={stats.num_dst_nodes} edges={stats.num_edges} "
            f"max_in={stats.max_in_degree} max_out={stats.max_out_degree} cv={stats.cv_in_degree:.3f} | "
            f"{request.kind} {request.op} {request.reduce} width={request.feature_width} "
            f"{str(request.dtype).replace('torch.', '')} {device}")


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call_us(run: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median wall time of ``run()`` in microseconds, after one warm-up call."""
    with torch.no_grad():
        run()
        _synchronize(device)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            _synchronize(device)
            times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


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
        if self._path is not None and os.path.exists(self._path):
            self._memory.update(self._read(self._path))

    def _check_env(self) -> None:
        if not self._env_checked:
            self._env_checked = True
            path = os.environ.get(CACHE_ENV_VAR, "").strip()
            if path:
                self.enable_disk_cache(path)

    @staticmethod
    def _read(path: str) -> dict[str, Measurement]:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"{path} is not a unigraph auto-tune cache of format {FORMAT_VERSION} "
                             f"(found version {data.get('version')!r}); delete it or point to another file")
        return {entry["kind"]: Measurement(entry["winner"], dict(entry["timings_us"])) for entry in data["entries"]}

    def _write(self) -> None:
        entries = [{"kind": kind, "winner": m.winner, "timings_us": m.timings_us}
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
        """Time ``trial(name)`` for every candidate, remember and return the fastest."""
        self._check_env()
        timings = {name: time_call_us(lambda name=name: trial(name), device, self.repeats) for name in candidates}
        measurement = Measurement(min(timings, key=timings.get), timings)
        self._memory[kind] = measurement
        log.info("auto-tune measured %s: %s", kind, ", ".join(f"{n} {t:.0f} us" for n, t in timings.items()))
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
