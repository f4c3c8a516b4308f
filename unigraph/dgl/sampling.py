r"""``dgl.sampling`` under DGL's names: the random walks of :mod:`unigraph.dgl.random_walks`
(``random_walk``, ``node2vec_random_walk``, ``pack_traces``), the neighbour samplers of
:mod:`unigraph.dgl.neighbor_sampling` (``sample_neighbors``, ``sample_neighbors_fused``,
``sample_etype_neighbors``, ``sample_neighbors_biased``, ``select_topk``), the negative sampler of
:mod:`unigraph.dgl.negative_sampling` (``global_uniform_negative_sampling``) and the random-walk
neighbourhoods of :mod:`unigraph.dgl.pinsage_sampling` (``RandomWalkNeighborSampler``,
``PinSAGESampler``) and LABOR-0 sampling of :mod:`unigraph.dgl.labor_sampling` (``sample_labors``).
"""
from __future__ import annotations

from unigraph.dgl.labor_sampling import sample_labors
from unigraph.dgl.negative_sampling import global_uniform_negative_sampling
from unigraph.dgl.neighbor_sampling import (
    sample_etype_neighbors, sample_neighbors, sample_neighbors_biased, sample_neighbors_fused, select_topk)
from unigraph.dgl.pinsage_sampling import PinSAGESampler, RandomWalkNeighborSampler
from unigraph.dgl.random_walks import node2vec_random_walk, pack_traces, random_walk

__all__ = ["random_walk", "node2vec_random_walk", "pack_traces", "sample_neighbors", "sample_neighbors_fused",
           "sample_etype_neighbors", "sample_neighbors_biased", "select_topk", "global_uniform_negative_sampling",
           "RandomWalkNeighborSampler", "PinSAGESampler", "sample_labors"]


def __getattr__(name: str):
    raise AttributeError(f"module 'unigraph.dgl.sampling' has no attribute {name!r} (it offers {__all__})")
