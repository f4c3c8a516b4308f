"""PyG's heterogeneous call forms, ``conv(x_dict, edge_index_dict)``, beside unigraph's
``conv(hg, x_dict)``: recognized and checked (:func:`hetero_form`) and turned into a cached
:class:`~unigraph.HeteroGraph` (:func:`hetero_graph`), with the cache and checks of the
homogeneous forms (:mod:`unigraph.call_forms`)."""
from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import Tensor

from unigraph.call_forms import (_SPARSE_LAYOUTS, _cached_all, _describe, _hint, _index_tensors, _is_adjacency,
                                 _is_sparse_tensor, _stamp)
from unigraph.convert import sparse_entries
from unigraph.hetero.graph import HeteroGraph, check_relation

HETERO_FORMS = ("conv(hg, x_dict) with hg a unigraph.HeteroGraph; conv(x_dict, edge_index_dict) with x_dict "
                "{node_type: tensor} and edge_index_dict {(src_type, name, dst_type): [2, E] integer tensor, "
                "torch_sparse.SparseTensor or torch sparse adj_t[dst, src]}")


def hetero_form(who: str, first: Any, second: Any) -> str:
    """``"graph"`` for ``conv(hg, x_dict)``, ``"dicts"`` for PyG's ``conv(x_dict, edge_index_dict)``
    (keys and adjacencies checked, every relation's node types present in ``x_dict``); anything
    else is refused naming the accepted forms."""
    if isinstance(first, HeteroGraph):
        return "graph"
    if not (isinstance(first, Mapping) and isinstance(second, Mapping)):
        swapped = ": the graph and the features look swapped" if isinstance(second, HeteroGraph) else ""
        raise TypeError(f"{who} cannot read its arguments ({_describe(first)}, {_describe(second)}){swapped}; "
                        f"accepted forms: {HETERO_FORMS}")
    if any(isinstance(key, tuple) for key in first) or any(isinstance(key, str) for key in second):
        raise TypeError(f"{who}: x_dict and edge_index_dict look swapped (x_dict is keyed by node type, "
                        f"edge_index_dict by (src_type, name, dst_type)); accepted forms: {HETERO_FORMS}")
    for ntype, x in first.items():
        if not isinstance(x, Tensor) or x.dim() == 0:
            raise TypeError(f"{who}: x_dict[{ntype!r}] must be a tensor with one row per node, got {_describe(x)}")
    for key, adj in second.items():
        relation = check_relation(key)
        if not _is_adjacency(adj):
            raise TypeError(f"{who}: edge_index_dict[{relation}] must be a [2, E] integer tensor, a SparseTensor or "
                            f"a torch sparse adj_t, got {_describe(adj)}{_hint(None, adj)}")
        missing = [t for t in (relation[0], relation[2]) if t not in first]
        if missing:
            raise ValueError(f"{who}: x_dict has no features for {missing}, node types of {relation}; every node "
                             "type of a relation needs its features (their rows are its node count)")
        if _is_sparse_tensor(adj) or adj.layout in _SPARSE_LAYOUTS:
            shape = tuple(adj.sizes())[:2] if _is_sparse_tensor(adj) else tuple(adj.shape)
            rows = (first[relation[2]].shape[0], first[relation[0]].shape[0])
            if shape != rows:
                raise ValueError(f"{who}: edge_index_dict[{relation}] has shape {list(shape)} but x_dict has "
                                 f"{list(rows)} rows for it (adj_t is [num_dst_nodes, num_src_nodes])")
    return "dicts"


def hetero_graph(who: str, x_dict: Mapping[str, Tensor], edge_index_dict: Mapping[Any, Any]):
    """The :class:`~unigraph.HeteroGraph` of PyG's ``(x_dict, edge_index_dict)``: node counts the
    rows of ``x_dict``, each relation's edges from its adjacency (a sparse one's entries in storage
    order, its values ignored). Cached on every adjacency's identity and in-place version."""
    adjs = tuple(edge_index_dict.values())
    relations = tuple(check_relation(key) for key in edge_index_dict)
    counts = tuple((t, x.shape[0]) for t, x in x_dict.items())
    indexes = tuple(_index_tensors(adj) for adj in adjs)
    stamps = tuple(_stamp(*index) for index in indexes)
    stamp = None if None in stamps else stamps

    def build():
        edges = {relation: _edge_index_of(adj) for relation, adj in zip(relations, adjs)}
        try:
            return HeteroGraph(edges, num_nodes=dict(counts))
        except (TypeError, ValueError) as err:  # the HeteroGraph names the problem; say who was called
            raise type(err)(f"{who}: {err}") from None
    return _cached_all(adjs, stamp, ("hetero", relations, counts), build, sum(indexes, ()))


def _edge_index_of(adj: Any) -> Tensor:
    """``[2, E]`` (sources, destinations) of an adjacency; sparse ones are ``adj_t[dst, src]``, read
    in storage order (duplicates kept, values ignored)."""
    if _is_sparse_tensor(adj):
        return torch.stack([adj.storage.col(), adj.storage.row()])
    if adj.layout in _SPARSE_LAYOUTS:
        if adj.dim() != 2:
            raise ValueError(f"a sparse adjacency must be a 2-D matrix adj_t[dst, src], got shape {list(adj.shape)}")
        dst, src, _ = sparse_entries(adj)
        return torch.stack([src, dst])
    return adj
