"""What every DGL layer does with its inputs before computing: the graph check, the zero-in-degree
check, and DGL's ``expand_as_pair`` (one feature tensor, or a source/destination pair)."""
from __future__ import annotations

from typing import Any

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
