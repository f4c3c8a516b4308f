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
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch
import torch.fx
from torch.fx.proxy import GraphAppendingTracer, Proxy, TraceError

U, V, E, CONST = "u", "v", "e", "c"  # source nodes, destination nodes, edges, no row dimension
DOMAIN_NAMES = {U: "source nodes", V: "destination nodes", E: "edges", CONST: "constant"}

# What a message function may raise when it meets a proxy instead of a tensor: Python control
# flow on a traced value (TraceError), a C function that does not dispatch __torch_function__
# (TypeError, RuntimeError, NotImplementedError), or attribute/shape access a proxy cannot answer.
# The caller then runs the function eagerly on materialized messages, where a genuine bug in the
# function raises again, and the explanation records why tracing stopped.
TRACE_ERRORS = (TraceError, TypeError, RuntimeError, NotImplementedError, AttributeError, ValueError,
                IndexError, KeyError)


class _ConstantKeepingTracer(GraphAppendingTracer):
    """Appends to a given fx graph; tensors met as arguments stay in the graph as constants."""

    def create_arg(self, a: Any):
        if isinstance(a, torch.Tensor):
            return a
        return super().create_arg(a)


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
                lines.append(f"{ins.name} = {target}({args}{kwargs})")
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
            self._proxies[key] = Proxy(node, self._tracer)
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
    tracer = _ConstantKeepingTracer(graph)
    factory = InputFactory(graph, tracer)
    output = _output_nodes(call(factory))
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
                                       map_structure(node.kwargs, ref), node.name))
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

