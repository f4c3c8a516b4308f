"""NodeLoader: an epoch of mini-batches through any sampler, in-process or in worker processes."""
from __future__ import annotations

import math
from typing import Any, Iterator

import numpy as np
import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.sampling.counter_rng import GOLDEN, mix64_int
from unigraph.sampling.csr_view import check_node_ids, in_csr_view
from unigraph.sampling.features import NodeFeatureStore
from unigraph.sampling.workers import WorkerPool


def make_batch(context: tuple, items: Tensor, key: int) -> Any:
    """Sample one batch and gather what can be gathered on the CPU (runs in workers too)."""
    sampler, graph, x, labels = context
    if isinstance(items, np.ndarray):   # sent to a worker: a pickled numpy array loads ~10x faster than a tensor
        items = torch.from_numpy(items)
    batch = sampler.sample(graph, items, key=key)
    if labels is not None:
        batch.y = labels[batch.output_nodes]
    if x is not None:
        batch.x = x[batch.input_nodes]
    return batch


class NodeLoader:
    """Iterates over ``nodes`` in batches of ``batch_size``, each turned into a mini-batch by
    ``sampler.sample(graph, batch_nodes, key=...)``.

    Args:
        graph: the graph to sample from (homogeneous :class:`~unigraph.Graph`).
        nodes: the items to batch: seed node ids for :class:`NeighborSampler` and
            :class:`RandomWalkSampler` (walk roots), partition ids for :class:`ClusterSampler`.
            A 1-D integer tensor; a bool mask must be turned into ids first.
        sampler: any object with ``sample(graph, items, *, key)`` and ``num_items(graph)``.
        batch_size, shuffle, drop_last: as in ``torch.utils.data.DataLoader``.
        features: node features (a tensor or a :class:`NodeFeatureStore`); each batch gets
            ``batch.x = features[batch.input_nodes]``. With a store that caches hot nodes on a
            device, the gather runs in the calling process (cache hits stay on the device).
        labels: per-node labels; each batch gets ``batch.y = labels[batch.output_nodes]``.
        device: where batches are delivered (``batch.to(device)``); None keeps them on the CPU.
        num_workers: 0 samples in the calling process; ``W >= 1`` runs ``W`` persistent worker
            processes (see :mod:`unigraph.sampling.workers` for the design: spawn, shared memory,
            errors and dead workers reported, never an unbounded wait).
        timeout: seconds to wait for any one batch from the workers before failing.
        start_method: ``"spawn"`` (default) or ``"forkserver"``; ``"fork"`` is refused. Scripts
            that use workers need the usual ``if __name__ == "__main__":`` guard.
        seed: fixes the shuffling and the sampling keys. Batch ``b`` of epoch ``e`` gets key
            ``mix64(mix64(seed + e * GOLDEN) + b)`` whatever process samples it, so a loader
            with workers yields exactly the batches of one without.
        num_replicas, rank: data-parallel training. Every rank shuffles with the same seed and
            takes every ``num_replicas``-th item from position ``rank`` (a remainder of fewer than
            ``num_replicas`` items is left out of that epoch, so every rank has as many batches and
            collective calls cannot hang). Rank ``r``'s batch ``b`` and the other ranks' batches
            ``b`` together are batch ``b`` of a single-process loader with ``batch_size *
            num_replicas``, and they share its key: since draws are keyed by node (see
            :class:`NeighborSampler`), each seed gets the same sampled computation tree as in that
            global batch, so data-parallel gradients equal the single-process ones.

    Batches come in order. Iterating again starts the next epoch (new order, new samples).
    Close the workers with :meth:`close` or ``with NodeLoader(...) as loader:``.
    """

    def __init__(self, graph: Graph, nodes: Tensor, sampler: Any, *, batch_size: int = 1024,
                 shuffle: bool = True, drop_last: bool = False,
                 features: Tensor | NodeFeatureStore | None = None, labels: Tensor | None = None,
                 device: torch.device | str | None = None, num_workers: int = 0, timeout: float = 120.0,
                 start_method: str = "spawn", prefetch: int = 2, seed: int = 0,
                 num_replicas: int = 1, rank: int = 0):
        if not hasattr(sampler, "sample") or not hasattr(sampler, "num_items"):
            raise TypeError(f"sampler must have sample(graph, items, *, key) and num_items(graph); "
                            f"got {type(sampler).__name__}")
        for name, value, minimum in (("batch_size", batch_size, 1), ("num_workers", num_workers, 0),
                                     ("prefetch", prefetch, 1), ("num_replicas", num_replicas, 1), ("rank", rank, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
        if rank >= num_replicas:
            raise ValueError(f"rank must be in 0..num_replicas-1 = 0..{num_replicas - 1}, got {rank}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        self.graph = graph
        self._csr = in_csr_view(graph)
        self.nodes = check_node_ids("nodes", nodes, sampler.num_items(graph), self._csr.device)
        self.sampler = sampler
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        if isinstance(features, Tensor):
            features = NodeFeatureStore(features)
        if features is not None and features.num_nodes != self._csr.num_nodes:
            raise ValueError(f"features have {features.num_nodes} rows but the graph has {self._csr.num_nodes} nodes")
        if labels is not None and (not isinstance(labels, Tensor) or labels.shape[:1] != (self._csr.num_nodes,)):
            raise ValueError(f"labels must be a tensor with one entry per node ({self._csr.num_nodes}), "
                             f"got {list(getattr(labels, 'shape', [])) or type(labels).__name__}")
        self.features = features
        self.labels = labels
        self.device = None if device is None else torch.device(device)
        self.num_workers = num_workers
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self._epoch = 0
        self._pool: WorkerPool | None = None
        if num_workers and self._csr.device.type != "cpu":
            raise ValueError(f"worker processes sample on the CPU, but the graph is on {self._csr.device}; keep the "
                             "graph on the CPU and pass device= to deliver batches there, or use num_workers=0")
        if num_workers:
            self._csr.share_memory_()
            if self._gather_in_workers:
                features.share_memory_()  # refuses features on a GPU, named
            if labels is not None:
                if labels.device.type != "cpu":
                    raise ValueError(f"worker processes read labels from shared CPU memory; these are on {labels.device}")
                labels.share_memory_()
            self._pool = WorkerPool(make_batch, self._context(), num_workers, start_method=start_method,
                                    timeout=timeout, prefetch=prefetch)

    @property
    def _gather_in_workers(self) -> bool:
        return self.features is not None and self.features.cache is None

    def _context(self) -> tuple:
        return (self.sampler, self._csr, self.features.x if self._gather_in_workers else None, self.labels)

    def __len__(self) -> int:
        count = (self.nodes.numel() // self.num_replicas) / self.batch_size
        return math.floor(count) if self.drop_last else math.ceil(count)

    @property
    def epoch(self) -> int:
        """The number of epochs started so far (the one being iterated, if any)."""
        return self._epoch

    def state_dict(self) -> dict:
        """Where the loader is in its epoch sequence (for checkpoints): with the seed, the epoch
        count fixes every later epoch's order and sampling keys."""
        return {"epoch": self._epoch, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        """Continue after the epochs ``state`` had started (the next iteration is the one after)."""
        if state["seed"] != self.seed:
            raise ValueError(f"the saved loader state has seed {state['seed']} but this loader has seed {self.seed}")
        self._epoch = int(state["epoch"])

    @property
    def worker_pids(self) -> list[int]:
        return self._pool.pids if self._pool is not None else []

    def _epoch_tasks(self, epoch: int) -> list[tuple[Tensor, int]]:
        epoch_key = mix64_int(self.seed + epoch * GOLDEN)
        order = self.nodes
        if self.shuffle:
            generator = torch.Generator().manual_seed(epoch_key & ((1 << 63) - 1))
            order = self.nodes[torch.randperm(self.nodes.numel(), generator=generator).to(self.nodes.device)]
        if self.num_replicas > 1:  # every rank drew the same order: take every num_replicas-th, equal counts
            usable = order.numel() - order.numel() % self.num_replicas
            order = order[self.rank:usable:self.num_replicas]
        batches = [order[start:start + self.batch_size] for start in range(0, order.numel(), self.batch_size)]
        if self.drop_last and batches and batches[-1].numel() < self.batch_size:
            batches.pop()
        return [(items, mix64_int(epoch_key + index)) for index, items in enumerate(batches)]

    def __iter__(self) -> Iterator[Any]:
        self._epoch += 1
        tasks = self._epoch_tasks(self._epoch)
        if self._pool is not None:
            batches = self._pool.run([(items.numpy(), key) for items, key in tasks])
        else:
            context = self._context()
            batches = (make_batch(context, items, key) for items, key in tasks)
        for batch in batches:
            if self.features is not None and not self._gather_in_workers:
                batch.x = self.features.gather(batch.input_nodes, self.device)
            yield batch if self.device is None else batch.to(self.device)

    def close(self) -> None:
        """Stop the worker processes (a later epoch starts them again)."""
        if self._pool is not None:
            self._pool.close()

    def __enter__(self) -> "NodeLoader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
