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
are provided too, and ``ptr`` (None, as PyG gives it for an unsorted ``edge_index``: PyG's
``softmax(alpha, index, ptr, size_i)`` then groups by ``index``). ``propagate`` takes a
:class:`~unigraph.Graph`, or PyG's adjacency as PyG's ``propagate`` does (``edge_index``,
``EdgeIndex``, sparse ``adj_t``, ``SparseTensor``, with PyG's ``size``:
:mod:`~unigraph.message_passing.pyg_adjacency`); ``aggr`` may be PyG's aggregation modules, and
an ``aggregate`` override may take PyG's parameters.

The fused path, and the one condition for it
--------------------------------------------
``propagate`` traces ``message`` with torch.fx and runs the trace through
:mod:`unigraph.message_passing.lazy`: row-wise work runs on node rows, and the reduction becomes
a g-SpMM where the message is ``x_j``, an edge tensor, ``x_j op e``, or those combined with
destination terms that the reduction allows (for example ``x_j - x_i`` under max).
``(x_i * x_j).sum(-1)`` becomes a g-SDDMM dot. No E x F message tensor is built on that path.

The condition: ``aggregate`` is not overridden. Otherwise, or where a call in the message is not
row-wise, the messages are materialized per edge for that call and run as written. A message the
tracer or the interpreter cannot run (Python control flow on tensor values, say) runs eagerly on
gathered inputs instead, exactly as with ``fuse=False``. ``unigraph.explain(layer)`` (or
``layer.explain()``) says which happened and why. Every path computes what ``fuse=False``
computes.

Why every call traces
---------------------
A trace bakes in everything ``message`` read while it ran: tensors it computed from parameters
(under ``no_grad`` they carry no autograd history), Python attributes (``self.tau``), closures and
globals, the training flag, grad mode, which branch an ``if`` took. No set of guards checked per
call covers all of that, so ``propagate`` traces ``message`` again on every call: each captured
value is the current one, gradients flow to the current parameters, and a changed attribute takes
effect at once. ``message`` therefore runs once per call on proxies (twice where it then falls
back to the eager path): a message with side effects performs them that often.

The one exception is a message that reads nothing but its arguments, checked on its bytecode
(:mod:`~unigraph.message_passing.purity`: no ``self``, no globals, no closures), as GCNConv's,
GraphConv's, MRConv's and the default ``x_j``: its trace depends only on which inputs are tensors
and the values of the others, so it is cached under exactly that key. Each eager call checks that
``message`` and ``update`` are still what the cache was read for (the same functions, bound to the
same object, with the same code and defaults) and reads them again otherwise. What re-tracing
costs, and what each fast path assumes, is in ``docs/message_passing.md``.

Writes in place and mode changes inside ``message`` are recorded exactly or refused while tracing
(:mod:`unigraph.message_passing.tracing`); a refused message runs eagerly, from the random state
the trace started with.

