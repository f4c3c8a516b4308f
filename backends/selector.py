"""Which backend runs an operator call: the user's choice, ``auto``'s cost model, or ``auto-tune``.

Precedence, highest first:

1. ``backend=`` passed to the op,
2. the innermost ``with unigraph.use_backend(name):``,
3. ``unigraph.set_backend(name)``,
4. the environment variable ``UNIGRAPH_BACKEND``,
5. ``auto`` (the default).

A choice is ``auto``, ``auto-tune``, a registered backend or a family name (:mod:`unigraph.backends`):

* A named backend that cannot run here (its dependency is missing) or cannot run the call (an
  op, dtype or device its contract excludes, or a finer rule of its own) raises an error saying
  why; it is never silently replaced. A *family* name (``triton``) is resolved per call to the
  variant the cost model estimates fastest among those that can run it.
* ``auto`` asks every available backend whose contract allows the call and lets ``auto`` pick
  it for an estimate (:mod:`unigraph.backends.cost_model`, through the backend's
  ``estimate_us``) and takes the cheapest. It skips backends whose estimate is infinite (Triton
  on the CPU: its interpreter), and says so in ``explain``.
* ``auto-tune`` measures every candidate ``auto`` would consider on the first call of each
  kind and keeps the fastest (:mod:`unigraph.backends.autotune`).

Automatic decisions and family resolutions are kept on the graph (``Graph.memo``), per request.
:func:`choose` returns the :class:`~unigraph.backends.Backend` object, looked up once per call.

Under ``torch.compile``, :func:`current_choice` is traced (dynamo guards on the ``use_backend``
stack and ``set_backend``: another choice recompiles), and the decision for that choice is made
once, while tracing, and kept in the compiled graph as a constant (as
``torch.compiler.assume_constant_result`` does), so an explicit backend compiles with no eager
warm-up. ``auto`` decides from the statistics of the graph being traced, and the compiled program
keeps that backend for every graph it then runs: it is guarded on the request (op, reduce, dtype,
device, feature width, grad mode) but not on the graph, so a new graph of any size (mini-batch
training) does not recompile. ``UNIGRAPH_BACKEND`` is read while tracing: changing it in a running
process does not recompile. Neither can change a result, since every backend computes the same
function; only the speed of graphs unlike the traced one.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import operator
import os
from typing import Callable, Iterator

import torch

from unigraph import backends as registry
from unigraph.backends import autotune, small_graph
from unigraph.backends.base import Backend, Request, differentiated
from unigraph.structure import degree_stats

ENV_VAR = "UNIGRAPH_BACKEND"
AUTO_CHOICES = ("auto", "auto-tune")
log = logging.getLogger("unigraph")

_context_stack: list[str] = []
_global_choice: str | None = None


# ---------------------------------------------------------------------- user choice
def _validated(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"backend name must be a string, got {type(name).__name__}")
    if name not in AUTO_CHOICES:
        registry.check_choice(name)  # raises for unknown or unavailable backends
    return name


def set_backend(name: str | None) -> None:
    """Use backend ``name`` ("auto", "auto-tune" or a registered name) from now on; None restores
    the default."""
    global _global_choice
    _global_choice = None if name is None else _validated(name)


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[None]:
    """Run the ops inside the block on backend ``name`` ("auto" to let the cost model pick,
    "auto-tune" to measure)."""
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
    env = _environment_value().strip()
    if env:
        if env not in AUTO_CHOICES and env not in registry.names():
            raise ValueError(f"{ENV_VAR}={env!r} names no backend; choose one of: "
                             f"{', '.join(AUTO_CHOICES + tuple(registry.names()))}")
        return env, ENV_VAR
    return "auto", "default"


def _environment_value() -> str:
    """``os.environ.get(ENV_VAR, "")``, read now (a change at run time counts). When the variable
    is unset, as it mostly is, ``os.environ.get`` raises and catches a ``KeyError`` inside (~0.5 us
    a call, two or three calls a layer call); CPython's ``os.environ`` keeps its entries in its
    ``_data`` dict under ``encodekey(name)``, read here directly (~0.1 us) wherever it has them."""
    environ = os.environ
    data, encode = getattr(environ, "_data", None), getattr(environ, "encodekey", None)
    if not isinstance(data, dict) or encode is None:
        return environ.get(ENV_VAR, "")
    value = data.get(_encoded_name(encode))
    return "" if value is None else environ.decodevalue(value)


@functools.lru_cache(maxsize=4)
def _encoded_name(encode) -> object:
    return encode(ENV_VAR)


# ---------------------------------------------------------------------- candidates
@dataclasses.dataclass
class Candidate:
    name: str
    estimate_us: float | None  # None: cannot run this call here
    note: str
    auto: bool = True          # whether auto may pick it (finite estimate, not a family name)
    measured_us: float | None = None


def _candidates(stats, request: Request, names: list[str] | None = None) -> list[Candidate]:
    """Every backend (or those in ``names``) with its estimate for ``request``, or why it cannot run it."""
    out = []
    for name in names if names is not None else list(registry.all_backends()):
        backend = registry.all_backends()[name]
        status = registry.status_of(name)
        if not status.ok:
            out.append(Candidate(name, None, f"unavailable: {status.detail}", False))
            continue
        reason = backend.cannot_run(request)
        if reason is not None:
            out.append(Candidate(name, None, f"cannot run this call: {reason}", False))
            continue
        estimate = backend.estimate_us(stats, request)
        if not backend.contract.auto:
            out.append(Candidate(name, estimate, "never picked by auto (its contract says so)", False))
        elif not math.isfinite(estimate):
            out.append(Candidate(name, estimate, f"never picked by auto here: {status.detail}", False))
        else:
            out.append(Candidate(name, estimate, status.detail))
    return out


def _cheapest(candidates: list[Candidate], request: Request, what: str) -> tuple[str, str]:
    """``(name, reason)`` of the lowest estimate among the auto-eligible candidates."""
    eligible = [c for c in candidates if c.auto]
    if not eligible:
        raise RuntimeError(f"no {what} can run {request.kind} {request.op} on {request.device}: "
                           + "; ".join(f"{c.name}: {c.note}" for c in candidates))
    ranked = sorted(eligible, key=lambda c: c.estimate_us)  # stable: registry order breaks ties
    best = ranked[0]
    if not math.isfinite(best.estimate_us):
        reason = "no finite estimate here (interpreted kernels): the first that can run it"
    elif len(ranked) > 1:
        reason = f"lowest estimated time ({best.estimate_us:.0f} us vs {ranked[1].name} {ranked[1].estimate_us:.0f} us)"
    else:
        reason = "the only candidate that can run this call here"
    by_note: dict[str, list[str]] = {}  # backends skipped for the same reason share one mention
    for c in candidates:
        if not c.auto:
            by_note.setdefault(c.note, []).append(c.name)
    if by_note:
        reason += "; skipped " + "; ".join(f"{', '.join(names)} ({note})" for note, names in by_note.items())
    return best.name, reason


def _pick(stats, request: Request) -> tuple[str, str, list[Candidate]]:
    candidates = _candidates(stats, request)
    name, reason = _cheapest(candidates, request, "backend")
    return name, reason, candidates


def _pick_name(stats, request: Request) -> str:
    """:func:`_pick`'s choice without the candidates' notes and the reason it formats (what auto
    needs on every new graph of a mini-batch loop: about half of a decision's time). The same
    rule: the lowest finite estimate among the available, auto-eligible backends that can run
    the call, the registry's order breaking ties; none: :func:`_pick` raises, naming why."""
    best, best_us = None, math.inf
    for name, backend in registry.all_backends().items():
        if not (registry.status_of(name).ok and backend.contract.auto) or backend.cannot_run(request) is not None:
            continue
        estimate = backend.estimate_us(stats, request)
        if math.isfinite(estimate) and (best is None or estimate < best_us):
            best, best_us = name, estimate
    return best if best is not None else _pick(stats, request)[0]


def _resolve_family(stats, request: Request, family: str) -> tuple[str, str, list[Candidate]]:
    """The variant of family ``family`` the cost model prefers for this call."""
    candidates = _candidates(stats, request, list(registry.family(family).variants))
    for c in candidates:  # inside a family an infinite estimate only ranks last
        c.auto = c.estimate_us is not None
    name, reason = _cheapest(candidates, request, f"variant of {family!r}")
    return name, f"family {family!r} resolved to {name}: {reason}", candidates


def _tuned(stats, request: Request, trial: Callable[..., object] | None,
           operands: tuple = ()) -> tuple[str, str, list[Candidate]]:
    """auto-tune: the measured winner for this kind of call (measuring it now if needed)."""
    candidates = _candidates(stats, request)
    runnable = [c.name for c in candidates if c.auto]
    kind = autotune.signature(stats, request)
    measurement = autotune.TUNER.lookup(kind)
    if measurement is not None and measurement.winner not in runnable:
        measurement = None  # measured where another backend was available: measure again
    if measurement is None:
        if trial is None or torch.compiler.is_compiling():
            name, reason = _cheapest(candidates, request, "backend")
            log.info("auto-tune: %s not measured yet and cannot be measured now (%s); using the cost model's %s",
                     kind, "tracing" if trial is not None else "no inputs", name)
            return name, f"not measured yet: the cost model's choice ({reason})", candidates
        measurement = autotune.TUNER.measure(kind, runnable, trial, operands, request.device)
    for c in candidates:
        c.measured_us = measurement.timings_us.get(c.name)
    ranked = sorted(measurement.timings_us.items(), key=lambda item: item[1])
    reason = f"fastest measured ({ranked[0][1]:.0f} us" + (
        f" vs {ranked[1][0]} {ranked[1][1]:.0f} us)" if len(ranked) > 1 else ")")
    return measurement.winner, reason, candidates


def choose(graph, request: Request, explicit: str | None = None,
           trial: Callable[..., object] | None = None, operands: tuple = ()) -> Backend:
    """The backend for this call. ``trial(backend, *operands)`` runs the call on ``backend``
    (what auto-tune times, on private copies of ``operands``: it must read no tensor of the
    caller's but those). Automatic decisions and family resolutions are kept on the graph."""
    name, source = current_choice(explicit)
    if torch.compiler.is_compiling():
        gt = graph.tensors()
        # plain constants pass into _traced_choice well (not dataclasses, not backends); the width is
        # made a constant (operator.index: dynamo guards on it) where dynamic shapes made it symbolic
        fields = _fields(dataclasses.replace(request, feature_width=operator.index(request.feature_width)))
        return registry.all_backends()[_traced_choice(gt.in_ptr, gt.out_ptr, *fields, name, source)]
    return _decide(graph, request, name, source, trial, operands)


def auto_backend(graph, kind: str, op: str, reduce: str | None, width: int, dtype: torch.dtype,
                 device: torch.device, grad: bool, threads: int) -> Backend:
    """:func:`choose` for an eager call under the choice ``auto`` (the caller has read
    :func:`current_choice`), given the request's fields: the graph's memo is looked up under
    :func:`_decide`'s very key (both go through :func:`_automatic_on`) before any Request is
    built: the native lane's per-call path, where building it, reading the choice again and the
    checks of ``choose`` were most of a decision that hits."""
    fields = (kind, op, reduce, width, dtype, device, grad, threads)
    if torch.compiler.is_compiling():  # (the lane runs eagerly; a trace keeps choose's constant choice)
        return choose(graph, Request(*fields))
    return _automatic_on(graph, "auto", fields, lambda: Request(*fields))


def _decide(graph, request: Request, name: str, source: str,
            trial: Callable[..., object] | None = None, operands: tuple = ()) -> Backend:
    # keys of plain constants, not the Request dataclass (see _automatic_on)
    if name in AUTO_CHOICES:
        return _automatic_on(graph, name, _fields(request), lambda: request, trial, operands)
    if registry.family(name) is not None:
        return graph.memo(("unigraph.backends", "family", name) + _fields(request),
                          lambda: registry.get(_resolve_family(graph.stats(), request, name)[0]))
    return _named(request, name, source)


def _automatic_on(graph, name: str, fields: tuple, request: Callable[[], Request],
                  trial: Callable[..., object] | None = None, operands: tuple = ()) -> Backend:
    """``auto``'s or ``auto-tune``'s (``name``) decision for the request with these ``fields``,
    kept on the graph under a key of plain constants: a compiled program reads the graph's memo,
    and dynamo guards on every key of a dict holding another kind of key (see Graph.memo).
    ``request()`` builds the Request only when the graph has no decision yet."""
    return graph.memo(("unigraph.backends", name) + fields,
                      lambda: _automatic(graph.stats(), request(), name, trial, operands))


def _fields(request: Request) -> tuple:
    """The request's fields in order (``dataclasses.astuple`` deep-copies them: about 50 us a call)."""
    return (request.kind, request.op, request.reduce, request.feature_width, request.dtype, request.device,
            request.grad, request.threads)


def _automatic(stats, request: Request, name: str, trial: Callable[..., object] | None,
               operands: tuple = ()) -> Backend:
    """What ``auto`` or ``auto-tune`` (``name``) picks for a graph with these statistics."""
    if name == "auto":
        return registry.get(_pick_name(stats, request))
    timed = None if trial is None else (lambda n, *ops: trial(registry.get(n), *ops))
    return registry.get(_tuned(stats, request, timed, operands)[0])


def _named(request: Request, name: str, source: str) -> Backend:
    """The backend the user named, if it can run the call (else the error saying why)."""
    backend = registry.get(name)
    reason = backend.cannot_run(request)
    if reason is not None:
        raise RuntimeError(f"backend {name!r} (chosen via {source}) cannot run {request.kind} "
                           f"{request.op}: {reason}. Use another backend or 'auto'.")
    return backend


def _assume_constant_result(fn: Callable) -> Callable:
    """``torch.compiler.assume_constant_result`` without importing ``torch._dynamo`` (about a
    second) with unigraph: that decorator does nothing but set this attribute, which dynamo reads
    when it traces a call (``tests/ops/test_compile_ops.py`` checks that the two agree)."""
    fn._dynamo_marked_constant = True
    return fn


@_assume_constant_result
def _traced_choice(in_ptr, out_ptr, kind, op, reduce, width, dtype, device, grad, threads, name: str,
                   source: str) -> str:
    """The name :func:`_decide` would pick, as a constant of the compiled graph (see the module
    docstring). Dynamo runs this once while tracing, on the real row pointers of the graph being
    traced (so a graph built inside the compiled code has statistics too), and guards on none of
    its arguments' values: the choice stays with the compiled program for every graph it runs.
    It runs eagerly, so it reads torch's thread count itself where the front door could not
    (``threads`` 0 while tracing): the compiled program keeps the choice made for the thread count
    at trace time."""
    request = Request(kind, op, reduce, width, dtype, device, grad, threads or torch.get_num_threads())
    if name in AUTO_CHOICES:
        return _automatic(degree_stats(in_ptr, out_ptr), request, name, None).name
    if registry.family(name) is not None:
        return _resolve_family(degree_stats(in_ptr, out_ptr), request, name)[0]
    return _named(request, name, source).name


# ---------------------------------------------------------------------- explain
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
            f"device={self.request.device} threads={self.request.threads or 'as measured'} "
            + ("(differentiated: ranked by forward + backward)" if self.request.grad else "(forward only)"),
            f"graph:   {s.num_src_nodes} src / {s.num_dst_nodes} dst nodes, {s.num_edges} edges, "
            f"in-degree mean {s.mean_in_degree:.2f} max {s.max_in_degree} cv {s.cv_in_degree:.2f}, "
            f"max out-degree {s.max_out_degree}",
            "candidates:",
        ]
        for c in self.candidates:
            cost = f"{c.estimate_us:10.1f} us" if c.estimate_us is not None and math.isfinite(c.estimate_us) \
                else "         --"
            measured = f"  (measured {c.measured_us:.1f} us)" if c.measured_us is not None else ""
            lines.append(f"  {c.name:<14}{cost} estimated{measured}  {c.note}")
        return "\n".join(lines)


