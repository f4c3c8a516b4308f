"""The partitioned graph and its features as one graph: :class:`DistGraph`, :class:`DistFeatureStore`.

Each process sees its machine's partition (:class:`~unigraph.distributed.local.LocalPartition`,
in shared memory when a graph server holds it) and the machine book. A query about any global
node ids is split by owner machine: rows this machine holds are answered directly, and each other
owner gets **one** request for all of its rows
(:mod:`unigraph.distributed.peers`), sent before the local work starts so that they overlap.
:class:`Pending` holds the answer until it is needed, which lets a loader fetch the next batch's
features while the current batch trains.
"""
from __future__ import annotations

import threading
from typing import Callable

import torch
from torch import Tensor

from unigraph.distributed.cache import FeatureCache
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
    """The whole graph, seen from a process of machine ``local.machine``.

    Node ids are the partition set's global ids (partition-major, see
    :mod:`unigraph.distributed.book`). Queries take any global ids and batch the remote ones per
    owner machine: :meth:`in_degrees`, :meth:`out_degrees`, :meth:`in_neighbors`, and the
    sampler's :meth:`sample_async`, which draws the rows of owned *and halo* nodes here (the
    machine holds its halo's in-edges) and asks owners only for the others. ``saved`` counts the
    halo rows sampled here and the request and reply bytes they would have cost.
    """

    def __init__(self, partition: LocalPartition, peers: Peers):
        self.local = partition
        self.peers = peers
        self.book = partition.book
        self.machine = partition.machine
        self.info = partition.info
        self.saved = {"sample_rows": 0, "sample_bytes": 0}
        self._lock = threading.Lock()

    @property
    def part(self) -> int:
        return self.machine

    @property
    def num_nodes(self) -> int:
        return self.book.num_nodes

    @property
    def num_parts(self) -> int:
        """Machines (owners) of the job: entries of the book."""
        return self.book.num_parts

    def __repr__(self) -> str:
        return (f"DistGraph(machine {self.machine} of {self.num_parts}, {self.num_nodes} nodes, "
                f"{self.info.num_edges} edges)")

    def owned_nodes(self) -> Tensor:
        return torch.arange(self.local.first, self.local.end)

    def check_ids(self, name: str, ids) -> Tensor:
        ids = torch.as_tensor(ids)
        if ids.dtype == torch.bool or ids.is_floating_point() or ids.dim() != 1:
            raise TypeError(f"{name} must be a 1-D tensor of integer node ids, got {ids.dtype} {list(ids.shape)}")
        ids = ids.to(torch.int64).contiguous()
        self.book.check_ids(name, ids)
        return ids

    @staticmethod
    def wait(future, owner: int, request: str):
        return wait(future, owner, request)

    def split(self, ids: Tensor, here: Tensor | None = None) -> tuple[Tensor | None, list[tuple[Tensor, int]]]:
        """``(positions answered here, [(positions, owner machine)])`` of ``ids``; ``here`` (a
        mask) says which are answered here, by default the owned ones."""
        owner = self.book.owner(ids)
        if here is None:
            here = owner == self.machine
        remote = []
        rest = torch.nonzero(~here).squeeze(1)
        if rest.numel():
            rest_owner = owner[rest]
            for p in torch.unique(rest_owner).tolist():
                remote.append((rest[rest_owner == p], p))
        local = torch.nonzero(here).squeeze(1) if bool(here.any()) else None
        return local, remote

    def request(self, request: str, ids: Tensor, *args, here: Tensor | None = None) -> tuple[list, list]:
        """Send one request to each remote owner of ``ids``, then answer the local ones here.

        Returns ``(local, remote)``: ``[(positions, answer)]`` for the local part and
        ``[(positions, owner, future)]`` for the others (positions index into ``ids``).
        """
        positions, others = self.split(ids, here)
        remote = [(where, p, self.peers.request(p, request, ids[where], *args)) for where, p in others]
        local = [] if positions is None else [(positions, self.local.answer(request, ids[positions], *args))]
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
        ``(counts, (sources, eids))`` in ``ids`` order. Owned and halo rows are drawn here."""
        here = self.local.halo_rows(ids) >= 0
        local, remote = self.request("sample", ids, fanout, replace, key, with_eids, here=here)
        for positions, answer in local:
            mine = ids[positions]
            halo = (mine < self.local.first) | (mine >= self.local.end)
            if bool(halo.any()):  # what asking the owners would have cost: an id and a count per row, a source
                rows, edges = int(halo.sum()), int(answer[0][halo].sum())  # (and an edge id) per edge
                with self._lock:
                    self.saved["sample_rows"] += rows
                    self.saved["sample_bytes"] += 16 * rows + 8 * (2 if with_eids else 1) * edges
        return self._assemble("sample", ids, local, remote)

    def _segments(self, request: str, ids: Tensor, *args) -> Pending:
        return self._assemble(request, ids, *self.request(request, ids, *args))

    def _assemble(self, request: str, ids: Tensor, local: list, remote: list) -> Pending:
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

    Rows of nodes the machine owns come from its partition (shared memory when a server holds
    it); rows of other nodes from the machine's halo feature ``cache``
    (:class:`~unigraph.distributed.cache.FeatureCache`, filled once at start by the server) or
    from their owners (one request per owner machine per call). ``hits``/``misses`` count remote
    rows served from the cache / fetched (``hit_rate``); ``rows`` counts every row gathered
    (local ones too); ``saved_bytes`` the request and reply bytes the hits did not cost.
    """

    def __init__(self, graph: DistGraph, cache: FeatureCache | None = None):
        local = graph.local
        if local.x is None:
            raise ValueError("DistFeatureStore needs a partition loaded with its node data (nodes=True)")
        if cache is not None and not isinstance(cache, FeatureCache):
            raise TypeError(f"cache must be a FeatureCache or None, got {type(cache).__name__}")
        self.graph = graph
        self.x = local.x
        self.cache = cache if cache is not None else FeatureCache(torch.zeros(0, dtype=torch.int64), local.x[:0])
        if self.cache.rows.shape[1:] != self.x.shape[1:] and len(self.cache):
            raise ValueError(f"the cache holds rows of {self.cache.rows.shape[1]} features, the graph has "
                             f"{self.x.shape[1]}")
        self.hits = 0
        self.misses = 0
        self.rows = 0
        self._lock = threading.Lock()  # gathers run in prefetch threads and RPC callbacks

    @property
    def cache_ids(self) -> Tensor:
        return self.cache.ids

    @property
    def num_features(self) -> int:
        return self.x.shape[1]

    @property
    def hit_rate(self) -> float:
        looked_up = self.hits + self.misses
        return self.hits / looked_up if looked_up else float("nan")

    @property
    def saved_bytes(self) -> int:
        """Request and reply payload the cache hits did not cost (an id out, a row back)."""
        return self.hits * (8 + self.num_features * self.x.element_size())

    def gather_async(self, ids) -> Pending:
        """Start fetching the rows of ``ids`` (any global ids); ``.wait()`` returns ``[len(ids), F]``."""
        ids = self.graph.check_ids("ids", ids)
        out = torch.empty((ids.numel(), self.num_features), dtype=self.x.dtype)
        owned = (ids >= self.graph.local.first) & (ids < self.graph.local.end)
        slot = self.cache.slots(ids)
        cached = (slot >= 0) & ~owned
        if bool(cached.any()):
            out[cached] = self.cache.rows[slot[cached]]
        fetch = torch.nonzero(~cached).squeeze(1)
        local, remote = self.graph.request("features", ids[fetch])
        with self._lock:
            self.rows += ids.numel()
            self.hits += int(cached.sum())
            self.misses += sum(positions.numel() for positions, _, _ in remote)
        for positions, rows in local:
            out[fetch[positions]] = rows

        def assemble():
            for positions, p, future in remote:
                out[fetch[positions]] = wait(future, p, "features")
            return out
        return Pending(assemble)

    def gather(self, ids) -> Tensor:
        return self.gather_async(ids).wait()
