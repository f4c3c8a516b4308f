r"""The :class:`MessagePassing` base class: write ``message``, ``aggregate``, ``update``; ``propagate``
compiles them to the graph operators.

.. math::
    \mathbf{x}_i' = \gamma\Big(\mathbf{x}_i,\ \bigoplus_{j \in \mathcal{N}(i)}
    \phi(\mathbf{x}_i, \mathbf{x}_j, \mathbf{e}_{j,i})\Big)

``message`` is :math:`\phi`, ``aggregate`` is :math:`\bigoplus` (``aggr``: sum, mean, max, min),
``update`` is :math:`\gamma`. As in PyG, ``message`` asks for inputs by name: ``x_j`` is the
source-node row of the ``x`` passed to ``propagate`` and ``x_i`` the destination-node row; any other
name is passed through (an edge tensor has one row per edge). ``index``/``edge_index_i`` (the
destination of each edge), ``edge_index_j`` (its source), ``size_i``/``dim_size`` and ``size_j``
are provided too.

The fused path, and the one condition for it
--------------------------------------------
``propagate`` traces ``message`` once with torch.fx (per training mode and set of inputs) and runs
the trace through :mod:`unigraph.message_passing.lazy`: row-wise work runs on node rows, and the
reduction becomes a g-SpMM where the message is ``x_j``, an edge tensor, ``x_j op e``, or those
combined with destination terms that the reduction allows (for example ``x_j - x_i`` under max).
``(x_i * x_j).sum(-1)`` becomes a g-SDDMM dot. No E x F message tensor is built on that path.

The condition: ``aggregate`` is not overridden. Otherwise, or where a call in the message is not
row-wise, or the message cannot be traced (Python control flow on tensor values, say), the
messages are materialized per edge and reduced by ``aggregate``; that works on every backend.
``unigraph.explain(layer)`` (or ``layer.explain()``) says which happened and why.

Tracing runs ``message`` once with proxies: a message with side effects performs them once more.
A trace is reused while the training mode and the set of inputs stay the same; a message whose
Python branches read other mutable attributes should call :meth:`MessagePassing.clear_traces`
after changing them.
"""
from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import Tensor

from unigraph import ops
from unigraph.graph import Graph
from unigraph.message_passing.inputs import check_graph, check_rows, split_pair
from unigraph.message_passing.lazy import Interpreter, Record
from unigraph.message_passing.plan import MessagePlan
from unigraph.message_passing.tracing import CONST, E, TRACE_ERRORS, U, V, Traced, trace

AGGR_ALIASES = {"add": "sum", "sum": "sum", "mean": "mean", "max": "max", "min": "min"}
_SPECIAL_INPUTS = ("index", "edge_index_i", "edge_index_j", "size_i", "size_j", "dim_size")


def normalize_aggr(aggr: Any) -> str:
    if not isinstance(aggr, str) or aggr not in AGGR_ALIASES:
        raise ValueError(f"aggr must be one of {', '.join(AGGR_ALIASES)}; got {aggr!r}")
    return AGGR_ALIASES[aggr]


