"""A balanced graph partitioner of our own (for Cluster-GCN), vectorized in torch.

Cluster-GCN (Chiang et al., KDD 2019) uses METIS; unigraph does not depend on it. This
partitioner is simpler and documented here in full:

1. **Locality order.** The graph is made undirected and its nodes are ordered breadth-first
   (level by level, each level one vector operation over the CSR). When a component is exhausted
   the next BFS starts from the lowest-numbered unvisited nodes: 1 of them, then 2, 4, ... (doubling
   at each restart), so that a graph of many tiny components needs only ``O(log N)`` restarts.
2. **Initial parts.** The BFS order is cut into ``num_parts`` consecutive, equally sized runs:
   nodes close in BFS order are close in the graph, so most edges fall inside a run.
3. **Refinement** (balanced label propagation, ``refine_rounds`` rounds). Every node counts the
   parts of its neighbours and proposes to move to the most frequent one when that has strictly
   more of its neighbours than its own part (the gain). Half of the nodes, drawn at random, may
   move in a round (two neighbours swapping forever is the failure this prevents). A part accepts
   movers, highest gain first, only while its size stays within ``(1 + imbalance) * N / num_parts``.

The result keeps every part within the size bound and cuts far fewer edges than a random
assignment on graphs with locality (tests check both); METIS, a multilevel method, cuts fewer
still. Cost per round: a sort of the ``2E`` (node, neighbour-part) pairs.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.sampling.csr_view import csr_ranges
from unigraph.structure import build_csr


def _undirected_csr(graph: Graph) -> tuple[Tensor, Tensor]:
    src, dst = graph.src, graph.dst
    keep = src != dst
    rows, cols = torch.cat([src[keep], dst[keep]]), torch.cat([dst[keep], src[keep]])
    ptr, neighbours, _ = build_csr(rows, cols, graph.num_nodes)
    return ptr, neighbours


def bfs_order(ptr: Tensor, neighbours: Tensor, num_nodes: int) -> Tensor:
    """Node ids in breadth-first order (restarts as described in the module docstring)."""
    visited = torch.zeros(num_nodes, dtype=torch.bool)
    levels: list[Tensor] = []
    num_visited, restart = 0, 1
    while num_visited < num_nodes:
        frontier = torch.nonzero(~visited).squeeze(1)[:restart]
        restart *= 2
        while frontier.numel():
            visited[frontier] = True
            levels.append(frontier)
            num_visited += frontier.numel()
            reached = neighbours[csr_ranges(ptr, frontier)[1]]
            frontier = torch.unique(reached[~visited[reached]])
    return torch.cat(levels) if levels else torch.zeros(0, dtype=torch.int64)


def partition_graph(graph: Graph, num_parts: int, *, refine_rounds: int = 8, imbalance: float = 0.05,
                    seed: int = 0) -> Tensor:
    """The part (``0..num_parts-1``) of every node of ``graph``; see the module docstring.

    Edge directions are ignored. Deterministic under ``seed``.
    """
    if not isinstance(graph, Graph) or graph.is_bipartite:
        raise TypeError(f"partition_graph needs a homogeneous unigraph.Graph, got {graph!r}")
    num_nodes = graph.num_nodes
    if isinstance(num_parts, bool) or not isinstance(num_parts, int) or not 1 <= num_parts <= max(num_nodes, 1):
        raise ValueError(f"num_parts must be an int in 1..{max(num_nodes, 1)} (the number of nodes), got {num_parts!r}")
    if isinstance(refine_rounds, bool) or not isinstance(refine_rounds, int) or refine_rounds < 0:
        raise ValueError(f"refine_rounds must be an int >= 0, got {refine_rounds!r}")
    if not isinstance(imbalance, (int, float)) or imbalance < 0:
        raise ValueError(f"imbalance must be a number >= 0, got {imbalance!r}")
    graph = graph.to("cpu")
    ptr, neighbours = _undirected_csr(graph)
    order = bfs_order(ptr, neighbours, num_nodes)
    part = torch.empty(num_nodes, dtype=torch.int64)
    part[order] = torch.arange(num_nodes) * num_parts // max(num_nodes, 1)
    capacity = math.ceil((1 + imbalance) * num_nodes / num_parts)
    node_of_pair = torch.repeat_interleave(torch.arange(num_nodes), ptr[1:] - ptr[:-1])
    generator = torch.Generator().manual_seed(seed)
    for _ in range(refine_rounds):
        part = _refine(part, node_of_pair, neighbours, num_parts, capacity, generator)
    return part


def _refine(part: Tensor, node_of_pair: Tensor, neighbours: Tensor, num_parts: int, capacity: int,
            generator: torch.Generator) -> Tensor:
    """One round of balanced label propagation (step 3 of the module docstring)."""
    num_nodes = part.numel()
    key, count = torch.unique(node_of_pair * num_parts + part[neighbours], return_counts=True)
    node, target = key // num_parts, key % num_parts
    own = torch.zeros(num_nodes, dtype=torch.int64)
    at_home = target == part[node]
    own[node[at_home]] = count[at_home]
    # the best part of each node: highest count, then lowest part id (keys are sorted by node, part)
    best_count = torch.zeros(num_nodes, dtype=torch.int64).scatter_reduce_(0, node, count, "amax")
    is_best = count == best_count[node]
    first_best = torch.full((num_nodes,), num_parts, dtype=torch.int64).scatter_reduce_(
        0, node[is_best], target[is_best], "amin")
    gain = best_count - own
    movers = torch.nonzero((gain > 0) & (torch.rand(num_nodes, generator=generator) < 0.5)).squeeze(1)
    if movers.numel() == 0:
        return part
    to = first_best[movers]
    # within each target part, highest gain first; accept while the part has room
    order = torch.argsort(to * (gain.max() + 1) - gain[movers], stable=True)
    movers, to = movers[order], to[order]
    sizes = torch.bincount(part, minlength=num_parts)
    group_start = torch.searchsorted(to, to, side="left")
    rank = torch.arange(to.numel()) - group_start
    accepted = rank < (capacity - sizes[to]).clamp(min=0)
    part = part.clone()
    part[movers[accepted]] = to[accepted]
    return part
