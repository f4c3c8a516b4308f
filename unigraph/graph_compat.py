"""What lets DGL-style code run on a :class:`~unigraph.Graph` unchanged.

* :class:`Count` - the node and edge counts. PyG code reads ``data.num_nodes`` as an int, DGL
  code calls ``g.num_nodes()``; a ``Count`` is an ``int`` that can also be called, so both spellings
  work on one attribute (``g.num_nodes + 1``, ``torch.arange(g.num_nodes)``, ``g.num_nodes()``,
  ``block.num_dst_nodes()``). It pickles as a call of ``int`` on a plain int, so no saved file
  names it; since ``torch.load(weights_only=True)`` admits only allow-listed callables, importing
  unigraph adds ``int`` to torch's safe globals (it can only rebuild an int from the saved number),
  so checkpoints and datasets holding ``g.num_nodes`` load as before.
* :func:`edges` - DGL's ``g.edges(form=..., order=...)``.
* :func:`local_scope` - DGL's ``with g.local_scope():`` (feature changes inside are undone).

The graph (:mod:`unigraph.graph`) imports this module, so nothing here imports the graph: the
functions take it as their argument.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch import Tensor

torch.serialization.add_safe_globals([int])  # a saved Count is `int(n)`; see the module docstring

EDGE_FORMS = ("uv", "eid", "all")
EDGE_ORDERS = ("eid", "srcdst")


class Count(int):
    """An ``int`` that returns itself when called: ``g.num_nodes == g.num_nodes()``.

    DGL's count methods take an optional node/edge type; a unigraph graph has one of each, so
    passing a type is refused rather than ignored.
    """

    __slots__ = ()

    def __call__(self, type_name: str | None = None) -> int:
        if type_name is not None:
            raise TypeError(f"a unigraph.Graph has one node and one edge type; got the type {type_name!r} "
                            "(typed graphs live in unigraph.hetero)")
        return int(self)

    def __reduce__(self):  # pickle (checkpoints, worker pipes) stores a plain int
        return (int, (int(self),))


def count(value: int) -> int:
    """``Count(value)``; inside a ``torch.compile`` trace the plain int (dynamo cannot create an
    int subclass while tracing, and compiled library code only reads counts as ints)."""
    return value if torch.compiler.is_compiling() else Count(value)


def edges(graph, form: str = "uv", order: str = "eid") -> tuple[Tensor, ...] | Tensor:
    """DGL's ``g.edges``: ``form="uv"`` gives ``(src, dst)``, ``"eid"`` the edge ids, ``"all"``
    ``(src, dst, eid)``; ``order="eid"`` lists edges by id, ``"srcdst"`` sorted by source, then
    destination (ties, i.e. multi-edges, by edge id)."""
    if form not in EDGE_FORMS:
        raise ValueError(f"form must be one of {', '.join(map(repr, EDGE_FORMS))}, got {form!r}")
    if order not in EDGE_ORDERS:
        raise ValueError(f"order must be one of {', '.join(map(repr, EDGE_ORDERS))}, got {order!r}")
    src, dst = graph.src, graph.dst
    eid = torch.arange(src.numel(), device=src.device)
    if order == "srcdst":  # two stable sorts: by destination, then by source
        by_dst = torch.sort(dst, stable=True).indices
        eid = by_dst[torch.sort(src[by_dst], stable=True).indices]
        src, dst = src[eid], dst[eid]
    if form == "uv":
        return src, dst
    if form == "eid":
        return eid
    return src, dst, eid


def local_scope(graph) -> Iterator:
    """Inside, features may be added, replaced or deleted freely; on exit ``ndata``/``srcdata``/
    ``dstdata``/``edata`` hold exactly the tensors they held on entry (as DGL's ``local_scope``).
    As in DGL, in-place changes to a tensor (``g.ndata["h"] += 1``) are not undone: the tensors are
    shared, not copied."""
    return restore_on_exit(graph, (graph.srcdata, graph.dstdata, graph.edata))


@contextlib.contextmanager
def restore_on_exit(graph, stores) -> Iterator:
    """``local_scope`` over any feature stores (a heterograph has one per type): yields ``graph``
    and on exit puts back the entries each store held on entry."""
    stores = list({id(s): s for s in stores}.values())
    saved = [dict(store) for store in stores]
    try:
        yield graph
    finally:
        for store, items in zip(stores, saved):
            for key in list(store):
                del store[key]
            store.update(items)
