"""Mini-batches of a graph on disk: sampling from the mapped in-CSR, features from a
:class:`~unigraph.storage.features.MappedFeatureStore`, the next batch prepared in a thread.

:class:`MappedNodeLoader` is :class:`~unigraph.sampling.NodeLoader` over the chunked graph's
in-CSR mapped from disk (:func:`mapped_csr`: no copy; the sampler reads the pages it needs) with
the labels mapped too, so its batches are **exactly** ``NodeLoader``'s on the same graph in memory
(same shuffles, same sampling keys, same blocks), and ``batch.x`` holds the same rows. What it adds
is the prefetch: a background thread samples batch ``b + 1``, advises the kernel to read the pages
of its feature rows (``madvise``), then gathers batch ``b``'s rows (their pages were advised one
batch earlier), and hands batches over through a queue of ``prefetch`` entries, while the caller
trains on the batch before. ``prefetch=0`` does everything in the caller's thread.

``stats``: ``batches``; ``wait`` (seconds the caller waited for a batch: what the overlap did not
hide); ``gather`` (seconds the feature gathers took, in whatever thread ran them).
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Iterator

import torch
from torch import Tensor

from unigraph.sampling import NeighborSampler, NodeLoader
from unigraph.sampling.csr_view import InCSR
from unigraph.storage.chunked import ChunkedGraph
from unigraph.storage.features import MappedFeatureStore

_END = object()


def mapped_csr(graph: ChunkedGraph) -> InCSR:
    """The graph's in-CSR as tensors over its mapped files (``eids``: ``in_eids``, or an empty
    tensor when the CSR order is the edge order; samplers asked for edge ids then refuse)."""
    for name in ("in_indptr", "in_indices"):
        if not graph.has(name):
            raise ValueError(f"{graph.directory} has no {name!r}: build the in-CSR first (`unigraph chunk csr`)")
    if graph.dtype("in_indices").itemsize != 8:
        raise ValueError(f"{graph.directory}: in_indices is {graph.dtype('in_indices')}; the samplers read int64 ids")
    with_eids = graph.has("in_eids")
    for name in ("in_indptr", "in_indices", *(("in_eids",) if with_eids else ())):
        graph.mapped(name).advise_random()   # neighbour lists are read in no order: no read-around per fault
    eids = graph.tensor("in_eids") if with_eids else torch.zeros(0, dtype=torch.int64)
    return InCSR(graph.tensor("in_indptr"), graph.tensor("in_indices"), eids, graph.num_nodes)


class MappedNodeLoader:
    """Batches of ``nodes`` sampled from a chunked graph on disk (see the module docstring).

    Args:
        graph: the :class:`~unigraph.storage.chunked.ChunkedGraph` (its in-CSR, ``y``).
        nodes: seed node ids (a 1-D integer tensor).
        sampler: a :class:`~unigraph.sampling.NeighborSampler`.
        features: a :class:`MappedFeatureStore` (``None``: batches have no ``x``).
        labels: fill ``batch.y`` from the graph's ``y``.
        batch_size, shuffle, seed: as :class:`~unigraph.sampling.NodeLoader`'s.
        prefetch: batches prepared ahead in the background thread (``0``: none).
        advise: ask the kernel to read each batch's feature pages ahead (``madvise``).
    """

    def __init__(self, graph: ChunkedGraph, nodes: Tensor, sampler: NeighborSampler, *,
                 features: MappedFeatureStore | None = None, labels: bool = True, batch_size: int = 1024,
                 shuffle: bool = True, seed: int = 0, prefetch: int = 1, advise: bool = True):
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise ValueError(f"prefetch must be an int >= 0, got {prefetch!r}")
        csr = mapped_csr(graph)
        if getattr(sampler, "return_eids", False) and not graph.has("in_eids"):
            raise ValueError(f"{graph.directory} stores no in_eids (its CSR order is the edge order): sample without "
                             "return_eids")
        self.inner = NodeLoader(csr, nodes, sampler, batch_size=batch_size, shuffle=shuffle,
                                labels=graph.tensor("y") if labels else None, seed=seed)
        self.features, self.prefetch, self.advise = features, prefetch, advise
        self.stats = {"batches": 0, "wait": 0.0, "gather": 0.0}

    def __len__(self) -> int:
        return len(self.inner)

    @property
    def epoch(self) -> int:
        return self.inner.epoch

    def state_dict(self) -> dict:
        return self.inner.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state)

    def _advise(self, batch) -> None:
        if self.features is not None and self.advise:
            self.features.advise(batch.input_nodes)

    def _gather(self, batch):
        if self.features is not None:
            began = time.perf_counter()
            batch.x = self.features.gather(batch.input_nodes)
            self.stats["gather"] += time.perf_counter() - began
        return batch

    def _produce(self, out: queue.Queue, stop: threading.Event) -> None:
        """The background thread: advise batch b + 1's pages, then gather and hand over batch b."""
        try:
            previous = None
            for batch in self.inner:
                self._advise(batch)
                if previous is not None:
                    out.put(self._gather(previous))
                previous = batch
                if stop.is_set():
                    return
            if previous is not None:
                out.put(self._gather(previous))
            out.put(_END)
        except BaseException as err:  # handed to the caller, raised there
            out.put(err)

    def __iter__(self) -> Iterator:
        if self.prefetch == 0:
            for batch in self.inner:
                began = time.perf_counter()
                self._advise(batch)
                batch = self._gather(batch)
                self.stats["wait"] += time.perf_counter() - began
                self.stats["batches"] += 1
                yield batch
            return
        out: queue.Queue = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()
        thread = threading.Thread(target=self._produce, args=(out, stop), name="unigraph-mapped-prefetch", daemon=True)
        thread.start()
        try:
            while True:
                began = time.perf_counter()
                item = out.get()
                self.stats["wait"] += time.perf_counter() - began
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                self.stats["batches"] += 1
                yield item
        finally:
            stop.set()
            while thread.is_alive():   # let a blocked put() finish so the thread can see the stop
                try:
                    out.get(timeout=0.05)
                except queue.Empty:
                    pass
            thread.join()

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> "MappedNodeLoader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
