"""Tracing a user's message function with torch.fx, over inputs tagged by where they live.

A message function reads per-edge views of tensors that live on source nodes (``x_j``, DGL's
``edges.src[...]``), on destination nodes (``x_i``, ``edges.dst[...]``), on edges (``edge_attr``,
``edges.data[...]``) or nowhere in particular (constants). :func:`trace` runs the function once on
fx proxies, one placeholder per tagged input, and records the torch calls it makes; the
interpreter in :mod:`unigraph.message_passing.lazy` then decides, call by call, what can run on
node rows, what becomes a g-SDDMM, and what the final reduction turns into.

Tensors the function reaches through closures or module attributes (weights, say) are not
inputs: they are recorded as constants inside the trace, and so is every Python value it read
(``self.tau``, ``self.training``, a global) and every branch it took. A trace is therefore a
snapshot of one call: callers trace again on every call (see
:mod:`unigraph.message_passing.base`, "Why every call traces") and never replay an old one.

Two things a proxy-level trace cannot record are refused while tracing (:class:`EagerOnly`; the
caller then runs the function as written, with the reason in its plan):

* **writes** into traced values (``y.relu_()``, ``y += b``, ``out=``, ``inplace=True``,
  ``y[m] = 0``, ``y.data = ...``, hooks), except a write into a fresh intermediate that nothing
  has viewed, which is recorded as its out-of-place form (:mod:`~unigraph.message_passing.mutation`);
* **mode changes**: a call recorded under another grad mode, inference mode, autocast state or
  default dtype than the trace started with (``with torch.no_grad():``, ``@torch.no_grad``
  helpers, ``torch.enable_grad()`` inside ``no_grad``, a ``torch.autograd.Function``, whose
  forward runs without grad), or a function that leaves one changed. A trace runs under the
  caller's modes, and so does the program it becomes.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
import torch.fx
from torch.fx.proxy import Attribute, GraphAppendingTracer, Proxy, TraceError

from unigraph.message_passing.mutation import AUGMENTED_METHODS, fresh_result, functional_form, mutation, target_name

U, V, E, CONST = "u", "v", "e", "c"  # source nodes, destination nodes, edges, no row dimension
DOMAIN_NAMES = {U: "source nodes", V: "destination nodes", E: "edges", CONST: "constant"}

# What a message function may raise when it meets a proxy instead of a tensor: Python control
# flow on a traced value (TraceError), a C function that does not dispatch __torch_function__
# (TypeError, RuntimeError, NotImplementedError), or attribute/shape access a proxy cannot answer.
# The caller then runs the function eagerly on materialized messages, where a genuine bug in the
# function raises again, and the explanation records why tracing stopped.
TRACE_ERRORS = (TraceError, TypeError, RuntimeError, NotImplementedError, AttributeError, ValueError,
                IndexError, KeyError)


class EagerOnly(TraceError):
    """The function writes into a traced value or changes a mode while it runs: a trace of it
    would not compute what it computes (see the module docstring). It runs as written instead."""


def mode_state() -> tuple:
    """What a recorded call's result depends on besides its arguments: grad mode, inference mode,
    autocast (CPU and CUDA: whether on, and the dtype while on) and the default dtype."""
    cpu, cuda = torch.is_autocast_enabled("cpu"), torch.is_autocast_enabled("cuda")
    return (torch.is_grad_enabled(), torch.is_inference_mode_enabled(),
            cpu, cpu and torch.get_autocast_dtype("cpu"), cuda, cuda and torch.get_autocast_dtype("cuda"),
            torch.get_default_dtype())


_MODE_NAMES = ("grad mode", "inference mode", "CPU autocast", "CPU autocast dtype", "CUDA autocast",
               "CUDA autocast dtype", "default dtype")


def _restore_modes(state: tuple) -> None:
    """Put back what a function left changed (inference mode has no setter: it stays as left)."""
    grad, _, cpu_on, cpu_dtype, cuda_on, cuda_dtype, default_dtype = state
    torch.set_grad_enabled(grad)
    for device, on, dtype in (("cpu", cpu_on, cpu_dtype), ("cuda", cuda_on, cuda_dtype)):
        torch.set_autocast_enabled(device, on)
        if on:
            torch.set_autocast_dtype(device, dtype)
    torch.set_default_dtype(default_dtype)


def _changed(before: tuple, after: tuple) -> str:
    return ", ".join(f"{name} {b} (it was {a} when the function began)"
                     for name, a, b in zip(_MODE_NAMES, before, after) if a != b)


class _Guarded:
    """Writes into a traced value go through the tracer (see :mod:`.mutation`), never lost."""

    def __getattr__(self, name: str) -> "_Attribute":
        return _Attribute(self, name)

    def __setitem__(self, index: Any, value: Any) -> None:
        self.tracer.refuse("an item assignment (y[...] = v) writes into a traced value")

    def __delitem__(self, index: Any) -> None:
        self.tracer.refuse("del y[...] writes into a traced value")


def _settable(name: str) -> property:
    """A tensor attribute whose assignment writes into the tensor (``y.data = ...``): reading it
    is traced as before, assigning it is refused."""
    def refuse(self, value: Any) -> None:
        self.tracer.refuse(f"setting .{name} of a traced value writes into it")
    return property(lambda self: _Attribute(self, name), refuse)


for _name in ("data", "grad", "requires_grad", "real", "imag", "names"):
    setattr(_Guarded, _name, _settable(_name))


def _augmented(function):
    def method(self, other: Any) -> Any:  # `y += b`: recorded as a write into y, returns y itself
        return self.tracer.create_proxy("call_function", function, (self, other), {})
    return method


for _name, _function in AUGMENTED_METHODS.items():
    setattr(_Guarded, _name, _augmented(_function))


class _Proxy(_Guarded, Proxy):
    """A traced value."""


class _Attribute(_Guarded, Attribute):
    """An attribute of a traced value (``y.T``, ``y.data``, or a method about to be called)."""


def _fresh(node: torch.fx.Node) -> bool:
    """Whether the node's value is a new tensor sharing memory with nothing else (see
    :func:`~unigraph.message_passing.mutation.fresh_result`); asked only when a write is traced."""
    if "fresh" not in node.meta:
        node.meta["fresh"] = node.op != "placeholder" and fresh_result(node.op, node.target, node.args, _is_tensor)
    return node.meta["fresh"]


def _is_tensor(a: Any) -> bool:
    """A traced argument known to be a tensor at run time (an input, or a fresh result)."""
    if isinstance(a, torch.fx.Node):
        return a.op == "placeholder" or _fresh(a)
    return isinstance(a, torch.Tensor)


_SHAPE_QUERIES = frozenset({"shape", "ndim", "dtype", "device", "layout", "is_cuda", "size", "dim", "numel"})


def _aliases(user: torch.fx.Node) -> bool:
    """Whether a call's result may share memory with its arguments (a view, an unknown call)."""
    if _fresh(user):
        return False
    if user.op == "call_method" and user.target in _SHAPE_QUERIES:
        return False
    return not (user.target is getattr and len(user.args) == 2 and user.args[1] in _SHAPE_QUERIES)


