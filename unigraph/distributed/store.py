"""The partitioned graph and its features as one graph: :class:`DistGraph`, :class:`DistFeatureStore`.

Each process holds one partition (:class:`~unigraph.distributed.local.LocalPartition`) and the
partition book. A query about any global node ids is split by owner: rows this process owns are
answered directly, and each other owner gets **one** request for all of its rows
(:mod:`unigraph.distributed.peers`), sent before the local work starts so that they overlap.
:class:`Pending` holds the answer until it is needed, which lets a loader fetch the next batch's
features while the current batch trains.
"""
from __future__ import annotations

import threading
from typing import Callable

import torch
from torch import Tensor

from unigraph.distributed.local import LocalPartition
from unigraph.distributed.peers import Peers, wait
from unigraph.sampling.csr_view import segment_arange


class Pending:
    """An answer assembled from the owners' replies when :meth:`wait` is called (once)."""

    def __init__(self, assemble: Callable[[], object]):
        self._assemble = assemble
        self._done = False
        self._value = None

    def wait(self):
        if not self._done:
            self._value = self._assemble()
            self._done = True
            self._assemble = None
        return self._value


def rows_in_order(n: int, pieces: list[tuple[Tensor, Tensor]], template: Tensor) -> Tensor:
    """One row per id: ``pieces`` are ``(positions, rows)`` from each owner."""
    out = torch.empty((n,) + tuple(template.shape[1:]), dtype=template.dtype)
    for positions, rows in pieces:
        out[positions] = rows
    return out


def segments_in_order(n: int, pieces: list[tuple[Tensor, Tensor, tuple]]) -> tuple[Tensor, tuple]:
    """``(counts, values)`` in id order from each owner's ``(positions, counts, values)``, where
    ``values`` holds ``counts[i]`` entries per id, id after id (``None`` values stay ``None``)."""
    counts = torch.zeros(n, dtype=torch.int64)
    for positions, piece_counts, _ in pieces:
        counts[positions] = piece_counts
    start = torch.cumsum(counts, 0) - counts
    total = int(counts.sum())
    width = len(pieces[0][2]) if pieces else 0
    out: list = [None] * width
    for positions, piece_counts, values in pieces:
        row, offset = segment_arange(piece_counts)
        slots = start[positions][row] + offset
        for k, value in enumerate(values):
            if value is None:
                continue
            if out[k] is None:
                out[k] = torch.empty(total, dtype=value.dtype)
            out[k][slots] = value
    return counts, tuple(out)


class DistGraph:
    """The whole graph, seen from the process that holds partition ``partition.part``.

    Node ids are the partition set's global ids (partition-major, see
    :mod:`unigraph.distributed.book`). Queries take any global ids and batch the remote ones
    per owner: :meth:`in_degrees`, :meth:`out_degrees`, :meth:`in_neighbors`, and the sampler's
    :meth:`sample_async`.
    """

    def __init__(self, partition: LocalPartition, peers: Peers):
        self.local = partition
        self.peers = peers
        self.book = partition.book
        self.part = partition.part
        self.info = partition.info

    @property
    def num_nodes(self) -> int:
        return self.book.num_nodes

    @property
    def num_parts(self) -> int:
        return self.book.num_parts

    def __repr__(self) -> str:
        return f"DistGraph(part {self.part} of {self.num_parts}, {self.num_nodes} nodes, {self.info.num_edges} edges)"

    def owned_nodes(self) -> Tensor:
        return torch.arange(self.local.first, self.local.end)

    def check_ids(self, name: str, ids) -> Tensor:
        ids = torch.as_tensor(ids)
        if ids.dtype == torch.bool or ids.is_floating_point() or ids.dim() != 1:
            raise TypeError(f"{name} must be a 1-D tensor of integer node ids, got {ids.dtype} {list(ids.shape)}")
        ids = ids.to(torch.int64).contiguous()
        self.book.check_ids(name, ids)
        return ids

    def request(self, request: str, ids: Tensor, *args) -> tuple[list, list]:
        """Split ``ids`` by owner; send one request to each remote owner, then answer the local ones.

        Returns ``(local, remote)``: ``[(positions, answer)]`` for the local part and
        ``[(positions, owner, future)]`` for the others (positions index into ``ids``).
        """
        owner = self.book.owner(ids)
        remote, local = [], []
        for p in torch.unique(owner).tolist():
            positions = torch.nonzero(owner == p).squeeze(1)
            if p != self.part:
                remote.append((positions, p, self.peers.request(p, request, ids[positions], *args)))
        if bool((owner == self.part).any()):
            positions = torch.nonzero(owner == self.part).squeeze(1)
            local.append((positions, self.local.answer(request, ids[positions], *args)))
        return local, remote

    def _rows(self, request: str, ids, *args) -> Tensor:
        ids = self.check_ids("ids", ids)
        local, remote = self.request(request, ids, *args)
        pieces = local + [(positions, wait(future, p, request)) for positions, p, future in remote]
        return rows_in_order(ids.numel(), pieces, pieces[0][1] if pieces else torch.zeros(0, dtype=torch.int64))

    def in_degrees(self, ids) -> Tensor:
        """In-degree of every node of ``ids`` (the neighbours a sampler can draw from)."""
        return self._rows("in_degrees", ids)

    def out_degrees(self, ids) -> Tensor:
        return self._rows("out_degrees", ids)

    def in_neighbors(self, ids) -> tuple[Tensor, Tensor]:
        """``(counts, sources)``: every in-neighbour of each node of ``ids``, node after node."""
        ids = self.check_ids("ids", ids)
        return self._segments("neighbors", ids).wait()

    def sample_async(self, ids: Tensor, fanout: int, replace: bool, key: int, with_eids: bool) -> Pending:
        """Sampled in-edges of ``ids`` (see :meth:`LocalPartition.sample`); a :class:`Pending` of
        ``(counts, (sources, eids))`` in ``ids`` order."""
        return self._segments("sample", ids, fanout, replace, key, with_eids)

    def _segments(self, request: str, ids: Tensor, *args) -> Pending:
        local, remote = self.request(request, ids, *args)

        def assemble():
            pieces = [(positions, answer[0], answer[1:]) for positions, answer in local]
            for positions, p, future in remote:
                answer = wait(future, p, request)
                pieces.append((positions, answer[0], tuple(answer[1:])))
            counts, values = segments_in_order(ids.numel(), pieces)
            if not pieces:  # no ids: empty answers of the request's shape
                values = (torch.zeros(0, dtype=torch.int64), None)
            return counts, values if request == "sample" else values[0]
        return Pending(assemble)


