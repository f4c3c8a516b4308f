r"""A multi-layer perceptron over node features, PyG's ``MLP`` (re-exported by :mod:`unigraph.nn.models`,
where PyG keeps it); layer ``i`` is

.. math::
    \mathbf{h}^{(i+1)} = \mathrm{dropout}\big(\sigma(\mathrm{norm}(\mathbf{W}^{(i)} \mathbf{h}^{(i)} + \mathbf{b}^{(i)}))\big)

(:math:`\sigma` before the norm with ``act_first``); with ``plain_last`` (the default) the last
layer is the linear map alone. Parameters ``lins.<i>`` and ``norms.<i>`` as PyG names them.
"""
from __future__ import annotations

import inspect
from types import NoneType
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.nn.checks import reset_module
from unigraph.nn.resolver import activation_resolver, normalization_resolver


def norm_and_activate(x: Tensor, norm: Any, act: Any, act_first: bool, with_batch: bool = False,
                      batch: Tensor | None = None, batch_size: int | None = None) -> Tensor:
    """PyG's order around a norm: the activation before it with ``act_first``, else after it;
    ``with_batch``: the norm takes the graph ids (``batch``, ``batch_size``)."""
    if act is not None and act_first:
        x = act(x)
    x = norm(x, batch, batch_size) if with_batch else norm(x)
    if act is not None and not act_first:
        x = act(x)
    return x


def accepts_batch(module: Any) -> bool:
    """Whether a normalization module's ``forward`` takes PyG's ``batch`` argument."""
    forward = getattr(module, "forward", None)
    return forward is not None and "batch" in inspect.signature(forward).parameters


class MLP(torch.nn.Module):
    """Args (PyG's): ``channel_list`` (widths, input first), or ``in_channels``,
    ``hidden_channels``, ``out_channels`` and ``num_layers``; ``dropout`` (one value, or one per
    layer), ``act``, ``act_first``, ``act_kwargs``, ``norm`` (default ``"batch_norm"``),
    ``norm_kwargs``, ``plain_last``, ``bias`` (one value or one per layer)."""

    # constants to TorchScript (torch.jit.script(mlp), as PyG's MLP allows): it then compiles only
    # the norm call and activation order that apply
    __constants__ = ["supports_norm_batch", "act_first", "plain_last"]

    def __init__(self, channel_list: list[int] | int | None = None, *, in_channels: int | None = None,
                 hidden_channels: int | None = None, out_channels: int | None = None, num_layers: int | None = None,
                 dropout: float | list[float] = 0.0, act: str | Callable | None = "relu", act_first: bool = False,
                 act_kwargs: dict | None = None, norm: str | Callable | None = "batch_norm",
                 norm_kwargs: dict | None = None, plain_last: bool = True, bias: bool | list[bool] = True):
        super().__init__()
        if isinstance(channel_list, int):
            in_channels, channel_list = channel_list, None
        if channel_list is None:
            if in_channels is None or num_layers is None or out_channels is None:
                raise ValueError("MLP needs channel_list, or in_channels, out_channels and num_layers")
            if num_layers > 1 and hidden_channels is None:
                raise ValueError(f"MLP with num_layers={num_layers} needs hidden_channels")
            channel_list = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        channel_list = list(channel_list)
        if len(channel_list) < 2:
            raise ValueError(f"MLP needs at least an input and an output width, got channel_list={channel_list}")
        layers = len(channel_list) - 1
        self.channel_list = channel_list
        self.act = activation_resolver(act, **(act_kwargs or {}))
        self.act_first, self.plain_last = act_first, plain_last
        if isinstance(dropout, (int, float)):
            dropout = [float(dropout)] * layers
            if plain_last:
                dropout[-1] = 0.0
        if len(dropout) != layers:
            raise ValueError(f"MLP got {len(dropout)} dropout values for {layers} layers")
        self.dropout = list(dropout)
        bias = [bias] * layers if isinstance(bias, bool) else list(bias)
        if len(bias) != layers:
            raise ValueError(f"MLP got {len(bias)} bias values for {layers} layers")
        self.lins = torch.nn.ModuleList(torch.nn.Linear(a, b, bias=c)
                                        for a, b, c in zip(channel_list[:-1], channel_list[1:], bias))
        normed = channel_list[1:-1] if plain_last else channel_list[1:]
        self.norms = torch.nn.ModuleList(
            normalization_resolver(norm, width, **(norm_kwargs or {})) if norm is not None else torch.nn.Identity()
            for width in normed)
        self.supports_norm_batch = len(self.norms) > 0 and accepts_batch(self.norms[0])
        self.reset_parameters()

    @property
    def in_channels(self) -> int:
        return self.channel_list[0]

    @property
    def out_channels(self) -> int:
        return self.channel_list[-1]

    @property
    def num_layers(self) -> int:
        return len(self.channel_list) - 1

    def reset_parameters(self) -> None:
        for module in (*self.lins, *self.norms):
            reset_module(module)

    def forward(self, x: Tensor, batch: Tensor | None = None, batch_size: int | None = None,
                return_emb: NoneType = None) -> Any:
        """``return_emb`` True or False returns ``(out, embedding)`` (None for False), as PyG's; it is
        annotated ``NoneType`` as PyG's is, so that TorchScript compiles the default (``out`` alone)."""
        emb: Optional[Tensor] = None   # (typed for TorchScript)
        for i, (lin, norm) in enumerate(zip(self.lins, self.norms)):
            # (norm_and_activate written out: TorchScript, which PyG's MLP supports, types an attribute here)
            x = lin(x)
            if self.act is not None and self.act_first:
                x = self.act(x)
            x = norm(x, batch, batch_size) if self.supports_norm_batch else norm(x)
            if self.act is not None and not self.act_first:
                x = self.act(x)
            x = F.dropout(x, p=self.dropout[i], training=self.training)
            if return_emb is True:
                emb = x
        if self.plain_last:
            x = self.lins[-1](x)
            x = F.dropout(x, p=self.dropout[-1], training=self.training)
        # PyG's contract: a bool return_emb (True or False) returns the pair, the embedding None for False
        return (x, emb) if isinstance(return_emb, bool) else x

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.channel_list)[1:-1]})"
