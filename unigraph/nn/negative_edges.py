"""Uniform negative edges, PyG's ``negative_sampling`` contract, vectorised: per graph of a batch
up to the asked number of distinct node pairs that are not edges (neither direction where asked),
no self-loops, drawn from torch's generator. Used by SuperGATConv's attention loss and the
autoencoders' and SignedGCN's losses; the draws are not PyG's draws."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def check_edge_index(edge_index: Any, num_nodes: int, who: str, name: str = "edge_index") -> Tensor:
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.shape[0] != 2 \
            or edge_index.is_floating_point() or edge_index.dtype == torch.bool:
        got = f"shape {list(edge_index.shape)}, {edge_index.dtype}" if isinstance(edge_index, Tensor) \
            else type(edge_index).__name__
        raise ValueError(f"{who} expects {name} as a [2, E] integer tensor, got {got}")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise ValueError(f"{who}: {name} holds node ids outside [0, {num_nodes})")
    return edge_index.long()


def _graphs_of(batch: Tensor | None, num_nodes: int, device: torch.device, who: str) -> tuple[Tensor, Tensor, Tensor]:
    """``(graph of each node, node count, first node)`` per graph; one graph without ``batch``."""
    if batch is None:
        return (torch.zeros(num_nodes, dtype=torch.long, device=device),
                torch.tensor([num_nodes], device=device), torch.zeros(1, dtype=torch.long, device=device))
    if not isinstance(batch, Tensor) or batch.dim() != 1 or batch.is_floating_point() or batch.shape[0] != num_nodes:
        raise ValueError(f"{who} expects batch as a [num_nodes={num_nodes}] integer tensor, got "
                         f"{list(batch.shape) if isinstance(batch, Tensor) else type(batch).__name__}")
    batch = batch.long()
    if batch.numel() and (int(batch.min()) < 0 or bool((batch[1:] < batch[:-1]).any())):
        raise ValueError(f"{who} expects batch sorted (each graph's nodes contiguous, graph ids from 0)")
    counts = torch.bincount(batch, minlength=1)
    return batch, counts, counts.cumsum(0) - counts


def _distinct_ranks(available: Tensor, wanted: Tensor) -> tuple[Tensor, Tensor]:
    """``(group, rank)``: ``wanted[b]`` distinct ranks drawn uniformly from ``[0, available[b])`` for
    every group ``b`` (``wanted <= available / 2`` keeps each draw new with probability >= 1/2).
    Draws with replacement, keeps the distinct values, draws again for the groups still short
    (rounds, not a loop over values), then takes a uniform ``wanted[b]`` of each group's values:
    a uniformly random subset, as every value of a group is equally likely to be kept."""
    groups = torch.arange(available.numel(), device=available.device)
    start = available.cumsum(0) - available                    # the groups' ranks side by side: group + rank in one key
    keys = available.new_empty(0)
    count = torch.zeros_like(available)
    while bool((count < wanted).any()):
        short = (wanted - count).clamp(min=0)
        draws = torch.where(short > 0, 2 * short + 8, 0)
        group = groups.repeat_interleave(draws)
        rank = torch.randint(0, 2 ** 62, (group.numel(),), device=available.device) % available[group]
        keys = torch.unique(torch.cat([keys, start[group] + rank]))
        count = torch.bincount(torch.searchsorted(start, keys, right=True) - 1, minlength=available.numel())
    group = torch.searchsorted(start, keys, right=True) - 1
    keep = _first_per_group(group, wanted)
    return group[keep], keys[keep] - start[group[keep]]


def _grouped_shuffle(group: Tensor) -> Tensor:
    """A permutation that sorts ``group`` ascending, in random order within each group."""
    order = torch.randperm(group.numel(), device=group.device)
    return order[torch.sort(group[order], stable=True).indices]


def _first_per_group(group: Tensor, wanted: Tensor) -> Tensor:
    """Positions of ``wanted[b]`` entries of each group ``b``, chosen uniformly at random."""
    order = _grouped_shuffle(group)
    sorted_group = group[order]
    within = torch.arange(group.numel(), device=group.device) - torch.searchsorted(sorted_group, sorted_group)
    return order[within < wanted[sorted_group]]


def negative_edges(edge_index: Tensor, num_nodes: int, num_samples: int, batch: Tensor | None = None,
                   symmetric: bool = True, who: str = "negative_edges") -> Tensor:
    """``[2, K]`` node pairs that are not edges: per graph (``batch``; one graph without it),
    ``min(num_samples, available)`` distinct pairs ``(i, j)``, ``i != j``, drawn uniformly from
    that graph's pairs that are not in ``edge_index`` (nor reversed when ``symmetric``), in random
    order, graph after graph. Every draw comes from torch's generator (``torch.manual_seed``
    repeats it). The pairs of a graph with ``n`` nodes are numbered ``0 .. n(n-1)-1`` skipping
    the diagonal, the graphs' numbers side by side; the ``r``-th non-edge is ``r`` plus the number
    of edges numbered before it, found by a binary search over the sorted edge numbers, so
    nothing of size ``n^2`` is built."""
    device = edge_index.device
    node_graph, counts, first = _graphs_of(batch, num_nodes, device, who)
    pairs = counts * (counts - 1)
    base = pairs.cumsum(0) - pairs
    src, dst = edge_index[0], edge_index[1]
    if bool((node_graph[src] != node_graph[dst]).any()):
        raise ValueError(f"{who}: edge_index has edges between different graphs of batch")
    keep = src != dst
    src, dst = src[keep], dst[keep]
    if symmetric:
        src, dst = torch.cat([src, dst]), torch.cat([dst, src])
    graph = node_graph[src]
    row, col = src - first[graph], dst - first[graph]
    positives = torch.unique(base[graph] + row * (counts[graph] - 1) + col - (col > row).long())
    taken = torch.bincount(torch.searchsorted(base, positives, right=True) - 1, minlength=counts.numel())
    available = pairs - taken
    offset = available.cumsum(0) - available                  # each graph's non-edges, numbered side by side
    wanted = available.clamp(max=max(int(num_samples), 0))
    # draw the smaller side: the chosen ranks, or (more than half wanted) the ranks left out
    complement = wanted > available - wanted
    group, rank = _distinct_ranks(available, torch.where(complement, available - wanted, wanted))
    if bool(complement.any()):   # those graphs: every rank but the drawn ones
        dropped = complement[group]
        sizes = torch.where(complement, available, 0)
        every_group = torch.arange(counts.numel(), device=device).repeat_interleave(sizes)
        every_rank = torch.arange(every_group.numel(), device=device) - (sizes.cumsum(0) - sizes)[every_group]
        left_out = torch.isin(offset[every_group] + every_rank, offset[group[dropped]] + rank[dropped])
        group = torch.cat([group[~dropped], every_group[~left_out]])
        rank = torch.cat([rank[~dropped], every_rank[~left_out]])
    # rank among the non-edges -> pair number (skipping the edges numbered before it) -> (i, j)
    shift = positives - torch.arange(positives.numel(), device=device)
    global_rank = offset[group] + rank
    number = global_rank + torch.searchsorted(shift, global_rank, right=True) - base[group]
    span = (counts[group] - 1).clamp(min=1)
    row, col = number // span, number % span
    col = col + (col >= row).long()
    pairs_out = torch.stack([row + first[group], col + first[group]])
    return pairs_out[:, _grouped_shuffle(group)]
