"""What the DGL layers share: the checks of their inputs before computing (the graph, zero
in-degrees, feature widths, scalar edge weights, one node set for the multi-hop layers, a dense
adjacency), DGL's ``expand_as_pair`` (one feature tensor, or a source/destination pair) and feature
dropout before it, and the propagation layers' one weighted hop and ``d^{-1/2}`` scaling."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from unigraph import ops
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


def check_edge_weight(graph, edge_weight: Any, layer: str) -> None:
    """One scalar weight per edge (DGL's normalisation is only defined for scalar weights)."""
    if not isinstance(edge_weight, Tensor):
        raise TypeError(f"{layer}: edge_weight must be a tensor, got {type(edge_weight).__name__}")
    if edge_weight.dim() != 1 or edge_weight.shape[0] != graph.num_edges:
        raise DGLError(f"{layer}: edge_weight must hold one scalar weight per edge, shape ({graph.num_edges},); "
                       f"got {tuple(edge_weight.shape)}")
    if not edge_weight.is_floating_point():
        raise TypeError(f"{layer}: edge_weight must be a floating-point tensor, got {edge_weight.dtype}")


def check_homogeneous(graph, feat: Any, layer: str, min_dim: int = 2, max_dim: int | None = None):
    """The graph (one node set: these layers propagate several hops, so a block or a bipartite
    graph is refused, as DGL's own layers fail on them) and ``feat`` ``[N, ...]`` for it."""
    graph = check_graph(graph, layer)
    if graph.is_bipartite:
        raise DGLError(f"{layer} needs a graph with one node set (it propagates over several hops); got a block or "
                       "a bipartite graph")
    if not isinstance(feat, Tensor):
        raise TypeError(f"{layer} takes one node feature tensor, got {type(feat).__name__} (a (src, dst) pair is "
                        "not supported, as in DGL)")
    if feat.dim() < min_dim or (max_dim is not None and feat.dim() > max_dim) or feat.shape[0] != graph.num_nodes:
        dims = f"{min_dim}" if max_dim == min_dim else f"at least {min_dim}"
        raise DGLError(f"{layer}: node features must have {dims} dimensions and one row per node "
                       f"({graph.num_nodes}); got shape {tuple(feat.shape)}")
    return graph


def inv_sqrt_degree(degrees: Tensor, feat: Tensor) -> Tensor:
    """``max(d, 1)^{-1/2}`` as a column broadcasting over ``feat``'s feature dimensions."""
    scale = degrees.to(feat).clamp(min=1).pow(-0.5)
    return scale.view(-1, *([1] * (feat.dim() - 1)))


def aggregate(graph, feat: Tensor, edge_weight: Tensor | None) -> Tensor:
    """``sum_{j -> i} (e_{ji}) h_j``: one hop of message passing, weighted where weights are given."""
    if edge_weight is None:
        return ops.gspmm(graph, "copy_u", "sum", feat)
    return ops.gspmm(graph, "u_mul_e", "sum", feat, edge_weight)


def check_feature_widths(layer: str, h_src: Tensor, h_dst: Tensor, in_src: int, in_dst: int) -> None:
    """A clear error, before any compute, when node features are not tensors of the widths the
    layer was built for (else the failure is a bare matmul shape error deep inside a Linear)."""
    for side, h, want in (("source", h_src, in_src), ("destination", h_dst, in_dst)):
        if not isinstance(h, Tensor) or h.dim() < 2:
            raise DGLError(f"{layer}: {side} node features must be a tensor [num_nodes, ..., {want}], "
                           f"got {type(h).__name__}{tuple(h.shape) if isinstance(h, Tensor) else ''}")
        if h.shape[-1] != want:
            raise DGLError(f"{layer}: {side} node features have {h.shape[-1]} features (last dimension); "
                           f"the layer was built for {want}")


def drop_and_split(feat, graph, dropout: nn.Module) -> tuple[Tensor, Tensor]:
    """``(source, destination)`` features after ``dropout``, as DGL: one mask per tensor, so with
    one tensor the destinations (a block's first rows) keep the sources' mask."""
    if isinstance(feat, tuple):
        return dropout(feat[0]), dropout(feat[1])
    return expand_as_pair(dropout(feat), graph)


def plain_linear(module: nn.Module) -> bool:
    """Whether calling ``module`` is exactly ``F.linear`` of its parameters (an ``nn.Linear``, no
    subclass, no hooks), so its product may be rearranged."""
    return (type(module) is nn.Linear and not module._forward_hooks and not module._forward_pre_hooks
            and not nn.modules.module._global_forward_hooks and not nn.modules.module._global_forward_pre_hooks)