class DistFeatureStore:
    """Node features of the whole graph, gathered by global id.

    Rows of owned nodes come from the local partition; rows of other nodes from their owners
    (one request per owner per call) or from an optional **cache** of remote rows. The cache is
    filled once, at construction, with the rows of the ``cache_size`` halo nodes of highest
    out-degree: a neighbour sampler reaches a node about in proportion to its out-degree, and the
    halo holds the remote nodes one hop from the seeds, so these are the remote rows most batches
    read. ``hits``/``misses`` count remote rows served from the cache / fetched (``hit_rate``);
    ``rows`` counts every row gathered (local ones too).
    """

    def __init__(self, graph: DistGraph, *, cache_size: int = 0):
        local = graph.local
        if local.x is None:
            raise ValueError("DistFeatureStore needs a partition loaded with its node data (nodes=True)")
        halo = local.halo_ids.numel()
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ValueError(f"cache_size must be an int >= 0 (remote nodes to cache), got {cache_size!r}")
        self.graph = graph
        self.x = local.x
        self.hits = 0
        self.misses = 0
        self.rows = 0
        self._lock = threading.Lock()  # gathers run in prefetch threads and RPC callbacks
        hot = torch.sort(local.halo_out_degree, descending=True, stable=True).indices[:min(cache_size, halo)]
        self.cache_ids = torch.sort(local.halo_ids[hot]).values
        self.cache_rows = self._fetch(self.cache_ids) if self.cache_ids.numel() else self.x[:0].clone()

    @property
    def num_features(self) -> int:
        return self.x.shape[1]

    @property
    def hit_rate(self) -> float:
        looked_up = self.hits + self.misses
        return self.hits / looked_up if looked_up else float("nan")

    def _fetch(self, ids: Tensor) -> Tensor:
        return self.gather_async(ids, use_cache=False).wait()

    def _cache_slots(self, ids: Tensor) -> Tensor:
        """The cache row of each id, -1 where it is not cached."""
        if not self.cache_ids.numel():
            return torch.full_like(ids, -1)
        slot = torch.searchsorted(self.cache_ids, ids).clamp_max(self.cache_ids.numel() - 1)
        return torch.where(self.cache_ids[slot] == ids, slot, -1)

    def gather_async(self, ids, *, use_cache: bool = True) -> Pending:
        """Start fetching the rows of ``ids`` (any global ids); ``.wait()`` returns ``[len(ids), F]``."""
        ids = self.graph.check_ids("ids", ids)
        out = torch.empty((ids.numel(), self.num_features), dtype=self.x.dtype)
        fetch = ids
        where = torch.arange(ids.numel())
        if use_cache and self.cache_ids.numel():
            slot = self._cache_slots(ids)
            cached = slot >= 0
            out[cached] = self.cache_rows[slot[cached]]
            fetch, where = ids[~cached], where[~cached]
        local, remote = self.graph.request("features", fetch)
        if use_cache:
            with self._lock:
                self.rows += ids.numel()
                self.hits += ids.numel() - fetch.numel()
                self.misses += sum(positions.numel() for positions, _, _ in remote)
        for positions, rows in local:
            out[where[positions]] = rows

        def assemble():
            for positions, p, future in remote:
                out[where[positions]] = wait(future, p, "features")
            return out
        return Pending(assemble)

    def gather(self, ids) -> Tensor:
        return self.gather_async(ids).wait()
