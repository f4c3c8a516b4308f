"""What every DGL layer does with its inputs before computing: the graph check, the zero-in-degree
check, and DGL's ``expand_as_pair`` (one feature tensor, or a source/destination pair); the dense
layers' adjacency check."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.dgl.base import DGLError
from unigraph.dgl.heterograph import one_relation
from unigraph.graph import Graph as CoreGraph


def check_graph(graph: Any, layer: str) -> CoreGraph:
    return one_relation(graph, layer)


def check_zero_in_degree(graph: CoreGraph, layer: str, allowed: bool) -> None:
    """DGL's refusal of destinations without in-edges (their output would be only the bias)."""
    if not allowed and graph.num_dst_nodes and bool((graph.in_degrees() == 0).any()):
        raise DGLError(f"{layer}: there are 0-in-degree nodes in the graph; their output would be invalid. Add "
                       "self-loops (dgl.add_self_loop) or pass allow_zero_in_degree=True")


def expand_as_pair(feat: Any, graph: CoreGraph) -> tuple[Tensor, Tensor]:
    """``(source features, destination features)``: a pair as given; one tensor for both sides,
    cut to the first ``num_dst_nodes`` rows on a block (destinations come first among sources)."""
    if isinstance(feat, tuple):
        return feat[0], feat[1]
    if graph.is_bipartite and getattr(graph, "is_block", True):
        return feat, feat[: graph.num_dst_nodes]
    return feat, feat


def dense_adjacency(adj: Any, feat: Tensor, layer: str, square: bool = False) -> Tensor:
    """A dense layer's adjacency ``[N_dst, N_src]`` (row = destination, as DGL's dense layers read
    it: ``g.adj_external(transpose=True).to_dense()``), checked against the source features'
    rows and cast to their dtype and device."""
    if not isinstance(adj, Tensor) or adj.layout != torch.strided or adj.dim() != 2:
        what = f"a {adj.layout} tensor" if isinstance(adj, Tensor) and adj.layout != torch.strided else (
            f"shape {list(adj.shape)}" if isinstance(adj, Tensor) else type(adj).__name__)
        raise DGLError(f"{layer} takes a dense 2-D adjacency [N_dst, N_src] (e.g. "
                       f"g.adj_external(transpose=True).to_dense()), got {what}")
    if adj.shape[1] != feat.shape[0] or (square and adj.shape[0] != adj.shape[1]):
        need = "a square adjacency" if square else "adj.shape[1] == feat.shape[0]"
        raise DGLError(f"{layer}: adjacency of shape {list(adj.shape)} and features of {feat.shape[0]} rows: "
                       f"needs {need} (rows are destinations, columns sources)")
    return adj.to(feat)
