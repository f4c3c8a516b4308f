"""Input checks and initializers shared by the layers: every bad input fails here, with the layer's
name and the value it got, before any kernel runs."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.message_passing.inputs import check_graph, check_rows, split_pair
from unigraph.nn.lazy import check_in_channels, materialize


def check_width(x: Tensor | None, expected: int, who: str, name: str = "x", setting: str = "in_channels",
                rows: str = "num_nodes") -> None:
    """``x`` is ``[rows, expected]`` (None passes); ``setting`` names the layer's argument that says
    ``expected`` (``edge_dim`` for edge features, with ``rows="num_edges"``)."""
    if x is None:
        return
    if x.dim() != 2:
        raise ValueError(f"{who} expects {name} of shape [{rows}, {expected}], got {list(x.shape)}")
    if x.shape[1] != expected:
        raise ValueError(f"{who} expects {name} with {expected} features (its {setting}), got {x.shape[1]}")


def node_inputs(g: Any, x: Any, who: str, widths: tuple[int, int] | None = None,
                layer: Any = None) -> tuple[Graph, Tensor, Tensor | None]:
    """``(g, x_src, x_dst)`` with the graph type, row counts and (if given) feature widths checked;
    a lazy ``layer`` (``in_channels=-1``) is first sized from the features."""
    check_graph(g, who)
    x_src, x_dst = split_pair(g, x)
    if layer is not None:
        if layer._lazy:
            materialize(layer, x_src, x_dst, *layer._lazy_linears())
        widths = layer._widths
    if widths is not None:
        check_width(x_src, widths[0], who, "x (source features)" if g.is_bipartite else "x")
        check_width(x_dst, widths[1], who, "x (destination features)" if g.is_bipartite else "x")
    return g, x_src, x_dst


def edge_input(g: Graph, value: Tensor | None, who: str, name: str, *, vector: bool = False) -> Tensor | None:
    """An optional per-edge tensor: one row per edge, floating point (``vector``: shape [E])."""
    if value is None:
        return None
    check_rows(value, g.num_edges, name, "edges")
    if not value.is_floating_point():
        raise TypeError(f"{who} expects {name} to be floating point, got {value.dtype}")
    if vector and value.dim() != 1:
        raise ValueError(f"{who} expects {name} of shape [num_edges], got {list(value.shape)}")
    return value


def channels_pair(in_channels: int | tuple[int, int], who: str, lazy: bool = False) -> tuple[int, int]:
    """``(source, destination)`` widths; with ``lazy``, -1 means "from the first input"
    (:mod:`unigraph.nn.lazy`)."""
    if lazy:
        return check_in_channels(in_channels, who)
    pair = (in_channels, in_channels) if isinstance(in_channels, int) else tuple(in_channels)
    if len(pair) != 2 or not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in pair):
        raise ValueError(f"{who} in_channels must be a positive int or a pair of them, got {in_channels!r}")
    return pair


def check_positive(value: Any, name: str, who: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{who} {name} must be a positive int, got {value!r}")
    return value


def check_probability(value: Any, name: str, who: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{who} {name} must be in [0, 1), got {value!r}")
    return float(value)


def glorot_(tensor: Tensor) -> None:
    """Glorot/Xavier uniform over the last two dims (PyG's ``glorot``)."""
    if isinstance(tensor, torch.nn.parameter.UninitializedParameter):
        return  # a lazy weight: initialized when the first call sizes it (unigraph.nn.lazy)
    bound = math.sqrt(6.0 / (tensor.size(-2) + tensor.size(-1)))
    with torch.no_grad():
        tensor.uniform_(-bound, bound)


def reset_module(module: Any) -> None:
    """Reset every submodule of a user-given network that knows how (PyG's ``reset``)."""
    if hasattr(module, "reset_parameters"):
        module.reset_parameters()
    elif isinstance(module, torch.nn.Module):
        for child in module.children():
            reset_module(child)