Under ``torch.compile`` no fx trace can be taken. A message that reads only its arguments runs
fused from its cached trace (traced in advance for the likely inputs when the layer is built);
any other runs on the eager path, where dynamo traces ``message`` itself and guards what it reads.
"""
from __future__ import annotations

import inspect
import itertools
import math
import operator
from typing import Any

import torch
from torch import Tensor

from unigraph import ops
from unigraph.call_forms import is_sparse_adjacency
from unigraph.group_reduce import group_reduce
from unigraph.ops import native_lane
from unigraph.backends import selector, small_graph
from unigraph.graph import Graph
from unigraph.message_passing.inputs import check_graph, check_rows, split_pair
from unigraph.message_passing.lazy import Interpreter, Record, Unfusable
from unigraph.message_passing.plan import MessagePlan
from unigraph.message_passing.purity import reads_only_its_arguments
from unigraph.message_passing.pyg_adjacency import graph_and_inputs, is_adjacency
from unigraph.message_passing.pyg_hooks import PyGHooks
from unigraph.message_passing.rectified import rectified_input
from unigraph.message_passing.pyg_arguments import (
    aggregation_module, check_node_dim, check_propagate_size, oriented, pyg_settings)
from unigraph.message_passing.rowwise import ELEMENTWISE_FUNCTIONS, ELEMENTWISE_METHODS
from unigraph.message_passing.tracing import (
    CONST, E, TRACE_ERRORS, U, V, Ref, Traced, random_state, restore_random_state, trace)

AGGR_ALIASES = {"add": "sum", "sum": "sum", "mean": "mean", "max": "max", "min": "min"}
_SPECIAL_INPUTS = ("index", "edge_index_i", "edge_index_j", "size_i", "size_j", "dim_size", "ptr")
_REQUIRED = object()  # a hook parameter without a default
_NO_KEY = object()    # _trace's key argument not given: computed there
# Tensor methods that neither draw random numbers nor compute anything but a view or a value per
# element (with rowwise.ELEMENTWISE_FUNCTIONS: what a trace may call and still skip the capture of
# the random state, _draws_nothing)
_QUIET_METHODS = ELEMENTWISE_METHODS | frozenset({
    "view", "reshape", "unsqueeze", "squeeze", "expand", "expand_as", "flatten", "transpose", "t", "permute",
    "__getitem__"})
_PLAIN_TENSORS = (Tensor, torch.nn.Parameter)


def normalize_aggr(aggr: Any) -> str:
    if not isinstance(aggr, str) or aggr not in AGGR_ALIASES:
        hint = ("; for several aggregations or an aggregation module, override aggregate()"
                if isinstance(aggr, (list, tuple)) or isinstance(aggr, torch.nn.Module) else "")
        raise ValueError(f"aggr must be one of {', '.join(AGGR_ALIASES)}; got {aggr!r}{hint}")
    return AGGR_ALIASES[aggr]


class MessagePassing(PyGHooks, torch.nn.Module):
    r"""Base class for message-passing layers (see the module docstring for the equation and the
    fused path).

    Args:
        aggr (str, optional): the aggregation :math:`\bigoplus`: ``"sum"`` (alias ``"add"``),
            ``"mean"``, ``"max"`` or ``"min"`` (fused); ``None`` when the layer overrides
            ``aggregate`` (as in PyG); or, as in PyG, an aggregation module, another name or a list
            of them (``layer.aggr_module``, called on the materialized messages). (default: ``"sum"``)
        fuse (bool, optional): trace ``message`` and compile it to graph operators. ``False`` always
            materializes the messages (a reference path). (default: ``True``)
        flow, node_dim, aggr_kwargs, decomposed_layers: PyG's arguments, with PyG's defaults
            (``node_dim=-2``: 2-D features), accepted where they mean what unigraph does and
            refused by name otherwise (see :mod:`unigraph.message_passing.pyg_arguments`).
    """

    #: True where ``forward`` orients the graph itself (:func:`~unigraph.message_passing.pyg_arguments.oriented`,
    #: right after reading its arguments, before anything depends on the direction): ``propagate``
    #: then takes ``g`` as given. False (a custom layer): ``propagate`` applies ``flow`` to ``g``.
    resolves_flow: bool = False

    def __init__(self, aggr: Any = "sum", *, fuse: bool = True, flow: str = "source_to_target",
                 node_dim: int = -2, aggr_kwargs: dict | None = None, decomposed_layers: int = 1):
        super().__init__()
        pyg_settings(type(self).__name__, flow=flow, node_dim=node_dim, aggr_kwargs=aggr_kwargs,
                     decomposed_layers=decomposed_layers)
        if aggr is None and not _overrides(self, "aggregate"):
            raise ValueError(f"{type(self).__name__} passes aggr=None, which means the layer aggregates "
                             "itself, but it does not override aggregate(inputs, g)")
        #: PyG's aggregation module where ``aggr`` is not one of the fused names (None otherwise)
        self.aggr_module: torch.nn.Module | None = None
        if aggr is None or (isinstance(aggr, str) and aggr in AGGR_ALIASES and not aggr_kwargs):
            self.aggr = None if aggr is None else normalize_aggr(aggr)
        else:
            self.aggr_module = aggregation_module(aggr, aggr_kwargs, type(self).__name__)
            self.aggr = [str(a) for a in aggr] if isinstance(aggr, (list, tuple)) else str(aggr)   # (PyG's)
        self.fuse = bool(fuse)
        self._init_pyg_hooks()
        self.decomposed_layers = decomposed_layers   # (PyG's attribute; the results do not depend on it)
        self.node_dim = node_dim
        self.flow = flow
        self._last_plan: MessagePlan | None = None
        self._prepare_hooks()

    def _prepare_hooks(self) -> None:
        # read here, eagerly (torch.compile cannot trace inspect.signature), and again by every eager
        # call whose message or update has changed since (see _read_hooks)
        self._read_hooks()
        if self._pure_message:  # so that a model compiled before any eager call finds its traces
            for inputs in _likely_inputs(self._message_parameters):
                self._trace(inputs)

    # pickling (torch.save of a whole model, copy.deepcopy): what was read of the hooks holds code
    # objects and traces, which pickle cannot hold; it is derived state, read again on loading
    _DERIVED = ("_hooks_read", "_message_parameters", "_update_parameters", "_read_names", "_pure_message",
                "_pure_traces", "_last_plan", "_copies_x", "_copy_plans", "_returned_inputs", "_weighted_inputs",
                "_materializes")

    def __getstate__(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key not in self._DERIVED}

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if "aggr_module" not in self.__dict__ and "aggr_module" not in self._modules:
            self.aggr_module = None   # (saved before aggregation modules were taken)
        self._ensure_pyg_hooks()
        self._last_plan = None
        self._prepare_hooks()

    # ------------------------------------------------------------------ the three user hooks
    def message(self, x_j: Tensor) -> Tensor:
        """:math:`\\phi`: the message of each edge (default: the source features)."""
        return x_j

    def aggregate(self, inputs: Tensor, g: Graph) -> Tensor:
        """:math:`\\bigoplus`: reduce per-edge ``inputs`` into the destination nodes of ``g``.
        Overriding it turns off the fused path (the messages are then materialized), as does an
        aggregation module (``aggr_module``). An override may also take PyG's parameters
        (``aggregate(self, inputs, index, ptr=None, dim_size=None)``: :meth:`_aggregate_arguments`)."""
        if self.aggr_module is not None:
            return self.aggr_module(inputs, g.dst, dim_size=g.num_dst_nodes, dim=0)
        return ops.gspmm(g, "copy_e", self.aggr, e=inputs)

    def update(self, aggr_out: Tensor) -> Tensor:
        """:math:`\\gamma`: the new destination features (default: the aggregation)."""
        return aggr_out

    def message_and_aggregate(self, adj_t: Any) -> Tensor:
        """PyG's fused hook: where a layer overrides it, ``propagate`` on a sparse adjacency with
        ``fuse`` calls it instead of ``message`` and ``aggregate``, as PyG does (:meth:`_fused_by_layer`)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement message_and_aggregate")

    # ------------------------------------------------------------------ propagate
    def propagate(self, g: Graph | Any = None, **kwargs: Any) -> Tensor:
        """Run message, aggregate and update on graph ``g``; ``kwargs`` supply message inputs
        (``x`` for ``x_j``/``x_i``, edge tensors by name) and update inputs. ``g`` may also be
        what PyG's ``propagate`` takes, an ``edge_index`` (``[2, E]`` or ``EdgeIndex``; also by
        the keyword ``edge_index=``), a ``SparseTensor`` or a torch sparse ``adj_t``, with PyG's
        ``size`` (:mod:`~unigraph.message_passing.pyg_adjacency`). PyG's hooks run around it
        (:mod:`~unigraph.message_passing.pyg_hooks`)."""
        if g is None and "edge_index" in kwargs:   # PyG's propagate(edge_index=..., x=...)
            g = kwargs.pop("edge_index")
        if not (self._propagate_forward_pre_hooks or self._propagate_forward_hooks):
            return self._propagate_graph(g, kwargs)
        g, size, kwargs = self._pre_call("propagate", (g, kwargs.pop("size", None), kwargs))
        out = self._propagate_graph(g, kwargs if size is None else {**kwargs, "size": size})
        return self._post_call("propagate", (g, size, kwargs), out)

    def _propagate_graph(self, g: Graph | Any, kwargs: dict) -> Any:
        who = type(self).__name__
        if not torch.compiler.is_compiling() and not _same(self._hooks_identity(), self._hooks_read):
            self._read_hooks()
        adjacency = None
        if not isinstance(g, Graph):   # PyG's adjacency forms, or an error naming what g is
            adjacency = g
            g, kwargs = self._graph_and_inputs(g, kwargs, self._read_names, "propagate")
        if not self.resolves_flow:
            g = oriented(g, self.flow, who)
        check_propagate_size(g, kwargs, who, "size" in self._message_parameters)
        if (adjacency is not None and self.fuse and is_sparse_adjacency(adjacency)
                and _overrides(self, "message_and_aggregate")):
            return self.update(self._fused_by_layer(adjacency, g, kwargs), **self._update_inputs(g, kwargs))
        if self._needs_hooked_messages():
            out = self._hooked_messages(g, self._message_inputs(g, kwargs), self._aggregate_arguments(g, kwargs))
            return self.update(out, **self._update_inputs(g, kwargs))
        # per call: aggregate may be replaced after the hooks were read
        if self.propagates_default_hooks() and self.fuse and kwargs.keys() <= _COPY_KWARGS \
                and not torch.compiler.is_compiling():
            x = kwargs.get("x")
            if isinstance(x, Tensor) and x.is_floating_point():
                return self._copy_propagate(g, x, who)
        inputs = self._message_inputs(g, kwargs)
        extra = self._aggregate_arguments(g, kwargs) if _overrides(self, "aggregate") else None
        if torch.compiler.is_compiling():
            out = self._compiled_propagate(g, inputs, extra)
        else:
            out = None
            if self.fuse:
                # the cached trace's key (a message that reads only its arguments), once per call
                key = _structure_key(inputs) if self._pure_message else None
                out = self._returned_copy(g, inputs, who, key)
                if out is None:
                    out = self._weighted_copy(g, inputs, who, key)
                if out is None:
                    out = self._rectified_sum(g, inputs, who, key)
                # what the small-graph eager rule learns by: the cached trace's key, or for a message
                # traced on every call (it reads a global: torch.tanh, F.relu) its inputs' structure
                # alone; only a choice of path, both of which compute the message as written
                learned = key if self._pure_message else _structure_key(inputs)
                if out is None and self._materializes.get(learned) and _small_enough_for_eager(g, inputs):
                    self._last_plan = MessagePlan.eager(f"{who}.message", _SMALL_EAGER)
                elif out is None:
                    out = self._traced_propagate(g, inputs, key, extra)
                    if out is not None and learned is not None:   # (what the next small call decides by)
                        self._materializes[learned] = not self._last_plan.fused
            if out is None:
                out = self._eager_propagate(g, inputs, extra)
        return self.update(out, **self._update_inputs(g, kwargs))

    def explain(self) -> MessagePlan:
        """How the last ``propagate`` ran: fused or materialized, the primitive calls, and why."""
        if self._last_plan is None:
            raise RuntimeError(f"{type(self).__name__} has not propagated yet; call it once, then explain()")
        return self._last_plan

    def _graph_and_inputs(self, g: Any, kwargs: dict, read: frozenset, hook: str) -> tuple[Graph, dict]:
        """``hook``'s graph (PyG's adjacency forms through :func:`graph_and_inputs`) and its inputs,
        the graph checked."""
        who = type(self).__name__
        if not isinstance(g, Graph) and is_adjacency(g):   # PyG's form: the graph from the call-form cache
            g, kwargs = graph_and_inputs(g, kwargs, read, self.flow, self.node_dim, who)
        check_graph(g, f"{who}.{hook}")
        return g, kwargs

    def _fused_by_layer(self, adjacency: Any, g: Graph, kwargs: dict) -> Any:
        """PyG's fused call: the layer's own ``message_and_aggregate(adj_t, ...)`` (its inputs by
        name as ``message``'s are collected, :meth:`_hook_arguments`), between its hooks."""
        parameters = dict(list(_hook_parameters(self.message_and_aggregate).items())[1:])
        arguments = self._hook_arguments(g, kwargs, parameters, "message_and_aggregate")
        adjacency, arguments = self._pre_call("message_and_aggregate", (adjacency, arguments))
        out = self.message_and_aggregate(adjacency, **arguments)
        if not torch.compiler.is_compiling():   # (a plan written in compiled code would be a side effect)
            self._last_plan = MessagePlan.eager(f"{type(self).__name__}.message", _BY_LAYER)
        return self._post_call("message_and_aggregate", (adjacency, arguments), out)

    def _hooked_messages(self, g: Graph, inputs: list[tuple[str, str, Any]], extra: dict | None) -> Any:
        """The messages as written, then the aggregation, each between its PyG hooks (a hook sees
        and may replace the per-edge inputs, the messages, the aggregation's arguments: the
        default aggregation reads its index and sizes from them)."""
        owner = f"{type(self).__name__}.message"
        arguments = self._pre_call_kwargs("message", _per_edge(g, inputs))
        messages = self._post_call("message", (arguments,), self.message(**arguments))
        custom = _overrides(self, "aggregate")
        if extra is None:
            extra = {"g": g} if custom else {"index": g.dst, "ptr": None, "dim_size": g.num_dst_nodes}
        extra = self._pre_call_kwargs("aggregate", extra)
        out = self.aggregate(messages, **extra) if custom else self._aggregate_by_index(messages, **extra)
        if not torch.compiler.is_compiling():
            self._last_plan = MessagePlan.eager(owner, _HOOKED)
        return self._post_call("aggregate", (extra,), out)

    def _aggregate_by_index(self, inputs: Tensor, index: Tensor, ptr: Tensor | None = None,
                            dim_size: int | None = None) -> Tensor:
        """The default aggregation from PyG's arguments (what a hook may have changed)."""
        if self.aggr_module is not None:
            return self.aggr_module(inputs, index, ptr=ptr, dim_size=dim_size, dim=0)
        return group_reduce(inputs, index, dim_size, self.aggr)

    def edge_update(self) -> Tensor:
        """PyG's per-edge hook, run by :meth:`edge_updater`; a layer that calls it overrides it
        (as in PyG, there is no default)."""
        raise NotImplementedError(f"{type(self).__name__} calls edge_updater but does not override edge_update")

    def edge_updater(self, edge_index: Graph | Any = None, size: Any = None, **kwargs: Any) -> Any:
        """PyG's ``edge_updater``: ``edge_update`` run once on every edge, its inputs by name as
        ``message``'s (``x_j``/``x_i`` gathered per edge, edge tensors, ``index``, ...), on a
        ``Graph`` or PyG's adjacency forms (``size`` as in :meth:`propagate`). Runs as written
        (no fused path: the result is per edge)."""
        who = type(self).__name__
        edge_index, size, kwargs = self._pre_call("edge_update", (edge_index, size, kwargs))
        hooked = (edge_index, size, kwargs)
        parameters = _hook_parameters(self.edge_update)
        if size is not None:
            kwargs = {**kwargs, "size": size}
        g, kwargs = self._graph_and_inputs(edge_index, kwargs, frozenset(parameters), "edge_updater")
        if not self.resolves_flow:
            g = oriented(g, self.flow, who)
        check_propagate_size(g, kwargs, who, "size" in parameters)
        out = self.edge_update(**_per_edge(g, self._message_inputs(g, kwargs, parameters, "edge_update")))
        return self._post_call("edge_update", hooked, out)

    def _aggregates_messages(self) -> bool:
        """Whether the aggregation needs the messages: ``aggregate`` overridden, or an aggregation
        module (``aggr_module``); the fused reductions are then off."""
        return _overrides(self, "aggregate") or self.aggr_module is not None

    def propagates_default_hooks(self) -> bool:
        """Whether ``propagate`` runs the default ``message`` (``x_j``), ``update`` and
        ``aggregate`` as they are now (as of the last call's reading of the hooks): its output at a
        destination without in-edges is then the constant of the aggregation, depending on no input."""
        return self._copies_x and not self._aggregates_messages()

    def _copy_propagate(self, g: Graph, x: Tensor, who: str) -> Tensor:
        """The default ``message`` (``x_j``) and ``update`` with ``aggregate`` not overridden: the
        fused path's one ``copy_u`` g-SpMM, without its trace lookup, interpreter and random-state
        capture (~25 us a call on a small graph). ``propagate`` takes it only while
        :meth:`_read_hooks` found the default hooks (``_copies_x``, re-read whenever the hooks'
        identity changes) for one floating tensor ``x``; the same checks, the same call, the same
        plan as the fused path (``tests/message_passing/test_copy_fast_path.py``)."""
        check_node_dim(self.node_dim, x, "x", who)
        _source_only(g, x, "x")
        out = ops.gspmm(g, "copy_u", self.aggr, u=x)
        self._copy_plan(self.aggr, [("x_j", U, x)], who)
        return out

    def _copy_plan(self, key: Any, inputs: list[tuple[str, str, Any]], who: str, op: str = "copy_u",
                   note: tuple = (), reasons: tuple = ()) -> None:
        """Record the plan of a one-g-SpMM path (``op``: the fused path's for these inputs; ``note``
        appended to its step, ``reasons`` said with it), cached under ``key``."""
        plan = self._copy_plans.get(key)
        if plan is None:
            plan = self._copy_plans[key] = MessagePlan.from_record(
                f"{who}.message", self._trace(inputs), Record(steps=[("gspmm", op, self.aggr) + note],
                                                              reasons=list(reasons)))
        if self._last_plan is not plan:  # (nn.Module's __setattr__ costs a few us a call)
            self._last_plan = plan

    def _returned_copy(self, g: Graph, inputs: list[tuple[str, str, Any]], who: str,
                       key: tuple | None) -> Tensor | None:
        """A message that reads only its arguments and, for these inputs' structure, returns one of
        its source-node inputs unchanged (GraphConv's ``x_j if edge_weight is None else ...``
        without weights): the fused path's one ``copy_u`` g-SpMM, without the interpreter and the
        random-state capture (its cached trace has no call, so nothing to draw or refuse). None
        otherwise. The trace is the one the fused path uses, cached under the same key (a function
        of the structure alone: :mod:`.purity`, ``key``: None where there is none); the plan is the
        fused path's."""
        found = self._trace_form(self._returned_inputs, key, inputs, _returned_input)
        if not found:
            return None
        x = next((value for name, _, value in inputs if name == found), None)
        if not (isinstance(x, Tensor) and x.is_floating_point()):
            return None  # (gspmm refuses it: the fused path falls back to the eager path, which says why)
        out = ops.gspmm(g, "copy_u", self.aggr, u=x)
        self._copy_plan((key, self.aggr), inputs, who)
        return out

    def _trace_form(self, forms: dict, key: tuple | None, inputs: list[tuple[str, str, Any]], reader) -> Any:
        """``reader``'s verdict on the cached trace under ``key`` (kept in ``forms`` per key; falsy:
        not that form), or None where no one-g-SpMM path applies (no cached trace, or ``aggregate``
        overridden, which needs the messages)."""
        if key is None or self._aggregates_messages():
            return None
        found = forms.get(key)
        if found is None:
            found = forms[key] = reader(self._trace(inputs, key))
        return found

    def _weighted_copy(self, g: Graph, inputs: list[tuple[str, str, Any]], who: str,
                       key: tuple | None) -> Tensor | None:
        """A message that reads only its arguments and, for these inputs' structure, is one edge
        weight per edge times a source input (GCNConv's and GraphConv's ``edge_weight.view(-1, 1) *
        x_j``: :func:`_weighted_input`): the fused path's one ``u_mul_e`` g-SpMM, without the
        interpreter (~100 us of a small GCNConv call on the 2-core machine). Taken only where the
        fused path would make that very call: plain tensors (a subclass's ``__torch_function__``
        could do anything), a 2-D floating source input and a 1-D weight of the same dtype (else
        the interpreter's rules differ: the fused path decides); an error there leaves the call to
        the fused path, which falls back as it does. The plan is the fused path's, cached per key
        and ``aggr``. None otherwise."""
        found = self._trace_form(self._weighted_inputs, key, inputs, _weighted_input)
        if not found:
            return None
        values = {name: value for name, _, value in inputs}
        x, weight = values[found[0]], values[found[1]]
        if not (type(x) in _PLAIN_TENSORS and type(weight) in _PLAIN_TENSORS and x.dim() == 2
                and weight.dim() == 1 and x.dtype == weight.dtype and x.is_floating_point()):
            return None
        try:
            out = ops.gspmm(g, "u_mul_e", self.aggr, u=x, e=weight.view(-1, 1))
        except TRACE_ERRORS:
            return None   # the fused path makes the same call, and falls back to the eager path
        self._copy_plan((key, "u_mul_e", self.aggr), inputs, who, "u_mul_e")
        return out

    def _rectified_sum(self, g: Graph, inputs: list[tuple[str, str, Any]], who: str,
                       key: tuple | None) -> Tensor | None:
        """A message that reads only its arguments and, for these inputs' structure, is exactly
        ``relu(x_j + e)`` (GINEConv's: :mod:`.rectified`), summed or averaged, where the small-graph
        rule takes the call: one COO pass, no ``[E, F]`` message, no interpreter
        (``native_lane.run_add_relu``, which also checks the operands: plain strided 2-D tensors of
        one float dtype and width, ``e`` a row per edge). GINEConv on a PyG batch of 128 small
        graphs, 2 threads: forward 460 -> 297 us (PyG 304; gather, add, relu and ``index_add_``
        were ~160 us of it, the pass is ~20). None otherwise."""
        found = self._trace_form(self._rectified_inputs, key, inputs, rectified_input)
        if not found:
            return None
        values = {name: value for name, _, value in inputs}
        x, e = values[found[0]], values[found[1]]
        if type(x) not in _PLAIN_TENSORS or type(e) not in _PLAIN_TENSORS:
            return None
        out = native_lane.run_add_relu(g, self.aggr, x, e)
        if out is not None:
            self._copy_plan((key, "relu(u + e)", self.aggr), inputs, who, "u_add_e", ("(relu per edge)",), (_RECTIFIED,))
        return out

    # ------------------------------------------------------------------ inputs
    def _message_inputs(self, g: Graph, kwargs: dict, parameters: dict | None = None,
                        hook: str = "message") -> list[tuple[str, str, Any]]:
        """``(name, domain, value)`` for every parameter of ``message`` (or of ``hook``, whose
        ``parameters`` are given)."""
        inputs = []
        parameters = self._message_parameters if parameters is None else parameters
        pairs: dict[str, tuple] = {}
        for name, default in parameters.items():
            if name.endswith(("_i", "_j")) and name[:-2] in kwargs:
                base = name[:-2]
                if base not in pairs:
                    check_node_dim(self.node_dim, kwargs[base], base, type(self).__name__)
                    needs_dst = f"{base}_i" in parameters
                    pairs[base] = split_pair(g, kwargs[base], base) if needs_dst else _source_only(g, kwargs[base], base)
                src, dst = pairs[base]
                value = src if name.endswith("_j") else dst
                if value is None:
                    raise ValueError(f"{type(self).__name__}.{hook} needs {name} but {base} has no destination part")
                inputs.append((name, U if name.endswith("_j") else V, value))
            elif name in kwargs:
                value = kwargs[name]
                is_edge = isinstance(value, Tensor) and value.dim() > 0 and value.shape[0] == g.num_edges
                inputs.append((name, E if is_edge else CONST, value))
            elif name in _SPECIAL_INPUTS:
                inputs.append((name, *_special_input(g, name)))
            elif default is not _REQUIRED:
                inputs.append((name, CONST, default))
            else:
                raise TypeError(f"{type(self).__name__}.{hook} needs {name!r} but propagate got no "
                                f"{name[:-2] if name.endswith(('_i', '_j')) else name!r} (got {sorted(kwargs)})")
        return inputs

    def _update_inputs(self, g: Graph, kwargs: dict) -> dict:
        out = {}
        for name in self._update_parameters:
            if name in kwargs:
                out[name] = kwargs[name]
            elif name.endswith("_i") and name[:-2] in kwargs:
                out[name] = split_pair(g, kwargs[name[:-2]], name[:-2])[1]
        return out

    # ------------------------------------------------------------------ the paths
    def _hooks_identity(self) -> tuple:
        return _identity(self.message, self) + _identity(self.update, self)

    def _read_hooks(self) -> None:
        """Read what ``propagate`` needs of ``message`` and ``update`` as they are now: their
        parameters with their defaults, whether ``message`` reads only its arguments, and no cached
        traces. Eager calls compare the functions (which may be replaced on the class or the
        instance), their code and their defaults with what was read (:func:`_identity`) and read
        again when any changed."""
        self._hooks_read = self._hooks_identity()
        message = self.message
        self._message_parameters = _parameters(message)
        self._update_parameters = tuple(_parameters(self.update))[1:]
        # what the hooks read by name (PyG's edge_index form infers node counts and values from it)
        self._read_names = frozenset(self._message_parameters) | frozenset(self._update_parameters)
        if _overrides(self, "message_and_aggregate"):
            self._read_names |= frozenset(list(_hook_parameters(self.message_and_aggregate))[1:])
        if _overrides(self, "aggregate"):   # (read here, eagerly, for a compiled call's _aggregate_arguments)
            try:
                _hook_parameters(self.aggregate)
            except TypeError:
                pass
        self._pure_message = reads_only_its_arguments(message)
        # structure key -> trace (or why tracing stopped), for a message that reads only its arguments
        self._pure_traces: dict[tuple, Traced | str] = {}
        # the default message, update and aggregate: propagate's copy_u path (_copy_propagate)
        self._copies_x = (_is_default(message, "message", self) and _is_default(self.update, "update", self)
                          and not self._aggregates_messages())
        self._copy_plans: dict[Any, MessagePlan] = {}  # aggr (or structure key, op, aggr) -> the plan of a one-call path
        # structure key -> the source-node input a pure message returns unchanged, or "" (_returned_copy)
        self._returned_inputs: dict[tuple, str] = {}
        # structure key -> (source input, edge input) of a message that weighs the one by the other (_weighted_copy)
        self._weighted_inputs: dict[tuple, tuple[str, str] | tuple[()]] = {}
        # structure key -> (source input, edge input) of a relu(x_j + e) message (_rectified_sum)
        self._rectified_inputs: dict[tuple, tuple[str, str] | tuple[()]] = {}
        # per structure key: whether the fused path built per-edge message tensors anyway (its plan
        # was not "fused"); such a message runs eagerly on small graphs (_small_enough_for_eager)
        self._materializes: dict[tuple, bool] = {}

    def _trace(self, inputs: list[tuple[str, str, Any]], key: Any = _NO_KEY) -> Traced | str:
        """A trace of ``message`` for these inputs, or why tracing stopped. Fresh on every call,
        except for a message that reads only its arguments (:mod:`.purity`): its trace is a
        function of the inputs' structure and is cached under it (``key``, where the caller has
        computed it: :func:`_structure_key`, or None for no cache)."""
        if key is _NO_KEY:
            key = _structure_key(inputs) if self._pure_message else None
        if key is None:
            return _trace_message(self.message, inputs)
        found = self._pure_traces.get(key)
        if found is None:
            found = self._pure_traces[key] = _trace_message(self.message, inputs)
        return found

    def _traced_propagate(self, g: Graph, inputs: list[tuple[str, str, Any]], key: tuple | None,
                          extra: dict | None = None) -> Tensor | None:
        """The fused path, or None (with the reason in the plan) when the message has to run
        eagerly. Then the random generators are as they were before the trace, so that the eager
        run draws what ``fuse=False`` draws (the trace or the traced program may have drawn).
        Where nothing this call runs can draw (a cached trace of arithmetic and views alone, on
        plain tensors: :func:`_draws_nothing`) the generators' state is not captured (14-16 us of a
        small GCNConv call on the 2-core machine; 34 us a call on the H200 machine's host, where it
        also copies CUDA's). ``key``: the cached trace's (:func:`_structure_key`), None where there is none."""
        if key is not None and _draws_nothing(self._pure_traces.get(key), inputs):
            return self._fused_propagate(g, inputs, key, extra)
        generators = random_state({value.device for _, _, value in inputs if isinstance(value, Tensor)})
        out = self._fused_propagate(g, inputs, key, extra)
        if out is None:
            restore_random_state(generators)
        return out

    def _fused_propagate(self, g: Graph, inputs: list[tuple[str, str, Any]], key: tuple | None,
                         extra: dict | None = None) -> Tensor | None:
        owner = f"{type(self).__name__}.message"
        traced = self._trace(inputs, key)
        if isinstance(traced, str):
            self._last_plan = MessagePlan.eager(owner, traced)
            return None
        record = Record()
        interpreter = Interpreter(g, record)
        custom_aggregate = self._aggregates_messages()
        try:
            root = interpreter.run(traced, {name: value for name, _, value in inputs})
            out = interpreter.edge_values(root, "aggregate") if custom_aggregate else interpreter.reduce(root, self.aggr)
        except Unfusable as err:
            self._last_plan = MessagePlan.eager(owner, str(err))
            return None
        except TRACE_ERRORS as err:  # the traced calls failed on real data: eager raises it again if genuine
            self._last_plan = MessagePlan.eager(owner, f"running the traced message failed: {type(err).__name__}: {err}")
            return None
        if custom_aggregate:
            how = "overrides aggregate()" if _overrides(self, "aggregate") else \
                f"aggregates with {type(self.aggr_module).__name__}"
            record.reasons.append(f"{type(self).__name__} {how}, which needs the messages")
            out = self._run_aggregate(out, g, extra)
        self._last_plan = MessagePlan.from_record(owner, traced, record)
        return out

    def _compiled_propagate(self, g: Graph, inputs: list[tuple[str, str, Any]], extra: dict | None = None) -> Tensor:
        """Under torch.compile no fx trace can be taken. A message that reads only its arguments
        runs fused from its cached trace (dynamo traces the interpreter); any other runs on the
        eager path, where dynamo traces ``message`` itself and guards what it reads. Writes no
        plan: that would be a side effect of the compiled code."""
        key = _structure_key(inputs) if self._pure_message and not self._aggregates_messages() else None
        traced = self._pure_traces.get(key) if key is not None else None
        if not isinstance(traced, Traced):
            return self._eager_propagate(g, inputs, extra)
        interpreter = Interpreter(g, Record())
        return interpreter.reduce(interpreter.run(traced, {name: value for name, _, value in inputs}), self.aggr)

    def _eager_propagate(self, g: Graph, inputs: list[tuple[str, str, Any]], extra: dict | None = None) -> Tensor:
        """The reference path: every input gathered per edge, ``message`` run as written."""
        messages = self.message(**_per_edge(g, inputs))
        # (an overridden aggregate has its own contract: PyG's tuple messages, say)
        if not _overrides(self, "aggregate") and (not isinstance(messages, Tensor) or messages.dim() == 0
                                                  or messages.shape[0] != g.num_edges):
            got = f"shape {list(messages.shape)}" if isinstance(messages, Tensor) else type(messages).__name__
            raise ValueError(f"{type(self).__name__}.message must return one row per edge "
                             f"({g.num_edges}), got {got}")
        if not self.fuse and not torch.compiler.is_compiling():
            self._last_plan = MessagePlan.eager(f"{type(self).__name__}.message", "fuse=False")
        return self._run_aggregate(messages, g, extra)

    def _run_aggregate(self, messages: Any, g: Graph, extra: dict | None) -> Any:
        """``aggregate`` called as it is written: ``(messages, g)``, or PyG's parameters by name (``extra``)."""
        return self.aggregate(messages, g) if extra is None else self.aggregate(messages, **extra)

    def _aggregate_arguments(self, g: Graph, kwargs: dict) -> dict | None:
        """The arguments of an ``aggregate`` override written as PyG writes it, by name
        (``aggregate(self, inputs, index, ptr=None, dim_size=None)``: ``index``/``edge_index_i`` the
        destination of each edge, ``edge_index_j`` its source, ``ptr`` None, ``dim_size``/``size_i``
        and ``size_j`` the node counts, any other name an input of ``propagate``, ``*_i``/``*_j``
        gathered per edge); None for unigraph's ``aggregate(inputs, g)`` and the default."""
        if not _overrides(self, "aggregate"):
            return None
        try:
            parameters = dict(list(_hook_parameters(self.aggregate).items())[1:])
        except TypeError:   # *args / **kwargs: called as unigraph calls it, (messages, g)
            return None
        if not parameters or next(iter(parameters)) == "g":
            return None
        return self._hook_arguments(g, kwargs, parameters, "aggregate")

    def _hook_arguments(self, g: Graph, kwargs: dict, parameters: dict, name: str) -> dict[str, Any]:
        """PyG hook ``name``'s arguments (``parameters``: those after its first), by name, collected as ``message``'s are
        (:meth:`_message_inputs`: ``*_i``/``*_j`` gathered per edge, ``propagate``'s inputs, the
        special inputs, defaults; a missing one refused naming it), as PyG collects one dict for
        all of them."""
        return _per_edge(g, self._message_inputs(g, kwargs, parameters, name))

    def extra_repr(self) -> str:
        return f"aggr={self.aggr!r}"


