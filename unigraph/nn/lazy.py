"""Lazy input widths: ``in_channels=-1`` (or ``(-1, -1)``) as in PyG.

The projection is then a ``torch.nn.LazyLinear`` whose weight is a
``torch.nn.parameter.UninitializedParameter`` until the layer's first call, which sets the width
from the features it sees and re-runs the layer's ``reset_parameters`` (so the weight gets the
layer's own initializer, Glorot for the attention layers). Before that call, reading the weight's
shape or values raises torch's error ("Can't access the shape of an uninitialized parameter");
an optimizer built before the first call keeps working, because torch materializes the parameter
object in place. A ``state_dict`` loaded before the first call materializes the weights from
their saved shapes (``LazyModuleMixin``), and no re-initialization happens then.
"""
from __future__ import annotations

from typing import Iterable

import torch
from torch import Tensor
from torch.nn import LazyLinear, Linear

LAZY = -1


def check_in_channels(in_channels, who: str) -> tuple[int, int]:
    """``(source, destination)`` input widths; ``-1`` means "from the first input"."""
    pair = (in_channels, in_channels) if isinstance(in_channels, int) else tuple(in_channels)
    if len(pair) != 2 or not all(isinstance(c, int) and not isinstance(c, bool) and (c > 0 or c == LAZY)
                                 for c in pair):
        raise ValueError(f"{who} in_channels must be a positive int, -1 (inferred on the first call) or a pair of "
                         f"them, got {in_channels!r}")
    return pair


def make_linear(in_features: int, out_features: int, bias: bool = True) -> Linear:
    """A ``Linear``, or a ``LazyLinear`` for ``in_features == -1``."""
    return LazyLinear(out_features, bias=bias) if in_features == LAZY else Linear(in_features, out_features, bias=bias)


def is_lazy(module: torch.nn.Module) -> bool:
    return any(isinstance(p, torch.nn.parameter.UninitializedParameter) for p in module.parameters())


def materialize(layer: torch.nn.Module, x_src: Tensor, x_dst: Tensor | None,
                source: Iterable[torch.nn.Module | None], destination: Iterable[torch.nn.Module | None]) -> None:
    """On a lazy layer's first call: size the weights of the ``source`` linears from ``x_src``'s width
    and the ``destination`` ones from ``x_dst``'s (an entry ``(linear, k)`` reads ``k`` times the
    width: ``k`` aggregations concatenated), record the widths in ``layer._widths``, reset the
    layer's parameters its own way, and clear ``layer._lazy`` once nothing is left uninitialized."""
    widths = list(layer._widths)
    done = False
    for side, x, linears in ((0, x_src, source), (1, x_dst, destination)):
        if x is None:
            continue
        if x.dim() != 2:
            raise ValueError(f"{type(layer).__name__} infers in_channels from features of shape [num_nodes, F], got "
                             f"{list(x.shape)}")
        if widths[side] == LAZY:
            widths[side] = x.shape[1]
        for entry in linears:
            linear, factor = entry if isinstance(entry, tuple) else (entry, 1)
            if isinstance(linear, LazyLinear) and linear.has_uninitialized_params():
                # one empty batch through the module: LazyLinear sizes its weight and becomes a Linear
                width = factor * widths[side]
                linear(torch.zeros(0, width, dtype=linear.weight.dtype, device=linear.weight.device))
                done = True
    layer._widths = tuple(widths)
    if done:
        layer.reset_parameters()
    layer._lazy = is_lazy(layer)
