"""``auto-tune``: choose a backend by measuring instead of estimating (opt-in).

With ``unigraph.set_backend("auto-tune")`` (or ``use_backend("auto-tune")``, or
``UNIGRAPH_BACKEND=auto-tune``) the first call of each *kind* runs once on every backend that
``auto`` could pick, is timed on each, and the fastest is used from then on. A kind is the
graph's signature (its node, edge and degree statistics, not its edge list: graphs that look
alike to the cost model share a measurement), the operator, reduce, output feature width,
dtype and device.

Each candidate runs the real call on the real data, and what training runs: when the call
records gradients (grad mode on and an input that requires grad), forward *and* backward are
timed (the backward with a ones gradient); otherwise the forward alone, under ``no_grad``.
Nothing of this can be observed by the caller: the runs see detached copies of the operands
(the same storage, each requiring grad as the caller's does), so their autograd graph never
reaches the caller's (no hook, ``retain_grad`` or ``.grad`` of the caller's sees a gradient,
nothing upstream runs); the caller's saved-tensor hooks are shadowed while they run; the RNG
state and the grad mode are put back afterwards, and no operand is written (so its in-place
version stays). Every candidate first runs once to warm up (imports, numba or Triton compilation,
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

import contextlib
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

from unigraph.backends.base import Request, differentiated

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
    (timed with its backward) is another kind than the same call under no_grad (forward alone),
    and a call at another thread count is another kind (kernels run with torch's count)."""
    device = request.device.type if request.device.type != "cuda" else f"cuda:{_device_name(request.device)}"
    return (f"src={stats.num_src_nodes} dst={stats.num_dst_nodes} edges={stats.num_edges} "
            f"max_in={stats.max_in_degree} max_out={stats.max_out_degree} cv={stats.cv_in_degree:.3f} | "
            f"{request.kind} {request.op} {request.reduce} width={request.feature_width} "
            f"{str(request.dtype).replace('torch.', '')} {device} threads={request.threads or torch.get_num_threads()}"
            + (" +backward" if request.grad else ""))


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _tensors(out) -> list[torch.Tensor]:
    items = out if isinstance(out, (tuple, list)) else (out,)
    return [t for t in items if isinstance(t, torch.Tensor) and t.requires_grad]


def private_operands(operands: tuple) -> tuple:
    """The operands as the timing runs see them: detached (same storage, nothing copied), each
    requiring grad as the caller's does, so the timing's autograd graph starts and ends at them and
    never reaches the caller's graph, hooks, ``retain_grad`` or ``.grad``."""
    return tuple(t.detach().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t
                 for t in operands)


def _same(t):
    return t


@contextlib.contextmanager
def isolated(device: torch.device):
    """The timing runs' surroundings: the RNG state (CPU, and ``device`` when it is a GPU) and the
    grad mode are put back afterwards, and the caller's saved-tensor hooks
    (``torch.autograd.graph.saved_tensors_hooks``: offloading, checkpointing) are shadowed by
    identity hooks, so none of the timing runs' saved tensors reach them."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.random.fork_rng(devices=[device] if device.type == "cuda" else []))
        stack.enter_context(torch.set_grad_enabled(torch.is_grad_enabled()))
        if torch._C._autograd._saved_tensors_hooks_is_enabled():  # disabled: no hooks to shadow
            stack.enter_context(torch.autograd.graph.saved_tensors_hooks(_same, _same))
        yield


def _forward(run: Callable[[], object]) -> Callable[[], None]:
    def forward_only():
        with torch.no_grad():
            run()
    return forward_only


def _forward_backward(run: Callable[[], object], leaves: list[torch.Tensor]) -> Callable[[], None]:
    def forward_backward():
        _backward(_tensors(run()), leaves)
    return forward_backward


def _backward(outputs: list[torch.Tensor], leaves: list[torch.Tensor]) -> None:
    """The call's own backward (ones gradient) into the private operands ``leaves``."""
    if outputs:
        torch.autograd.grad(outputs, leaves, [torch.ones_like(t) for t in outputs], allow_unused=True)


def time_candidates_us(trial: Callable[..., object], operands: tuple, candidates: list[str],
                       device: torch.device, repeats: int) -> tuple[dict[str, float], str]:
    """Median wall time in microseconds of each candidate running ``trial(name, *operands)``, and
    what was timed (``fwd`` or ``fwd+bwd``: the latter when the call records gradients). Every
    candidate warms up once, then ``repeats`` rounds run each once in an order rotated by the round.
    The runs see private copies of the operands (:func:`private_operands`) inside :func:`isolated`."""
    with isolated(device):
        own = private_operands(operands)
        leaves = [t for t in own if isinstance(t, torch.Tensor) and t.requires_grad]
        timed = "fwd+bwd" if differentiated(*own) else "fwd"
        make = (lambda run: _forward_backward(run, leaves)) if timed == "fwd+bwd" else _forward
        steps = {name: make(lambda name=name: trial(name, *own)) for name in candidates}
        for name in candidates:  # warm-up
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

    def measure(self, kind: str, candidates: list[str], trial: Callable[..., object], operands: tuple,
                device: torch.device) -> Measurement:
        """Time ``trial(name, *operands)`` for every candidate (forward and backward when the call
        records gradients) on private copies of ``operands``, remember and return the fastest."""
        self._check_env()
        timings, timed = time_candidates_us(trial, operands, candidates, device, self.repeats)
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