_HOOKED = "a message or aggregate hook is registered (PyG's hooks): the messages run as written"
_BY_LAYER = "the layer's own message_and_aggregate on a sparse adjacency (PyG's fused call)"
_RECTIFIED = ("relu(u + e) summed per destination in one COO pass (numba, the small-graph rule: "
              "backends/small_graph.py): no per-edge message tensor, no CSR")
_SMALL_EAGER = ("a small graph under auto (the small-graph rule's bound, backends/small_graph.py), and a message "
                "whose fused plan materializes per-edge tensors anyway: it runs as written, its messages summed "
                "by torch's index_add_; interpreting it costs more than it saves there")


def _small_enough_for_eager(g: Graph, inputs: list[tuple[str, str, Any]]) -> bool:
    """Whether ``propagate`` runs eagerly a message whose fused plan materializes per-edge tensors
    anyway (the caller knows that from the last fused call with the same structure: its plan was
    not "fused"): under ``auto``, on the CPU, ``edges x width`` (the widest input's) within the
    small-graph rule's bound. There the interpreter, its plan and its g-SDDMM/g-SpMM Functions
    cost more than they save (GINEConv's ``relu(x_j + e)`` on a PyG batch of 128 small graphs, 1
    thread: forward 770 -> 531 us, PyG 419). A message the interpreter fuses whole keeps the
    fused path: on a Cora-sized kept graph ``tanh(x_j / tau) * w - x_i`` took 1,305 us fused and
    1,623 eager (forward + backward, width 16, 1 thread). The eager path computes the same
    function (it is the reference the fused path is tested against)."""
    width = max((math.prod(value.shape[1:]) for _, _, value in inputs
                 if isinstance(value, Tensor) and value.dim() >= 1), default=1)
    return (g.device.type == "cpu" and selector.current_choice()[0] == "auto"
            and small_graph.applies(g.num_edges, width, g.device, fresh=small_graph.is_fresh(g)))


