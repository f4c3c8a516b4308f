"""The two steps of one neighbour-sampling hop, vectorized in torch (any device).

``sample_layer`` picks the in-edges to keep for every frontier node; ``relabel`` gives the new
source nodes consecutive local ids. ``unigraph.kernels.sampling`` holds numba versions of both
that return bit-identical results (same counter-based draws, same order), faster on the CPU.

Sampling without replacement is Robert Floyd's algorithm (Bentley & Floyd, CACM 1987): to draw
``k`` distinct offsets from ``0..d-1``, for ``j = d-k, ..., d-1`` draw ``t`` uniformly from
``0..j`` and keep ``t``, or ``j`` if ``t`` was kept already. It yields a uniformly random
``k``-subset in ``k`` draws whatever the degree, so a hub costs no more than any other node.
Here all rows that need it run the algorithm at once: step ``s`` is one vector operation over
the rows (the membership test compares against the ``s`` offsets kept so far).
"""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.sampling.batch import block_from_csr
from unigraph.sampling.counter_rng import row_keys, uniform
from unigraph.sampling.csr_view import segment_arange


def _draw_offsets(keys: Tensor, degree: Tensor, fanout: int, replace: bool) -> Tensor:
    """``[rows, fanout]`` offsets into each row's in-edges (distinct unless ``replace``)."""
    offsets = torch.empty(keys.numel(), fanout, dtype=torch.int64, device=keys.device)
    for step in range(fanout):
        u = uniform(keys, step)
        if replace:
            offsets[:, step] = (u * degree.to(torch.float64)).to(torch.int64)
            continue
        j = degree - fanout + step
        t = (u * (j + 1).to(torch.float64)).to(torch.int64)
        if step:
            t = torch.where((offsets[:, :step] == t.unsqueeze(1)).any(dim=1), j, t)
        offsets[:, step] = t
    return offsets


def sample_layer(ptr: Tensor, frontier: Tensor, fanout: int, replace: bool, key: int) -> tuple[Tensor, Tensor]:
    """Choose in-edges of every ``frontier`` node.

    Returns ``(counts, positions)``: ``counts[i]`` edges are kept for ``frontier[i]``
    (``min(fanout, degree)`` without replacement; ``fanout``, or 0 for an isolated node, with),
    and ``positions`` are their positions in the in-CSR, grouped by frontier node. Rows that keep
    all their edges keep them in CSR order; sampled rows in the order of their draws.
    """
    return sample_rows(ptr, frontier, frontier, fanout, replace, key)


def sample_rows(ptr: Tensor, frontier: Tensor, key_ids: Tensor, fanout: int, replace: bool,
                key: int) -> tuple[Tensor, Tensor]:
    """:func:`sample_layer` with row ``frontier[i]`` drawn under the id ``key_ids[i]``: a CSR that
    holds other ids' rows (a partition's) draws exactly what the whole graph's CSR draws."""
    start = ptr[frontier]
    degree = ptr[frontier + 1] - start
    if replace:
        counts = torch.where(degree > 0, fanout, 0)
    else:
        counts = degree.clamp(max=fanout)
    row_of_slot, offsets = segment_arange(counts)
    drawn = degree > 0 if replace else degree > fanout
    if bool(drawn.any()):
        # drawn rows have exactly `fanout` slots each, row after row: their draws fill them in order
        draws = _draw_offsets(row_keys(key, key_ids[drawn]), degree[drawn], fanout, replace)
        offsets[drawn[row_of_slot]] = draws.reshape(-1)
    return counts, start[row_of_slot] + offsets


def relabel(neighbours: Tensor, local_id: Tensor, num_known: int) -> tuple[Tensor, Tensor]:
    """Local ids for ``neighbours`` (global ids); nodes not seen before get ``num_known, ...`` in
    the order of their first occurrence.

    ``local_id`` is a scratch array over all nodes of the graph: -1 for a node not yet in the
    batch, else its local id; it is updated in place. Returns ``(local ids of neighbours, the new
    nodes in order)``.
    """
    unseen = local_id[neighbours] < 0
    candidates = neighbours[unseen]
    # the first occurrence of each unseen node: the largest value -(2 + slot) is the smallest slot
    tag = -2 - torch.nonzero(unseen).squeeze(1)
    local_id.scatter_reduce_(0, candidates, tag, "amax", include_self=False)
    new_nodes = candidates[local_id[candidates] == tag]
    local_id[new_nodes] = torch.arange(num_known, num_known + new_nodes.numel(), device=neighbours.device)
    return local_id[neighbours], new_nodes


def sample_hop(ptr: Tensor, indices: Tensor, frontier: Tensor, fanout: int, replace: bool, key: int,
               local_id: Tensor, num_known: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One hop: sample (:func:`sample_layer`), then relabel the sources (:func:`relabel`).

    Returns ``(indptr, local_sources, positions, new_nodes)``: the block's in-CSR over local ids
    (one row per frontier node), the CSR positions of its edges and the nodes it adds.
    """
    counts, positions = sample_layer(ptr, frontier, fanout, replace, key)
    local, new_nodes = relabel(indices[positions], local_id, num_known)
    indptr = torch.zeros(frontier.numel() + 1, dtype=torch.int64, device=frontier.device)
    torch.cumsum(counts, 0, out=indptr[1:])
    return indptr, local, positions, new_nodes


def sample_hops(ptr: Tensor, indices: Tensor, eids: Tensor, seeds: Tensor, fanouts: list[int], replace: bool,
                keys: list[int], local_id: Tensor, return_eids: bool, num_threads: int | None = None
                ) -> tuple[Tensor, list[Graph]]:
    """Every hop from the (marked) seeds outwards: ``(input_nodes, blocks in hop order)``.
    Hop ``h`` samples ``fanouts[h]`` in-edges of every node found so far with key ``keys[h]``.
    (``num_threads`` is the numba path's; torch ops use torch's own thread setting.)"""
    nodes = [seeds]
    blocks = []
    for fanout, key in zip(fanouts, keys):
        frontier = torch.cat(nodes) if len(nodes) > 1 else seeds
        indptr, local, positions, new_nodes = sample_hop(ptr, indices, frontier, fanout, replace, key,
                                                         local_id, frontier.numel())
        nodes.append(new_nodes)
        blocks.append(block_from_csr(indptr, local, frontier.numel() + new_nodes.numel(),
                                     eids[positions] if return_eids else None))
    return torch.cat(nodes), blocks


def mark_seeds(local_id: Tensor, seeds: Tensor) -> bool:
    """Give the seeds local ids ``0..S-1`` in ``local_id``; False (and nothing marked) if some
    seed appears twice."""
    order = torch.arange(seeds.numel(), device=seeds.device)
    local_id[seeds] = order
    if bool((local_id[seeds] == order).all()):
        return True
    local_id[seeds] = -1
    return False


def unmark(local_id: Tensor, nodes: Tensor) -> None:
    """Reset the scratch entries of a finished batch to -1."""
    local_id[nodes] = -1
