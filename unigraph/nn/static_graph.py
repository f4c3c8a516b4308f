"""Static graphs: one graph shared by a batch of feature sets, ``x`` of shape ``[B, N, F]``
(PyG's layers with ``node_dim=-2`` accept it: nodes are the second-to-last dimension).

The layers run such a call on the node-major view ``[N, B * F]``: every aggregation is linear
in the rows and acts on each column alike, so aggregating the ``B`` feature sets side by side
is aggregating each one (the same numbers as ``B`` separate calls), and the graph is read once.
Layers whose per-edge networks or aggregations mix channels run ``B`` disjoint copies of the
graph instead (:func:`static_copies`).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.call_forms import resolve


def is_static(x) -> bool:
    """Whether ``x`` is a dense ``[B, N, F]`` batch of feature sets over one graph."""
    return isinstance(x, Tensor) and x.layout == torch.strided and x.dim() == 3


def node_major(x: Tensor) -> Tensor:
    """``[B, N, F]`` -> ``[N, B * F]``."""
    batch, nodes, width = x.shape
    return x.transpose(0, 1).reshape(nodes, batch * width)


def batch_major(out: Tensor, batch: int) -> Tensor:
    """``[N, B * F]`` -> ``[B, N, F]``."""
    return out.reshape(out.shape[0], batch, -1).transpose(0, 1)


def static_copies(who: str, x: Tensor, edge_index: Any, *, size: Any = None, edge_attr: Tensor | None = None,
                  values: str = "edge_weight") -> tuple[Graph, Tensor, Tensor | None]:
    """For layers whose messages or aggregation mix a node's channels (an MLP per edge, a learned
    aggregation): ``[B, N, F]`` run as one call on ``B`` disjoint copies of the graph. Returns the
    copies as one :class:`~unigraph.Graph` (copy ``b``'s nodes are ``b * N .. (b + 1) * N - 1``,
    its edges ``b * E .. (b + 1) * E - 1``), the features ``[B * N, F]`` and the edge features
    repeated per copy (given, or a sparse adjacency's values with ``values="edge_attr"``). The
    same numbers as ``B`` separate calls; the layer runs it in the graph form ``layer(g, x)`` (which
    applies its ``flow``) and views the output as ``[B, N, F_out]``."""
    batch, nodes = x.shape[0], x.shape[1]
    call = resolve(who, x[0], edge_index, size=size, edge_attr=edge_attr, values=values)
    g = call.graph
    if g.is_bipartite:
        raise ValueError(f"{who}: static graphs (x of shape [B, N, F]) need a square graph, got "
                         f"{g.num_src_nodes} source and {g.num_dst_nodes} destination nodes")
    edge_attr = edge_attr if edge_attr is not None else call.edge_attr
    offsets = torch.arange(batch, device=g.src.device).mul_(nodes).repeat_interleave(g.num_edges)
    src, dst = g.src.repeat(batch) + offsets, g.dst.repeat(batch) + offsets
    copies = Graph(torch.stack([src, dst]), num_nodes=batch * nodes)
    if edge_attr is not None:
        if edge_attr.shape[0] != g.num_edges:
            raise ValueError(f"{who}: edge_attr has {edge_attr.shape[0]} rows for {g.num_edges} edges")
        edge_attr = edge_attr.repeat(batch, *([1] * (edge_attr.dim() - 1)))
    return copies, x.reshape(batch * nodes, *x.shape[2:]), edge_attr


def refuse_static(who: str, x: Any) -> None:
    """A clear refusal of ``[B, N, F]`` features for layers that take no static graph (PyG's
    attention and relational layers refuse them too), before they are read as ``B`` nodes."""
    if is_static(x):
        raise ValueError(f"{who} does not take static graphs (x of shape {list(x.shape)} = [B, N, F]), as in PyG; "
                         "pass node features [N, F] (GCNConv, GraphConv, GINConv, GINEConv, SAGEConv, EdgeConv and "
                         "PNAConv take [B, N, F])")