_LITERALS = (bool, int, float, str, type(None))
_MAX_LIKELY_VARIANTS = 8


def _trace_message(message, inputs: list[tuple[str, str, Any]]) -> Traced | str:
    def call(factory):
        return message(**{name: factory(name, domain) if isinstance(value, Tensor) else value
                          for name, domain, value in inputs})

    try:
        return trace(call)
    except (*TRACE_ERRORS, ArithmeticError) as err:  # the eager path raises it again where it is genuine
        return f"tracing message() stopped: {type(err).__name__}: {err}"


def _draws_nothing(traced: Traced | str | None, inputs: list[tuple[str, str, Any]]) -> bool:
    """Whether running the fused path from this cached trace can draw no random number: the trace
    is cached (None: it is yet to be made, and tracing runs the message), and it either stopped
    (a reason: nothing runs) or calls only arithmetic and views (:data:`_QUIET_METHODS`,
    ``rowwise.ELEMENTWISE_FUNCTIONS``), on inputs that are plain tensors (a subclass's
    ``__torch_function__`` could run anything)."""
    if traced is None:
        return False
    if any(isinstance(value, Tensor) and type(value) not in _PLAIN_TENSORS for _, _, value in inputs):
        return False
    if not isinstance(traced, Traced):
        return True
    for ins in traced.program:
        try:
            quiet = (ins.op == "placeholder" or (ins.op == "call_function" and ins.target in ELEMENTWISE_FUNCTIONS)
                     or (ins.op == "call_method" and ins.target in _QUIET_METHODS))
        except TypeError:   # an unhashable callable: not one of those
            quiet = False
        if not quiet:
            return False
    return True


