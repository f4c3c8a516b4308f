"""Induced subgraphs, shared by the Cluster-GCN and GraphSAINT samplers."""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.user_graph import Graph
from unigraph.sampling.batch import block_from_csr
from unigraph.sampling.csr_view import InCSR, csr_ranges


def induced_subgraph(csr: InCSR, nodes: Tensor) -> Graph:
    """The subgraph of every edge whose two endpoints are in ``nodes`` (distinct ids), over local
    ids (node ``i`` is ``nodes[i]``), original edge ids in ``edata["eid"]``.

    Vectorized: gather the in-edges of ``nodes``, keep those whose source is in the set (an
    ``N``-entry lookup table), and count the kept edges per row for the in-CSR: ``O(N + in-edges
    of nodes)``.
    """
    local = torch.full((csr.num_nodes,), -1, dtype=torch.int64, device=nodes.device)
    local[nodes] = torch.arange(nodes.numel(), device=nodes.device)
    counts, positions = csr_ranges(csr.ptr, nodes)
    local_src = local[csr.indices[positions]]
    keep = local_src >= 0
    zero = torch.zeros(1, dtype=torch.int64, device=nodes.device)
    kept_before = torch.cat([zero, torch.cumsum(keep, 0)])          # kept edges before each position
    indptr = kept_before[torch.cat([zero, torch.cumsum(counts, 0)])]  # ... at each row's start
    return block_from_csr(indptr, local_src[keep], nodes.numel(), csr.eids[positions[keep]], bipartite=False)
