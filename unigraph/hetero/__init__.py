"""Heterogeneous graphs: typed nodes and canonical relations.

* :class:`HeteroGraph` - node types with their counts, relations ``(src_type, name, dst_type)``
  each holding a validated :class:`~unigraph.Graph`, per-type and per-relation features;
  conversions to and from PyG ``HeteroData`` and DGL heterographs, and to one homogeneous graph.
"""
from unigraph.hetero.graph import HeteroGraph, Relation
from unigraph.hetero.homogeneous import EDGE_TYPE, NODE_TYPE, from_homogeneous, to_homogeneous

__all__ = ["HeteroGraph", "Relation", "to_homogeneous", "from_homogeneous", "NODE_TYPE", "EDGE_TYPE"]
