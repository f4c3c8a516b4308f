"""DGL's subgraph extraction on unigraph.dgl graphs of any kind (a homogeneous or bipartite
:class:`~unigraph.dgl.graph.DGLGraph`, a :class:`~unigraph.dgl.heterograph.DGLHeteroGraph`):
``node_subgraph``, ``edge_subgraph``, ``in_subgraph``, ``out_subgraph``, ``khop_in_subgraph``,
``khop_out_subgraph``, ``node_type_subgraph``, ``edge_type_subgraph`` (also the graphs' methods
of those names, ``g.subgraph`` being ``node_subgraph``).

A graph is seen as its typed parts (:func:`typed_parts`: node counts and feature stores by type,
relation graphs by canonical edge type); a subgraph is the same node types and relations with
some edges and, with ``relabel_nodes``, some nodes renumbered, built as the same kind of graph
(:func:`assemble`). The orders are DGL's, per relation:

* ``node_subgraph``: the edges with both ends among the nodes, grouped by new source id, in edge
  id order within (also without relabelling, as DGL keeps them);
* ``edge_subgraph``: the edges in the order given; with ``relabel_nodes`` each type's nodes in
  order of first appearance over the relations in ``canonical_etypes`` order, sources before
  destinations within one;
* ``in_subgraph`` / ``out_subgraph``: the in-edges (out-edges) of the nodes node by node in the
  order given, edge id order within; relabelled as ``edge_subgraph`` relabels;
* ``khop_*``: every node within ``k`` hops, sorted per type, then ``node_subgraph``.

Features come along sliced; ``store_ids`` writes the original ids (``dgl.NID`` where nodes were
renumbered, ``dgl.EID`` always), in the graph's id type. ``node_type_subgraph`` and
``edge_type_subgraph`` share the features with the graph instead (DGL's: a write on one is seen on
the other). Blocks are refused, as DGL refuses them.
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import torch
from torch import Tensor

from unigraph.dgl.base import EID, NID, DGLError
from unigraph.dgl.views import as_ids, first_appearance
from unigraph.graph import FeatureStore

CanonicalEtype = tuple[str, str, str]


class TypedParts(NamedTuple):
    """A graph as typed parts: node counts and feature stores by node type (in ``ntypes``
    order), relation graphs by canonical edge type (in ``canonical_etypes`` order). Each graph
    class gives its own (``g._typed_parts()``) and builds a graph of its kind from counts and
    edges (``g._assembled(counts, edges)``): this module reads and builds graphs only through
    those two, so it sits below the graph classes."""
    counts: dict[str, int]
    stores: dict[str, FeatureStore]
    relations: dict[CanonicalEtype, Any]


def typed_parts(g: Any) -> TypedParts:
    return g._typed_parts()


def graph_only(g: Any, what: str) -> TypedParts:
    """``g``'s typed parts; a block or anything but a unigraph.dgl graph is refused."""
    if not hasattr(g, "_typed_parts"):
        raise DGLError(f"{what} expects a graph from unigraph.dgl, got {type(g).__name__}")
    if g.is_block:
        raise DGLError(f"{what} of a block is not supported (DGL refuses it too)")
    return g._typed_parts()


def assemble(g: Any, counts: Mapping[str, int], edges: Mapping[CanonicalEtype, tuple[Tensor, Tensor]]):
    """A graph of ``g``'s kind, types, id type and initializers with ``counts`` nodes per type and
    the relations ``edges`` ({canonical etype: (src, dst)}, ids already valid); no features."""
    return g._assembled(counts, edges)


def with_features(g: Any, out: Any, nodes: Mapping[str, Tensor | None], edges: Mapping[CanonicalEtype, Tensor],
                  store_ids: bool):
    """``out`` (assembled from ``g``) with ``g``'s features: rows ``nodes[t]`` of each node type
    (None: every row, no ids stored) and ``edges[cet]`` of each relation; returns ``out``."""
    source, target = typed_parts(g), typed_parts(out)
    for ntype, ids in nodes.items():
        store = target.stores[ntype]
        for key, value in source.stores[ntype].items():
            store[key] = value if ids is None else value[ids]
        if store_ids and ids is not None:
            store[NID] = g._out_ids(ids)
    for cet, ids in edges.items():
        store = target.relations[cet].edata
        for key, value in source.relations[cet].edata.items():
            store[key] = value[ids]
        if store_ids:
            store[EID] = g._out_ids(ids)
    return out