class MessagePassing(torch.nn.Module):
    r"""Base class for message-passing layers (see the module docstring for the equation and the
    fused path).

    Args:
        aggr (str, optional): the aggregation :math:`\bigoplus`: ``"sum"`` (alias ``"add"``),
            ``"mean"``, ``"max"`` or ``"min"``. (default: ``"sum"``)
        fuse (bool, optional): trace ``message`` and compile it to graph operators. ``False`` always
            materializes the messages (a reference path). (default: ``True``)
    """

    def __init__(self, aggr: str = "sum", *, fuse: bool = True):
        super().__init__()
        self.aggr = normalize_aggr(aggr)
        self.fuse = bool(fuse)
        self._traces: dict[tuple, Traced | str] = {}
        self._last_plan: MessagePlan | None = None

    # ------------------------------------------------------------------ the three user hooks
    def message(self, x_j: Tensor) -> Tensor:
        """:math:`\\phi`: the message of each edge (default: the source features)."""
        return x_j

    def aggregate(self, inputs: Tensor, g: Graph) -> Tensor:
        """:math:`\\bigoplus`: reduce per-edge ``inputs`` into the destination nodes of ``g``.
        Overriding it turns off the fused path (the messages are then materialized)."""
        return ops.gspmm(g, "copy_e", self.aggr, e=inputs)

    def update(self, aggr_out: Tensor) -> Tensor:
        """:math:`\\gamma`: the new destination features (default: the aggregation)."""
        return aggr_out

    # ------------------------------------------------------------------ propagate
    def propagate(self, g: Graph, **kwargs: Any) -> Tensor:
        """Run message, aggregate and update on graph ``g``; ``kwargs`` supply message inputs
        (``x`` for ``x_j``/``x_i``, edge tensors by name) and update inputs."""
        check_graph(g, f"{type(self).__name__}.propagate")
        inputs = self._message_inputs(g, kwargs)
        out = self._traced_propagate(g, inputs) if self.fuse else None
        if out is None:
            out = self._eager_propagate(g, inputs)
        return self.update(out, **self._update_inputs(g, kwargs))

    def explain(self) -> MessagePlan:
        """How the last ``propagate`` ran: fused or materialized, the primitive calls, and why."""
        if self._last_plan is None:
            raise RuntimeError(f"{type(self).__name__} has not propagated yet; call it once, then explain()")
        return self._last_plan

    def clear_traces(self) -> None:
        """Forget cached traces of ``message`` (after changing attributes its Python branches read)."""
        self._traces.clear()

    # ------------------------------------------------------------------ inputs
    def _message_inputs(self, g: Graph, kwargs: dict) -> list[tuple[str, str, Any]]:
        """``(name, domain, value)`` for every parameter of ``message``."""
        inputs = []
        parameters = _parameters(type(self).message)
        pairs: dict[str, tuple] = {}
        for name, parameter in parameters.items():
            if name.endswith(("_i", "_j")) and name[:-2] in kwargs:
                base = name[:-2]
                if base not in pairs:
                    needs_dst = f"{base}_i" in parameters
                    pairs[base] = split_pair(g, kwargs[base], base) if needs_dst else _source_only(g, kwargs[base], base)
                src, dst = pairs[base]
                value = src if name.endswith("_j") else dst
                if value is None:
                    raise ValueError(f"{type(self).__name__}.message needs {name} but {base} has no destination part")
                inputs.append((name, U if name.endswith("_j") else V, value))
            elif name in kwargs:
                value = kwargs[name]
                is_edge = isinstance(value, Tensor) and value.dim() > 0 and value.shape[0] == g.num_edges
                inputs.append((name, E if is_edge else CONST, value))
            elif name in _SPECIAL_INPUTS:
                inputs.append((name, *_special_input(g, name)))
            elif parameter.default is not inspect.Parameter.empty:
                inputs.append((name, CONST, parameter.default))
            else:
                raise TypeError(f"{type(self).__name__}.message needs {name!r} but propagate got no "
                                f"{name[:-2] if name.endswith(('_i', '_j')) else name!r} (got {sorted(kwargs)})")
        return inputs

    def _update_inputs(self, g: Graph, kwargs: dict) -> dict:
        names = list(_parameters(type(self).update))[1:]
        out = {}
        for name in names:
            if name in kwargs:
                out[name] = kwargs[name]
            elif name.endswith("_i") and name[:-2] in kwargs:
                out[name] = split_pair(g, kwargs[name[:-2]], name[:-2])[1]
        return out

    # ------------------------------------------------------------------ the two paths
    def _traced_propagate(self, g: Graph, inputs: list[tuple[str, str, Any]]) -> Tensor | None:
        traced = self._trace(inputs)
        owner = f"{type(self).__name__}.message"
        if isinstance(traced, str):
            self._last_plan = MessagePlan.eager(owner, traced)
            return None
        record = Record()
        interpreter = Interpreter(g, record)
        root = interpreter.run(traced, {name: value for name, _, value in inputs})
        if _overrides(self, "aggregate"):
            record.reasons.append(f"{type(self).__name__} overrides aggregate(), which needs the messages")
            out = self.aggregate(interpreter.edge_values(root, "aggregate"), g)
        else:
            out = interpreter.reduce(root, self.aggr)
        self._last_plan = MessagePlan.from_record(owner, traced, record)
        return out

    def _trace(self, inputs: list[tuple[str, str, Any]]) -> Traced | str:
        """The cached trace for these inputs, or why tracing failed (also cached)."""
        key_parts: list = [self.training]
        for name, domain, value in inputs:
            if isinstance(value, Tensor):
                key_parts.append((name, domain, value.dtype))
            elif value is None or isinstance(value, (bool, int, float, str)):
                key_parts.append((name, "literal", value))
            else:
                key_parts = []  # another literal (hashable or not, it may change): trace every call
                break
        key = tuple(key_parts)
        if key and key in self._traces:
            return self._traces[key]
        # tracing runs eagerly; under torch.compile, warm the cache with one eager call. (Disabled
        # only while compiling: torch.compiler.disable imports torch._dynamo, ~1 s at import.)
        new_trace = torch.compiler.disable(self._new_trace) if torch.compiler.is_compiling() else self._new_trace
        return new_trace(key, inputs)

    def _new_trace(self, key: tuple, inputs: list[tuple[str, str, Any]]) -> Traced | str:
        def call(factory):
            arguments = {name: factory(name, domain) if isinstance(value, Tensor) else value
                         for name, domain, value in inputs}
            return self.message(**arguments)

        try:
            result: Traced | str = trace(call)
        except TRACE_ERRORS as err:
            result = f"tracing message() stopped: {type(err).__name__}: {err}"
        if key and (isinstance(result, str) or result.reusable):
            self._traces[key] = result
        return result

    def _eager_propagate(self, g: Graph, inputs: list[tuple[str, str, Any]]) -> Tensor:
        """The reference path: every input gathered per edge, ``message`` run as written."""
        arguments = {}
        for name, domain, value in inputs:
            if domain == U:
                value = value.index_select(0, g.src)
            elif domain == V:
                value = value.index_select(0, g.dst)
            arguments[name] = value
        messages = self.message(**arguments)
        if not isinstance(messages, Tensor) or messages.dim() == 0 or messages.shape[0] != g.num_edges:
            got = f"shape {list(messages.shape)}" if isinstance(messages, Tensor) else type(messages).__name__
            raise ValueError(f"{type(self).__name__}.message must return one row per edge "
                             f"({g.num_edges}), got {got}")
        if not self.fuse:
            self._last_plan = MessagePlan.eager(f"{type(self).__name__}.message", "fuse=False")
        return self.aggregate(messages, g)

    def extra_repr(self) -> str:
        return f"aggr={self.aggr!r}"


