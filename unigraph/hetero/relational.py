"""All relations of a typed graph as a few ordinary graphs, so that relation-wise layers make one
call to the graph operators for all relations instead of one per relation.

Nodes get global ids type after type (``offset[type] + local id``). Two kinds of *rows* stand for
(relation, node) pairs, laid out relation after relation:

* destination rows ``(r, v)``, one for every node ``v`` of relation ``r``'s destination type: the
  **gather graph** joins each source node to the row of its edge's relation and destination, so
  one ``gspmm`` over it aggregates every relation separately (``mean`` divides by the in-degree
  *within the relation*, as R-GCN's :math:`1/|\\mathcal{N}_r(i)|`); the **combine graph** then
  sums each destination's rows over the relations.
* source rows ``(r, u)``, one for every node ``u`` of relation ``r``'s source type: the **scatter
  graph** joins them to the global destinations, so per-relation transforms of the sources
  (``x_u W_r``) reach every destination in one ``gspmm``, and an edge softmax over it normalizes
  across all relations at once (HGT).

The three graphs share one edge order, so a per-edge tensor of one is valid for the others. Rows
of one relation are consecutive, so per-relation weights apply with one grouped product
(:mod:`unigraph.hetero.grouped`). The layout of a :class:`HeteroGraph` is built once and kept on it
(:meth:`HeteroGraph.memo`).
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.hetero.graph import HeteroGraph
from unigraph.hetero.homogeneous import type_offsets


class RelationLayout:
    """The typed graph as global edges plus per-relation row bookkeeping (see the module docstring).

    Fields: ``node_types``; ``src_counts``/``dst_counts`` per node type; ``rel_src``/``rel_dst``
    (type index of each relation's endpoints); ``src``, ``dst`` (global ids) and ``rel`` (relation
    id) per edge.
    """

    def __init__(self, node_types: list[str], src_counts: list[int], dst_counts: list[int], rel_src: list[int],
                 rel_dst: list[int], src: Tensor, dst: Tensor, rel: Tensor):
        self.node_types = node_types
        self.src_counts, self.dst_counts = src_counts, dst_counts
        self.rel_src, self.rel_dst = rel_src, rel_dst
        self.src, self.dst, self.rel = src, dst, rel
        self.src_offsets = type_offsets(src_counts)
        self.dst_offsets = type_offsets(dst_counts)
        self.src_row_counts = [src_counts[t] for t in rel_src]
        self.dst_row_counts = [dst_counts[t] for t in rel_dst]
        self._built: dict[str, Any] = {}

    @property
    def num_relations(self) -> int:
        return len(self.rel_src)

    @property
    def device(self) -> torch.device:
        return self.src.device

    def _once(self, name: str, build: Callable[[], Any]) -> Any:
        if name not in self._built:
            self._built[name] = build()
        return self._built[name]

    def _per_relation(self, values: list[int]) -> Tensor:
        return torch.tensor(values, dtype=torch.int64, device=self.device)

    def _type_ranges(self, offsets: list[int], rel_types: list[int]) -> Tensor:
        """The global ids of every node of each relation's type, relation after relation."""
        nodes = [torch.arange(offsets[t], offsets[t + 1], device=self.device) for t in rel_types]
        return torch.cat(nodes) if nodes else torch.empty(0, dtype=torch.int64, device=self.device)

    def _rows(self, node: Tensor, offsets: list[int], rel_types: list[int], row_counts: list[int]) -> Tensor:
        """The row ``(r, local id)`` of each edge's endpoint ``node`` (global id) under relation ``r``."""
        row_start = self._per_relation(type_offsets(row_counts)[:-1])
        type_start = self._per_relation([offsets[t] for t in rel_types])
        return row_start[self.rel] + node - type_start[self.rel]

    # ------------------------------------------------------------------ the three graphs
    def gather_graph(self) -> Graph:
        """Sources: global source nodes; destinations: rows ``(r, v)``."""
        def build() -> Graph:
            rows = self._rows(self.dst, self.dst_offsets, self.rel_dst, self.dst_row_counts)
            return Graph._trusted(self.src, rows, self.src_offsets[-1], sum(self.dst_row_counts), True)
        return self._once("gather", build)

    def combine_graph(self) -> Graph:
        """Sources: rows ``(r, v)``; destinations: global destination nodes (one edge per row)."""
        def build() -> Graph:
            dst = self._type_ranges(self.dst_offsets, self.rel_dst)
            return Graph._trusted(torch.arange(dst.numel(), device=self.device), dst, dst.numel(),
                                  self.dst_offsets[-1], True)
        return self._once("combine", build)

    def scatter_graph(self) -> Graph:
        """Sources: rows ``(r, u)``; destinations: global destination nodes."""
        def build() -> Graph:
            rows = self._rows(self.src, self.src_offsets, self.rel_src, self.src_row_counts)
            return Graph._trusted(rows, self.dst, sum(self.src_row_counts), self.dst_offsets[-1], True)
        return self._once("scatter", build)

    def row_graph(self) -> Graph:
        """Sources: rows ``(r, u)``; destinations: rows ``(r, v)``: per-relation messages of the
        sources aggregated within each relation (any reduction), before the combine graph sums them."""
        def build() -> Graph:
            return Graph._trusted(self.scatter_graph().src, self.gather_graph().dst, sum(self.src_row_counts),
                                  sum(self.dst_row_counts), True)
        return self._once("row", build)

    # ------------------------------------------------------------------ per-row and per-edge values
    def src_row_nodes(self) -> Tensor:
        """The global source node of every source row ``(r, u)``."""
        return self._once("src_row_nodes", lambda: self._type_ranges(self.src_offsets, self.rel_src))

    def src_row_relations(self) -> Tensor:
        """The relation of every source row."""
        return self._once("src_row_relations", lambda: torch.repeat_interleave(
            torch.arange(self.num_relations, device=self.device), self._per_relation(self.src_row_counts),
            output_size=sum(self.src_row_counts)))

    def mean_norm(self, dtype: torch.dtype) -> Tensor:
        """``1 / |N_r(v)|`` for every edge (its relation's in-degree of its destination)."""
        def build() -> Tensor:
            gather = self.gather_graph()
            return (1.0 / gather.in_degrees().to(torch.float64))[gather.dst].to(dtype)
        return self._once(f"mean_norm/{dtype}", build)