def _returned_input(traced: Traced | str) -> str:
    """The name of the source-node input a trace returns unchanged (no call at all), or ""."""
    if not isinstance(traced, Traced) or not isinstance(traced.output, Ref) or \
            any(ins.op != "placeholder" for ins in traced.program):   # (an in-place call included)
        return ""
    returned = traced.program[traced.output.index]   # (a placeholder: the program holds nothing else)
    return returned.target if returned.domain == U else ""


_COLUMN_SHAPES = {("view", (-1, 1)), ("reshape", (-1, 1)), ("unsqueeze", (-1,)), ("unsqueeze", (1,))}
_MULTIPLY = ("mul", "__mul__", operator.mul)   # (a message reading only its arguments names no torch.mul)


def _weighted_input(traced: Traced | str) -> tuple[str, str] | tuple[()]:
    """``(source input, edge input)`` of a trace that is exactly ``w.view(-1, 1) * x_j`` (or
    ``x_j * w.view(-1, 1)``; ``reshape(-1, 1)`` or ``unsqueeze(-1)``/``unsqueeze(1)`` for the
    view), or ``()``. The interpreter runs that column view on the edge input as written and
    reduces the product of an edge and a source value as one ``u_mul_e`` g-SpMM."""
    if not isinstance(traced, Traced) or not isinstance(traced.output, Ref):
        return ()
    program = traced.program
    calls = [ins for ins in program if ins.op != "placeholder"]
    if len(calls) != 2 or any(ins.in_place or ins.kwargs for ins in calls):
        return ()
    column, product = calls
    if program[traced.output.index] is not product or not (
            column.op == "call_method" and isinstance(column.args[0], Ref)
            and (column.target, tuple(column.args[1:])) in _COLUMN_SHAPES):
        return ()
    multiplies = product.target in _MULTIPLY and product.op in ("call_method", "call_function")   # (compared, not hashed)
    if not multiplies or len(product.args) != 2 or not all(isinstance(a, Ref) for a in product.args):
        return ()
    weight = program[column.args[0].index]
    operands = [program[a.index] for a in product.args]
    if not any(operand is column for operand in operands):
        return ()
    source = operands[1] if operands[0] is column else operands[0]
    if weight.op != "placeholder" or weight.domain != E or source.op != "placeholder" or source.domain != U:
        return ()
    return source.target, weight.target