_SIGNATURES: dict[Any, dict[str, inspect.Parameter]] = {}


def _parameters(function) -> dict[str, inspect.Parameter]:
    """The parameters of a hook, without ``self`` (cached per function)."""
    cached = _SIGNATURES.get(function)
    if cached is None:
        parameters = dict(inspect.signature(function).parameters)
        parameters.pop("self", None)
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters.values()):
            raise TypeError(f"{function.__qualname__} must name its inputs explicitly (no *args/**kwargs)")
        cached = _SIGNATURES[function] = parameters
    return cached


def _source_only(g: Graph, x: Any, name: str) -> tuple[Tensor, None]:
    """The source side of ``x`` when the message reads only ``x_j`` (no destination slice needed)."""
    if isinstance(x, (tuple, list)):
        return split_pair(g, (x[0], None) if len(x) == 2 else x, name)
    check_rows(x, g.num_src_nodes, name, "source nodes" if g.is_bipartite else "nodes")
    return x, None


def _special_input(g: Graph, name: str) -> tuple[str, Any]:
    if name in ("index", "edge_index_i"):
        return E, g.dst
    if name == "edge_index_j":
        return E, g.src
    if name in ("size_i", "dim_size"):
        return CONST, g.num_dst_nodes
    return CONST, g.num_src_nodes


def _overrides(module: MessagePassing, hook: str) -> bool:
    return getattr(type(module), hook) is not getattr(MessagePassing, hook)


__all__ = ["MessagePassing", "normalize_aggr"]
