r"""DGL's random-walk neighbourhoods (PinSAGE, Ying et al., KDD 2018,
https://arxiv.org/abs/1806.01973): :class:`RandomWalkNeighborSampler` and :class:`PinSAGESampler`.

For each seed :math:`v` of the metapath's node type, ``num_random_walks`` walks each repeat the
metapath up to ``num_traversals`` times, stopping after a full traversal with probability
``termination_prob``. Every node reached at the end of a traversal is a visit (the seed itself
included, as in DGL); the ``num_neighbors`` most visited nodes :math:`u` become edges
:math:`u \to v` with ``edata[weight_column]`` = the visit count :math:`c_{uv}`:

.. math::
    c_{uv} = \big|\{(w, t) : \text{walk } w \text{ from } v \text{ is at } u \text{ after traversal } t\}\big|

ties broken by the larger node id first (DGL's order). The result is a graph of the seeds' node
type with all its nodes and those edges, seed after seed (by decreasing count), one edge type
``'_E'``; a repeated seed is sampled again.

How it computes: the walks are :func:`unigraph.dgl.sampling.random_walk` with a restart
probability on the steps that begin a traversal; the visits of all seeds are counted at once
(``unique`` over ``seed x node`` keys) and ranked per seed by one composite sort: no loop over
seeds or nodes. Walks use torch's generator (DGL's distribution, not its draws).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from unigraph.dgl.base import DGLError
from unigraph.dgl.neighbor_sampling import stable_argsort
from unigraph.dgl.views import as_ids

__all__ = ["RandomWalkNeighborSampler", "PinSAGESampler"]


def _positive_int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive int, got {value!r}")
    return value


class RandomWalkNeighborSampler:
    """DGL's ``RandomWalkNeighborSampler``: call it on seed ids to get their random-walk
    neighbourhood graph (module docstring).

    Args:
        G: a ``DGLGraph`` or ``DGLHeteroGraph``.
        num_traversals: the most times a walk repeats the metapath.
        termination_prob: probability of stopping after each traversal (from the second on).
        num_random_walks: walks per seed.
        num_neighbors: the most neighbours kept per seed.
        metapath: relations (names or canonical triples) from a node type back to itself;
            default: the graph's single relation.
        weight_column: edge feature of the result holding the visit counts.
    """

    def __init__(self, G, num_traversals: int, termination_prob: float, num_random_walks: int, num_neighbors: int,
                 metapath: Sequence | None = None, weight_column: str = "weights"):
        self.G = G
        self.weight_column = weight_column
        self.num_traversals = _positive_int(num_traversals, "num_traversals")
        self.num_random_walks = _positive_int(num_random_walks, "num_random_walks")
        self.num_neighbors = _positive_int(num_neighbors, "num_neighbors")
        if not 0 <= float(termination_prob) < 1:
            raise ValueError(f"termination_prob must be in [0, 1), got {termination_prob!r}")
        if metapath is None:
            if len(G.ntypes) > 1 or len(G.canonical_etypes) > 1:
                raise ValueError("Metapath must be specified if the graph is not homogeneous "
                                 f"(node types {G.ntypes}, relations {G.canonical_etypes})")
            metapath = [G.canonical_etypes[0]]
        if isinstance(metapath, (str, tuple)) or len(metapath) == 0:
            raise ValueError(f"metapath must be a non-empty list of edge types, got {metapath!r}")
        start, end = G.to_canonical_etype(metapath[0])[0], G.to_canonical_etype(metapath[-1])[2]
        if start != end:
            raise ValueError(f"The metapath must start and end at the same node type, got {start!r} and {end!r}")
        self.ntype = start
        self.metapath = list(metapath)
        self.metapath_hops = len(metapath)
        self.full_metapath = self.metapath * self.num_traversals
        restart = torch.zeros(self.metapath_hops * self.num_traversals, dtype=torch.float32)
        restart[self.metapath_hops::self.metapath_hops] = float(termination_prob)
        self.restart_prob = restart

    def __call__(self, seed_nodes) -> "object":
        from unigraph.dgl.convert import heterograph
        from unigraph.dgl.random_walks import random_walk
        seeds = as_ids(seed_nodes, self.G.num_nodes(self.ntype), "seed_nodes", self.G.device)
        walkers = seeds.repeat_interleave(self.num_random_walks)
        paths, _ = random_walk(self.G, walkers, metapath=self.full_metapath,
                               restart_prob=self.restart_prob.to(self.G.device))
        visits = paths[:, self.metapath_hops::self.metapath_hops].long()
        visits = visits.reshape(seeds.numel(), self.num_random_walks * self.num_traversals)
        src, dst, counts = _most_visited(visits, seeds, self.G.num_nodes(self.ntype), self.num_neighbors)
        graph = heterograph({(self.ntype, "_E", self.ntype): (src, dst)}, {self.ntype: self.G.num_nodes(self.ntype)},
                            idtype=self.G.idtype, device=self.G.device)
        graph.edata[self.weight_column] = counts.to(self.G.idtype)
        return graph


def _most_visited(visits: Tensor, seeds: Tensor, num_nodes: int, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """Per seed (row of ``visits``; -1: no visit), its ``k`` most visited nodes by (count, node id)
    descending: ``(node, seed, count)``, seed after seed."""
    row = torch.arange(seeds.numel(), device=seeds.device).repeat_interleave(visits.shape[1])
    node = visits.reshape(-1)
    row, node = row[node >= 0], node[node >= 0]
    keys, counts = torch.unique(row * num_nodes + node, return_counts=True)
    row, node = keys // num_nodes, keys % num_nodes
    order = stable_argsort(node, descending=True)                     # last key: node id, descending
    order = order[stable_argsort(counts[order], descending=True)]     # then the count, descending
    order = order[stable_argsort(row[order])]                         # first key: the seed
    size = torch.bincount(row, minlength=seeds.numel())
    rank = torch.arange(order.numel(), device=seeds.device) - (torch.cumsum(size, 0) - size)[row[order]]
    kept = order[rank < k]
    return node[kept], seeds[row[kept]], counts[kept]


class PinSAGESampler(RandomWalkNeighborSampler):
    """DGL's ``PinSAGESampler``: :class:`RandomWalkNeighborSampler` on a bipartite-like
    heterograph with the metapath ``ntype -> other_type -> ntype`` (the first relation each way,
    in the graph's relation order)."""

    def __init__(self, G, ntype: str, other_type: str, num_traversals: int, termination_prob: float,
                 num_random_walks: int, num_neighbors: int, weight_column: str = "weights"):
        forward = [cet for cet in G.canonical_etypes if cet[0] == ntype and cet[2] == other_type]
        backward = [cet for cet in G.canonical_etypes if cet[0] == other_type and cet[2] == ntype]
        if not forward or not backward:
            raise DGLError(f"PinSAGESampler needs relations {ntype!r} -> {other_type!r} and back; the graph has "
                           f"{G.canonical_etypes}")
        super().__init__(G, num_traversals, termination_prob, num_random_walks, num_neighbors,
                         metapath=[forward[0], backward[0]], weight_column=weight_column)