def _structure_key(inputs: list[tuple[str, str, Any]]) -> tuple | None:
    """What the trace of a message that reads only its arguments depends on: where each tensor
    lives, and the other values (with their types: ``1``, ``1.0`` and ``True`` are equal keys
    in a dict but not to a message). None when a value is not a plain literal."""
    key = []
    for name, domain, value in inputs:
        if isinstance(value, Tensor):
            key.append((name, domain))
        elif isinstance(value, _LITERALS):
            key.append((name, domain, type(value), value))
        else:
            return None
    return tuple(key)


def _likely_inputs(parameters: dict[str, Any]) -> list[list[tuple[str, str, Any]]]:
    """The inputs ``propagate`` most likely passes (``x_j``/``x_i`` node tensors, an edge tensor
    or None for the others), with placeholder tensors: enough to trace a message in advance."""
    tensor = torch.empty(0)
    choices: list[list[tuple[str, str, Any]]] = []
    for name, default in parameters.items():
        if name in _SPECIAL_INPUTS:
            if name not in ("index", "edge_index_i", "edge_index_j"):
                return []  # sizes are known per graph only
            choices.append([(name, E, tensor)])
        elif name.endswith(("_i", "_j")):
            choices.append([(name, U if name.endswith("_j") else V, tensor)])
        elif default is None:
            choices.append([(name, E, tensor), (name, CONST, None)])
        elif default is _REQUIRED:
            choices.append([(name, E, tensor)])
        elif isinstance(default, _LITERALS):
            choices.append([(name, CONST, default)])
        else:
            return []
    if math.prod(len(c) for c in choices) > _MAX_LIKELY_VARIANTS:
        return []
    return [list(variant) for variant in itertools.product(*choices)]


