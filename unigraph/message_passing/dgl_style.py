"""DGL-style message passing on the features stored on a graph: ``update_all`` and ``apply_edges``.

``g.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "h"))`` reads ``g.srcdata["h"]`` and
``g.edata["w"]`` and writes ``g.dstdata["h"]`` (``g.ndata`` on a homogeneous graph). Message
functions are built-ins (:mod:`unigraph.function`) or user-defined functions of an
:class:`EdgeBatch` returning a dict; reducers are built-ins or functions of a :class:`NodeBatch`
whose ``mailbox`` holds each node's messages as ``[nodes, in_degree, ...]`` (DGL's degree
bucketing); nodes without in-edges get zeros.

Both kinds of message function run through the same interpreter as ``MessagePassing``
(:mod:`unigraph.message_passing.lazy`): a user-defined ``lambda edges: {"m": edges.src["h"] *
edges.data["w"]}`` is traced and becomes the same single g-SpMM as the built-in ``u_mul_e``,
closing DGL's gap between built-in and user-defined functions. Each call returns a
:class:`~unigraph.message_passing.plan.MessagePlan` saying what ran.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
from torch import Tensor

from unigraph.function import MessageFunction, ReduceFunction
from unigraph.graph import Graph
from unigraph.message_passing.lazy import Interpreter, Pending, Record, Rows, Unfusable
from unigraph.message_passing.plan import MessagePlan
from unigraph.message_passing.tracing import E, TRACE_ERRORS, U, V, random_state, restore_random_state, trace
from unigraph.ops.broadcast import with_rank

_STORE_OF = {U: "srcdata", V: "dstdata", E: "edata"}


class EdgeBatch:
    """What a user-defined message function sees: ``src``, ``dst`` and ``data`` (edge) features,
    each a mapping from field name to a per-edge tensor."""

    def __init__(self, src: Mapping[str, Tensor], dst: Mapping[str, Tensor], data: Mapping[str, Tensor]):
        self.src, self.dst, self.data = src, dst, data


class NodeBatch:
    """What a user-defined reducer or node update sees: ``data`` (node features of the nodes in the
    batch), ``mailbox`` (messages, ``[nodes, in_degree, ...]``) and ``nodes()`` (their ids)."""

    def __init__(self, node_ids: Tensor, data: Mapping[str, Tensor], mailbox: Mapping[str, Tensor] | None = None):
        self._ids, self.data, self.mailbox = node_ids, data, mailbox or {}

    def nodes(self) -> Tensor:
        return self._ids

    def batch_size(self) -> int:
        return self._ids.numel()


class _TracedFields(Mapping):
    """A feature store seen through proxies: reading field ``k`` creates the traced input ``prefix:k``."""

    def __init__(self, store, prefix: str, domain: str, factory):
        self._store, self._prefix, self._domain, self._factory = store, prefix, domain, factory

    def __getitem__(self, key: str):
        self._store[key]  # raises KeyError naming the fields the store holds
        return self._factory(f"{self._prefix}:{key}", self._domain)

    def __iter__(self):
        return iter(self._store)

    def __len__(self) -> int:
        return len(self._store)


def _store(g: Graph, domain: str):
    return getattr(g, _STORE_OF[domain])


def _field_value(g: Graph, domain: str, field: str) -> Tensor:
    try:
        return _store(g, domain)[field]
    except KeyError:
        raise KeyError(f"{_STORE_OF[domain]} has no field {field!r}; it holds {sorted(_store(g, domain))}") from None


# ---------------------------------------------------------------------- message values
def _builtin_messages(g: Graph, fn: MessageFunction, interpreter: Interpreter) -> dict[str, Any]:
    lhs = Rows(fn.lhs_target, _field_value(g, fn.lhs_target, fn.lhs_field))
    if fn.op == "copy":
        return {fn.out_field: lhs}
    rhs = Rows(fn.rhs_target, _field_value(g, fn.rhs_target, fn.rhs_field))
    lhs, rhs = _same_rank(lhs, rhs)  # DGL's broadcasting: 1s right after the row dim (unigraph.ops.broadcast)
    if fn.op == "dot":
        return {fn.out_field: interpreter.dot(Pending("mul", lhs, rhs), keepdim=True)}
    return {fn.out_field: Pending(fn.op, lhs, rhs)}


def _same_rank(a: Rows, b: Rows) -> tuple[Rows, Rows]:
    """DGL's broadcasting between operands of different rank: 1s are padded right after the row
    dimension (``[E, 4]`` against ``[N, 4, 4]`` is ``[E, 1, 4]``)."""
    rank = max(a.tensor.dim(), b.tensor.dim())
    return Rows(a.domain, with_rank(a.tensor, rank)), Rows(b.domain, with_rank(b.tensor, rank))


def _traced_udf(g: Graph, fn: Callable, interpreter: Interpreter) -> tuple[dict[str, Any], Any]:
    """Trace a user-defined message function (on this call: see MessagePassing's "Why every call
    traces") and run it lazily. Raises one of TRACE_ERRORS or :class:`Unfusable` when it cannot."""
    def call(factory):
        return fn(EdgeBatch(_TracedFields(g.srcdata, "src", U, factory), _TracedFields(g.dstdata, "dst", V, factory),
                            _TracedFields(g.edata, "data", E, factory)))
    traced = trace(call)
    if not isinstance(traced.output, dict):
        raise Unfusable(f"the message function returned {type(traced.output).__name__}, not a dict")
    values = {}
    for spec in traced.inputs:
        prefix, field = spec.key.split(":", 1)
        values[spec.key] = {"src": g.srcdata, "dst": g.dstdata, "data": g.edata}[prefix][field]
    return interpreter.run(traced, values), traced


class _GatheredFields(Mapping):
    """Node features read per edge (the eager fallback): every read gathers and is recorded."""

    def __init__(self, store, index: Tensor, record: Record, domain: str):
        self._store, self._index, self._record, self._domain = store, index, record, domain

    def __getitem__(self, key: str) -> Tensor:
        value = self._store[key].index_select(0, self._index)
        self._record.gathered.append((f"{key!r}", self._domain, tuple(value.shape)))
        return value

    def __iter__(self):
        return iter(self._store)

    def __len__(self) -> int:
        return len(self._store)


def _check_message_dict(result: Any) -> dict[str, Tensor]:
    if not isinstance(result, dict) or not all(isinstance(v, Tensor) for v in result.values()):
        raise TypeError(f"a DGL-style message function must return a dict of tensors, got {type(result).__name__}")
    return result


class MissingMessage(KeyError):
    """A reducer names a message field the message function does not produce."""


def _run_messages(g: Graph, fn: Any, finish: Callable[[Interpreter, dict], dict]) -> tuple[dict, Record, Any]:
    """Compute the messages of ``fn`` on ``g`` and hand them to ``finish(interpreter, messages)``
    (library code only: reductions, materialization). A user-defined function is traced and run
    lazily; where that cannot run exactly (or under torch.compile, where dynamo traces the function
    itself) it runs on gathered per-edge features instead. Returns ``finish``'s result, the record
    of what ran and the message's source for the plan."""
    if isinstance(fn, ReduceFunction):
        raise TypeError(f"{fn!r} is a reduce function; pass it as the reduce_fn, after a message function")
    record = Record()
    interpreter = Interpreter(g, record)
    if isinstance(fn, MessageFunction):
        return finish(interpreter, _builtin_messages(g, fn, interpreter)), record, repr(fn)
    if not callable(fn):
        raise TypeError(f"message_fn must be a unigraph.function built-in or a callable, got {type(fn).__name__}")
    if torch.compiler.is_compiling():
        reason = "under torch.compile the message function runs as written (dynamo traces it)"
    else:
        generators = random_state([g.device])  # restored below: the eager run draws what it would untraced
        try:
            messages, traced = _traced_udf(g, fn, interpreter)
            return finish(interpreter, messages), record, traced
        except MissingMessage:  # the user's mistake: eager would say the same
            raise
        except Unfusable as err:
            reason = str(err)
        except TRACE_ERRORS as err:
            reason = f"tracing the message function stopped: {type(err).__name__}: {err}"
        restore_random_state(generators)
    record = Record(reasons=[reason])
    interpreter = Interpreter(g, record)
    gathered = EdgeBatch(_GatheredFields(g.srcdata, g.src, record, U), _GatheredFields(g.dstdata, g.dst, record, V),
                         g.edata)
    messages = {key: Rows(E, value) for key, value in _check_message_dict(fn(gathered)).items()}
    return finish(interpreter, messages), record, ""


# ---------------------------------------------------------------------- update_all / apply_edges
def update_all(g: Graph, message_fn: Any, reduce_fn: Any, update_fn: Callable | None = None) -> MessagePlan:
    """Send messages along every edge, reduce them into the destination nodes, optionally update
    (DGL's ``update_all``). Results land in ``g.dstdata`` (``g.ndata`` on a homogeneous graph)."""
    if isinstance(reduce_fn, MessageFunction):
        raise TypeError(f"{reduce_fn!r} is a message function; reduce_fn must be a reducer such as fn.sum('m', 'h')")
    if not isinstance(reduce_fn, ReduceFunction) and not callable(reduce_fn):
        raise TypeError(f"reduce_fn must be a unigraph.function reducer or a callable, got {type(reduce_fn).__name__}")
    if update_fn is not None and not callable(update_fn):
        raise TypeError(f"update_fn must be callable or None, got {type(update_fn).__name__}")

    def finish(interpreter: Interpreter, messages: dict) -> dict:
        if isinstance(reduce_fn, ReduceFunction):
            if reduce_fn.msg_field not in messages:
                raise MissingMessage(f"the reducer {reduce_fn!r} reads message {reduce_fn.msg_field!r} but the "
                                     f"message function produces {sorted(messages)}")
            return {reduce_fn.out_field: interpreter.reduce(messages[reduce_fn.msg_field], reduce_fn.reduce)}
        return {key: interpreter.edge_values(value, "user-defined reducer") for key, value in messages.items()}

    results, record, source = _run_messages(g, message_fn, finish)
    if not isinstance(reduce_fn, ReduceFunction):
        record.reasons.append("a user-defined reducer needs every node's mailbox")
        results = _bucketed_reduce(g, reduce_fn, results)
    for key, value in results.items():
        g.dstdata[key] = value
    if update_fn is not None:
        node_ids = torch.arange(g.num_dst_nodes, device=g.device)
        updated = update_fn(NodeBatch(node_ids, dict(g.dstdata.items())))
        for key, value in _check_node_dict(updated, "update_fn").items():
            g.dstdata[key] = value
    return MessagePlan.from_record("update_all", source, record)


def apply_edges(g: Graph, fn: Any) -> MessagePlan:
    """Compute edge features from ``fn`` (a built-in or a function of an :class:`EdgeBatch`) into
    ``g.edata`` (DGL's ``apply_edges``)."""
    def finish(interpreter: Interpreter, messages: dict) -> dict:
        return {key: interpreter.edge_values(value, "apply_edges") for key, value in messages.items()}

    results, record, source = _run_messages(g, fn, finish)
    for key, value in results.items():
        g.edata[key] = value
    return MessagePlan.from_record("apply_edges", source, record)


def _check_node_dict(result: Any, who: str) -> dict[str, Tensor]:
    if not isinstance(result, dict) or not all(isinstance(v, Tensor) for v in result.values()):
        raise TypeError(f"{who} must return a dict of node tensors, got {type(result).__name__}")
    return result


def _bucketed_reduce(g: Graph, reduce_fn: Callable, messages: dict[str, Tensor]) -> dict[str, Tensor]:
    """Run a user-defined reducer once per distinct in-degree with mailboxes ``[nodes, degree, ...]``
    (messages in edge-id order within each node); nodes without in-edges get zeros."""
    ptr, _, eid = g.in_csr()
    degrees = ptr[1:] - ptr[:-1]
    outputs: dict[str, Tensor] = {}
    for degree in torch.unique(degrees).tolist():
        if degree == 0:
            continue
        nodes = (degrees == degree).nonzero().flatten()
        slots = ptr[nodes].unsqueeze(1) + torch.arange(degree, device=ptr.device)
        edge_ids = eid[slots]
        mailbox = {key: m[edge_ids] for key, m in messages.items()}
        data = {key: value[nodes] for key, value in g.dstdata.items()}
        result = _check_node_dict(reduce_fn(NodeBatch(nodes, data, mailbox)), "the reducer")
        for key, value in result.items():
            if value.shape[0] != nodes.numel():
                raise ValueError(f"the reducer returned {value.shape[0]} rows for {key!r} but the batch has "
                                 f"{nodes.numel()} nodes")
            if key not in outputs:
                outputs[key] = value.new_zeros((g.num_dst_nodes,) + tuple(value.shape[1:]))
            outputs[key] = outputs[key].index_copy(0, nodes, value)
    return outputs
