"""Heterogeneous graphs: typed nodes, canonical relations, relation-wise layers and typed sampling.

* :class:`HeteroGraph` - node types with their counts, relations ``(src_type, name, dst_type)``
  each holding a validated :class:`~unigraph.Graph`, per-type and per-relation features;
  conversions to and from PyG ``HeteroData`` and DGL heterographs, and to one homogeneous graph.
* :class:`TypedLinear`, :func:`segment_matmul` - per-type projections as one grouped product.
* :class:`HeteroNeighborSampler` - per-relation fanouts into typed blocks (:class:`HeteroBlocks`).

The heterogeneous layers live in :mod:`unigraph.nn` (they build on this package):
:class:`~unigraph.nn.HeteroConv` (any unigraph layer per relation, combined per destination type),
and the relation-wise :class:`~unigraph.nn.RGCNConv` and :class:`~unigraph.nn.HGTConv`, which run
every relation at once on the ordinary graph operators (:mod:`unigraph.hetero.relational`). See
``docs/hetero.md``.
"""
from unigraph.hetero.graph import HeteroGraph, Relation
from unigraph.hetero.grouped import block_segment_matmul, segment_matmul
from unigraph.hetero.homogeneous import EDGE_TYPE, NODE_TYPE, to_homogeneous
from unigraph.hetero.linear import TypedLinear
from unigraph.hetero.sampling import HeteroBlocks, HeteroNeighborSampler

from_homogeneous = HeteroGraph.from_homogeneous  # the function form (homogeneous.py takes the class)

__all__ = ["HeteroGraph", "Relation", "TypedLinear", "segment_matmul", "block_segment_matmul",
           "HeteroNeighborSampler", "HeteroBlocks", "to_homogeneous", "from_homogeneous", "NODE_TYPE", "EDGE_TYPE"]
