"""A :class:`HeteroGraph` as one homogeneous :class:`~unigraph.Graph` with type ids, and back.

The homogeneous graph numbers the nodes type after type (in :attr:`HeteroGraph.node_types` order)
and the edges relation after relation (in :attr:`HeteroGraph.relations` order, each relation's
edges in their own order). ``ndata["node_type"]`` holds each node's type id and
``edata["edge_type"]`` each edge's relation id (PyG's names; DGL's ``dgl.NTYPE``/``dgl.ETYPE``).

This module sits below :class:`HeteroGraph` (whose ``to_homogeneous``/``from_homogeneous``
methods call it), so it names no heterograph class: :func:`from_homogeneous` builds the ``cls``
it is given (``unigraph.hetero.from_homogeneous`` is ``HeteroGraph.from_homogeneous``).
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor

from unigraph.graph import Graph as CoreGraph
from unigraph.user_graph import Graph
from unigraph.hetero.names import Relation, check_relation, check_type_name

NODE_TYPE = "node_type"
EDGE_TYPE = "edge_type"


def type_offsets(counts: Sequence[int]) -> list[int]:
    """``[0, c0, c0 + c1, ...]``: where each type's rows start when types are laid out in order."""
    offsets = [0]
    for count in counts:
        offsets.append(offsets[-1] + count)
    return offsets


def _concat_features(key: str, parts: dict, what: str) -> Tensor:
    """One tensor from the per-type (or per-relation) tensors of ``key``; all must have it, with one
    dtype and one feature shape."""
    missing = [name for name, store in parts.items() if key not in store]
    if missing:
        raise ValueError(f"to_homogeneous: {what} {missing} have no feature {key!r}; every {what[:-1]} needs it to "
                         "concatenate (give only keys that every one holds)")
    tensors = [store[key] for store in parts.values()]
    shapes = {tuple(t.shape[1:]) for t in tensors}
    dtypes = {t.dtype for t in tensors}
    if len(shapes) > 1 or len(dtypes) > 1:
        raise ValueError(f"to_homogeneous: feature {key!r} has different shapes or dtypes across {what} "
                         f"({ {name: (tuple(s[key].shape[1:]), s[key].dtype) for name, s in parts.items()} })")
    return torch.cat(tensors) if tensors else torch.empty(0)


def to_homogeneous(hg: Any, node_features: Sequence[str] = (), edge_features: Sequence[str] = ()) -> Graph:
    """``hg`` as one graph: ``ndata["node_type"]``, ``edata["edge_type"]`` and the requested features
    concatenated (every type, or every relation, must hold them with one shape and dtype)."""
    if hg.is_block:
        raise ValueError("to_homogeneous works on a whole HeteroGraph, not on a sampled block")
    types = hg.node_types
    offsets = type_offsets([hg.num_nodes(t) for t in types])
    index = {t: i for i, t in enumerate(types)}
    device = hg.device
    srcs, dsts, rels = [], [], []
    for rid, ((src_type, _, dst_type), graph) in enumerate(hg.items()):
        srcs.append(graph.src + offsets[index[src_type]])
        dsts.append(graph.dst + offsets[index[dst_type]])
        rels.append(torch.full((graph.num_edges,), rid, dtype=torch.int64, device=device))
    empty = torch.empty(0, dtype=torch.int64, device=device)
    src = torch.cat(srcs) if srcs else empty
    dst = torch.cat(dsts) if dsts else empty
    out = Graph._trusted(src, dst, offsets[-1], offsets[-1], False)
    out.ndata[NODE_TYPE] = torch.repeat_interleave(
        torch.arange(len(types), device=device), torch.tensor([hg.num_nodes(t) for t in types], device=device),
        output_size=offsets[-1])
    out.edata[EDGE_TYPE] = torch.cat(rels) if rels else empty
    for key in node_features:
        out.ndata[key] = _concat_features(key, dict(hg.ndata), "node types")
    for key in edge_features:
        out.edata[key] = _concat_features(key, dict(hg.edata), "relations")
    return out


