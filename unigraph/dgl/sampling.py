r"""``dgl.sampling`` under DGL's names: the random walks of :mod:`unigraph.dgl.random_walks`
(``random_walk``, ``node2vec_random_walk``, ``pack_traces``), the neighbour samplers of
:mod:`unigraph.dgl.neighbor_sampling` (``sample_neighbors``, ``sample_neighbors_fused``,
``sample_etype_neighbors``, ``sample_neighbors_biased``, ``select_topk``), the negative sampler of
:mod:`unigraph.dgl.negative_sampling` (``global_uniform_negative_sampling``) and the random-walk
neighbourhoods of :mod:`unigraph.dgl.pinsage_sampling` (``RandomWalkNeighborSampler``,
``PinSAGESampler``). DGL's ``sample_labors`` (LABOR sampling) is not offered: it raises
NotImplementedError when called (see :data:`NOT_OFFERED`).
"""
from __future__ import annotations

from unigraph.dgl.negative_sampling import global_uniform_negative_sampling
from unigraph.dgl.neighbor_sampling import (
    sample_etype_neighbors, sample_neighbors, sample_neighbors_biased, sample_neighbors_fused, select_topk)
from unigraph.dgl.pinsage_sampling import PinSAGESampler, RandomWalkNeighborSampler
from unigraph.dgl.random_walks import node2vec_random_walk, pack_traces, random_walk

__all__ = ["random_walk", "node2vec_random_walk", "pack_traces", "sample_neighbors", "sample_neighbors_fused",
           "sample_etype_neighbors", "sample_neighbors_biased", "select_topk", "global_uniform_negative_sampling",
           "RandomWalkNeighborSampler", "PinSAGESampler"]

# DGL 2.1's dgl.sampling names that unigraph.dgl does not offer (yet): using one raises by name
NOT_OFFERED = ("sample_labors",)


def __getattr__(name: str):
    if name in NOT_OFFERED:
        def not_offered(*args, **kwargs):
            raise NotImplementedError(f"unigraph.dgl.sampling has no {name} (it offers {__all__}; node-wise "
                                      "mini-batches: unigraph.dgl.dataloading.NeighborSampler)")
        not_offered.__name__ = not_offered.__qualname__ = name
        return not_offered
    raise AttributeError(f"module 'unigraph.dgl.sampling' has no attribute {name!r}")
