"""Mini-batches for one trainer of a partitioned graph: :class:`DistNodeLoader`.

**The split.** Each trainer takes its own seeds (normally its share of its machine's training nodes), every
epoch in a new order, cut into ``num_batches`` batches of near-equal size (``torch.tensor_split``:
the first ``n % K`` batches have one seed more). ``num_batches`` is the same on every trainer
(:func:`equal_num_batches`: enough for the trainer with the most seeds), so every trainer takes
as many optimizer steps as the others and no collective waits for a missing batch. Batch ``b`` of
epoch ``e`` has the sampling key ``mix64(mix64(seed + e * GOLDEN) + b)`` on every trainer, as in
:class:`~unigraph.sampling.NodeLoader`: since draws are keyed by node, the trainers' batches ``b``
together are exactly the single-machine batch of the union of their seeds.

**The pipeline.** Batch ``b`` is made in two steps: sampling (local first, one request per owner
per hop), then the feature gather (local rows, cached rows, one request per owner). With
``prefetch = k >= 1`` up to ``k`` batches are prepared ahead while the caller trains, so the next
batches' sampling and feature requests overlap the current step: in a background thread of this
process, or, with ``samplers`` (names of sampler processes, see
:mod:`unigraph.distributed.sampler`), in other processes that return the sampled blocks (the
feature gather of a batch starts as soon as its blocks arrive). The queue of prepared batches is
bounded by ``k``. ``prefetch=0`` does everything in the caller's thread, one step after the other.

:attr:`DistNodeLoader.stats` accumulates the time the caller *waited* for sampling and for
features (what the overlap did not hide), the sampling work time where it is measured (in this
process), and the payload bytes exchanged with sampler processes (seeds out, blocks back).
"""
from __future__ import annotations

import concurrent.futures
import itertools
import time
from collections import deque
from typing import Iterator, Sequence

import torch
from torch import Tensor

from unigraph.distributed.peers import RemoteError, describe_failure, payload_bytes
from unigraph.distributed.sampler import DistNeighborSampler, sample_on
from unigraph.distributed.store import DistFeatureStore, DistGraph, Pending
from unigraph.sampling.batch import Blocks
from unigraph.sampling.counter_rng import GOLDEN, mix64_int


def blocks_tensors(blocks: Blocks) -> list[Tensor]:
    """The tensors a batch of blocks travels as (ids and each block's CSR)."""
    tensors = [blocks.seeds, blocks.input_nodes]
    for block in blocks.blocks:
        tensors += list(block.in_csr()[:2]) + ([block.edata["eid"]] if "eid" in block.edata else [])
    return tensors