_BOUND_TO_OWNER = object()  # stands for the layer itself, which its own record must not hold


def _identity(hook, owner) -> tuple:
    """What a hook's parameters (and ``message``'s purity and cached traces) were read from: the
    function and the object it is bound to, its code, its defaults and its keyword-only defaults
    (compared by identity, element by element: a changed default is a new object)."""
    function = getattr(hook, "__func__", hook)
    bound = getattr(hook, "__self__", None)
    kwdefaults = getattr(function, "__kwdefaults__", None) or {}
    return (_BOUND_TO_OWNER if bound is owner else bound, function, getattr(function, "__code__", None),
            getattr(function, "__defaults__", None), len(kwdefaults),
            *itertools.chain.from_iterable(kwdefaults.items()))


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))   # (no generator frames: every call reads it)


def _parameters(function) -> dict[str, Any]:
    """The parameters of a hook without ``self``: name -> default (``_REQUIRED`` if none)."""
    parameters = dict(inspect.signature(function).parameters)
    parameters.pop("self", None)
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters.values()):
        raise TypeError(f"{function.__qualname__} must name its inputs explicitly (no *args/**kwargs)")
    return {name: _REQUIRED if p.default is inspect.Parameter.empty else p.default for name, p in parameters.items()}


def _source_only(g: Graph, x: Any, name: str) -> tuple[Tensor, None]:
    """The source side of ``x`` when the message reads only ``x_j`` (no destination slice needed)."""
    if isinstance(x, (tuple, list)):
        return split_pair(g, (x[0], None) if len(x) == 2 else x, name)
    check_rows(x, g._sizes()[0], name, "source nodes" if g.is_bipartite else "nodes")
    return x, None


