"""PyG's ``MessagePassing`` arguments, checked in one place: each works as in PyG or is refused by
name, with the value received and what unigraph accepts instead.

=====================  ==========================================================================
PyG argument           in unigraph
=====================  ==========================================================================
``aggr=None``          accepted when the layer overrides ``aggregate`` (checked in the base class)
``aggr=[...]``/module  an aggregation module, another name (``"mul"``, ``"softmax"``, ...) or a
                       list of them: resolved by :mod:`unigraph.nn.aggr`'s resolver (PyG's
                       ``aggregation_resolver``, registered here when ``unigraph.nn`` loads) into
                       ``layer.aggr_module``, which ``aggregate`` calls on the messages
``aggr_kwargs``        passed to that resolver (with a basic name too, as PyG does)
``flow``               ``"source_to_target"`` (the direction of a :class:`~unigraph.Graph`), or
                       ``"target_to_source"``: the layers that resolve their own graph
                       (:func:`oriented`) then run on it reversed; read at call time, so setting
                       ``layer.flow`` later takes effect. A custom layer's ``propagate`` turns
                       its graph (a ``Graph`` or PyG's ``edge_index``) the same way; a bipartite
                       one with ``"target_to_source"`` is refused (PyG's sparse forms refuse it)
``node_dim``           PyG's default ``-2`` while the features are 2-D (then the same dimension),
                       or ``0``; nodes are always dimension 0 here, so ``-2`` refuses other
                       features by name (``[N, H, F]`` features need ``node_dim=0``)
``decomposed_layers``  any positive int; the results do not depend on it, and the fused path
                       builds no E x F message tensor to split
``propagate(size=)``   with a ``Graph``: ``None`` or its ``(num_src_nodes, num_dst_nodes)`` (the
                       graph carries its sizes); with PyG's ``edge_index``: PyG's node counts
                       (:mod:`unigraph.message_passing.pyg_adjacency`)
=====================  ==========================================================================
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

FLOWS = ("source_to_target", "target_to_source")


def check_flow(flow: Any, who: str) -> str:
    if flow not in FLOWS:
        raise ValueError(f"{who}: flow must be 'source_to_target' or 'target_to_source', got {flow!r}")
    return flow


def oriented(g, flow: str, who: str):
    """``g`` for ``flow="source_to_target"``; its reverse (kept on ``g``, so its caches persist)
    for ``"target_to_source"``, where messages go from ``edge_index[1]`` to ``edge_index[0]``."""
    if check_flow(flow, who) == "source_to_target":
        return g
    if g.is_bipartite:
        raise ValueError(f"{who}: flow='target_to_source' on a bipartite graph would swap which features are the "
                         "sources; pass the graph reversed (and the features in that order) instead")
    return g.memo(("unigraph.nn", "reversed"), g.reverse)


def pyg_settings(who: str, *, flow: Any, node_dim: Any, aggr_kwargs: Any, decomposed_layers: Any) -> None:
    """Refuse the ``MessagePassing.__init__`` arguments unigraph cannot honour."""
    check_flow(flow, who)
    if isinstance(node_dim, bool) or not isinstance(node_dim, int) or node_dim not in (0, -2):
        raise ValueError(f"{who}: node_dim must be 0 (unigraph keeps nodes in dimension 0), or PyG's default -2 "
                         f"for 2-D features; got {node_dim!r}")
    if aggr_kwargs is not None and not isinstance(aggr_kwargs, dict):
        raise ValueError(f"{who}: aggr_kwargs must be a dict of the aggregation's arguments, got {aggr_kwargs!r}")
    if isinstance(decomposed_layers, bool) or not isinstance(decomposed_layers, int) or decomposed_layers < 1:
        raise ValueError(f"{who}: decomposed_layers must be a positive int, got {decomposed_layers!r}")


_RESOLVER: list = []   # unigraph.nn.aggr's aggregation_resolver, once unigraph.nn has loaded


def register_aggregation_resolver(resolver) -> None:
    """Called by :mod:`unigraph.nn.aggr` (above this package) with its ``aggregation_resolver``."""
    _RESOLVER[:] = [resolver]


def aggregation_module(aggr: Any, aggr_kwargs: dict | None, who: str) -> torch.nn.Module:
    """PyG's ``aggr`` beyond one basic name (a module, another name, a list of names or modules)
    as an aggregation module, with ``aggr_kwargs`` (PyG's ``aggregation_resolver``)."""
    if not _RESOLVER:
        raise ValueError(f"{who}: aggr={aggr!r} needs unigraph.nn's aggregation modules; import unigraph.nn first")
    try:
        return _RESOLVER[0](aggr, **(aggr_kwargs or {}))
    except (TypeError, ValueError) as err:
        raise ValueError(f"{who}: aggr={aggr!r} (aggr_kwargs={aggr_kwargs!r}) is not an aggregation unigraph has: "
                         f"{err}; or override aggregate()") from None


def check_node_dim(node_dim: int, x: Any, name: str, who: str) -> None:
    """With ``node_dim=-2`` (PyG's default) nodes are dimension 0 only for 2-D features."""
    if node_dim != -2:
        return
    for part in (x if isinstance(x, (tuple, list)) else (x,)):
        if isinstance(part, Tensor) and part.dim() != 2:
            raise ValueError(f"{who} has node_dim=-2 (PyG's default), which for {name} of shape {list(part.shape)} "
                             f"is dimension {part.dim() - 2}, not the nodes; unigraph keeps nodes in dimension 0: "
                             "pass node_dim=0")


def check_propagate_size(g, kwargs: dict, who: str, message_reads_size: bool) -> None:
    """PyG's ``propagate(edge_index, size=...)``: the graph has its sizes, so a ``size`` that is
    not a message input must agree with them."""
    if message_reads_size or kwargs.get("size") is None:
        return
    size = kwargs["size"]
    expected = (g.num_src_nodes, g.num_dst_nodes)
    if not isinstance(size, (tuple, list)) or len(size) != 2 or tuple(
            expected[i] if s is None else s for i, s in enumerate(size)) != expected:
        raise ValueError(f"{who}.propagate got size={size!r} but the graph has {expected[0]} source and "
                         f"{expected[1]} destination nodes; the graph carries its sizes (pass size=None)")