def _check_type_ids(name: str, ids: Tensor, rows: int, count: int, what: str) -> Tensor:
    if not isinstance(ids, Tensor) or ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
        raise TypeError(f"{name} must be an integer tensor, got {getattr(ids, 'dtype', type(ids).__name__)}")
    if ids.shape != (rows,):
        raise ValueError(f"{name} must have shape [{rows}], got {list(ids.shape)}")
    ids = ids.to(torch.int64)
    if rows and (int(ids.min()) < 0 or int(ids.max()) >= count):
        bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
        raise ValueError(f"{name} holds {bad}, outside the {count} {what} (valid ids 0..{count - 1})")
    return ids


def from_homogeneous(graph: Graph, node_types: Sequence[str], relations: Sequence[Relation], *,
                     node_type: Tensor | None = None, edge_type: Tensor | None = None, cls: type) -> Any:
    """A :class:`HeteroGraph` from one graph whose nodes carry type ids (``node_type``, default
    ``graph.ndata["node_type"]``) and whose edges carry relation ids (``edge_type``, default
    ``graph.edata["edge_type"]``); ids index ``node_types`` and ``relations``.

    Nodes of a type keep their relative order (node ``i`` of type ``t`` is the ``i``-th node of type
    ``t`` in ``graph``), and so do the edges of a relation. Every edge's endpoints must have the
    types its relation names (``ValueError`` otherwise). Every other node / edge feature of
    ``graph`` is split by type / relation. The result is a ``cls`` (``HeteroGraph.from_homogeneous``
    passes its own class).
    """
    if not isinstance(graph, CoreGraph) or graph.is_bipartite:
        raise TypeError(f"from_homogeneous needs a homogeneous unigraph.Graph, got {graph!r}")
    node_types = [check_type_name(t, "a node type") for t in node_types]
    relations = [check_relation(r) for r in relations]
    if len(set(node_types)) != len(node_types) or len(set(relations)) != len(relations):
        raise ValueError(f"node_types and relations must not repeat, got {node_types} and {relations}")
    index = {t: i for i, t in enumerate(node_types)}
    for relation in relations:
        for ntype in (relation[0], relation[2]):
            if ntype not in index:
                raise ValueError(f"relation {relation} names the node type {ntype!r}, which is not in {node_types}")
    n, e = graph.num_nodes, graph.num_edges
    ntype = _check_type_ids("node_type", graph.ndata[NODE_TYPE] if node_type is None else node_type, n,
                            len(node_types), "node types")
    etype = _check_type_ids("edge_type", graph.edata[EDGE_TYPE] if edge_type is None else edge_type, e,
                            len(relations), "relations")
    # local id of each node inside its type: its rank among the nodes of that type
    order = torch.sort(ntype, stable=True).indices
    counts = torch.bincount(ntype, minlength=len(node_types))
    starts = torch.cumsum(counts, 0) - counts
    local = torch.empty_like(ntype)
    local[order] = torch.arange(n, device=ntype.device) - starts[ntype[order]]
    graphs = {}
    for rid, relation in enumerate(relations):
        edges = (etype == rid).nonzero().flatten()
        src, dst = graph.src[edges], graph.dst[edges]
        wrong = (ntype[src] != index[relation[0]]) | (ntype[dst] != index[relation[2]])
        if bool(wrong.any()):
            first = int(edges[wrong.nonzero()[0]])
            raise ValueError(f"relation {relation}: {int(wrong.sum())} of its edges join nodes of other types "
                             f"(first: edge {first}, {int(graph.src[first])} -> {int(graph.dst[first])} with node types "
                             f"{node_types[int(ntype[graph.src[first]])]!r} -> {node_types[int(ntype[graph.dst[first]])]!r})")
        n_src, n_dst = int(counts[index[relation[0]]]), int(counts[index[relation[2]]])
        rel_graph = Graph._trusted(local[src], local[dst], n_src, n_dst, relation[0] != relation[2])
        for key, value in graph.edata.items():
            if key != EDGE_TYPE:
                rel_graph.edata[key] = value[edges]
        graphs[relation] = rel_graph
    sizes, firsts = counts.tolist(), starts.tolist()
    out = cls._trusted(graphs, dict(zip(node_types, sizes)))
    for key, value in graph.ndata.items():
        if key == NODE_TYPE:
            continue
        for tid, t in enumerate(node_types):
            out.ndata[t][key] = value[order[firsts[tid]:firsts[tid] + sizes[tid]]]
    return out