# ---------------------------------------------------------------------- arguments
def typed_ids(g: Any, parts: TypedParts, given: Any, what: str, *, masks: bool = True) -> dict[str, Tensor]:
    """Node ids by type from DGL's forms: ``{ntype: ids or bool mask}`` (a type left out: none)
    or, on a graph of one node type, the ids themselves."""
    if not isinstance(given, Mapping):
        if len(parts.counts) != 1:
            raise DGLError(f"{what}: this graph has node types {list(parts.counts)}; give {{node type: ids}}")
        given = {next(iter(parts.counts)): given}
    out = {t: torch.zeros(0, dtype=torch.int64, device=g.device) for t in parts.counts}
    for ntype, ids in given.items():
        name = g._check_ntype(ntype)
        out[name] = _ids_or_mask(ids, parts.counts[name], f"{what}[{ntype!r}]", g.device, masks)
    return out


def typed_edge_ids(g: Any, parts: TypedParts, given: Any, what: str) -> dict[CanonicalEtype, Tensor]:
    """Edge ids by canonical edge type: ``{etype: ids or bool mask}`` (a relation left out:
    none) or, on a graph of one relation, the ids themselves."""
    if not isinstance(given, Mapping):
        if len(parts.relations) != 1:
            raise DGLError(f"{what}: this graph has edge types {list(parts.relations)}; give {{edge type: ids}}")
        given = {next(iter(parts.relations)): given}
    out = {cet: torch.zeros(0, dtype=torch.int64, device=g.device) for cet in parts.relations}
    for etype, ids in given.items():
        cet = g.to_canonical_etype(etype)
        out[cet] = _ids_or_mask(ids, parts.relations[cet]._src.numel(), f"{what}[{etype!r}]", g.device, True)
    return out


def _ids_or_mask(ids: Any, size: int, what: str, device: torch.device, masks: bool) -> Tensor:
    if isinstance(ids, Tensor) and ids.dtype == torch.bool:
        if not masks:
            raise DGLError(f"{what}: give ids, not a mask")
        # DGL takes the positions of a mask of any length; a position past the count is refused below
        ids = ids.reshape(-1).nonzero().flatten()
    return as_ids(ids, size, what, device)


def _positions(ids: Tensor, size: int) -> Tensor:
    """For each of ``size`` ids, its position in ``ids`` (-1: absent)."""
    out = torch.full((size,), -1, dtype=torch.int64, device=ids.device)
    out[ids] = torch.arange(ids.numel(), device=ids.device)
    return out


def _moved(out: Any, output_device: Any):
    return out if output_device is None else out.to(output_device)


# ---------------------------------------------------------------------- node / edge subgraphs
def node_subgraph(graph: Any, nodes: Any, *, relabel_nodes: bool = True, store_ids: bool = True,
                  output_device: Any = None):
    """The subgraph induced by ``nodes`` (ids, a bool mask, or ``{node type: ids or mask}``; a
    type left out keeps no node): every edge with both ends among them (DGL's ``node_subgraph``)."""
    parts = graph_only(graph, "node_subgraph")
    chosen = typed_ids(graph, parts, nodes, "nodes")
    position = {t: _positions(ids, parts.counts[t]) for t, ids in chosen.items()}
    kept, new_edges = {}, {}
    for cet, relation in parts.relations.items():
        src, dst = relation._coo()
        new_src, new_dst = position[cet[0]][src], position[cet[2]][dst]
        eids = ((new_src >= 0) & (new_dst >= 0)).nonzero().flatten()
        eids = eids[torch.sort(new_src[eids], stable=True).indices]   # DGL's order: by new source id
        kept[cet] = eids
        new_edges[cet] = (new_src[eids], new_dst[eids]) if relabel_nodes else (src[eids], dst[eids])
    if relabel_nodes:
        counts, rows = {t: ids.numel() for t, ids in chosen.items()}, chosen
    else:
        counts, rows = parts.counts, dict.fromkeys(parts.counts)
    out = assemble(graph, counts, new_edges)
    return _moved(with_features(graph, out, rows, kept, store_ids), output_device)