def _per_edge(g: Graph, inputs: list[tuple[str, str, Any]]) -> dict[str, Any]:
    """The inputs by name, node inputs gathered per edge (source rows for ``_j``, destination rows for ``_i``)."""
    arguments = {}
    for name, domain, value in inputs:
        if domain == U:
            value = value.index_select(0, g.src)
        elif domain == V:
            value = value.index_select(0, g.dst)
        arguments[name] = value
    return arguments


_HOOK_PARAMETERS: dict = {}   # (function, code, defaults) -> its parameters (functions live as long as classes)


def _hook_parameters(hook) -> dict[str, Any]:
    """:func:`_parameters` of a hook read per call (``aggregate``, ``edge_update``), kept per
    function, code and defaults (``_read_hooks`` reads ``aggregate``'s eagerly: under
    torch.compile this is then a dict lookup)."""
    function = getattr(hook, "__func__", hook)
    key = (function, getattr(function, "__code__", None), getattr(function, "__defaults__", None))
    found = _HOOK_PARAMETERS.get(key)
    if found is None:
        found = _HOOK_PARAMETERS[key] = _parameters(function)
    return found


def _special_input(g: Graph, name: str) -> tuple[str, Any]:
    if name == "ptr":   # PyG's CSR pointer of sorted destinations: None, as PyG gives for an edge_index
        return CONST, None
    if name in ("index", "edge_index_i"):
        return E, g.dst
    if name == "edge_index_j":
        return E, g.src
    if name in ("size_i", "dim_size"):
        return CONST, g.num_dst_nodes
    return CONST, g.num_src_nodes


def _overrides(module: MessagePassing, hook: str) -> bool:
    """Whether ``hook`` is replaced on the module's class or on the instance itself."""
    return getattr(type(module), hook) is not getattr(MessagePassing, hook) or hook in module.__dict__


_COPY_KWARGS = frozenset(("x", "size"))  # what propagate may get on its copy_u path
_DEFAULT_HOOKS = {name: getattr(MessagePassing, name) for name in ("message", "update")}
_DEFAULT_CODES = {name: hook.__code__ for name, hook in _DEFAULT_HOOKS.items()}


def _is_default(hook, name: str, owner: MessagePassing) -> bool:
    """Whether ``hook`` is MessagePassing's own ``name`` bound to ``owner``, with its code and no
    defaults (nothing replaced on the class, the instance or the function)."""
    function = getattr(hook, "__func__", None)
    return (function is _DEFAULT_HOOKS[name] and getattr(hook, "__self__", None) is owner
            and function.__code__ is _DEFAULT_CODES[name] and function.__defaults__ is None
            and not function.__kwdefaults__)


__all__ = ["MessagePassing", "normalize_aggr"]
