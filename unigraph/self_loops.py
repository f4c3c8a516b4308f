"""The graph with one self-loop per node, which GCNConv and the attention layers run on: built once
per graph, cached on it, and built by :meth:`Graph.prepare`. A graph given to a compiled program
needs it built eagerly (``prepare``); a graph built inside one (PyG's ``conv(x, edge_index)``)
builds it in the trace, through a custom operator (:mod:`unigraph.traced_structure`: how many
loops a graph already has is data).

PyG's GCN (``add_remaining_self_loops``) and GAT (``remove_self_loops`` + ``add_self_loops``) use the
same structure: every existing self-loop is dropped and one loop ``i -> i`` is appended for each
node ``i < min(num_src_nodes, num_dst_nodes)`` (a bipartite block's first destinations are its
first sources). They differ only in the loops' edge values, which the layers compute.
"""
from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from unigraph.structure import loops_appended, self_looped_edges
from unigraph.traced_structure import traced_self_loop_parts

_CACHE_KEY = ("unigraph", "self_loops")


@dataclasses.dataclass(frozen=True)
class SelfLooped:
    graph: object      # a Graph of the input's class: kept edges first (in their order), then the loops in node order
    kept: Tensor       # ids (in the original graph) of the kept, non-loop edges
    loop_slot: Tensor  # [E]: the node of each original edge that is a self-loop, else num_loops
    num_loops: int

    def edge_values(self, values: Tensor, loop_values: Tensor) -> Tensor:
        """Per-edge values of the looped graph from the original edges' values and the loops'."""
        return torch.cat([values.index_select(0, self.kept), loop_values])

    def existing_loop_values(self, values: Tensor, fill: float) -> Tensor:
        """One value per loop: that of the node's existing self-loop, ``fill`` where it has none
        (PyG's ``add_remaining_self_loops``; where a node has several, the last written wins and
        the gradient reaches each, as in PyG's ``index_put``). Every original edge writes, the
        others into a slot past the loops that is then dropped: the shapes follow the node and
        edge counts alone, so a compiled program does not depend on how many loops a graph had."""
        slots = values.new_full((self.num_loops + 1,) + tuple(values.shape[1:]), fill)
        return slots.index_put((self.loop_slot,), values)[: self.num_loops]


def with_self_loops(g) -> SelfLooped:
    """``g`` (a :class:`unigraph.graph.Graph`) without its self-loops and with one loop per node
    (cached on ``g``). This module sits below the graph (``Graph.prepare`` builds it), so it names
    no graph class: it builds the result with the class of ``g``."""
    return g.memo(_CACHE_KEY, lambda: _build(g))


def _build(g) -> SelfLooped:
    compiling = torch.compiler.is_compiling()
    if compiling and not g._built_in_trace:  # a graph the compiled program is given: built once, eagerly
        raise RuntimeError("torch.compile needs the graph with self-loops built before tracing: call g.prepare() "
                           "once (eagerly) before running the compiled model")
    num_loops = torch.sym_min(g._num_src, g._num_dst)  # plain ints (or a trace's sizes), never a Count
    src, dst = g.src, g.dst
    if compiling:
        # inside a trace (a graph built there, PyG's conv(x, edge_index)): one custom operator, whose
        # output size (how many edges are not loops) is data
        kept, loop_slot = traced_self_loop_parts(src, dst, num_loops)
        new_src, new_dst = loops_appended(src, dst, kept, num_loops)
    else:
        new_src, new_dst, kept, loop_slot = self_looped_edges(src, dst, num_loops)
    graph = type(g)._trusted(new_src, new_dst, g._num_src, g._num_dst, g.is_bipartite)  # valid by construction
    return SelfLooped(graph, kept, loop_slot, num_loops)
