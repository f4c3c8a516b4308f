"""Node features for mini-batch training: kept once in shared CPU memory, gathered by node id,
optionally with the rows of the highest-degree nodes cached on the training device.

Why a degree cache: a neighbour sampler reaches a node about in proportion to its out-degree, so
on a power-law graph a small set of hubs makes up a large share of every batch's input nodes.
Keeping their rows on the GPU saves most of the host-to-device traffic for little memory
(the PaGraph / GNNLab observation). Only the rows that miss the cache are copied.
"""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.graph import Graph


class NodeFeatureStore:
    """Per-node features ``x`` (``[N, ...]``) gathered by node id: on the CPU, or already on the
    device the graph is sampled on (a GPU graph, ``num_workers=0``: gathered there, no copies).

    :meth:`share_memory_` moves them to shared memory (a loader does this before starting its
    workers, which then read them without copies). :meth:`cache_hot_nodes` keeps the rows of the
    ``num_cached`` highest-degree nodes on ``device``; :meth:`gather` then assembles a batch on
    that device from the cache and the CPU rows. ``hits`` / ``misses`` count gathered rows.
    """

    def __init__(self, x: Tensor):
        if not isinstance(x, Tensor) or x.dim() < 1:
            raise TypeError(f"NodeFeatureStore needs a tensor with one row per node, got {type(x).__name__} "
                            f"{list(getattr(x, 'shape', []))}")
        self.x = x.contiguous()
        self.cache: Tensor | None = None
        self._slot: Tensor | None = None       # node id -> row of the cache, -1 if not cached
        self.hits = 0
        self.misses = 0

    @property
    def num_nodes(self) -> int:
        return self.x.shape[0]

    def __repr__(self) -> str:
        cached = (f", cached={self.cache.shape[0]} rows on {self.cache.device}" if self.cache is not None else "")
        return f"NodeFeatureStore(x={list(self.x.shape)} {self.x.dtype}{cached})"

    def share_memory_(self) -> "NodeFeatureStore":
        if self.x.device.type != "cpu":
            raise ValueError(f"worker processes gather features from shared CPU memory; these are on {self.x.device} "
                             "(keep them on the CPU for num_workers > 0, or use num_workers=0)")
        self.x.share_memory_()
        return self

    def cache_hot_nodes(self, degrees: Tensor | Graph, num_cached: int, device: torch.device | str) -> "NodeFeatureStore":
        """Cache the rows of the ``num_cached`` nodes of highest ``degrees`` on ``device``.

        ``degrees`` is a per-node tensor or a graph (its out-degrees: how often a node is a
        sampled neighbour). Ties go to the lower node id.
        """
        if isinstance(degrees, Graph):
            degrees = degrees.out_degrees()
        if not isinstance(degrees, Tensor) or degrees.shape != (self.num_nodes,):
            raise ValueError(f"degrees must have one entry per node ({self.num_nodes}), got "
                             f"{list(getattr(degrees, 'shape', [])) or type(degrees).__name__}")
        if isinstance(num_cached, bool) or not isinstance(num_cached, int) or not 0 <= num_cached <= self.num_nodes:
            raise ValueError(f"num_cached must be an int in 0..{self.num_nodes}, got {num_cached!r}")
        if self.x.device.type != "cpu":
            raise ValueError(f"the features are already on {self.x.device}: a hot-node cache is for features kept on the CPU")
        device = torch.device(device)
        order = torch.sort(degrees.cpu(), descending=True, stable=True).indices
        hot = order[:num_cached]
        self.cache = self.x[hot].to(device)
        slot = torch.full((self.num_nodes,), -1, dtype=torch.int64)
        slot[hot] = torch.arange(num_cached)
        self._slot = slot.to(device)
        return self

    def gather(self, ids: Tensor, device: torch.device | str | None = None) -> Tensor:
        """The rows of ``ids`` on ``device`` (the cache's device if a cache exists, else where the
        features are)."""
        if self.cache is None:
            rows = self.x[ids.to(self.x.device)]
            self.misses += rows.shape[0]
            return rows if device is None else rows.to(device)
        device = self.cache.device if device is None else torch.device(device)
        slot = self._slot[ids.to(self._slot.device)]
        hit = slot >= 0
        out = torch.empty((ids.numel(),) + tuple(self.x.shape[1:]), dtype=self.x.dtype, device=self.cache.device)
        out[hit] = self.cache[slot[hit]]
        miss = ~hit
        out[miss] = self.x[ids.cpu()[miss.cpu()]].to(self.cache.device)
        num_hits = int(hit.sum())
        self.hits += num_hits
        self.misses += ids.numel() - num_hits
        return out.to(device)
