"""The part of a graph that samplers read, and checks of the node ids they are given.

Samplers read only the in-CSR (``ptr``, source ``indices``, original edge ``eids``): the
neighbours of ``v`` are the sources of its in-edges, the nodes whose messages ``v`` receives.
:class:`InCSR` is that triple as a plain tuple, so that a loader can place it in shared memory
and hand it to worker processes without the rest of the :class:`~unigraph.Graph`.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

from unigraph.graph import Graph


class InCSR(NamedTuple):
    ptr: Tensor
    indices: Tensor
    eids: Tensor
    num_nodes: int

    @property
    def device(self) -> torch.device:
        return self.ptr.device

    def share_memory_(self) -> "InCSR":
        for tensor in self[:3]:
            tensor.share_memory_()
        return self


def in_csr_view(graph: Graph | InCSR) -> InCSR:
    """The in-CSR of a homogeneous graph (built once and cached by the graph)."""
    if isinstance(graph, InCSR):
        return graph
    if not isinstance(graph, Graph):
        raise TypeError(f"samplers take a unigraph.Graph, got {type(graph).__name__}")
    if graph.is_bipartite:
        raise ValueError(f"samplers need a homogeneous graph; this one is bipartite ({graph!r})")
    return InCSR(*graph.in_csr(), graph.num_nodes)


def check_node_ids(name: str, ids: Any, num_nodes: int, device: torch.device) -> Tensor:
    """``ids`` as a 1-D int64 tensor on ``device``, every id in ``0..num_nodes-1``."""
    if not isinstance(ids, Tensor):
        try:
            ids = torch.as_tensor(ids, dtype=torch.int64)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"{name} must be a 1-D integer tensor of node ids, got {type(ids).__name__}: {err}") from None
    if ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
        raise TypeError(f"{name} must hold integer node ids (int32 or int64), got {ids.dtype}"
                        + (" (a mask? pass mask.nonzero().squeeze(1))" if ids.dtype == torch.bool else ""))
    if ids.dim() != 1:
        raise ValueError(f"{name} must be 1-D, got shape {list(ids.shape)}")
    ids = ids.to(device=device, dtype=torch.int64).contiguous()
    if ids.numel():
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= num_nodes:
            bad = low if low < 0 else high
            raise ValueError(f"{name} holds node id {bad}, outside the graph's 0..{num_nodes - 1}")
    return ids


def segment_arange(counts: Tensor) -> tuple[Tensor, Tensor]:
    """``(row, offset)`` for every slot of segments of lengths ``counts``, segment after segment:
    ``counts = [2, 0, 3]`` gives rows ``[0, 0, 2, 2, 2]`` and offsets ``[0, 1, 0, 1, 2]``."""
    total = int(counts.sum())
    row = torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device), counts, output_size=total)
    offset = torch.arange(total, device=counts.device) - (torch.cumsum(counts, 0) - counts)[row]
    return row, offset


def csr_ranges(ptr: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
    """``(counts, positions)``: every CSR position of ``rows``, row after row."""
    start = ptr[rows]
    counts = ptr[rows + 1] - start
    row, offset = segment_arange(counts)
    return counts, start[row] + offset


def relabel_sorted(frontier: Tensor, sources: Tensor) -> tuple[Tensor, Tensor]:
    """``(local ids of sources, new nodes)``: the ``F`` distinct ``frontier`` nodes keep local ids
    ``0..F-1``; sources not in it get ``F, F+1, ...`` in order of first appearance (the
    single-machine sampler's numbering, computed by sorting instead of a scratch array)."""
    ids = torch.cat([frontier, sources])
    unique, inverse = torch.unique(ids, return_inverse=True)
    first = torch.full((unique.numel(),), ids.numel(), dtype=torch.int64)
    first.scatter_reduce_(0, inverse, torch.arange(ids.numel()), "amin")
    order = torch.argsort(first)                          # first appearances are distinct: no ties
    local_of_unique = torch.empty_like(order)
    local_of_unique[order] = torch.arange(order.numel())
    return local_of_unique[inverse[frontier.numel():]], unique[order[frontier.numel():]]
