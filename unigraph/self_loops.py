"""The graph with one self-loop per node, which GCNConv and the attention layers run on: built once
per graph, cached on it, and built by :meth:`Graph.prepare` (``torch.compile`` cannot build it
while tracing: how many loops a graph already has is data).

PyG's GCN (``add_remaining_self_loops``) and GAT (``remove_self_loops`` + ``add_self_loops``) use the
same structure: every existing self-loop is dropped and one loop ``i -> i`` is appended for each
node ``i < min(num_src_nodes, num_dst_nodes)`` (a bipartite block's first destinations are its
first sources). They differ only in the loops' edge values, which the layers compute.
"""
from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from unigraph.graph import Graph

_CACHE_KEY = ("unigraph", "self_loops")


@dataclasses.dataclass(frozen=True)
class SelfLooped:
    graph: Graph     # kept edges first (in their order), then the loops in node order
    kept: Tensor     # ids (in the original graph) of the kept, non-loop edges
    dropped: Tensor  # ids of the dropped self-loops
    num_loops: int

    def edge_values(self, values: Tensor, loop_values: Tensor) -> Tensor:
        """Per-edge values of the looped graph from the original edges' values and the loops'."""
        return torch.cat([values.index_select(0, self.kept), loop_values])


def with_self_loops(g: Graph) -> SelfLooped:
    """``g`` without its self-loops and with one loop per node (cached on ``g``)."""
    return g.memo(_CACHE_KEY, lambda: _build(g))


def _build(g: Graph) -> SelfLooped:
    if torch.compiler.is_compiling():  # how many loops the graph has is data: no trace can build this
        raise RuntimeError("torch.compile needs the graph with self-loops built before tracing: call g.prepare() "
                           "once (eagerly) before running the compiled model")
    is_loop = g.src == g.dst
    kept = (~is_loop).nonzero().flatten()
    dropped = is_loop.nonzero().flatten()
    num_loops = min(g.num_src_nodes, g.num_dst_nodes)
    loops = torch.arange(num_loops, device=g.device)
    edge_index = torch.stack([torch.cat([g.src[kept], loops]), torch.cat([g.dst[kept], loops])])
    if g.is_bipartite:
        graph = Graph(edge_index, num_src_nodes=g.num_src_nodes, num_dst_nodes=g.num_dst_nodes)
    else:
        graph = Graph(edge_index, num_nodes=g.num_src_nodes)
    return SelfLooped(graph, kept, dropped, num_loops)