def edge_subgraph(graph: Any, edges: Any, *, relabel_nodes: bool = True, store_ids: bool = True,
                  output_device: Any = None):
    """The edges ``edges`` (ids, a bool mask, or ``{edge type: ids or mask}``; a relation left
    out keeps none), in the order given, with their end nodes (DGL's ``edge_subgraph``)."""
    parts = graph_only(graph, "edge_subgraph")
    chosen = typed_edge_ids(graph, parts, edges, "edges")
    return _moved(_edges_kept(graph, parts, chosen, relabel_nodes, store_ids), output_device)


def _edges_kept(graph: Any, parts: TypedParts, chosen: Mapping[CanonicalEtype, Tensor], relabel_nodes: bool,
                store_ids: bool):
    """The subgraph of the edges ``chosen`` per relation; with ``relabel_nodes`` only their end
    nodes, numbered per type in order of first appearance (relations in order, sources first)."""
    ends = {cet: tuple(ids[chosen[cet]] for ids in relation._coo()) for cet, relation in parts.relations.items()}
    if not relabel_nodes:
        out = assemble(graph, parts.counts, ends)
        return with_features(graph, out, dict.fromkeys(parts.counts), chosen, store_ids)
    seen: dict[str, list[Tensor]] = {t: [] for t in parts.counts}
    for (src_type, _, dst_type), (src, dst) in ends.items():
        seen[src_type].append(src)
        seen[dst_type].append(dst)
    nodes = {t: first_appearance(torch.cat(ids)) if ids and sum(x.numel() for x in ids)
             else torch.zeros(0, dtype=torch.int64, device=graph.device) for t, ids in seen.items()}
    position = {t: _positions(ids, parts.counts[t]) for t, ids in nodes.items()}
    relabelled = {cet: (position[cet[0]][src], position[cet[2]][dst]) for cet, (src, dst) in ends.items()}
    out = assemble(graph, {t: ids.numel() for t, ids in nodes.items()}, relabelled)
    return with_features(graph, out, nodes, chosen, store_ids)


def _adjacent_subgraph(graph: Any, nodes: Any, relabel_nodes: bool, store_ids: bool, output_device: Any,
                       inbound: bool):
    what = "in_subgraph" if inbound else "out_subgraph"
    parts = graph_only(graph, what)
    chosen = typed_ids(graph, parts, nodes, "nodes", masks=False)
    eids = {}
    for cet, relation in parts.relations.items():
        seeds = chosen[cet[2] if inbound else cet[0]]
        eids[cet] = relation._adjacent(relation.in_csr() if inbound else relation.out_csr(), seeds)[1]
    return _moved(_edges_kept(graph, parts, eids, relabel_nodes, store_ids), output_device)


def in_subgraph(graph: Any, nodes: Any, *, relabel_nodes: bool = False, store_ids: bool = True,
                output_device: Any = None):
    """Every in-edge of ``nodes`` (ids, or ``{node type: ids}``) over every relation (DGL's
    ``in_subgraph``); every node kept unless ``relabel_nodes``."""
    return _adjacent_subgraph(graph, nodes, relabel_nodes, store_ids, output_device, inbound=True)


def out_subgraph(graph: Any, nodes: Any, *, relabel_nodes: bool = False, store_ids: bool = True,
                 output_device: Any = None):
    """Every out-edge of ``nodes`` over every relation (DGL's ``out_subgraph``)."""
    return _adjacent_subgraph(graph, nodes, relabel_nodes, store_ids, output_device, inbound=False)


