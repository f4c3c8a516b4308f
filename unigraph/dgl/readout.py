r"""DGL's graph readouts (``dgl.readout_nodes``, ``dgl.sum_nodes``, ``dgl.mean_nodes``,
``dgl.max_nodes``, ``dgl.softmax_nodes``, ``dgl.broadcast_nodes``, ``dgl.topk_nodes`` and their
``_edges`` twins): one reduction per graph of a batch (``dgl.batch``; a single graph is a batch of
one), over the features ``feat`` of its nodes (edges) of one type.

.. math::
    r_b = \bigoplus_{v \in G_b} w_v \, x_v \qquad
    \operatorname{softmax}(x)_v = \frac{e^{x_v}}{\sum_{u \in G_{b(v)}} e^{x_u}} \qquad
    \operatorname{broadcast}(r)_v = r_{b(v)}

with :math:`\bigoplus` the sum, mean, max or min (0 for a graph without nodes) and :math:`w` the
optional ``weight`` feature. ``topk_nodes(g, feat, k, descending, sortby)``: per graph the ``k``
rows with the largest (smallest) value in column ``sortby`` ``[B, k, D]`` with their positions
``[B, k]``; or, without ``sortby``, each column sorted on its own (positions ``[B, k, D]``); a graph
with fewer than ``k`` rows is padded with zeros (its padded positions are undefined, as in DGL).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.dgl.base import DGLError, DGLWarning
from unigraph.dgl.ops import segment_reduce, segment_softmax

OPS = ("sum", "mean", "max", "min")


def _data(graph, kind: str, typ: Any) -> tuple[Any, Tensor]:
    """``(feature store, items per graph)`` of the nodes or edges of type ``typ``."""
    if kind == "nodes":
        store = graph.ndata if typ is None else graph.nodes[typ].data
        return store, graph.batch_num_nodes(typ)
    store = graph.edata if typ is None else graph.edges[typ].data
    return store, graph.batch_num_edges(typ)


def _feature(store, name: str, kind: str) -> Tensor:
    if name not in store:
        raise DGLError(f"the graph's {kind} have no feature {name!r} (they have {sorted(store.keys())})")
    return store[name]


def _readout(graph, kind: str, feat: str, weight: str | None, op: str, typ: Any) -> Tensor:
    if op not in OPS:
        raise DGLError(f"readout op must be one of {OPS}, got {op!r}")
    store, counts = _data(graph, kind, typ)
    x = _feature(store, feat, kind)
    if weight is not None:
        x = x * _feature(store, weight, kind)
    return segment_reduce(counts, x, reducer=op)


def readout_nodes(graph, feat: str, weight: str | None = None, *, op: str = "sum", ntype: Any = None) -> Tensor:
    return _readout(graph, "nodes", feat, weight, op, ntype)


def readout_edges(graph, feat: str, weight: str | None = None, *, op: str = "sum", etype: Any = None) -> Tensor:
    return _readout(graph, "edges", feat, weight, op, etype)


def sum_nodes(graph, feat: str, weight: str | None = None, *, ntype: Any = None) -> Tensor:
    return _readout(graph, "nodes", feat, weight, "sum", ntype)


def sum_edges(graph, feat: str, weight: str | None = None, *, etype: Any = None) -> Tensor:
    return _readout(graph, "edges", feat, weight, "sum", etype)


def mean_nodes(graph, feat: str, weight: str | None = None, *, ntype: Any = None) -> Tensor:
    return _readout(graph, "nodes", feat, weight, "mean", ntype)


def mean_edges(graph, feat: str, weight: str | None = None, *, etype: Any = None) -> Tensor:
    return _readout(graph, "edges", feat, weight, "mean", etype)


def max_nodes(graph, feat: str, weight: str | None = None, *, ntype: Any = None) -> Tensor:
    return _readout(graph, "nodes", feat, weight, "max", ntype)


def max_edges(graph, feat: str, weight: str | None = None, *, etype: Any = None) -> Tensor:
    return _readout(graph, "edges", feat, weight, "max", etype)


def softmax_nodes(graph, feat: str, *, ntype: Any = None) -> Tensor:
    store, counts = _data(graph, "nodes", ntype)
    return segment_softmax(counts, _feature(store, feat, "nodes"))


def softmax_edges(graph, feat: str, *, etype: Any = None) -> Tensor:
    store, counts = _data(graph, "edges", etype)
    return segment_softmax(counts, _feature(store, feat, "edges"))


def _broadcast(graph, kind: str, graph_feat: Tensor, typ: Any) -> Tensor:
    _, counts = _data(graph, kind, typ)
    if graph_feat.shape[0] != counts.numel():
        if counts.numel() != 1:
            raise DGLError(f"broadcast_{kind}: graph_feat has {graph_feat.shape[0]} rows for a batch of "
                           f"{counts.numel()} graphs")
        import warnings
        warnings.warn("for a single graph give graph_feat the shape (1, *); the shape (*) is deprecated in DGL",
                      DGLWarning, stacklevel=3)
        graph_feat = graph_feat.unsqueeze(0)
    return graph_feat.repeat_interleave(counts.to(device=graph_feat.device, dtype=torch.int64), dim=0)


def broadcast_nodes(graph, graph_feat: Tensor, *, ntype: Any = None) -> Tensor:
    return _broadcast(graph, "nodes", graph_feat, ntype)


def broadcast_edges(graph, graph_feat: Tensor, *, etype: Any = None) -> Tensor:
    return _broadcast(graph, "edges", graph_feat, etype)


def _topk(graph, kind: str, feat: str, k: int, descending: bool, sortby: int | None, typ: Any):
    store, counts = _data(graph, kind, typ)
    x = _feature(store, feat, kind)
    if x.dim() > 2:
        raise DGLError(f"topk_{kind}: feature {feat!r} has {x.dim()} dimensions; at most 2 are supported")
    x2 = x.reshape(x.shape[0], -1)
    counts = counts.to(device=x.device, dtype=torch.int64)
    batch, length = counts.numel(), max(int(counts.max()) if counts.numel() else 0, k)
    # rows padded to [B, length, D] with -inf (descending) / inf, so padding sorts last
    padded = x2.new_full((batch, length, x2.shape[1]), float("-inf") if descending else float("inf"))
    graph_of = torch.repeat_interleave(torch.arange(batch, device=x.device), counts)
    position = torch.arange(x2.shape[0], device=x.device) - (torch.cumsum(counts, 0) - counts)[graph_of]
    padded[graph_of, position] = x2
    if sortby is not None:
        order = padded[..., sortby].topk(k, -1, largest=descending).indices          # [B, k]
        values = padded.gather(1, order.unsqueeze(-1).expand(-1, -1, padded.shape[-1]))
    else:
        values, order = torch.sort(padded, 1, descending=descending)
        values, order = values[:, :k], order[:, :k]
    values = values.masked_fill(torch.isinf(values), 0)
    if x.dim() == 1:
        values, order = values.squeeze(-1), order.squeeze(-1) if sortby is None else order
    return values, order


def topk_nodes(graph, feat: str, k: int, *, descending: bool = True, sortby: int | None = None, ntype: Any = None):
    return _topk(graph, "nodes", feat, k, descending, sortby, ntype)


def topk_edges(graph, feat: str, k: int, *, descending: bool = True, sortby: int | None = None, etype: Any = None):
    return _topk(graph, "edges", feat, k, descending, sortby, etype)


__all__ = ["readout_nodes", "readout_edges", "sum_nodes", "sum_edges", "mean_nodes", "mean_edges", "max_nodes",
           "max_edges", "softmax_nodes", "softmax_edges", "broadcast_nodes", "broadcast_edges", "topk_nodes",
           "topk_edges"]