class _Tracer(GraphAppendingTracer):
    """Appends to a given fx graph; tensors met as arguments stay in the graph as constants; writes
    and mode changes are recorded exactly or refused (see the module docstring)."""

    def __init__(self, graph: torch.fx.Graph, modes: tuple):
        super().__init__(graph)
        self.modes = modes
        self.refused: str | None = None  # kept: a function that catches EagerOnly still runs eagerly

    def refuse(self, reason: str):
        self.refused = self.refused or reason
        raise EagerOnly(reason)

    def create_arg(self, a: Any):
        if isinstance(a, torch.Tensor):
            return a
        return super().create_arg(a)

    def proxy(self, node: torch.fx.Node) -> Proxy:
        return _Proxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
        now = mode_state()
        if now != self.modes:
            self.refuse(f"{target_name(target)}() ran with {_changed(self.modes, now)}: a trace records "
                        "calls, not the modes they ran under")
        what = mutation(kind, target, args, kwargs)
        if what is None:
            return super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        subject = args[0] if args else None
        twin = functional_form(kind, target, args, kwargs)
        if twin is None:
            self.refuse(f"{what}, and unigraph knows no out-of-place form of it")
        if type(subject) is not _Proxy:
            self.refuse(f"{what}, which is not a value computed inside the message (a constant or a view)")
        if subject.node.op == "placeholder":
            self.refuse(f"{what}, which is an input of the message")
        if not _fresh(subject.node):
            self.refuse(f"{what}, the result of {target_name(subject.node.target)}(), which may share memory "
                        "with another tensor (a view, or its input)")
        viewed = [user.name for user in subject.node.users if _aliases(user)]
        if viewed:
            self.refuse(f"{what}, which {', '.join(viewed)} may view")
        # exact: the value is fresh and nothing views it, so only the Python references to it see the
        # write, and they all hold this proxy: point it at the out-of-place result
        result = super().create_proxy(*twin)
        result.node.meta["in_place"] = True
        subject.node = result.node
        return subject


