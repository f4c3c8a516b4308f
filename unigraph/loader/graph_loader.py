"""GraphLoader: an epoch of graph mini-batches (graph classification), in-process or in workers."""
from __future__ import annotations

import math
from typing import Iterator, Sequence

import torch
from torch import Tensor

from unigraph.data.batch import GraphBatch, collate_dataset
from unigraph.data.graph_dataset import GraphDataset, check_graph_ids
from unigraph.sampling.counter_rng import GOLDEN, mix64_int
from unigraph.sampling.workers import WorkerPool


def _make_graph_batch(dataset: GraphDataset, ids: Tensor, key: int) -> GraphBatch:  # runs in workers too
    return collate_dataset(dataset, ids)


class GraphLoader:
    """Iterates over graphs of ``dataset`` in :class:`~unigraph.data.GraphBatch` es of ``batch_size``.

    Args:
        dataset: a :class:`~unigraph.data.GraphDataset`, or a list of graphs / ``(graph, label)``
            pairs (packed into one first).
        indices: the graphs to iterate over (ids or a bool mask; default: all).
        batch_size, shuffle, drop_last: as in ``torch.utils.data.DataLoader``.
        num_workers: 0 batches in this process; ``W >= 1`` starts ``W`` persistent worker
            processes over the dataset in shared memory (see :mod:`unigraph.sampling.workers`:
            spawn, errors and dead workers reported, never an unbounded wait). Collation is a few
            vectorised gathers, so workers pay off only for large batches or slow storage.
        seed: fixes the shuffled order of every epoch (epoch ``e`` uses ``mix64(seed + e * GOLDEN)``),
            the same with or without workers.
        progress: show a tqdm bar over each epoch's batches (needs tqdm: ``pip install tqdm``).
        device: where batches are delivered; None keeps them on the CPU.

    PyG-style loops read ``batch.x``, ``batch.edge_index``, ``batch.batch``, ``batch.y``; DGL-style
    loops unpack ``for graph, labels in loader``. Close workers with :meth:`close` or ``with``.
    """

    def __init__(self, dataset: GraphDataset | Sequence, indices=None, *, batch_size: int = 32, shuffle: bool = False,
                 drop_last: bool = False, num_workers: int = 0, seed: int = 0, progress: bool = False,
                 device: torch.device | str | None = None, timeout: float = 120.0, start_method: str = "spawn"):
        if not isinstance(dataset, GraphDataset):
            dataset = _pack(dataset)
        for name, value, minimum in (("batch_size", batch_size, 1), ("num_workers", num_workers, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        if progress:
            from unigraph._optional import require  # noqa: PLC0415
            self._tqdm = require("tqdm", "GraphLoader(progress=True)", "pip install tqdm").tqdm
        self.dataset = dataset
        self.indices = torch.arange(len(dataset)) if indices is None else check_graph_ids(indices, len(dataset))
        self.batch_size, self.shuffle, self.drop_last = batch_size, shuffle, drop_last
        self.seed, self.progress = seed, progress
        self.device = None if device is None else torch.device(device)
        self._epoch = 0
        self._pool = None
        if num_workers:
            self._pool = WorkerPool(_make_graph_batch, dataset.share_memory_(), num_workers,
                                    start_method=start_method, timeout=timeout)

    def __len__(self) -> int:
        count = self.indices.numel() / self.batch_size
        return math.floor(count) if self.drop_last else math.ceil(count)

    def _epoch_batches(self, epoch: int) -> list[Tensor]:
        order = self.indices
        if self.shuffle:
            key = mix64_int(self.seed + epoch * GOLDEN) & ((1 << 63) - 1)
            order = order[torch.randperm(order.numel(), generator=torch.Generator().manual_seed(key))]
        batches = list(order.split(self.batch_size))
        if self.drop_last and batches and batches[-1].numel() < self.batch_size:
            batches.pop()
        return batches

    def __iter__(self) -> Iterator[GraphBatch]:
        self._epoch += 1
        tasks = [(ids, 0) for ids in self._epoch_batches(self._epoch)]
        if self._pool is not None:
            batches = self._pool.run(tasks)
        else:
            batches = (collate_dataset(self.dataset, ids) for ids, _ in tasks)
        if self.progress:
            batches = self._tqdm(batches, total=len(tasks), unit="batch", leave=False)
        for batch in batches:
            yield batch if self.device is None else batch.to(self.device)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()

    def __enter__(self) -> "GraphLoader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _pack(items: Sequence) -> GraphDataset:
    items = list(items)
    if not items:
        raise ValueError("GraphLoader needs at least one graph")
    if isinstance(items[0], tuple):
        graphs, labels = zip(*items)
        return GraphDataset.from_graphs(list(graphs), torch.stack([torch.as_tensor(y) for y in labels]))
    return GraphDataset.from_graphs(items, torch.zeros(len(items), dtype=torch.int64))
