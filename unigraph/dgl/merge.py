r"""DGL's ``dgl.merge``: graphs of the same node and edge types laid over one another.

.. math::
    V_t = \{0, \dots, \max_i n_t(G_i) - 1\}, \qquad
    E_r = E_r(G_0) \,\Vert\, E_r(G_1) \,\Vert\, \cdots

Node ``v`` of type ``t`` is one node in every graph that has it; each relation's edges are every
graph's edges, in graph order (an edge in two graphs is two edges, as in DGL). Node features: the
rows of a later graph replace those of an earlier one for the features it has (``x_v`` is the last
graph's value among those holding ``v`` and the feature); a feature no earlier graph had is
created, zero where no graph gave it. Edge features are concatenated; an edge of a graph without
the feature gets zeros. DGL 2.1 differs in two corner cases: an edge feature that only a later
graph has is dropped there (kept here, zeros for the earlier graphs' edges), and one that a later
graph lacks raises a ``KeyError`` there (zeros for that graph's edges here). A feature whose row
shape or dtype differs between graphs is refused (DGL's concatenation fails or promotes).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor

from unigraph.dgl.base import DGLError
from unigraph.dgl.convert import heterograph


def merge(graphs: Sequence[Any]):
    """The graphs of ``graphs`` merged into a new graph (module docstring); the inputs are not
    changed. The result has the first graph's id type and device."""
    graphs = list(graphs)
    if not graphs:
        raise DGLError("dgl.merge: the input list of graphs cannot be empty")
    ref = graphs[0]
    for i, g in enumerate(graphs[1:], 1):
        if list(g.ntypes) != list(ref.ntypes) or list(g.canonical_etypes) != list(ref.canonical_etypes):
            raise DGLError(f"dgl.merge: graph {i} has node types {list(g.ntypes)} and relations "
                           f"{list(g.canonical_etypes)}, graph 0 {list(ref.ntypes)} and {list(ref.canonical_etypes)}: "
                           "merged graphs must have the same types")
    counts = {ntype: max(g.num_nodes(ntype) for g in graphs) for ntype in ref.ntypes}
    edges = {}
    for etype in ref.canonical_etypes:
        pairs = [g.edges(etype=etype) for g in graphs]
        edges[etype] = (torch.cat([u.to(torch.int64) for u, _ in pairs]), torch.cat([v.to(torch.int64) for _, v in pairs]))
    merged = heterograph(edges, counts, idtype=ref.idtype, device=ref.device)
    for etype in ref.canonical_etypes:
        stores = [g.edges[etype].data for g in graphs]
        for key, value in _edge_features(stores, [g.num_edges(etype) for g in graphs], etype).items():
            merged.edges[etype].data[key] = value
    for ntype in ref.ntypes:
        for key, value in _node_features([g.nodes[ntype].data for g in graphs], counts[ntype], ntype).items():
            merged.nodes[ntype].data[key] = value
    return merged


def _template(stores: list, key: str, what: str) -> Tensor:
    """The first graph's ``key`` tensor, after checking every other graph's has its row shape and dtype."""
    present = [(i, store[key]) for i, store in enumerate(stores) if key in store]
    first_index, first = present[0]
    for i, value in present[1:]:
        if tuple(value.shape[1:]) != tuple(first.shape[1:]) or value.dtype != first.dtype:
            raise DGLError(f"dgl.merge: {what} feature {key!r} is {value.dtype} {list(value.shape[1:])} per row in "
                           f"graph {i} but {first.dtype} {list(first.shape[1:])} in graph {first_index}")
    return first


def _keys(stores: list) -> list:
    """Every feature name of ``stores``, in order of first appearance."""
    seen: dict = {}
    for store in stores:
        for key in store.keys():
            seen.setdefault(key, None)
    return list(seen)


def _edge_features(stores: list, sizes: list, etype: tuple) -> dict:
    out = {}
    for key in _keys(stores):
        first = _template(stores, key, f"edge ({etype})")
        out[key] = torch.cat([store[key].to(first.device) if key in store
                              else first.new_zeros((size,) + tuple(first.shape[1:]))
                              for store, size in zip(stores, sizes)])
    return out


def _node_features(stores: list, count: int, ntype: str) -> dict:
    out = {}
    for key in _keys(stores):
        first = _template(stores, key, f"node ({ntype})")
        value = first.new_zeros((count,) + tuple(first.shape[1:]))
        for store in stores:   # a later graph's rows replace an earlier one's
            if key in store:
                rows = store[key]
                value = torch.cat([rows.to(value.device), value[rows.shape[0]:]]) if rows.shape[0] else value
        out[key] = value
    return out