def random_state(devices) -> tuple:
    """The state of the generators a function's random calls draw from on ``devices`` (the CPU's
    always), for :func:`restore_random_state`: a function that was traced and then runs eagerly
    must draw what it would have drawn without the trace."""
    cuda = sorted({_cuda_index(torch.device(d)) for d in devices if torch.device(d).type == "cuda"})
    return torch.get_rng_state(), [(index, torch.cuda.get_rng_state(index)) for index in cuda]


def _cuda_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def restore_random_state(state: tuple) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    for index, value in cuda:
        torch.cuda.set_rng_state(value, index)


@dataclasses.dataclass(frozen=True)
class TracedInput:
    key: str      # how the caller names the value it supplies (e.g. "x_j", "src:h")
    domain: str   # U, V, E or CONST


@dataclasses.dataclass(frozen=True)
class Ref:
    """An argument that is the result of instruction ``index`` of the program."""

    index: int


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One traced call (or input). The program is plain Python data rather than fx nodes, so that
    ``torch.compile`` can trace the interpreter that runs it (dynamo does not walk fx graphs)."""

    op: str        # "placeholder", "call_function" or "call_method"
    target: Any    # the callable, the method name, or (placeholders) the input key
    args: tuple
    kwargs: dict
    name: str
    domain: str | None = None  # placeholders: U, V, E or CONST
    in_place: bool = False     # the out-of-place form of a write into args[0] (see .mutation)


@dataclasses.dataclass
class Traced:
    """A message function as a program of instructions. ``output`` mirrors what the function
    returned, with :class:`Ref` in place of tensors (one, or a dict of them DGL-style)."""

    program: tuple[Instruction, ...]
    output: Any

    @property
    def inputs(self) -> list[TracedInput]:
        return [TracedInput(ins.target, ins.domain) for ins in self.program if ins.op == "placeholder"]

    def code(self) -> str:
        """The traced calls, one per line (for explanations)."""
        lines = []
        for ins in self.program:
            if ins.op != "placeholder":
                target = ins.target if isinstance(ins.target, str) else getattr(ins.target, "__name__", str(ins.target))
                args = ", ".join(self._describe(a) for a in ins.args)
                kwargs = "".join(f", {k}={self._describe(v)}" for k, v in ins.kwargs.items())
                note = "  # written in place" if ins.in_place else ""
                lines.append(f"{ins.name} = {target}({args}{kwargs}){note}")
        return "\n".join(lines)

    def _describe(self, arg: Any) -> str:
        if isinstance(arg, Ref):
            return self.program[arg.index].name
        if isinstance(arg, torch.Tensor):
            return f"<const {list(arg.shape)}>"
        if isinstance(arg, (list, tuple)):
            inner = ", ".join(self._describe(a) for a in arg)
            return f"[{inner}]" if isinstance(arg, list) else f"({inner})"
        return repr(arg)


_CONTAINERS = (tuple, list, dict, slice)


def map_structure(tree: Any, fn) -> Any:
    """Apply ``fn`` to every leaf of nested tuples, lists, dicts and slices (fx's ``map_aggregate``
    without fx, so that dynamo can trace it)."""
    if not isinstance(tree, _CONTAINERS):
        return fn(tree)
    if isinstance(tree, tuple):
        items = [map_structure(t, fn) for t in tree]
        if type(tree) is tuple:
            return tuple(items)
        # keep named results (torch.return_types.max, namedtuples): the message reads `.values`
        return tree._make(items) if hasattr(tree, "_make") else type(tree)(items)
    if isinstance(tree, list):
        return [map_structure(t, fn) for t in tree]
    if isinstance(tree, dict):
        return {k: map_structure(v, fn) for k, v in tree.items()}
    if isinstance(tree, slice):
        return slice(map_structure(tree.start, fn), map_structure(tree.stop, fn), map_structure(tree.step, fn))
    return fn(tree)


def leaves(tree: Any) -> list:
    """The leaves of nested tuples, lists, dicts and slices, in order (nothing is rebuilt)."""
    out: list = []
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, (tuple, list)):
            stack.extend(reversed(item))
        elif isinstance(item, slice):
            stack.extend((item.step, item.stop, item.start))
        else:
            out.append(item)
    return out


class InputFactory:
    """Hands the traced function a proxy per tagged input, creating placeholders on first use
    (so DGL-style functions only get inputs for the fields they read)."""

    def __init__(self, graph: torch.fx.Graph, tracer: GraphAppendingTracer):
        self._graph, self._tracer = graph, tracer
        self.inputs: dict[str, TracedInput] = {}  # placeholder name -> input
        self._proxies: dict[str, Proxy] = {}

    def __call__(self, key: str, domain: str) -> Proxy:
        if key not in self._proxies:
            node = self._graph.placeholder(_placeholder_name(key, len(self._proxies)))
            self.inputs[node.name] = TracedInput(key, domain)
            self._proxies[key] = self._tracer.proxy(node)
        return self._proxies[key]


def _placeholder_name(key: str, index: int) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in key)
    return cleaned if cleaned and cleaned[0].isalpha() else f"in{index}_{cleaned}"


def trace(call: Callable[[InputFactory], Any]) -> Traced:
    """Trace ``call(inputs)``, which invokes the user's function with proxies from ``inputs``.

    Raises one of :data:`TRACE_ERRORS` when the function cannot be traced, or ``TypeError`` when
    it returns something other than a tensor (or a dict of tensors for DGL-style functions).
    """
    graph = torch.fx.Graph()
    modes = mode_state()
    tracer = _Tracer(graph, modes)
    factory = InputFactory(graph, tracer)
    try:
        result = call(factory)
    finally:
        left = mode_state()
        if left != modes:  # the caller (and the eager run that follows) must start where it started
            _restore_modes(modes)
    if tracer.refused:
        raise EagerOnly(tracer.refused)
    if left != modes:
        raise EagerOnly(f"the function left {_changed(modes, left)}")
    output = _output_nodes(result)
    index: dict[torch.fx.Node, int] = {}
    program = []

    def ref(a: Any) -> Any:
        return Ref(index[a]) if isinstance(a, torch.fx.Node) else a

    for node in graph.nodes:
        index[node] = len(program)
        if node.op == "placeholder":
            spec = factory.inputs[node.name]
            program.append(Instruction("placeholder", spec.key, (), {}, node.name, spec.domain))
        else:  # our tracer records constants inline: only calls remain
            # map_structure also turns fx's immutable containers into plain tuples, lists and dicts
            program.append(Instruction(node.op, node.target, map_structure(node.args, ref),
                                       map_structure(node.kwargs, ref), node.name,
                                       in_place=node.meta.get("in_place", False)))
    return Traced(tuple(program), map_structure(output, ref))


def _output_nodes(result: Any):
    if isinstance(result, Proxy):
        return result.node
    if isinstance(result, dict):
        return {key: _output_nodes(value) for key, value in result.items()}
    if isinstance(result, torch.Tensor):  # computed from constants alone: not a per-edge value
        raise TypeError("the message function returned a tensor that does not depend on any of its "
                        "per-edge inputs; a message must be computed from x_j, x_i or edge features")
    raise TypeError(f"a message function must return a tensor (or, DGL-style, a dict of tensors); "
                    f"got {type(result).__name__}")

