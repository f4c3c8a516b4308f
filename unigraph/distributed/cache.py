"""The halo feature cache: which remote feature rows a machine keeps, and looking them up.

**What to keep.** A trainer's batches read the features of every node the sampler reaches from
its seeds; the remote ones cost a request each. The cache keeps the ``size`` halo nodes the
machine's seeds are *expected to read most often* per epoch, computed from the fanouts over the
machine's own structure (its in-edges and its halo's, :mod:`unigraph.distributed.local`). With
``c_0`` = 1 on every seed, hop ``h`` (fanout ``f``, every node found so far sampled again, as
the sampler does) adds to every in-neighbour ``u`` of a row ``w``::

    c_{h+1}(u) = c_h(u) + sum over in-edges u -> w of  c_h(w) * min(1, f / in_degree(w))

(each of ``w``'s in-edges is drawn with probability ``min(1, f / degree)``). ``c_L`` after the
last hop counts the expected reads of each node (paths are counted, so a node reached twice in a
batch counts twice: a ranking, not a forecast). Only halo nodes are candidates: the machine knows
their in-edges, so for two layers the count is exact in this sense; a deeper model's later hops
stop at the halo. Measured on a 100k-node planted-partition graph (4 METIS parts, fanouts
[10, 5]): with as many rows cached as the part owns, 44% of the remote reads were served by a
cache ranked by edges into the part, 42% by out-degree, and 50% by a ranking measured from 8
sampled epochs, which this formula computes without sampling.

**Lookup.** :class:`FeatureCache` holds the cached ids (sorted) and their rows; a lookup is a
binary search. The cache is filled once, at start, and never changes: features do not change
during training. What it is keyed on: the node id alone (the rows are the owner's rows at start).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from unigraph.distributed.local import LocalPartition
from unigraph.sampling.csr_view import csr_ranges

CHUNK_EDGES = 1 << 22  # in-edges handled at once while counting (bounds the counting's memory)


def expected_reads(local: LocalPartition, seeds: Tensor, fanouts: Sequence[int]) -> Tensor:
    """Expected reads per epoch of every halo node (float64 ``[num_halo]``, in ``halo_ids`` order)
    by a sampler with ``fanouts`` (layer order) from ``seeds`` (owned global ids); see the module
    docstring."""
    n, rows = local.num_owned, local.num_owned + local.num_halo
    degree = (local.indptr[1:] - local.indptr[:-1]).to(torch.float64)
    count = torch.zeros(rows, dtype=torch.float64)
    count[local.rows(seeds)] = 1.0
    for fanout in reversed(list(fanouts)):
        take = torch.where(degree > 0, count * (fanout / degree.clamp(min=1)).clamp(max=1.0), 0.0)
        reached = torch.zeros(rows, dtype=torch.float64)
        active = torch.nonzero(take > 0).squeeze(1)
        for chunk in _chunks(active, degree):
            counts, positions = csr_ranges(local.indptr, chunk)
            sources = local.halo_rows(local.indices[positions].to(torch.int64))
            weight = take[chunk].repeat_interleave(counts)
            known = sources >= 0
            reached.index_add_(0, sources[known], weight[known])
        count += reached
    return count[n:]


def _chunks(active: Tensor, degree: Tensor) -> list[Tensor]:
    """``active`` rows cut into runs of about :data:`CHUNK_EDGES` in-edges."""
    if not active.numel():
        return []
    edges = torch.cumsum(degree[active], 0)
    pieces = int(edges[-1]) // CHUNK_EDGES + 1
    cuts = torch.searchsorted(edges, torch.arange(1, pieces, dtype=torch.float64) * CHUNK_EDGES)
    return [piece for piece in torch.tensor_split(active, cuts.tolist()) if piece.numel()]


def choose(local: LocalPartition, seeds: Tensor, fanouts: Sequence[int], size: int) -> Tensor:
    """The (sorted) ids of the ``size`` halo nodes of most expected reads (fewer if fewer are ever read)."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"the cache size must be an int >= 0 (remote rows per machine), got {size!r}")
    score = expected_reads(local, seeds, fanouts)
    order = torch.sort(score, descending=True, stable=True).indices[:size]
    order = order[score[order] > 0]
    return torch.sort(local.halo_ids[order]).values


class FeatureCache:
    """Feature rows of remote nodes: ``ids`` (sorted, distinct) and ``rows`` (one per id)."""

    def __init__(self, ids: Tensor, rows: Tensor):
        if ids.dim() != 1 or rows.dim() != 2 or rows.shape[0] != ids.numel():
            raise ValueError(f"a cache needs 1-D ids and one row per id, got ids {list(ids.shape)} and rows "
                             f"{list(rows.shape)}")
        self.ids, self.rows = ids, rows

    def __len__(self) -> int:
        return self.ids.numel()

    def slots(self, ids: Tensor) -> Tensor:
        """The cache row of each id, -1 where it is not cached."""
        if not self.ids.numel():
            return torch.full_like(ids, -1)
        slot = torch.searchsorted(self.ids, ids).clamp_max(self.ids.numel() - 1)
        return torch.where(self.ids[slot] == ids, slot, -1)
