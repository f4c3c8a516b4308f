"""DGL's message passing entry points on a :class:`~unigraph.dgl.graph.DGLGraph`:
``update_all``, ``send_and_recv``, ``pull``, ``push`` (one routine, :func:`send_and_recv`),
``apply_edges`` and ``apply_nodes``, with DGL's rules for which rows change.

The messages themselves run through unigraph's DGL-style interpreter
(:func:`unigraph.message_passing.dgl_style.update_all` / ``apply_edges``): built-ins and traceable
user-defined functions become g-SpMM / g-SDDMM calls, a user-defined reducer gets DGL's
degree-bucketed mailboxes. That interpreter writes whole tensors into the graph it runs on, so it
runs on a *scratch* graph: the same nodes and features with every edge (sharing the structure and
its cached formats) or with the chosen edges only. The results are then placed as DGL places them:

* the receivers (every destination for ``update_all``; the destinations of the chosen edges for
  ``send_and_recv`` and ``push``; the nodes asked for by ``pull``) get their rows; nobody else does;
* a receiver without messages gets 0 from a built-in reducer and the node initializer's value
  (``set_n_initializer``; zeros by default) for each output of a user-defined reducer; one
  exception, DGL's: a node ``pull`` asks for that has no in-edge gets ``-inf`` from ``max`` and
  ``inf`` from ``min`` (``update_all`` gives it 0);
* ``apply_node_func`` then runs on the receivers only.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor

from unigraph.dgl.base import DGLError
from unigraph.function import MessageFunction, ReduceFunction
from unigraph.graph import FeatureStore
from unigraph.graph import Graph as CoreGraph
from unigraph.message_passing import dgl_style
from unigraph.message_passing.dgl_style import EdgeBatch, NodeBatch


def _typed_edges(g, func: Any) -> Any:
    """A user-defined edge function that sees ``edges.canonical_etype`` (DGL's edge batches
    carry it); a built-in as it is."""
    if isinstance(func, (MessageFunction, ReduceFunction)) or not callable(func):
        return func
    cet = g.canonical_etypes[0]

    def typed(edges):
        edges.canonical_etype = cet
        return func(edges)
    return typed


def _typed_nodes(ntype: str, func: Any) -> Any:
    """A user-defined node function (reducer, node update) that sees ``nodes.ntype``."""
    if isinstance(func, (MessageFunction, ReduceFunction)) or not callable(func):
        return func

    def typed(nodes):
        nodes.ntype = ntype
        return func(nodes)
    return typed


def _scratch(g, eids: Tensor | None) -> CoreGraph:
    """The graph the interpreter runs on: ``g``'s nodes and node features with every edge
    (``eids`` None: structure and caches shared) or with the edges ``eids`` (their features)."""
    if eids is None:
        return g._shallow()
    src, dst = g._coo()
    sub = CoreGraph._trusted(src[eids], dst[eids], g._num_src, g._num_dst, g.is_bipartite)
    for key, value in g.srcdata.items():
        sub.srcdata[key] = value
    if g.is_bipartite:
        for key, value in g.dstdata.items():
            sub.dstdata[key] = value
    for key, value in g.edata.items():
        sub.edata[key] = value.index_select(0, eids)
    return sub


def _written(store: FeatureStore, before: dict[str, Tensor]) -> dict[str, Tensor]:
    return {key: value for key, value in store.items() if before.get(key) is not value}


def send_and_recv(g, eids: Tensor | None, receivers: Tensor | None, message_func: Any, reduce_func: Any,
                  apply_node_func: Callable | None) -> None:
    """Messages on the edges ``eids`` (None: every edge) reduced into ``receivers`` (None: every
    destination), then ``apply_node_func`` on them; see the module docstring for the rules."""
    if message_func is None or reduce_func is None:
        raise DGLError("send_and_recv / pull / push / update_all need a message function and a reduce function")
    num_dst = g._num_dst
    scratch = _scratch(g, eids)
    before = dict(scratch.dstdata.items())
    builtin = isinstance(reduce_func, ReduceFunction)
    # no edge chosen but receivers named (a pull of nodes without in-edges): built-ins still run, and
    # DGL writes their empty reduction, zeros, to the receivers; a user-defined message has no edge to
    # run on, and without receivers (send_and_recv / push of no edge) nothing is written, as in DGL
    empty = eids is not None and not eids.numel()
    named = receivers is not None and receivers.numel() > 0
    if not empty or (named and builtin and isinstance(message_func, MessageFunction)):
        dgl_style.update_all(scratch, _typed_edges(g, message_func), _typed_nodes(g._dsttype, reduce_func))
    results = _written(scratch.dstdata, before)
    silent = None if receivers is None and builtin else _without_messages(g, eids, receivers)
    for key, value in results.items():
        if silent is not None and silent.numel() and not builtin and _has_initializer(g, key):
            filler = g._initial("node", key, tuple(value.shape), value.dtype, value.device)
            value = value.index_put((silent,), filler.index_select(0, silent))
        elif silent is not None and silent.numel() and builtin and reduce_func.reduce in ("max", "min") and not empty:
            extreme = float("-inf") if reduce_func.reduce == "max" else float("inf")
            value = value.index_put((silent,), value.new_full((), extreme))
        if receivers is None:
            g.dstdata[key] = value
        else:
            g._write_rows(g.dstdata, key, receivers, value.index_select(0, receivers), "node", num_dst)
    if apply_node_func is not None:
        apply_nodes(g, g.dstdata, num_dst, receivers, apply_node_func, g._dsttype)


def _without_messages(g, eids: Tensor | None, receivers: Tensor | None) -> Tensor:
    """The receivers no chosen edge reaches."""
    dst = g._coo()[1] if eids is None else g._coo()[1][eids]
    reached = torch.zeros(g._num_dst, dtype=torch.bool, device=g.device)
    reached[dst] = True
    if receivers is None:
        return (~reached).nonzero().flatten()
    return receivers[~reached[receivers]]


def _has_initializer(g, key: str) -> bool:
    inits = g._initializers["node"]
    return key in inits or None in inits


def apply_edges(g, eids: Tensor | None, func: Any) -> None:
    """Edge features from ``func`` on the edges ``eids`` (None: every edge)."""
    scratch = _scratch(g, eids)
    before = dict(scratch.edata.items())
    dgl_style.apply_edges(scratch, _typed_edges(g, func))
    for key, value in _written(scratch.edata, before).items():
        if eids is None:
            g.edata[key] = value
        else:
            g._write_rows(g.edata, key, eids, value, "edge", g._src.numel())


def apply_nodes(g, store: FeatureStore, count: int, ids: Tensor | None, func: Callable, ntype: str) -> None:
    """Node features from ``func(NodeBatch)`` on the nodes ``ids`` (None: all ``count``) of
    ``store``, the nodes of type ``ntype`` (``nodes.ntype`` in the batch, as DGL's)."""
    if not callable(func):
        raise DGLError(f"the node function must be callable, got {type(func).__name__}")
    result = func(node_batch(g, store, count, ids, ntype))
    if not isinstance(result, dict) or not all(isinstance(v, Tensor) for v in result.values()):
        raise DGLError(f"a node function must return a dict of tensors, got {type(result).__name__}")
    for key, value in result.items():
        if ids is None:
            store[key] = value
        else:
            g._write_rows(store, key, ids, value, "node", count)


def node_batch(g, store: FeatureStore, count: int, ids: Tensor | None, ntype: str) -> NodeBatch:
    """DGL's node batch of the nodes ``ids`` (None: all ``count``) of ``store``, typed ``ntype``."""
    nodes = torch.arange(count, device=g.device) if ids is None else ids
    data = dict(store.items()) if ids is None else {key: value.index_select(0, ids) for key, value in store.items()}
    batch = NodeBatch(g._out_ids(nodes), data)
    batch.ntype = ntype
    return batch


def edge_batch(g, ids: Tensor) -> EdgeBatch:
    """DGL's edge batch of the edges ``ids`` of relation ``g`` (their endpoints' features and
    their own), typed ``g.canonical_etypes[0]``."""
    src, dst = (ends.index_select(0, ids) for ends in g._coo())
    batch = EdgeBatch({key: value.index_select(0, src) for key, value in g.srcdata.items()},
                      {key: value.index_select(0, dst) for key, value in g.dstdata.items()},
                      {key: value.index_select(0, ids) for key, value in g.edata.items()})
    batch.canonical_etype = g.canonical_etypes[0]
    return batch
