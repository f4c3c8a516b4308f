r"""Several aggregations of the same rows, combined (PyG's ``MultiAggregation``).

``mode`` says how the outputs :math:`\mathbf{h}_1, \ldots, \mathbf{h}_k` of one group combine:

- ``"cat"``: :math:`[\mathbf{h}_1 \Vert \ldots \Vert \mathbf{h}_k]` (``k * F`` wide);
- ``"proj"``: :math:`\mathbf{W} [\mathbf{h}_1 \Vert \ldots \Vert \mathbf{h}_k] + \mathbf{b}` (``lin``);
- ``"attn"``: each :math:`\mathbf{h}_i` projected by its own linear map (``lin_heads.lins[i]``),
  multi-head self-attention across the ``k`` results (``multihead_attn``), averaged over them;
- ``"sum"``, ``"mean"``, ``"max"``, ``"min"``, ``"logsumexp"``, ``"std"``, ``"var"``: that
  reduction across the ``k`` results, elementwise.

``proj`` and ``attn`` need ``mode_kwargs`` with ``in_channels`` and ``out_channels``; the rest of
``mode_kwargs`` goes to ``Linear`` (proj) or ``MultiheadAttention`` (attn, with ``num_heads``).
"""
from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor

from unigraph.nn.aggr.base import Aggregation
from unigraph.nn.aggr.names import aggregation_by_name

DENSE_MODES = ("sum", "mean", "max", "min", "logsumexp", "std", "var")
MODES = ("cat", "proj", "attn") + DENSE_MODES


class _HeadLinears(torch.nn.Module):
    """One ``Linear`` per aggregation, keyed ``"0"``, ``"1"``, ... (``lin_heads.lins.<i>``)."""

    def __init__(self, in_channels: list[int], out_channels: int):
        super().__init__()
        self.lins = torch.nn.ModuleDict({str(i): torch.nn.Linear(c, out_channels) for i, c in enumerate(in_channels)})

    def reset_parameters(self) -> None:
        for lin in self.lins.values():
            lin.reset_parameters()


class MultiAggregation(Aggregation):
    """Args: ``aggrs`` (names or modules), ``aggrs_kwargs`` (one dict per aggregation), ``mode``
    and ``mode_kwargs`` (see the module docstring)."""

    def __init__(self, aggrs: list[Any], aggrs_kwargs: list[dict] | None = None, mode: str = "cat",
                 mode_kwargs: dict | None = None):
        super().__init__()
        if not isinstance(aggrs, (list, tuple)) or not aggrs:
            raise ValueError(f"MultiAggregation aggrs must be a non-empty list, got {aggrs!r}")
        if aggrs_kwargs is None:
            aggrs_kwargs = [{}] * len(aggrs)
        if len(aggrs_kwargs) != len(aggrs):
            raise ValueError(f"MultiAggregation got {len(aggrs_kwargs)} aggrs_kwargs for {len(aggrs)} aggregations; "
                             "pass one dict per aggregation")
        if mode not in MODES:
            raise ValueError(f"MultiAggregation mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.aggrs = torch.nn.ModuleList(aggregation_by_name(a, **(kw or {})) for a, kw in zip(aggrs, aggrs_kwargs))
        self.mode = mode
        mode_kwargs = copy.copy(mode_kwargs) or {}
        self.in_channels = mode_kwargs.pop("in_channels", None)
        self.out_channels = mode_kwargs.pop("out_channels", None)
        if mode in ("proj", "attn"):
            if len(aggrs) == 1:
                raise ValueError(f"MultiAggregation mode={mode!r} combines several aggregations; got one")
            if self.in_channels is None or self.out_channels is None:
                raise ValueError(f"MultiAggregation mode={mode!r} needs mode_kwargs with in_channels and out_channels")
            if isinstance(self.in_channels, int):
                self.in_channels = [self.in_channels] * len(aggrs)
            if mode == "proj":
                self.lin = torch.nn.Linear(sum(self.in_channels), self.out_channels, **mode_kwargs)
            else:
                self.lin_heads = _HeadLinears(self.in_channels, self.out_channels)
                heads = mode_kwargs.pop("num_heads", 1)
                self.multihead_attn = torch.nn.MultiheadAttention(self.out_channels, heads, **mode_kwargs)

    def reset_parameters(self) -> None:
        for aggr in self.aggrs:
            if hasattr(aggr, "reset_parameters"):
                aggr.reset_parameters()
        if self.mode == "proj":
            self.lin.reset_parameters()
        elif self.mode == "attn":
            self.lin_heads.reset_parameters()
            self.multihead_attn._reset_parameters()

    def get_out_channels(self, in_channels: int) -> int:
        """The output width for inputs ``in_channels`` wide."""
        if self.out_channels is not None:
            return self.out_channels
        return in_channels * len(self.aggrs) if self.mode == "cat" else in_channels

    def forward(self, x, index, ptr=None, dim_size=None, dim=-2):
        return self.combine([aggr(x, index, dim_size=dim_size, dim=dim) for aggr in self.aggrs])

    def combine(self, outs: list[Tensor]) -> Tensor:
        if len(outs) == 1:
            return outs[0]
        if self.mode == "cat":
            return torch.cat(outs, dim=-1)
        if self.mode == "proj":
            return self.lin(torch.cat(outs, dim=-1))
        if self.mode == "attn":
            h = torch.stack([self.lin_heads.lins[str(i)](out) for i, out in enumerate(outs)])
            attended, _ = self.multihead_attn(h, h, h)
            return attended.mean(0)
        out = getattr(torch, self.mode)(torch.stack(outs), dim=0)
        return out if isinstance(out, Tensor) else out[0]  # max/min return (values, indices)

    def __repr__(self) -> str:
        inner = ",\n".join(f"  {aggr}" for aggr in self.aggrs) + ",\n"
        return f"{type(self).__name__}([\n{inner}], mode={self.mode})"