def explain_request(stats, request: Request, choice: str = "auto", source: str = "auto",
                    fresh: bool = False) -> Explanation:
    """The decision for ``request`` on a graph with statistics ``stats`` under ``choice``
    (what :func:`explain` prints; usable for a device this machine does not have); ``fresh``: the
    graph has no CSR yet (the small-graph rule's larger bound for its first calls)."""
    if choice == "auto":
        name, reason, candidates = _pick(stats, request)
        device = torch.device(request.device)
        if small_graph.applies_to_request(stats.num_edges, request.kind, request.op, request.reduce,
                                          request.feature_width, request.dtype, device, request.threads,
                                          fresh, request.grad):
            # the native lane applies the rule before any estimate (unigraph/ops/native_lane.py)
            extreme, copy_e = request.reduce in small_graph.EXTREMES, request.op == small_graph.COPY_E
            rule = small_graph.reason(stats.num_edges, request.feature_width, request.threads, fresh, device,
                                      request.grad, extreme, copy_e)
            backend = small_graph.backend_for(stats.num_edges, request.feature_width, device, request.grad, extreme,
                                              copy_e)
            return Explanation(backend, f"{rule}; "
                               f"the cost model's pick otherwise: {name} ({reason})", "auto", request, stats,
                               candidates)
        return Explanation(name, reason, "auto", request, stats, candidates)
    if choice == "auto-tune":
        name, reason, candidates = _tuned(stats, request, None)
        return Explanation(name, reason, "auto-tune", request, stats, candidates)
    if registry.family(choice) is not None:
        name, reason, _ = _resolve_family(stats, request, choice)
        return Explanation(name, f"requested via {source}; {reason}", source, request, stats,
                           _candidates(stats, request))
    registry.get(choice)  # raises for unknown or unavailable backends
    return Explanation(choice, f"requested via {source}", source, request, stats, _candidates(stats, request))


