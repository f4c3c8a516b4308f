"""Graph-aware micro-batches for pipeline parallelism.

**The problem.** GPipe cuts a mini-batch into micro-batches along the batch dimension. For a graph,
the GPipe GNN study cut the node feature matrix into contiguous index ranges and ran each
micro-batch on the subgraph its range induces: every edge between two ranges is lost, and with it
part of each node's neighbourhood (:func:`index_slice_edges` counts them).

**What we do.** A mini-batch's *seeds* are split into micro-batches, and each micro-batch gets its
own sampled blocks: the computation tree of its seeds, with every edge a seed needs. The blocks
come from sampling the micro-batch's seeds with the *mini-batch's* key
(:class:`MicroBatchSampler`). :class:`~unigraph.sampling.NeighborSampler` keys its draws by
(key, hop, node), so a node gets the same sampled in-edges whichever other seeds share its batch:
each seed's tree in its micro-batch is exactly its tree in the whole mini-batch. With a loss that
sums per-seed losses and divides by the mini-batch's seed count, the micro-batch gradients add up
to the gradient of the whole mini-batch (``tests/test_pipeline.py`` checks both the trees and
the gradients). (The alternative, sampling the mini-batch once and cutting each micro-batch's tree
out of its blocks, gives the same trees; re-sampling needs no sub-block extraction and parallelizes
over micro-batches.) A node reached by two micro-batches is computed in both: the price of
independence, as in any mini-batch GNN training.

**Fixed shapes.** ``torch.distributed.pipelining`` allocates the buffers that carry activations
between stages once, from example shapes, but micro-batches reach different numbers of nodes.
Activations crossing a stage boundary are therefore padded to a fixed capacity
(:func:`node_capacities`: an upper bound from the fanouts and the micro-batch size, capped at the
node count); the receiving stage reads only the rows its blocks have. Padded rows get zero
gradient, so they change nothing.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.sampling import Blocks, NeighborSampler
from unigraph.sampling.counter_rng import KeySequence

IGNORE_LABEL = -100  # cross_entropy's default ignore_index: the label of padded seed rows


@dataclasses.dataclass
class MicroBatches:
    """One mini-batch as micro-batches: ``parts[i]`` holds the sampled blocks of the ``i``-th slice of
    ``seeds`` (``torch.tensor_split`` order), all sampled with the mini-batch's ``key``."""

    seeds: Tensor
    parts: list[Blocks]
    key: int

    def to(self, device: torch.device | str) -> "MicroBatches":
        return MicroBatches(self.seeds.to(device), [part.to(device) for part in self.parts], self.key)


class MicroBatchSampler:
    """A sampler for :class:`~unigraph.sampling.NodeLoader` that returns :class:`MicroBatches`: the
    batch's seeds cut into ``num_micro_batches`` slices (some may be empty when the batch is
    smaller), each sampled by ``sampler`` with the batch's key."""

    def __init__(self, sampler: NeighborSampler, num_micro_batches: int, *, seed: int = 0):
        if not isinstance(sampler, NeighborSampler):
            raise TypeError(f"sampler must be a NeighborSampler, got {type(sampler).__name__}")
        if isinstance(num_micro_batches, bool) or not isinstance(num_micro_batches, int) or num_micro_batches < 1:
            raise ValueError(f"num_micro_batches must be an int >= 1, got {num_micro_batches!r}")
        self.sampler = sampler
        self.num_micro_batches = num_micro_batches
        self._keys = KeySequence(seed)

    def num_items(self, graph) -> int:
        return self.sampler.num_items(graph)

    def sample(self, graph, seeds, *, key: int | None = None) -> MicroBatches:
        key = self._keys.resolve(key)
        seeds = torch.as_tensor(seeds)
        parts = [self.sampler.sample(graph, part, key=key) for part in torch.tensor_split(seeds, self.num_micro_batches)]
        return MicroBatches(seeds, parts, key)


def node_capacities(fanouts: Sequence[int], seeds_per_micro_batch: int, num_nodes: int) -> list[int]:
    """Upper bounds on the node counts of one micro-batch's blocks.

    ``capacities[i]`` (``i < L``) bounds ``blocks[i].num_src_nodes``, the rows layer ``i`` reads;
    ``capacities[L]`` is the seed count. Each hop samples at most ``fanout`` in-edges of every node
    so far, so it at most multiplies the node count by ``1 + fanout``; no count exceeds the graph's.
    """
    capacities = [0] * (len(fanouts) + 1)
    capacities[-1] = min(seeds_per_micro_batch, num_nodes)
    for i in reversed(range(len(fanouts))):
        capacities[i] = min(num_nodes, capacities[i + 1] * (1 + fanouts[i]))
    return capacities


def seeds_per_micro_batch(batch_size: int, num_micro_batches: int) -> int:
    """The largest slice ``torch.tensor_split`` makes of a batch of ``batch_size`` seeds."""
    return math.ceil(batch_size / num_micro_batches)


def pad_rows(x: Tensor, rows: int, value: float = 0.0) -> Tensor:
    """``x`` with ``value`` rows appended up to ``rows`` rows (a ``ValueError`` if it has more)."""
    if x.shape[0] > rows:
        raise ValueError(f"{x.shape[0]} rows do not fit the capacity {rows}; the capacity bound is wrong")
    if x.shape[0] == rows:
        return x
    return torch.cat([x, x.new_full((rows - x.shape[0],) + tuple(x.shape[1:]), value)])


def global_edges(batch: Blocks, layer: int) -> Tensor:
    """The edges of ``batch.blocks[layer]`` as ``[2, E]`` global node ids (source, destination)."""
    block = batch.blocks[layer]
    return torch.stack([batch.input_nodes[block.src], batch.input_nodes[block.dst]])


def index_slice_edges(graph: Graph, num_micro_batches: int) -> tuple[int, int]:
    """GPipe-style micro-batching of a graph's nodes: ``(edges kept, edges dropped)`` when node
    features are cut into ``num_micro_batches`` contiguous index ranges and each micro-batch runs on
    the subgraph its range induces (an edge survives only when both ends fall in the same range)."""
    sizes = [part.numel() for part in torch.tensor_split(torch.arange(graph.num_nodes), num_micro_batches)]
    chunk = torch.repeat_interleave(torch.arange(num_micro_batches), torch.tensor(sizes))
    kept = int((chunk[graph.src] == chunk[graph.dst]).sum())
    return kept, graph.num_edges - kept
