"""DGL's ways of naming nodes, edges and rows: ``g.nodes[ids].data``, ``g.edges[u, v].data``,
``g.nodes['user'].data``, ``g.num_nodes('user')``, and the id arguments every method takes.

The views hold no data: they ask the graph (a :class:`~unigraph.dgl.graph.DGLGraph` or a
:class:`~unigraph.dgl.heterograph.DGLHeteroGraph`) through a few hooks, ``_node_store(ntype)``,
``_edge_store(etype)``, ``_num_nodes_of(ntype)``, ``_num_edges_of(etype)``, ``_edge_ids_of(u, v,
etype)`` and ``_write_rows(store, key, ids, value, kind)``, so both graph classes share them.
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping, MutableMapping

import numpy as np
import torch
from torch import Tensor

from unigraph.dgl.base import DGLError, is_all
from unigraph.graph import FeatureStore


class TypedCount(int):
    """A count DGL code both reads (``g.num_nodes() + 1``) and calls with a type
    (``g.num_nodes('user')``): the int is the total over all types, a call with a type asks the
    graph for that type's count."""

    def __new__(cls, total: int, of, keyword: str = "ntype"):
        value = super().__new__(cls, total)
        value._of, value._keyword = of, keyword
        return value

    def __call__(self, type_name: Any = None, **by_name: Any) -> int:
        """``g.num_nodes('user')`` / ``g.num_nodes(ntype='user')`` (``etype=`` for edge counts)."""
        if by_name:
            if set(by_name) != {self._keyword} or type_name is not None:
                raise TypeError(f"this count takes one type, positionally or as {self._keyword}=, got "
                                f"{sorted(by_name)}")
            type_name = by_name[self._keyword]
        return int(self) if type_name is None else int(self._of(type_name))

    def __reduce__(self):
        return (int, (int(self),))


def first_appearance(ids: Tensor) -> Tensor:
    """The distinct values of ``ids`` in order of first appearance."""
    unique, inverse = torch.unique(ids, return_inverse=True)
    first = torch.full((unique.numel(),), ids.numel(), dtype=torch.int64, device=ids.device)
    first = first.scatter_reduce(0, inverse, torch.arange(ids.numel(), device=ids.device), "amin")
    return unique[torch.argsort(first)]


def as_ids(value: Any, size: int, what: str, device: torch.device) -> Tensor:
    """Node or edge ids as an int64 tensor on ``device``: an int, a list, a numpy array or a
    tensor (any integer dtype), checked against ``size``. ``dgl.ALL`` gives every id."""
    if is_all(value):
        return torch.arange(size, device=device)
    if isinstance(value, Tensor):
        ids = value
    elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        ids = torch.tensor([int(value)])
    else:
        try:
            ids = torch.as_tensor(np.asarray(value))
        except (TypeError, ValueError) as err:
            raise TypeError(f"{what} must be ids (an int, a list or a tensor), got {type(value).__name__}: {err}") from None
    if ids.numel() == 0:
        return torch.zeros(0, dtype=torch.int64, device=device)
    if ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
        raise TypeError(f"{what} must hold integers, got {ids.dtype}")
    ids = ids.reshape(-1).to(device=device, dtype=torch.int64)
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= size:
        raise DGLError(f"{what} holds {low if low < 0 else high}, outside 0..{size - 1}")
    return ids


class RowData(MutableMapping):
    """``g.nodes[ids].data`` / ``g.edges[ids].data``: the rows ``ids`` of a feature store. Reading
    gathers the rows; writing replaces them out of place (autograd flows to both the old tensor and
    the written rows), creating the feature with the graph's initializer when it is new."""

    def __init__(self, graph, store, ids: Tensor, kind: str, num_rows: int):
        self._graph, self._store, self._ids, self._kind, self._num_rows = graph, store, ids, kind, num_rows

    def __getitem__(self, key: str) -> Tensor:
        return self._store[key].index_select(0, self._ids.to(self._store[key].device))

    def __setitem__(self, key: str, value: Tensor) -> None:
        self._graph._write_rows(self._store, key, self._ids, value, self._kind, self._num_rows)

    def __delitem__(self, key: str) -> None:
        raise DGLError(f"cannot delete {key!r} from some rows; delete it from the whole store (g.ndata.pop)")

    def __iter__(self) -> Iterator[str]:
        return iter(self._store)

    def __len__(self) -> int:
        return len(self._store)

    def __repr__(self) -> str:
        return f"RowData({len(self._ids)} rows of {sorted(self._store)})"