def explain(graph, op: str = "copy_u", reduce: str | None = "sum", feat=64, *,
            backend: str | None = None, grad: bool | None = None) -> Explanation:
    """Which backend a call would run on, the statistics and estimates behind it.

    Args:
        graph: a :class:`unigraph.Graph`.
        op: a gspmm op ("copy_u", "u_mul_e", ...), a gsddmm op ("dot", "add", ...), "edge_softmax"
            or "gat_attention" (whose width is heads x features).
        reduce: the gspmm reduce (ignored for the others).
        feat: a feature tensor (its width, dtype and device are used; for ``dot`` an operand, whose
            last dimension the dot reduces) or the output feature width.
        backend: explain an explicit choice instead of the current one.
        grad: whether the call is differentiated (the CPU cost model then ranks forward + backward
            time); None: as the ops decide, from ``feat.requires_grad`` and grad mode (False for a width).

    Given a message-passing layer instead of a graph, returns how its last propagate ran (fused
    or materialized, and why): the layer's own ``explain()``.

    The statistics it reads build a CPU graph's CSRs where none exist yet: it explains the call as
    it would have run before, and later calls on the graph are decided as on a graph whose CSRs
    are built (the small-graph rule's larger bound for new graphs no longer applies to it).
    """
    if not hasattr(graph, "stats") and callable(getattr(graph, "explain", None)):  # a unigraph.nn layer
        return graph.explain()
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
        # the width the ops front door gives the cost model (for dot: the elements it multiplies)
        width, dtype, device = max(math.prod(feat.shape[1:]), 1), feat.dtype, feat.device
    else:
        width, dtype, device = int(feat), torch.float32, graph.device
    if grad is None:
        grad = isinstance(feat, torch.Tensor) and differentiated(feat)
    name, source = current_choice(backend)
    fresh = small_graph.is_fresh(graph)   # read before the statistics, which build the CSRs
    return explain_request(graph.stats(), Request(kind, op, reduce, width, dtype, device, bool(grad),
                                                  torch.get_num_threads()), name, source, fresh)


