r"""DGL's graph traversals as frontiers: :func:`bfs_nodes_generator`, :func:`bfs_edges_generator`,
:func:`topological_nodes_generator`, :func:`dfs_edges_generator` and
:func:`dfs_labeled_edges_generator`.

Each returns a tuple of 1-D tensors, one per frontier, in DGL's order, element for element:

* BFS from the sources :math:`S`: :math:`F_0 = S` (as given, duplicates kept) and
  :math:`F_{k+1}` = the nodes first reached from :math:`F_k`, in the order a FIFO queue reaches
  them (the nodes of :math:`F_k` in order, each node's out-edges in edge id order); the edge
  frontiers hold the edge that first reached each node of :math:`F_{k+1}`, :math:`k \ge 0`.
* Topological order (Kahn): :math:`F_0` = the nodes of in-degree 0 by id, :math:`F_{k+1}` = the
  nodes whose last remaining in-edge leaves :math:`F_k`, in the order the last such edge is met.
  A cycle raises :class:`~unigraph.dgl.base.DGLError`.
* DFS from each source separately (out-edges in edge id order; a source without out-edge gives
  nothing): each step visits one edge, labelled ``0`` forward (it reaches an unvisited node),
  ``1`` reverse (the walk backs up over a tree edge, with ``has_reverse_edge``) or ``2`` non-tree
  (it reaches a visited node, with ``has_nontree_edge``). Frontier :math:`t` holds step :math:`t`
  of every source that has one, in the order of the sources.

``reverse=True`` follows in-edges instead (the in-edges of a node in edge id order). Edge ids are
the graph's; ids come back in the graph's ``idtype``, DFS labels as int64, and every frontier on
the CPU (as DGL's). An empty traversal is an empty tuple.

How it computes: BFS and topological order take one frontier at a time, vectorised over the
frontier's edges (a loop over levels, never over nodes): the candidates of a level are every
out-edge of the frontier in queue order; BFS keeps each unvisited target at its first occurrence,
Kahn's rule subtracts each target's occurrences from its remaining in-degree and keeps the
targets that reach 0 at their last occurrence. DFS is sequential by nature (each step depends on
every earlier one, and one frontier is one step), so it runs as a plain loop over the steps of each
source on Python lists of the CSR, then the sources' traces are interleaved in one vectorised
merge.

Differs from DGL where DGL crashes or is undefined: out-of-range sources raise (DGL may crash),
sources may have any integer dtype, graphs of several relations, bipartite graphs and blocks are
refused by name.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.dgl.base import DGLError
from unigraph.dgl.neighbor_sampling import stable_argsort
from unigraph.dgl.views import as_ids

__all__ = ["bfs_nodes_generator", "bfs_edges_generator", "topological_nodes_generator", "dfs_edges_generator",
           "dfs_labeled_edges_generator"]

FORWARD, REVERSE, NONTREE = 0, 1, 2   # DGL's DFS edge labels


# ---------------------------------------------------------------------- the graph's adjacency
def _csr(graph, what: str, reverse: bool) -> tuple[Tensor, Tensor, Tensor]:
    """``(ptr, neighbour, eid)`` on the CPU: out-edges by source (in-edges by destination with
    ``reverse``), each row in edge id order (DGL's CSR / CSC order)."""
    from unigraph.dgl.graph import DGLGraph
    if not isinstance(graph, DGLGraph):
        raise DGLError(f"{what} needs a homogeneous unigraph.dgl graph (one node type, one relation), "
                       f"got {type(graph).__name__}" + (f" with relations {graph.canonical_etypes}"
                                                        if hasattr(graph, "canonical_etypes") else ""))
    if graph.is_block or graph.is_bipartite:
        kind = "block" if graph.is_block else "bipartite graph"
        raise DGLError(f"{what} needs a graph of one node type, got a {kind}")
    ptr, neighbour, eid = graph.in_csr() if reverse else graph.out_csr()
    return ptr.cpu(), neighbour.cpu(), eid.cpu()


def _sources(graph, source: Any) -> Tensor:
    return as_ids(source, graph.num_nodes(), "source", torch.device("cpu"))


def _expand(ptr: Tensor, rows: Tensor) -> Tensor:
    """The CSR slots of ``rows``, row after row in the order given."""
    start, count = ptr[rows], ptr[rows + 1] - ptr[rows]
    first = torch.cumsum(count, 0) - count
    return torch.repeat_interleave(start - first, count) + torch.arange(int(count.sum()))


class _Occurrence:
    """Masks of the first (or last) occurrence of each node id in a list: each id's extreme
    position by a scatter into a scratch array over the nodes (linear, no sort), which is reset
    where it was written, so a traversal of many small levels does not pay for every node."""

    NONE_FIRST, NONE_LAST = torch.iinfo(torch.int64).max, -1   # what the scratch arrays hold untouched

    def __init__(self, num_nodes: int):
        self.first = torch.full((num_nodes,), self.NONE_FIRST, dtype=torch.int64)
        self.last = torch.full((num_nodes,), self.NONE_LAST, dtype=torch.int64)

    def mask(self, values: Tensor, last: bool) -> Tensor:
        scratch = self.last if last else self.first
        position = torch.arange(values.numel())
        scratch.scatter_reduce_(0, values, position, "amax" if last else "amin")
        mask = scratch[values] == position
        scratch[values] = self.NONE_LAST if last else self.NONE_FIRST
        return mask


# ---------------------------------------------------------------------- BFS
def _bfs(graph, source: Any, reverse: bool, what: str) -> tuple[list[Tensor], list[Tensor]]:
    """The node frontiers (sources first) and the edge frontiers of a BFS."""
    ptr, neighbour, eid = _csr(graph, what, reverse)
    frontier = _sources(graph, source)
    visited = torch.zeros(ptr.numel() - 1, dtype=torch.bool)
    visited[frontier] = True
    occurrence = _Occurrence(visited.numel())
    nodes, edges = ([frontier] if frontier.numel() else []), []
    while frontier.numel():
        slots = _expand(ptr, frontier)
        slots = slots[~visited[neighbour[slots]]]
        slots = slots[occurrence.mask(neighbour[slots], last=False)]   # the edge that reaches a node first
        frontier = neighbour[slots]
        if frontier.numel():
            visited[frontier] = True
            nodes.append(frontier)
            edges.append(eid[slots])
    return nodes, edges


def bfs_nodes_generator(graph, source, reverse: bool = False) -> tuple[Tensor, ...]:
    """DGL's ``bfs_nodes_generator``: the node frontiers of a breadth-first search from
    ``source`` (ids; every source is in the first frontier), following out-edges (in-edges with
    ``reverse``). See the module docstring for the order within a frontier."""
    nodes, _ = _bfs(graph, source, reverse, "bfs_nodes_generator")
    return tuple(f.to(graph.idtype) for f in nodes)


def bfs_edges_generator(graph, source, reverse: bool = False) -> tuple[Tensor, ...]:
    """DGL's ``bfs_edges_generator``: per BFS level, the ids of the edges that first reach the
    level's nodes (one edge per newly reached node, in the order of :func:`bfs_nodes_generator`)."""
    _, edges = _bfs(graph, source, reverse, "bfs_edges_generator")
    return tuple(f.to(graph.idtype) for f in edges)


# ---------------------------------------------------------------------- topological order
def topological_nodes_generator(graph, reverse: bool = False) -> tuple[Tensor, ...]:
    """DGL's ``topological_nodes_generator``: Kahn's frontiers (module docstring); ``reverse``
    starts from the nodes without out-edges and follows in-edges. A cycle raises DGLError."""
    ptr, neighbour, _ = _csr(graph, "topological_nodes_generator", reverse)
    num_nodes = ptr.numel() - 1
    remaining = torch.bincount(neighbour, minlength=num_nodes)   # in-degree (out-degree with reverse)
    frontier = (remaining == 0).nonzero().flatten()
    occurrence = _Occurrence(num_nodes)
    levels = []
    while frontier.numel():
        levels.append(frontier)
        targets = neighbour[_expand(ptr, frontier)]
        remaining.index_add_(0, targets, torch.full_like(targets, -1))
        frontier = targets[(remaining[targets] == 0) & occurrence.mask(targets, last=True)]
    if sum(level.numel() for level in levels) != num_nodes:
        raise DGLError("topological_nodes_generator: the graph has a cycle (a loop was detected), so it has no "
                       "topological order")
    return tuple(level.to(graph.idtype) for level in levels)


# ---------------------------------------------------------------------- DFS
def _dfs_trace(ptr: list, neighbour: list, eid: list, source: int, has_reverse_edge: bool,
               has_nontree_edge: bool) -> tuple[list, list]:
    """One source's DFS: the edges visited step by step and their labels (DGL's stack walk)."""
    edges, labels = [], []
    if ptr[source + 1] == ptr[source]:
        return edges, labels
    visited = {source}
    stack = [[source, ptr[source], False]]   # [node, CSR slot being looked at, whether it led down the tree]
    while stack:
        top = stack[-1]
        u, slot, on_tree = top
        v = neighbour[slot]
        if v in visited:
            if on_tree and has_reverse_edge:
                edges.append(eid[slot])
                labels.append(REVERSE)
            elif not on_tree and has_nontree_edge:
                edges.append(eid[slot])
                labels.append(NONTREE)
            stack.pop()
            if slot + 1 < ptr[u + 1]:
                stack.append([u, slot + 1, False])
        else:
            visited.add(v)
            top[2] = True
            edges.append(eid[slot])
            labels.append(FORWARD)
            if ptr[v + 1] > ptr[v]:
                stack.append([v, ptr[v], False])
    return edges, labels


def _interleave(traces: list[list]) -> tuple[Tensor, list[int]]:
    """Step ``t`` of every trace that has one, trace after trace, for t = 0, 1, ...: the values
    and the size of each step (DGL's merge of several DFS traversals)."""
    lengths = torch.tensor([len(t) for t in traces], dtype=torch.int64)
    values = torch.tensor([x for t in traces for x in t], dtype=torch.int64)
    step = torch.arange(values.numel()) - torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
    order = stable_argsort(step)   # by step, then by trace (the concatenation order)
    sizes = torch.bincount(step).tolist() if values.numel() else []
    return values[order], sizes


def dfs_labeled_edges_generator(graph, source, reverse: bool = False, has_reverse_edge: bool = False,
                                has_nontree_edge: bool = False, return_labels: bool = True):
    """DGL's ``dfs_labeled_edges_generator``: the edges of a depth-first search from each of
    ``source`` (separately; DGL asks them to lie in different components), one step per frontier,
    labelled 0 forward, 1 reverse (``has_reverse_edge``), 2 non-tree (``has_nontree_edge``).

    Returns ``(edge_frontiers, label_frontiers)``, or only ``edge_frontiers`` without
    ``return_labels``."""
    ptr, neighbour, eid = _csr(graph, "dfs_labeled_edges_generator", reverse)
    sources = _sources(graph, source).tolist()
    ptr, neighbour, eid = ptr.tolist(), neighbour.tolist(), eid.tolist()
    traces = [_dfs_trace(ptr, neighbour, eid, s, has_reverse_edge, has_nontree_edge) for s in sources]
    edges, sizes = _interleave([t[0] for t in traces])
    edge_frontiers = tuple(f.to(graph.idtype) for f in torch.split(edges, sizes)) if sizes else ()
    if not return_labels:
        return edge_frontiers
    labels, _ = _interleave([t[1] for t in traces])
    return edge_frontiers, (tuple(torch.split(labels, sizes)) if sizes else ())


def dfs_edges_generator(graph, source, reverse: bool = False) -> tuple[Tensor, ...]:
    """DGL's ``dfs_edges_generator``: the tree edges of a depth-first search from each of
    ``source``, one step per frontier (:func:`dfs_labeled_edges_generator`'s forward edges)."""
    return dfs_labeled_edges_generator(graph, source, reverse, return_labels=False)
