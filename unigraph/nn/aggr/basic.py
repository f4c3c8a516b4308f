r"""The elementwise aggregations, per group :math:`\mathcal{X}` of rows (PyG's names and
arguments):

.. math::
    \mathrm{sum} = \sum_{\mathbf{x} \in \mathcal{X}} \mathbf{x}, \quad
    \mathrm{mean} = \tfrac{1}{|\mathcal{X}|} \mathrm{sum}, \quad
    \mathrm{var} = \mathrm{mean}(\mathbf{x}^2) - \mathrm{mean}(\mathbf{x})^2, \quad
    \mathrm{std} = \sqrt{\mathrm{var}}\ (0 \text{ where } \mathrm{var} \le 10^{-5}),

    \mathrm{softmax}_t = \sum_{\mathbf{x}} \frac{e^{t \mathbf{x}}}{\sum_{\mathbf{x}'} e^{t \mathbf{x}'}}
    \odot \mathbf{x}, \quad
    \mathrm{powermean}_p = \mathrm{mean}(\mathbf{x}^p)^{1/p}, \quad
    \mathrm{mul} = \prod_{\mathbf{x} \in \mathcal{X}} \mathbf{x}\ (1 \text{ for an empty group, as PyG's})

(max and min elementwise; powermean clamps its input and the mean to ``[clamp_min, clamp_max]``).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import Parameter

from unigraph.nn.aggr.base import Aggregation, group_softmax


class _Reduction(Aggregation):
    """One of the plain reductions, named by ``reduction``."""

    reduction: str

    def forward(self, x, index, ptr=None, dim_size=None, dim=-2):
        return self.reduce(x, index, ptr, dim_size, dim, self.reduction)


class SumAggregation(_Reduction):
    reduction = "sum"


class MulAggregation(Aggregation):
    """The product of each group's rows (PyG's ``"mul"``): torch's ``scatter_reduce`` ``"prod"``
    onto ones, so an empty group is 1 (PyG's result); its gradient is torch's (zeros included)."""

    def forward(self, x, index, ptr=None, dim_size=None, dim=-2):
        shape = list(x.shape)
        shape[dim] = dim_size
        view = [1] * x.dim()
        view[dim] = -1
        return x.new_ones(shape).scatter_reduce(dim, index.view(view).expand_as(x), x, "prod", include_self=True)


class MeanAggregation(_Reduction):
    reduction = "mean"


class MaxAggregation(_Reduction):
    reduction = "max"


class MinAggregation(_Reduction):
    reduction = "min"


class VarAggregation(Aggregation):
    """``semi_grad=True``: no gradient through :math:`\\mathrm{mean}(\\mathbf{x}^2)`."""

    def __init__(self, semi_grad: bool = False):
        super().__init__()
        self.semi_grad = semi_grad

    def forward(self, x, index, ptr=None, dim_size=None, dim=-2):
        mean = self.reduce(x, index, ptr, dim_size, dim, "mean")
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.semi_grad):
            mean_of_squares = self.reduce(x * x, index, ptr, dim_size, dim, "mean")
        return mean_of_squares - mean * mean


class StdAggregation(Aggregation):
    """The square root of :class:`VarAggregation`, 0 where the variance is at most 1e-5 (the
    square root's gradient is undefined at 0)."""

    def __init__(self, semi_grad: bool = False):
        super().__init__()
        self.var_aggr = VarAggregation(semi_grad)

    def forward(self, x, index, ptr=None, dim_size=None, dim=-2):
        var = self.var_aggr.forward(x, index, ptr, dim_size, dim)
        out = var.clamp(min=1e-5).sqrt()
        return out.masked_fill(out <= math.sqrt(1e-5), 0.0)


class SoftmaxAggregation(Aggregation):
    """Args: ``t`` (inverse temperature), ``learn`` (learn ``t``), ``semi_grad`` (no gradient
    through the softmax weights; not with ``learn``), ``channels`` (one learned ``t`` per
    feature)."""

    def __init__(self, t: float = 1.0, learn: bool = False, semi_grad: bool = False, channels: int = 1):
        super().__init__()
        if learn and semi_grad:
            raise ValueError("SoftmaxAggregation cannot use semi_grad=True with learn=True: t would get no gradient")
        if not learn and channels != 1:
            raise ValueError(f"SoftmaxAggregation(channels={channels}) needs learn=True (one learned t per channel)")
        self._init_t, self.learn, self.semi_grad, self.channels = t, learn, semi_grad, channels
        self.t = Parameter(torch.empty(channels)) if learn else t
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if isinstance(self.t, Tensor):
            with torch.no_grad():
                self.t.fill_(self._init_t)

    def forward(self, x, index, ptr=None, dim_size=None, dim=-2):
        t = self.t.view(-1, self.channels) if self.channels != 1 else self.t
        scores = x if isinstance(t, (int, float)) and t == 1 else x * t
        with torch.set_grad_enabled(torch.is_grad_enabled() and not (self.semi_grad and not self.learn)):
            alpha = group_softmax(scores, index, dim_size, dim)
        return self.reduce(x * alpha, index, ptr, dim_size, dim, "sum")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(learn={self.learn})"


class PowerMeanAggregation(Aggregation):
    """Args: ``p`` (the power), ``learn`` (learn ``p``), ``channels`` (one learned ``p`` per
    feature), ``clamp_min``/``clamp_max`` (range of the input and of the mean; None: unbounded)."""

    def __init__(self, p: float = 1.0, learn: bool = False, channels: int = 1, clamp_min: float | None = 1e-4,
                 clamp_max: float | None = 100.0):
        super().__init__()
        if not learn and channels != 1:
            raise ValueError(f"PowerMeanAggregation(channels={channels}) needs learn=True (one learned p per channel)")
        self._init_p, self.learn, self.channels = p, learn, channels
        self.p = Parameter(torch.empty(channels)) if learn else p
        self.min_value, self.max_value = clamp_min, clamp_max
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if isinstance(self.p, Tensor):
            with torch.no_grad():
                self.p.fill_(self._init_p)

    def forward(self, x, index, ptr=None, dim_size=None, dim=-2):
        p = self.p.view(-1, self.channels) if self.channels != 1 else self.p
        plain = isinstance(p, (int, float)) and p == 1
        if not plain:
            x = x.clamp(min=self.min_value, max=self.max_value).pow(p)
        out = self.reduce(x, index, ptr, dim_size, dim, "mean")
        if not plain:
            out = out.clamp(min=self.min_value, max=self.max_value).pow(1.0 / p)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(learn={self.learn})"