# ---------------------------------------------------------------------- info
@dataclasses.dataclass
class Info:
    torch_version: str
    cuda: str
    choice: str
    backends: dict[str, str]
    families: dict[str, str]
    peers: dict[str, str]

    def __str__(self) -> str:
        lines = [f"unigraph on torch {self.torch_version}; GPU: {self.cuda}", f"backend choice: {self.choice}",
                 "kernels:"]
        lines += [f"  {name:<16}{detail}" for name, detail in self.backends.items()]
        lines += [f"  {name:<16}{detail}" for name, detail in self.families.items()]
        lines.append("peers (optional, for conversions and benchmarks):")
        lines += [f"  {name:<16}{detail}" for name, detail in self.peers.items()]
        return "\n".join(lines)


PEERS = ("torch_geometric", "dgl")


def _peer_status(module: str) -> str:
    """Whether peer ``module`` is installed and whether it can actually be imported here."""
    return _peer_statuses((module,))[module]


@functools.lru_cache(maxsize=None)
def _peer_statuses(modules: tuple[str, ...]) -> dict[str, str]:
    """``_peer_status`` of several modules, probed once per process in one subprocess (so that a
    failing or slow import, DGL's on a torch it was not built for, cannot harm this process)."""
    import importlib.util
    import json
    import subprocess
    import sys
    status = {m: "not installed" for m in modules if importlib.util.find_spec(m) is None}
    status.update({m: "installed, imported" for m in modules if m not in status and m in sys.modules})
    probe = [m for m in modules if m not in status]
    if probe:
        script = ("import importlib, json, sys\nout = {}\nfor m in sys.argv[1:]:\n    try:\n"
                  "        importlib.import_module(m)\n        out[m] = None\n"
                  "    except BaseException as err:  # reported to the parent, which names it\n"
                  "        out[m] = f'{type(err).__name__}: {err}'.splitlines()[0]\nprint(json.dumps(out))\n")
        done = subprocess.run([sys.executable, "-c", script, *probe], capture_output=True, text=True, timeout=300)
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            tail = (done.stderr or done.stdout).strip().splitlines()
            failed = {m: f"the import probe exited with code {done.returncode}" + (f": {tail[-1]}" if tail else "")
                      for m in probe}
        else:
            failed = json.loads(lines[-1])
        status.update({m: "installed, importable" if failed[m] is None else
                       f"installed but cannot be imported: {failed[m]}" for m in probe})
    return status


def info() -> Info:
    """Which kernels are available here, what each runs on, the current backend choice, and
    whether the peer libraries (PyG, DGL) are installed and importable."""
    backends = {}
    for name in registry.all_backends():
        status = registry.status_of(name)
        backends[name] = ("available: " if status.ok else "unavailable: ") + status.detail
    families = {name: f"family: per call the faster of {' or '.join(f.variants)}"
                for name, f in registry.families().items()}
    name, source = current_choice()
    cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none (CPU only)"
    peers = _peer_statuses(PEERS)
    return Info(torch.__version__, cuda, f"{name} (from {source})", backends, families, peers)