def hetero_layout(hg: HeteroGraph) -> RelationLayout:
    """The layout of a :class:`HeteroGraph` (built once per graph, kept on it)."""
    def build() -> RelationLayout:
        types = hg.node_types
        index = {t: i for i, t in enumerate(types)}
        src_counts = [hg.num_src_nodes(t) for t in types]
        dst_counts = [hg.num_dst_nodes(t) for t in types]
        src_offsets, dst_offsets = type_offsets(src_counts), type_offsets(dst_counts)
        rel_src, rel_dst, srcs, dsts, rels = [], [], [], [], []
        for rid, ((s, _, d), graph) in enumerate(hg.items()):
            rel_src.append(index[s])
            rel_dst.append(index[d])
            srcs.append(graph.src + src_offsets[index[s]])
            dsts.append(graph.dst + dst_offsets[index[d]])
            rels.append(torch.full((graph.num_edges,), rid, dtype=torch.int64, device=graph.device))
        empty = torch.empty(0, dtype=torch.int64, device=hg.device)
        cat = (lambda parts: torch.cat(parts) if parts else empty)
        return RelationLayout(types, src_counts, dst_counts, rel_src, rel_dst, cat(srcs), cat(dsts), cat(rels))
    return hg.memo(("unigraph.hetero", "relation_layout"), build)


_TYPED_LAYOUTS: "weakref.WeakKeyDictionary[Graph, tuple]" = weakref.WeakKeyDictionary()


def typed_layout(g: Graph, edge_type: Tensor, num_relations: int) -> RelationLayout:
    """The layout of a graph with one node type whose edges carry relation ids ``edge_type``
    (PyG's R-GCN input). Kept per graph and reused only while ``edge_type`` holds the same values
    (compared on every call, so changing it in place cannot reuse a stale layout)."""
    cached = _TYPED_LAYOUTS.get(g)
    if cached is not None:
        saved_types, saved_count, layout = cached
        if saved_count == num_relations and saved_types.device == edge_type.device and torch.equal(saved_types, edge_type):
            return layout
    snapshot = edge_type.clone()  # the layout reads its own copy: later in-place changes cannot reach it
    layout = RelationLayout(["node"], [g.num_src_nodes], [g.num_dst_nodes], [0] * num_relations, [0] * num_relations,
                            g.src, g.dst, snapshot)
    _TYPED_LAYOUTS[g] = (snapshot, num_relations, layout)
    return layout
