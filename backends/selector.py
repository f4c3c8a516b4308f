"""Which backend runs an operator call: the user's choice, or ``auto``'s cost model.

Precedence, highest first:

1. ``backend=`` passed to the op,
2. the innermost ``with unigraph.use_backend(name):``,
3. ``unigraph.set_backend(name)``,
4. the environment variable ``UNIGRAPH_BACKEND``,
5. ``auto`` (the default).

A named backend that cannot run here (its dependency is missing) or cannot run the call (an
op it does not implement on that device) raises an error saying why; it is never silently
replaced. ``auto`` asks every available backend for an estimate and takes the cheapest; the
estimates are the cost functions below, one per backend, in microseconds.

The cost model
--------------
Each estimate is ``launch + per_edge_element * E * F + per_node_element * N * F`` (F the output
feature width), with constants per backend, op family and device. The CPU constants were
measured on the development machine (2 cores) at N = 20,000, F = 64, mean degree 32 with
``benchmarks/kernels.py``; GPU constants are relative guesses until a GPU run refines them.
Anyone can read and change them here; ``unigraph.explain`` prints the numbers it compared.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
from typing import Iterator

import torch

from unigraph import backends as registry
from unigraph.backends.base import Request

ENV_VAR = "UNIGRAPH_BACKEND"
log = logging.getLogger("unigraph")

_context_stack: list[str] = []
_global_choice: str | None = None


# ---------------------------------------------------------------------- user choice
def _validated(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"backend name must be a string, got {type(name).__name__}")
    if name != "auto":
        registry.get(name)  # raises for unknown or unavailable backends
    return name


def set_backend(name: str | None) -> None:
    """Use backend ``name`` ("auto" or a registered name) from now on; None restores the default."""
    global _global_choice
    _global_choice = None if name is None else _validated(name)


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Run the ops inside the block on backend ``name`` ("auto" to let the cost model pick)."""
    _context_stack.append(_validated(name))
    try:
        yield
    finally:
        _context_stack.pop()


def current_choice(explicit: str | None = None) -> tuple[str, str]:
    """``(name, where the choice came from)`` under the precedence in the module docstring."""
    if explicit is not None:
        return explicit, "argument"
    if _context_stack:
        return _context_stack[-1], "use_backend"
    if _global_choice is not None:
        return _global_choice, "set_backend"
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        if env != "auto" and env not in registry.names():
            raise ValueError(f"{ENV_VAR}={env!r} names no backend; choose one of: auto, {', '.join(registry.names())}")
        return env, ENV_VAR
    return "auto", "default"


# ---------------------------------------------------------------------- cost model
# Microseconds of fixed cost per call (Python, dispatch, allocation), and nanoseconds per
# element of E x F (edge side) per backend and op family. See the module docstring.
CPU_COSTS = {
    # scatter: gather x[src] into E x F, then scatter-add; torch-scatter's max/min is slower.
    "scatter": {"launch_us": 40.0, "sum_ns": 2.3, "extreme_ns": 10.0, "sddmm_ns": 2.0},
    "scatter_native": {"launch_us": 40.0, "sum_ns": 3.9, "extreme_ns": 6.0, "sddmm_ns": 2.0},
    # sparse: CSR SpMM for copy_u / u_mul_e; segment reduce for the rest; SDDMM for dot.
    "sparse": {"launch_us": 60.0, "spmm_ns": 0.17, "spmm_extreme_ns": 1.3, "segment_ns": 2.9,
               "sddmm_ns": 2.0},
}
GPU_SPEEDUP = 20.0  # per-element costs on a GPU, relative to the CPU constants (a guess until measured)
GPU_LAUNCH_US = 15.0


def _element_scale(request: Request) -> tuple[float, float]:
    """(per-element multiplier, launch cost override) for the request's device."""
    if request.device.type == "cuda":
        return 1.0 / GPU_SPEEDUP, GPU_LAUNCH_US
    return 1.0, -1.0


def _estimate(costs: dict, per_element_ns: float, stats, request: Request) -> float:
    scale, launch = _element_scale(request)
    launch = costs["launch_us"] if launch < 0 else launch
    edge_elements = stats.num_edges * request.feature_width
    node_elements = max(stats.num_dst_nodes, stats.num_src_nodes) * request.feature_width
    return launch + scale * (per_element_ns * edge_elements + 0.5 * node_elements) / 1000.0