def equal_num_batches(seed_counts: Sequence[int], batch_size: int) -> int:
    """Batches per epoch for every trainer: enough for the largest share at ``batch_size`` (>= 1)."""
    return max(1, max(-(-count // batch_size) for count in seed_counts))


def batch_sizes(num_seeds: int, num_batches: int) -> Tensor:
    """Seeds in each batch of a share of ``num_seeds`` cut into ``num_batches`` (tensor_split's sizes)."""
    sizes = torch.full((num_batches,), num_seeds // num_batches, dtype=torch.int64)
    sizes[:num_seeds % num_batches] += 1
    return sizes


def epoch_tasks(nodes: Tensor, num_batches: int, seed: int, epoch: int, shuffle: bool) -> list[tuple[Tensor, int]]:
    """``(seeds, key)`` of every batch of ``epoch`` (see the module docstring)."""
    epoch_key = mix64_int(seed + epoch * GOLDEN)
    order = nodes
    if shuffle:
        generator = torch.Generator().manual_seed(epoch_key & ((1 << 63) - 1))
        order = nodes[torch.randperm(nodes.numel(), generator=generator)]
    return [(chunk, mix64_int(epoch_key + b)) for b, chunk in enumerate(torch.tensor_split(order, num_batches))]


class DistNodeLoader:
    """Iterates over ``nodes`` in ``num_batches`` batches per epoch; each batch is a
    :class:`~unigraph.sampling.Blocks` with ``x`` (features of ``input_nodes``) and ``y`` (labels
    of the seeds) filled.

    Args:
        graph: the :class:`DistGraph` of this process.
        nodes: global ids of the seeds, owned by this process's machine (their labels are local).
        sampler: a :class:`DistNeighborSampler`.
        features: a :class:`DistFeatureStore` (``None``: no ``x``).
        batch_size: seeds per batch when ``num_batches`` is not given.
        num_batches: batches per epoch (give the same number on every trainer:
            :func:`equal_num_batches`).
        shuffle, seed: a new order every epoch; ``seed`` also fixes the sampling keys.
        prefetch: batches prepared ahead (``0``: none, everything in the caller's thread).
        samplers: RPC names of sampler processes to sample in (``None``: in this process).
    """

    def __init__(self, graph: DistGraph, nodes: Tensor, sampler: DistNeighborSampler, *,
                 features: DistFeatureStore | None = None, batch_size: int = 1024, num_batches: int | None = None,
                 shuffle: bool = True, seed: int = 0, prefetch: int = 2, samplers: Sequence[str] | None = None,
                 labels: bool = True):
        for name, value, minimum in (("batch_size", batch_size, 1), ("prefetch", prefetch, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
        nodes = graph.check_ids("nodes", nodes)
        if labels and nodes.numel() and (int(nodes.min()) < graph.local.first or int(nodes.max()) >= graph.local.end):
            raise ValueError(f"the seeds must be nodes of this process's machine {graph.machine} "
                             f"({graph.local.first}..{graph.local.end - 1}) to read their labels")
        if num_batches is None:
            num_batches = max(1, -(-nodes.numel() // batch_size))
        if isinstance(num_batches, bool) or not isinstance(num_batches, int) or num_batches < 1:
            raise ValueError(f"num_batches must be an int >= 1, got {num_batches!r}")
        if samplers is not None and not samplers:
            raise ValueError("samplers must name at least one sampler process (or be None)")
        self.graph, self.nodes, self.sampler, self.features = graph, nodes, sampler, features
        self.num_batches, self.shuffle, self.seed, self.prefetch = num_batches, shuffle, seed, prefetch
        self.samplers = list(samplers) if samplers is not None else None
        self.labels = labels
        self._epoch = 0
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._next_sampler = itertools.cycle(self.samplers or [None])
        self.stats = {"batches": 0, "sample_wait": 0.0, "fetch_wait": 0.0, "sample_work": 0.0, "sampler_bytes": 0}

    def __len__(self) -> int:
        return self.num_batches

    @property
    def epoch(self) -> int:
        return self._epoch

    def state_dict(self) -> dict:
        return {"epoch": self._epoch, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        if state["seed"] != self.seed:
            raise ValueError(f"the saved loader state has seed {state['seed']} but this loader has seed {self.seed}")
        self._epoch = int(state["epoch"])

    # ------------------------------------------------------------------ making one batch
    def _gather(self, blocks: Blocks) -> Pending | None:
        return self.features.gather_async(blocks.input_nodes) if self.features is not None else None

    def _prepare(self, seeds: Tensor, key: int) -> tuple[Blocks, Pending | None]:
        """Sample, then start the feature gather (in the caller's or the prefetch thread)."""
        began = time.perf_counter()
        blocks = self.sampler.sample(self.graph, seeds, key=key)
        self.stats["sample_work"] += time.perf_counter() - began
        return blocks, self._gather(blocks)

    def _submit(self, seeds: Tensor, key: int):
        """Start preparing a batch; returns an object whose ``result()`` is ``(blocks, features)``."""
        name = next(self._next_sampler)
        if name is not None:
            self.stats["sampler_bytes"] += payload_bytes(seeds)
            return _Waiting(name, sample_on(name, seeds, key, self.sampler).then(self._delivered))
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="unigraph-prefetch")
        return self._executor.submit(self._prepare, seeds, key)

    def _delivered(self, future) -> tuple[Blocks, Pending | None]:
        """A sampler process's blocks arrived (in an RPC thread): count them, start their feature gather."""
        blocks = future.value()
        self.stats["sampler_bytes"] += payload_bytes(blocks_tensors(blocks))
        return blocks, self._gather(blocks)

    def _finish(self, blocks: Blocks, features: Pending | None) -> Blocks:
        began = time.perf_counter()
        if features is not None:
            blocks.x = features.wait()
        self.stats["fetch_wait"] += time.perf_counter() - began
        if self.labels:
            blocks.y = self.graph.local.y[blocks.seeds - self.graph.local.first]
        self.stats["batches"] += 1
        return blocks

    # ------------------------------------------------------------------ an epoch
    def __iter__(self) -> Iterator[Blocks]:
        self._epoch += 1
        tasks = epoch_tasks(self.nodes, self.num_batches, self.seed, self._epoch, self.shuffle)
        if self.prefetch == 0 and self.samplers is None:
            for seeds, key in tasks:
                began = time.perf_counter()
                prepared = self._prepare(seeds, key)
                self.stats["sample_wait"] += time.perf_counter() - began
                yield self._finish(*prepared)
            return
        waiting: deque = deque()
        upcoming = iter(tasks)
        for _ in range(len(tasks)):
            while len(waiting) < 1 + self.prefetch:  # the batch needed now, and `prefetch` more while it is used
                task = next(upcoming, None)
                if task is None:
                    break
                waiting.append(self._submit(*task))
            began = time.perf_counter()
            prepared = waiting.popleft().result()
            self.stats["sample_wait"] += time.perf_counter() - began
            yield self._finish(*prepared)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def __enter__(self) -> "DistNodeLoader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Waiting:
    """A sampler process's ``torch.futures.Future`` seen through ``concurrent.futures``' ``result()``."""

    def __init__(self, name: str, future):
        self._name = name
        self._future = future

    def result(self):
        try:
            return self._future.wait()
        except RuntimeError as err:
            who = f"sampler process {self._name}"
            raise RemoteError(f"{who} failed to deliver a batch: {describe_failure(err, who)}") from err
