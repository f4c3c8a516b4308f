"""Node features read from a mapped file, with a cache of hot rows in memory.

:class:`MappedFeatureStore` gathers rows of a chunked graph's ``x`` by node id. The rows of the
``cache_rows`` nodes of highest out-degree are copied into memory once (a neighbour sampler
reaches a node about in proportion to its out-degree, so these rows are the ones most batches
read); every other row is read from the mapping, which goes through the kernel's page cache: a
row read recently by this or any other process costs a memory copy, one that is not resident a
disk read. The cache is **keyed on node ids only**: it is filled once from the file and assumes
the file does not change while it is used (the chunked format is written once; a rewrite creates
new files under the same names, which a running store does not see).

:meth:`advise` asks the kernel to start reading the pages of rows that are not cached
(``madvise(MADV_WILLNEED)``, :meth:`unigraph.storage.mapped.MappedArray.advise_rows`): the loader
calls it for the next batch before gathering it, so the disk reads are queued together instead of
faulting in one page at a time. Rows are gathered in id order (then put back in the batch's
order), so neighbouring rows share pages and the kernel's read-ahead.

Memory: the cache (``cache_rows x F`` values, sorted ids), and each batch's rows; choosing the hot
rows streams the out-degrees a chunk at a time (``O(cache_rows + chunk)``).
"""
from __future__ import annotations

import threading

import numpy as np
import torch
from torch import Tensor

from unigraph.storage.chunked import ChunkedGraph


def top_nodes(graph: ChunkedGraph, name: str, k: int) -> np.ndarray:
    """The ids of the ``k`` nodes with the largest ``name`` values (ties: the lower id), sorted by
    id; streamed, memory ``O(k + chunk)``."""
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    best_ids = np.zeros(0, dtype=np.int64)
    best_values = np.zeros(0, dtype=graph.dtype(name))
    for first, block in graph.chunks(name):
        ids = np.concatenate([best_ids, np.arange(first, first + len(block), dtype=np.int64)])
        values = np.concatenate([best_values, block])
        if len(ids) > k:   # order by value descending, then id ascending: lexsort's last key is primary
            keep = np.lexsort((ids, -values.astype(np.float64)))[:k]
            ids, values = ids[keep], values[keep]
        best_ids, best_values = ids, values
    return np.sort(best_ids)


class MappedFeatureStore:
    """The features ``x`` of a chunked graph, gathered by node id (see the module docstring).

    ``hits`` / ``misses`` count rows served from the cache / the mapping; ``advised`` counts the
    page ranges :meth:`advise` asked for.
    """

    def __init__(self, graph: ChunkedGraph, *, cache_rows: int = 0, hotness: str = "out_degree"):
        if isinstance(cache_rows, bool) or not isinstance(cache_rows, int) or cache_rows < 0:
            raise ValueError(f"cache_rows must be an int >= 0, got {cache_rows!r}")
        if not graph.has("x"):
            raise ValueError(f"{graph.directory} has no node features (array 'x')")
        self.graph = graph
        self.mapped = graph.mapped("x")
        self.mapped.advise_random()   # rows are read in no order: no read-around per fault
        self.x = torch.from_numpy(self.mapped.array)
        cache_rows = min(cache_rows, graph.num_nodes)
        if cache_rows and not graph.has(hotness):
            raise ValueError(f"{graph.directory} has no {hotness!r} array to choose the cached rows by")
        ids = top_nodes(graph, hotness, cache_rows) if cache_rows else np.zeros(0, dtype=np.int64)
        self.cache_ids = torch.from_numpy(ids)
        self.cache = self.x[self.cache_ids].clone() if cache_rows else self.x[:0].clone()
        self.hits = self.misses = self.advised = 0
        self._lock = threading.Lock()

    @property
    def num_features(self) -> int:
        return self.x.shape[1]

    @property
    def cache_bytes(self) -> int:
        return self.cache.numel() * self.cache.element_size() + self.cache_ids.numel() * 8

    @property
    def hit_rate(self) -> float:
        rows = self.hits + self.misses
        return self.hits / rows if rows else float("nan")

    def __repr__(self) -> str:
        return (f"MappedFeatureStore({self.mapped.path}, {list(self.x.shape)} {self.x.dtype}, cached rows "
                f"{self.cache_ids.numel()})")

    def _slots(self, ids: Tensor) -> Tensor:
        """The cache row of every id, -1 where it is not cached."""
        if not self.cache_ids.numel():
            return torch.full_like(ids, -1)
        slot = torch.searchsorted(self.cache_ids, ids).clamp_max(self.cache_ids.numel() - 1)
        return torch.where(self.cache_ids[slot] == ids, slot, -1)

    def advise(self, ids: Tensor) -> int:
        """Start reading the pages of the uncached rows of ``ids`` (advice only; returns the ranges)."""
        missing = ids[self._slots(ids) < 0]
        ranges = self.mapped.advise_rows(missing.numpy())
        with self._lock:
            self.advised += ranges
        return ranges

    def gather(self, ids: Tensor) -> Tensor:
        """``[len(ids), F]``: cached rows from memory, the others from the mapping (in id order)."""
        ids = ids.to(torch.int64)
        out = torch.empty((ids.numel(), self.num_features), dtype=self.x.dtype)
        slot = self._slots(ids)
        cached = slot >= 0
        out[cached] = self.cache[slot[cached]]
        where = torch.nonzero(~cached).squeeze(1)
        order = torch.argsort(ids[where])
        out[where[order]] = self.x[ids[where[order]]]
        with self._lock:
            self.hits += int(cached.sum())
            self.misses += where.numel()
        return out