def cost_scatter(stats, request: Request) -> float:
    from unigraph.backends.scatter import _torch_scatter
    costs = CPU_COSTS["scatter" if _torch_scatter() is not None else "scatter_native"]
    if request.kind == "gsddmm":
        per = costs["sddmm_ns"]
    elif request.kind == "edge_softmax":
        per = 2 * costs["extreme_ns"] + 2 * costs["sddmm_ns"] + costs["sum_ns"]
    elif request.kind == "gat_attention":  # E x H score work is small next to the E x H x F sum
        per = costs["sum_ns"] + costs["sddmm_ns"]
    else:
        per = costs["sum_ns"] if request.reduce in ("sum", "mean") else costs["extreme_ns"]
    return _estimate(costs, per, stats, request)


def cost_sparse(stats, request: Request) -> float:
    from unigraph.backends.sparse import _torch_sparse
    costs = CPU_COSTS["sparse"]
    if request.kind == "gsddmm":
        per = costs["sddmm_ns"]
    elif request.kind == "edge_softmax":
        per = 2 * costs["segment_ns"] + 2 * costs["sddmm_ns"]
    elif request.kind == "gat_attention":
        per = costs["spmm_ns"] + costs["sddmm_ns"]
    elif request.op in ("copy_u", "u_mul_e"):
        if request.reduce in ("sum", "mean"):
            per = costs["spmm_ns"]
        else:
            per = costs["spmm_extreme_ns"] if _torch_sparse() is not None else costs["segment_ns"]
    else:
        per = costs["segment_ns"]
    return _estimate(costs, per, stats, request)


# ---------------------------------------------------------------------- auto and explain
@dataclasses.dataclass
class Candidate:
    name: str
    estimate_us: float | None
    note: str


@dataclasses.dataclass
class Explanation:
    """What ``auto`` (or the user's choice) picks for one call, and why."""

    backend: str
    reason: str
    source: str
    request: Request
    stats: object
    candidates: list[Candidate]

    def __str__(self) -> str:
        s = self.stats
        lines = [
            f"backend: {self.backend} ({self.source})",
            f"reason:  {self.reason}",
            f"call:    {self.request.kind} op={self.request.op} reduce={self.request.reduce} "
            f"features={self.request.feature_width} dtype={str(self.request.dtype).replace('torch.', '')} "
            f"device={self.request.device}",
            f"graph:   {s.num_src_nodes} src / {s.num_dst_nodes} dst nodes, {s.num_edges} edges, "
            f"in-degree mean {s.mean_in_degree:.2f} max {s.max_in_degree} cv {s.cv_in_degree:.2f}",
            "candidates:",
        ]
        for c in self.candidates:
            cost = f"{c.estimate_us:10.1f} us" if c.estimate_us is not None else "         --"
            lines.append(f"  {c.name:<14}{cost}  {c.note}")
        return "\n".join(lines)


def _candidates(stats, request: Request) -> list[Candidate]:
    out = []
    for name, backend in registry.all_backends().items():
        status = registry.status_of(name)
        if not status.ok:
            out.append(Candidate(name, None, f"unavailable: {status.detail}"))
            continue
        reason = backend.unsupported_reason(request)
        if reason is not None:
            out.append(Candidate(name, None, f"cannot run this call: {reason}"))
            continue
        out.append(Candidate(name, backend.estimate_us(stats, request), status.detail))
    return out


def _pick(stats, request: Request) -> tuple[str, str, list[Candidate]]:
    candidates = _candidates(stats, request)
    runnable = [c for c in candidates if c.estimate_us is not None]
    if not runnable:
        raise RuntimeError(f"no backend can run {request.kind} {request.op} on {request.device}: "
                           + "; ".join(f"{c.name}: {c.note}" for c in candidates))
    best = min(runnable, key=lambda c: c.estimate_us)
    others = sorted((c for c in runnable if c is not best), key=lambda c: c.estimate_us)
    if others:
        reason = (f"lowest estimated time ({best.estimate_us:.0f} us vs {others[0].name} "
                  f"{others[0].estimate_us:.0f} us)")
    else:
        reason = "the only backend that can run this call here"
    skipped = [c for c in candidates if c.estimate_us is None]
    if skipped:
        reason += "; skipped " + ", ".join(f"{c.name} ({c.note})" for c in skipped)
    return best.name, reason, candidates