# ---------------------------------------------------------------------- k-hop subgraphs
def _khop(graph: Any, nodes: Any, k: int, relabel_nodes: bool, store_ids: bool, output_device: Any,
          inbound: bool):
    what = "khop_in_subgraph" if inbound else "khop_out_subgraph"
    parts = graph_only(graph, what)
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise DGLError(f"{what}: k must be an int >= 0, got {k!r}")
    is_mapping = isinstance(nodes, Mapping)
    seeds = typed_ids(graph, parts, nodes, "nodes", masks=False)
    named = {t: graph._check_ntype(t) for t in nodes} if is_mapping else {t: t for t in parts.counts}
    hops, last = [seeds], seeds
    for _ in range(k):
        reached: dict[str, list[Tensor]] = {t: [] for t in parts.counts}
        for cet, relation in parts.relations.items():
            near, far = (cet[2], cet[0]) if inbound else (cet[0], cet[2])
            slots = relation._adjacent(relation.in_csr() if inbound else relation.out_csr(), last[near])[1]
            reached[far].append((relation._coo()[0] if inbound else relation._coo()[1])[slots])
        last = {t: torch.unique(torch.cat(ids)) if ids else seeds[t][:0] for t, ids in reached.items()}
        hops.append(last)
    within, inverse = {}, {}
    for ntype in parts.counts:
        within[ntype], inverse[ntype] = torch.unique(torch.cat([hop[ntype] for hop in hops]), return_inverse=True)
    out = node_subgraph(graph, within, relabel_nodes=relabel_nodes, store_ids=store_ids,
                        output_device=output_device)
    if not relabel_nodes:
        return out
    # the seeds' new ids, keyed as given (int64, as DGL's come from torch.unique)
    seed_ids = {key: inverse[t][:seeds[t].numel()].to(out.device) for key, t in named.items()}
    return out, (seed_ids if is_mapping else next(iter(seed_ids.values())))


def khop_in_subgraph(graph: Any, nodes: Any, k: int, *, relabel_nodes: bool = True, store_ids: bool = True,
                     output_device: Any = None):
    """The subgraph induced by every node from which ``nodes`` are reached in at most ``k`` hops
    (DGL's ``khop_in_subgraph``); with ``relabel_nodes``, also the new ids of ``nodes``."""
    return _khop(graph, nodes, k, relabel_nodes, store_ids, output_device, inbound=True)


def khop_out_subgraph(graph: Any, nodes: Any, k: int, *, relabel_nodes: bool = True, store_ids: bool = True,
                      output_device: Any = None):
    """The subgraph induced by every node reached from ``nodes`` in at most ``k`` hops."""
    return _khop(graph, nodes, k, relabel_nodes, store_ids, output_device, inbound=False)


# ---------------------------------------------------------------------- type subgraphs
def edge_type_subgraph(graph: Any, etypes: Any, output_device: Any = None):
    """The relations ``etypes`` with every node of the types they join, sharing the graph's node
    and edge features (DGL's ``edge_type_subgraph``: a feature written on one is seen on the other)."""
    graph_only(graph, "edge_type_subgraph")
    chosen = list(dict.fromkeys(graph.to_canonical_etype(etype) for etype in etypes))
    if not chosen:
        raise DGLError("edge_type_subgraph needs at least one edge type")
    return _moved(graph._with_relations(chosen), output_device)


def node_type_subgraph(graph: Any, ntypes: Any, output_device: Any = None):
    """Every relation among the node types ``ntypes`` (DGL's ``node_type_subgraph``; the
    features are shared as in :func:`edge_type_subgraph`)."""
    parts = graph_only(graph, "node_type_subgraph")
    names = {graph._check_ntype(t) for t in ntypes}
    etypes = [cet for cet in parts.relations if cet[0] in names and cet[2] in names]
    if not etypes:
        raise DGLError("There are no edges among nodes of the specified types.")
    return edge_type_subgraph(graph, etypes, output_device=output_device)
