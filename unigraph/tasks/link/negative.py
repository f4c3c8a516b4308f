"""Negative sampling for link prediction: node pairs that are not edges, drawn in vectorised rounds.

Two samplers share one core (:class:`EdgeSet` membership by binary search over sorted pair keys,
:func:`draw_nodes`):

* :func:`negative_pairs` - ``num`` distinct pairs ``(u, v)``, ``u != v``, none an edge (PyG's
  ``negative_sampling``; with ``undirected=True`` each pair is reported once as ``u < v`` and
  neither direction may be an edge).
* :func:`corrupt_destinations` - for each source ``u`` of ``src``, ``k`` destinations ``v`` with
  ``(u, v)`` not an edge and ``v != u`` (DGL's ``negative_sampler.Uniform(k)``); repeats allowed.

``method="uniform"`` draws nodes uniformly; ``method="degree"`` draws them with probability
proportional to ``degree ** power`` (word2vec's and PinSage's unigram^0.75 rule, ``power=0.75``),
so negatives are as "popular" as positives and cannot be told apart by degree alone; nodes of
degree 0 are then never drawn. Each round draws candidates for everything still missing and
rejects self-loops, edges and repeats; if ``max_rounds`` rounds do not find enough, the call fails
with the count it reached (a graph nearly complete), never returning fewer or invalid pairs.
"""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.graph import Graph

METHODS = ("uniform", "degree")


class EdgeSet:
    """Membership test for node pairs: the sorted keys ``src * num_nodes + dst`` of the edges."""

    def __init__(self, edge_index: Tensor, num_nodes: int, *, undirected: bool = False):
        src, dst = edge_index[0].to(torch.int64), edge_index[1].to(torch.int64)
        if undirected:
            src, dst = torch.cat([src, dst]), torch.cat([dst, src])
        self.num_nodes = num_nodes
        self.keys = torch.unique(src * num_nodes + dst)  # sorted

    def num_non_loops(self) -> int:
        """Distinct stored pairs ``(u, v)`` with ``u != v`` (self-loops are never candidates)."""
        n = max(self.num_nodes, 1)
        return int((self.keys // n != self.keys % n).sum())

    def contains(self, src: Tensor, dst: Tensor) -> Tensor:
        keys = src * self.num_nodes + dst
        if self.keys.numel() == 0:
            return torch.zeros_like(keys, dtype=torch.bool)
        at = torch.searchsorted(self.keys, keys).clamp_(max=self.keys.numel() - 1)
        return self.keys[at] == keys


def node_weights(graph: Graph, method: str, power: float = 0.75) -> Tensor | None:
    """``None`` for uniform draws, else ``(in + out degree) ** power`` per node."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    if method == "uniform":
        return None
    weights = (graph.in_degrees() + graph.out_degrees()).double() ** power
    if float(weights.sum()) == 0:
        raise ValueError("degree-weighted negative sampling needs edges: every node has degree 0")
    return weights


def draw_nodes(count: int, num_nodes: int, weights: Tensor | None, generator: torch.Generator) -> Tensor:
    if weights is None:
        return torch.randint(0, num_nodes, (count,), generator=generator)
    return torch.multinomial(weights, count, replacement=True, generator=generator)


def _check_count(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


def negative_pairs(graph: Graph, num: int, *, exclude: EdgeSet | None = None, method: str = "uniform",
                   power: float = 0.75, undirected: bool = False, generator: torch.Generator | None = None,
                   max_rounds: int = 100) -> Tensor:
    """``[2, num]`` distinct non-edges of ``graph`` (or of ``exclude``, when given: a split passes
    the full graph's edges while drawing for a subgraph), in random order."""
    _check_count("num", num)
    n = graph.num_nodes
    exclude = exclude if exclude is not None else EdgeSet(graph.edge_index, n, undirected=undirected)
    pairs_possible = n * (n - 1) // (2 if undirected else 1)
    edges_known = exclude.num_non_loops() // (2 if undirected else 1)  # undirected: both directions are stored
    if num > pairs_possible - edges_known:
        raise ValueError(f"cannot draw {num} negative pairs: the graph has {n} nodes and {edges_known} edges, "
                         f"leaving at most {max(pairs_possible - edges_known, 0)} non-edges")
    generator = generator or torch.Generator().manual_seed(int(torch.randint(0, 2 ** 62, ())))
    weights = node_weights(graph, method, power)
    found = torch.empty(0, dtype=torch.int64)
    for _ in range(max_rounds):
        missing = num - found.numel()
        if missing <= 0:
            break
        draws = max(2 * missing + 16, 64)
        src, dst = draw_nodes(draws, n, weights, generator), draw_nodes(draws, n, weights, generator)
        if undirected:
            src, dst = torch.minimum(src, dst), torch.maximum(src, dst)
        ok = (src != dst) & ~exclude.contains(src, dst)
        keys = torch.unique(torch.cat([found, src[ok] * n + dst[ok]]))
        # keep the earlier finds, add new keys in a random order up to the count
        new = keys[~torch.isin(keys, found)]
        found = torch.cat([found, new[torch.randperm(new.numel(), generator=generator)][:missing]])
    if found.numel() < num:
        raise ValueError(f"found only {found.numel()} of {num} negative pairs in {max_rounds} rounds "
                         f"(method={method!r}); the graph is too dense for this many negatives")
    found = found[torch.randperm(num, generator=generator)]
    return torch.stack([found // n, found % n]) if n else found.view(2, 0)


def corrupt_destinations(graph: Graph, src: Tensor, k: int, *, exclude: EdgeSet | None = None, method: str = "uniform",
                         power: float = 0.75, generator: torch.Generator | None = None,
                         max_rounds: int = 100) -> Tensor:
    """``[2, len(src) * k]``: each source repeated ``k`` times with a destination that is not one
    of its out-neighbours (in ``exclude``, default ``graph``'s edges) nor itself."""
    _check_count("k", k)
    n = graph.num_nodes
    exclude = exclude if exclude is not None else EdgeSet(graph.edge_index, n)
    generator = generator or torch.Generator().manual_seed(int(torch.randint(0, 2 ** 62, ())))
    weights = node_weights(graph, method, power)
    src = src.to(torch.int64).repeat_interleave(k)
    dst = torch.empty_like(src)
    todo = torch.arange(src.numel())
    for _ in range(max_rounds):
        if todo.numel() == 0:
            break
        dst[todo] = draw_nodes(todo.numel(), n, weights, generator)
        bad = (dst[todo] == src[todo]) | exclude.contains(src[todo], dst[todo])
        todo = todo[bad]
    if todo.numel():
        node = int(src[todo[0]])
        raise ValueError(f"found no non-neighbour destination for source {node} in {max_rounds} rounds "
                         f"(method={method!r}): it is joined to (nearly) every node that can be drawn")
    return torch.stack([src, dst])