def choose(graph, request: Request, explicit: str | None = None) -> str:
    """The backend name for this call (fast path: auto decisions are cached on the graph)."""
    name, source = current_choice(explicit)
    if name != "auto":
        backend = registry.get(name)
        reason = backend.unsupported_reason(request)
        if reason is not None:
            raise RuntimeError(f"backend {name!r} (chosen via {source}) cannot run {request.kind} "
                               f"{request.op}: {reason}. Use another backend or 'auto'.")
        return name
    key = ("auto", request)
    cache = graph._cache
    if key not in cache:
        cache[key] = _pick(graph.stats(), request)[0]
    return cache[key]


def explain(graph, op: str = "copy_u", reduce: str | None = "sum", feat=64, *,
            backend: str | None = None) -> Explanation:
    """Which backend a call would run on, the statistics and estimates behind it.

    Args:
        graph: a :class:`unigraph.Graph`.
        op: a gspmm op ("copy_u", "u_mul_e", ...), a gsddmm op ("dot", "add", ...), "edge_softmax"
            or "gat_attention" (whose width is heads x features).
        reduce: the gspmm reduce (ignored for the others).
        feat: a feature tensor (its width, dtype and device are used) or a feature width.
        backend: explain an explicit choice instead of the current one.
    """
    from unigraph.ops.spec import GSDDMM_OPS, GSPMM_OPS
    if op in GSPMM_OPS:
        kind = "gspmm"
    elif op in GSDDMM_OPS:
        kind, reduce = "gsddmm", None
    elif op == "edge_softmax":
        kind, op, reduce = "edge_softmax", "softmax", None
    elif op == "gat_attention":
        kind, op, reduce = "gat_attention", "gat", None
    else:
        raise ValueError(f"op must be a gspmm op {GSPMM_OPS}, a gsddmm op {GSDDMM_OPS}, 'edge_softmax' or "
                         f"'gat_attention'; got {op!r}")
    if isinstance(feat, torch.Tensor):
        width, dtype, device = math.prod(feat.shape[1:]), feat.dtype, feat.device
    else:
        width, dtype, device = int(feat), torch.float32, graph.device
    request = Request(kind, op, reduce, width, dtype, device)
    stats = graph.stats()
    name, source = current_choice(backend)
    if name == "auto":
        chosen, reason, candidates = _pick(stats, request)
        return Explanation(chosen, reason, "auto", request, stats, candidates)
    candidates = _candidates(stats, request)
    return Explanation(name, f"requested via {source}", source, request, stats, candidates)


# ---------------------------------------------------------------------- info
@dataclasses.dataclass
class Info:
    torch_version: str
    cuda: str
    choice: str
    backends: dict[str, str]
    peers: dict[str, str]

    def __str__(self) -> str:
        lines = [f"unigraph on torch {self.torch_version}; GPU: {self.cuda}", f"backend choice: {self.choice}",
                 "kernels:"]
        lines += [f"  {name:<16}{detail}" for name, detail in self.backends.items()]
        lines.append("peers (optional, for conversions and benchmarks):")
        lines += [f"  {name:<16}{detail}" for name, detail in self.peers.items()]
        return "\n".join(lines)


def _peer_status(module: str) -> str:
    import importlib.util
    if importlib.util.find_spec(module) is None:
        return "not installed"
    return "installed"


def info() -> Info:
    """Which kernels are available here, what each runs on, and the current backend choice."""
    backends = {}
    for name in registry.all_backends():
        status = registry.status_of(name)
        backends[name] = ("available: " if status.ok else "unavailable: ") + status.detail
    name, source = current_choice()
    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none (CPU only)"
    peers = {"torch_geometric": _peer_status("torch_geometric"), "dgl": _peer_status("dgl")}
    return Info(torch.__version__, cuda, f"{name} (from {source})", backends, peers)
