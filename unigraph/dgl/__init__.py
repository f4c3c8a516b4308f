"""DGL's API on unigraph: ``import unigraph.dgl as dgl`` and a DGL script runs on unigraph's
graphs, operators and kernels (no call reaches the real DGL).

This package is the top of unigraph's layering: it imports the core graph, the ops, message
passing, samplers and layers, and nothing in unigraph imports it (tests/test_import_layers.py).

* graphs: :func:`graph`, :func:`heterograph`, :func:`create_block`, :class:`DGLGraph` (one
  relation; a :class:`unigraph.Graph`), :class:`DGLHeteroGraph` (several), conversions
  (:func:`from_scipy`, :func:`from_networkx`, :func:`to_homogeneous`, ...), transforms
  (:func:`add_self_loop`, :func:`to_block`, :func:`batch`, :func:`merge`, ...) and their module
  forms (:mod:`~unigraph.dgl.transforms`: ``AddSelfLoop``, ``Compose``, ``DropEdge``, ``GCNNorm``, ...),
  ``NID``/``EID``/``ALL``;
* :mod:`~unigraph.dgl.function`, :mod:`~unigraph.dgl.ops`, :mod:`~unigraph.dgl.nn`,
  :mod:`~unigraph.dgl.sampling`, :mod:`~unigraph.dgl.geometry`, :mod:`~unigraph.dgl.dataloading`,
  :mod:`~unigraph.dgl.data`, :mod:`~unigraph.dgl.init`.

What differs from DGL is listed in docs/porting_from_dgl.md.
"""
import random as _random

import numpy as _np
import torch as _torch

from unigraph.dgl import base, function, init, ops
from unigraph.dgl.base import ALL, EID, ETYPE, NID, NTYPE, DGLError, DGLWarning, is_internal_column
from unigraph.dgl.convert import (
    bipartite_from_scipy, create_block, from_networkx, from_scipy, graph, heterograph, rand_bipartite, rand_graph,
    to_heterogeneous, to_homogeneous)
from unigraph.dgl.graph import DGLGraph
from unigraph.dgl.convert import bipartite_from_networkx, block_to_graph, to_networkx
from unigraph.dgl.heterograph import DGLHeteroGraph
from unigraph.dgl.merge import merge
from unigraph.dgl.positional import LapPE, lap_pe, shortest_dist
from unigraph.dgl.readout import (
    broadcast_edges, broadcast_nodes, max_edges, max_nodes, mean_edges, mean_nodes, readout_edges, readout_nodes,
    softmax_edges, softmax_nodes, sum_edges, sum_nodes, topk_edges, topk_nodes)
from unigraph.dgl.neighbor_sampling import sort_csc_by_tag, sort_csr_by_tag
from unigraph.dgl.propagate import prop_edges, prop_edges_dfs, prop_nodes, prop_nodes_bfs, prop_nodes_topo
from unigraph.dgl.reorder import reorder_graph
from unigraph.dgl.subgraph import edge_type_subgraph, khop_in_subgraph, khop_out_subgraph, node_type_subgraph
from unigraph.dgl.augment_transforms import (
    AddEdge, DropEdge, DropNode, FeatMask, NodeShuffle, RandomWalkPE, RowFeatNormalizer, SVDPE, ToLevi, random_walk_pe,
    svd_pe)
from unigraph.dgl.diffusion_transforms import GCNNorm, GDC, HeatKernel, PPR, SIGNDiffusion
from unigraph.dgl.structure_transforms import (
    AddMetaPaths, KHopGraph, LineGraph, RemoveSelfLoop, ToSimple, compact_graphs, khop_adj, khop_graph,
    laplacian_lambda_max, line_graph, norm_by_dst)
from unigraph.dgl.transform_base import BaseTransform, Compose
from unigraph.dgl.traversal import (
    bfs_edges_generator, bfs_nodes_generator, dfs_edges_generator, dfs_labeled_edges_generator,
    topological_nodes_generator)
from unigraph.dgl.transforms import (
    AddReverse, AddSelfLoop, add_edges, add_nodes, add_reverse_edges, add_self_loop, batch, edge_subgraph,
    in_subgraph, metapath_reachable_graph, node_subgraph, out_subgraph, remove_edges, remove_nodes,
    remove_self_loop, reverse, slice_batch, to_bfloat16, to_bidirected, to_block, to_double, to_float, to_half,
    to_simple, unbatch)


def seed(val: int) -> None:
    """Seed every generator the graph functions draw from (Python's, numpy's, torch's)."""
    _random.seed(val)
    _np.random.seed(val)
    _torch.manual_seed(val)


def __getattr__(name: str):
    # the heavier sub-packages load on first use, as `import dgl` does not build every layer either
    if name in ("nn", "dataloading", "data", "sampling", "utils"):
        import importlib
        return importlib.import_module(f"unigraph.dgl.{name}")
    if name in ("knn_graph", "segmented_knn_graph", "radius_graph"):   # (they live with their modules, in nn)
        from unigraph.dgl.nn.pytorch import factory
        return getattr(factory, name)
    raise AttributeError(f"module 'unigraph.dgl' has no attribute {name!r} (see docs/porting_from_dgl.md for what "
                         "unigraph.dgl offers)")