class Space:
    """What ``g.nodes[...]`` / ``g.edges[...]`` returns: ``.data`` (all rows: the store itself)."""

    def __init__(self, data):
        self.data = data


class NodeView:
    """``g.nodes`` (``g.srcnodes``, ``g.dstnodes``): call it for the ids (``g.nodes()``,
    ``g.nodes('user')``); index it for data (``g.nodes[ids].data``, ``g.nodes['user'].data``)."""

    def __init__(self, graph, side: str = "node"):
        self._graph, self._side = graph, side  # side: "node", "src" or "dst"

    def __call__(self, ntype: Any = None) -> Tensor:
        count = self._graph._num_nodes_of(ntype, self._side)
        return self._graph._out_ids(torch.arange(count, device=self._graph.device))

    def __getitem__(self, key: Any) -> Space:
        graph = self._graph
        if isinstance(key, str):
            return Space(graph._node_store(key, self._side))
        store = graph._node_store(None, self._side)
        if is_all(key) or (isinstance(key, slice) and key == slice(None)):
            return Space(store)
        count = graph._num_nodes_of(None, self._side)
        return Space(RowData(graph, store, as_ids(key, count, "node ids", graph.device), "node", count))

    def __len__(self) -> int:
        return self._graph._num_nodes_of(None, self._side)

    def __iter__(self):
        return iter(range(len(self)))


class EdgeView:
    """``g.edges``: call it for the endpoints (``g.edges(form='uv', order='eid', etype=None)``);
    index it for data (``g.edges[eids].data``, ``g.edges[u, v].data``, ``g.edges['plays'].data``)."""

    def __init__(self, graph):
        self._graph = graph

    def __call__(self, form: str = "uv", order: str = "eid", etype: Any = None):
        return self._graph.all_edges(form=form, order=order, etype=etype)

    def __getitem__(self, key: Any) -> Space:
        graph = self._graph
        if isinstance(key, str) or (isinstance(key, tuple) and len(key) == 3 and all(isinstance(k, str) for k in key)):
            return Space(graph._edge_store(key))
        store = graph._edge_store(None)
        if is_all(key) or (isinstance(key, slice) and key == slice(None)):
            return Space(store)
        if isinstance(key, tuple) and len(key) == 2:
            ids = graph._edge_ids_of(key[0], key[1], None)
        else:
            ids = as_ids(key, graph._num_edges_of(None), "edge ids", graph.device)
        return Space(RowData(graph, store, ids, "edge", graph._num_edges_of(None)))

    def __len__(self) -> int:
        return self._graph._num_edges_of(None)


class TypedData(MutableMapping):
    """``g.ndata`` / ``g.edata`` of a graph with several types, DGL's dict form: ``data[key]`` is
    ``{type: tensor}`` over the types that hold ``key``; ``data[key] = {type: tensor}`` writes each
    type (a bare tensor is refused: it names no type)."""

    def __init__(self, stores: Mapping[Any, FeatureStore], what: str):
        self._stores, self._what = dict(stores), what

    def __getitem__(self, key: str) -> dict[Any, Tensor]:
        found = {t: store[key] for t, store in self._stores.items() if key in store}
        if not found:
            raise KeyError(f"{self._what} has no {key!r} for any type")
        return found

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(value, Mapping):
            raise DGLError(f"this graph has several types: set {self._what}[{key!r}] to a dict {{type: tensor}}")
        for type_name, tensor in value.items():
            if type_name not in self._stores:
                raise DGLError(f"{self._what}: no type {type_name!r}; valid: {list(self._stores)}")
            self._stores[type_name][key] = tensor

    def __delitem__(self, key: str) -> None:
        holders = [store for store in self._stores.values() if key in store]
        if not holders:
            raise KeyError(f"{self._what} has no {key!r} for any type")
        for store in holders:
            del store[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(key for store in self._stores.values() for key in store))

    def __len__(self) -> int:
        return len(list(iter(self)))

    def __repr__(self) -> str:
        return f"{self._what}({ {t: sorted(s) for t, s in self._stores.items()} })"
