r"""PNA's degree scalers (`"Principal Neighbourhood Aggregation for Graph Nets"
<https://arxiv.org/abs/2004.05718>`_): each aggregation of a group with ``d`` rows, scaled by

.. math::
    \text{identity}: 1, \quad
    \text{amplification}: \frac{\log(d + 1)}{\delta}, \quad
    \text{attenuation}: \frac{\delta}{\log(\max(d, 1) + 1)}, \quad
    \text{linear}: \frac{d}{\bar d}, \quad
    \text{inverse\_linear}: \frac{\bar d}{\max(d, 1)},

with :math:`\delta` (``avg_deg_log``) and :math:`\bar d` (``avg_deg_lin``) the mean of
:math:`\log(d + 1)` and of :math:`d` over the training degrees, given as the histogram ``deg``
(``deg[k]`` nodes of degree ``k``). The scaled results are concatenated, scaler after scaler.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.group_reduce import group_sizes
from unigraph.nn.aggr.base import Aggregation
from unigraph.nn.aggr.multi import MultiAggregation
from unigraph.nn.aggr.names import aggregation_by_name

SCALERS = ("identity", "amplification", "attenuation", "linear", "inverse_linear")


class DegreeScalerAggregation(Aggregation):
    """Args: ``aggr`` (a name, a module, or a list of them), ``scaler`` (a name or a list of
    :data:`SCALERS`), ``deg`` (the degree histogram), ``train_norm`` (learn the two averages),
    ``aggr_kwargs`` (one dict per aggregation)."""

    def __init__(self, aggr: Any, scaler: str | list[str], deg: Tensor, train_norm: bool = False,
                 aggr_kwargs: list[dict] | None = None):
        super().__init__()
        if isinstance(aggr, (list, tuple)):
            self.aggr = MultiAggregation(list(aggr), aggr_kwargs)
        else:
            self.aggr = aggregation_by_name(aggr, **((aggr_kwargs or [{}])[0]))
        self.scaler = [scaler] if isinstance(scaler, str) else list(scaler)
        for name in self.scaler:
            if name not in SCALERS:
                raise ValueError(f"DegreeScalerAggregation: unknown scaler {name!r}; choices: {', '.join(SCALERS)}")
        if not isinstance(deg, Tensor) or deg.dim() != 1 or deg.numel() == 0:
            raise ValueError(f"DegreeScalerAggregation: deg must be a 1-D degree histogram (deg[k] = nodes of degree "
                             f"k), got {getattr(deg, 'shape', type(deg).__name__)}")
        deg = deg.to(torch.float64)
        nodes = float(deg.sum())
        if nodes <= 0:
            raise ValueError("DegreeScalerAggregation: the degree histogram deg counts no nodes")
        degrees = torch.arange(deg.numel(), dtype=torch.float64)
        self.init_avg_deg_lin = float((degrees * deg).sum()) / nodes
        self.init_avg_deg_log = float(((degrees + 1).log() * deg).sum()) / nodes
        if train_norm:
            self.avg_deg_lin = torch.nn.Parameter(torch.empty(1))
            self.avg_deg_log = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("avg_deg_lin", torch.empty(1))
            self.register_buffer("avg_deg_log", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if hasattr(self.aggr, "reset_parameters"):
            self.aggr.reset_parameters()
        with torch.no_grad():
            self.avg_deg_lin.fill_(self.init_avg_deg_lin)
            self.avg_deg_log.fill_(self.init_avg_deg_log)

    def forward(self, x, index, ptr=None, dim_size=None, dim=-2):
        out = self.aggr(x, index, dim_size=dim_size, dim=dim)
        shape = [1] * out.dim()
        shape[dim] = -1
        # in-degrees counted exactly (float32 at least: a float16 count stops at 2,048), each
        # scale computed in that precision and rounded once to the output's dtype
        deg = group_sizes(index, dim_size, out).view(shape)
        outs = []
        for name in self.scaler:
            if name == "identity":
                outs.append(out)
                continue
            if name == "amplification":
                scale = torch.log(deg + 1) / self.avg_deg_log
            elif name == "attenuation":
                scale = self.avg_deg_log / torch.log(deg.clamp(min=1) + 1)
            elif name == "linear":
                scale = deg / self.avg_deg_lin
            else:
                scale = self.avg_deg_lin / deg.clamp(min=1)
            outs.append(out * scale.to(out.dtype))
        return torch.cat(outs, dim=-1) if len(outs) > 1 else outs[0]
