r"""Normalization layers for node features, with PyG's names, arguments and parameter names (so a
PyG ``state_dict`` loads): :class:`BatchNorm`, :class:`LayerNorm`, :class:`GraphNorm`,
:class:`InstanceNorm`.

The three graph-wise ones take PyG's ``forward(x, batch=None, batch_size=None)``: ``batch[i]`` is
the graph of node ``i`` (all one graph when omitted), ``batch_size`` the number of graphs (one
more than the largest id when omitted). A graph id outside ``[0, batch_size)`` is refused before
anything is computed, with :class:`BatchIndexError` (a ``ValueError`` and, as PyG's scatter
raises, a ``RuntimeError``, with "out of bounds" in its message).

Statistics per graph :math:`k` over its node set :math:`\mathcal{V}_k` (``n_k`` nodes, ``F``
features), as PyG computes them:

- ``LayerNorm(mode="graph")``: one mean and variance over all :math:`n_k F` entries,
  :math:`\mathbf{x}'_i = \frac{\mathbf{x}_i - \mu_k}{\sqrt{\sigma^2_k + \epsilon}} \odot \gamma + \beta`;
  without ``batch`` the whole input is one graph and the divisor is :math:`\sigma + \epsilon`
  (PyG's two forms differ there; both are kept). ``mode="node"`` is torch's per-row layer norm.
- ``GraphNorm``: per feature, :math:`\mathbf{x}'_i = \gamma \odot \frac{\mathbf{x}_i - \alpha
  \odot \mu_k}{\sqrt{\mathrm{mean}_{\mathcal{V}_k}((\mathbf{x} - \alpha \odot \mu_k)^2) + \epsilon}} + \beta`.
- ``InstanceNorm``: per feature and graph, biased variance for the output, unbiased for the
  running statistics (when ``track_running_stats``).
- ``BatchNorm``: ``torch.nn.BatchNorm1d`` kept as ``.module`` (PyG's layout).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.group_reduce import widened


class BatchIndexError(ValueError, RuntimeError):
    """A graph id in ``batch`` outside ``[0, batch_size)``."""


def graph_counts(x: Tensor, batch: Tensor | None, batch_size: int | None, who: str) -> tuple[Tensor, int]:
    """``(batch, batch_size)`` checked: one int64 id per row of ``x``, every id in range."""
    if batch is None:
        return torch.zeros(x.shape[0], dtype=torch.int64, device=x.device), 1 if batch_size is None else batch_size
    if not isinstance(batch, Tensor) or batch.dim() != 1 or batch.is_floating_point() or batch.dtype == torch.bool:
        raise TypeError(f"{who}: batch must be a 1-D integer tensor (the graph of each node), got "
                        f"{getattr(batch, 'dtype', type(batch).__name__)}")
    if batch.shape[0] != x.shape[0]:
        raise ValueError(f"{who}: batch has {batch.shape[0]} entries but x has {x.shape[0]} rows")
    if batch.numel():
        low, high = int(batch.min()), int(batch.max())  # one check before any scatter reads them
        batch_size = high + 1 if batch_size is None else batch_size
        if low < 0 or high >= batch_size:
            bad = low if low < 0 else high
            raise BatchIndexError(f"{who}: batch holds graph id {bad}, out of bounds for batch_size={batch_size}")
    elif batch_size is None:
        batch_size = 0
    return batch.to(torch.int64), batch_size


def graph_sum(x: Tensor, batch: Tensor, batch_size: int) -> Tensor:
    """Rows of ``x`` summed per graph: ``[batch_size, ...]``."""
    return x.new_zeros((batch_size,) + tuple(x.shape[1:])).index_add(0, batch, x)


def graph_sizes(batch: Tensor, batch_size: int, dtype: torch.dtype) -> Tensor:
    """Nodes per graph, at least 1 (an empty graph divides by 1), as a ``[batch_size, 1]`` column."""
    return torch.bincount(batch, minlength=batch_size).to(dtype).clamp(min=1).view(-1, 1)


class BatchNorm(torch.nn.Module):
    r"""Batch normalization over nodes: ``torch.nn.BatchNorm1d(in_channels, ...)`` held as
    ``self.module`` (PyG's parameter names ``module.weight``, ``module.running_mean``, ...).

    Args:
        in_channels (int): features per node.
        eps, momentum, affine, track_running_stats: as ``torch.nn.BatchNorm1d``.
        allow_single_element (bool, optional): a batch of one row is normalized with the running
            statistics instead of raising. (default: ``False``)
    """

    def __init__(self, in_channels: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, allow_single_element: bool = False,
                 device: torch.device | str | None = None):
        super().__init__()
        if allow_single_element and not track_running_stats:
            raise ValueError("BatchNorm(allow_single_element=True) requires 'track_running_stats' to be True: a "
                             "single row is normalized with the running statistics")
        self.in_channels = in_channels
        self.allow_single_element = allow_single_element
        self.module = torch.nn.BatchNorm1d(in_channels, eps, momentum, affine, track_running_stats, device=device)

    def reset_parameters(self) -> None:
        self.module.reset_parameters()

    def reset_running_stats(self) -> None:
        """The running mean and variance back to 0 and 1 (torch's and PyG's method)."""
        self.module.reset_running_stats()

    def forward(self, x: Tensor) -> Tensor:
        if self.allow_single_element and x.shape[0] <= 1:
            m = self.module
            return F.batch_norm(x, m.running_mean, m.running_var, m.weight, m.bias, False, 0.0, m.eps)
        return self.module(x)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.module.extra_repr()})"


class LayerNorm(torch.nn.Module):
    r"""Layer normalization per graph (``mode="graph"``) or per node (``mode="node"``); see the
    module docstring for the equations.

    Args:
        in_channels (int): features per node.
        eps (float, optional): added for numerical stability. (default: ``1e-5``)
        affine (bool, optional): learn ``weight`` (:math:`\gamma`) and ``bias`` (:math:`\beta`).
            (default: ``True``)
        mode (str, optional): ``"graph"`` or ``"node"``. (default: ``"graph"``)
    """

    def __init__(self, in_channels: int, eps: float = 1e-5, affine: bool = True, mode: str = "graph",
                 device: torch.device | str | None = None):
        super().__init__()
        if mode not in ("graph", "node"):
            raise ValueError(f"LayerNorm mode must be 'graph' or 'node', got {mode!r}")
        self.in_channels, self.eps, self.affine, self.mode = in_channels, eps, affine, mode
        if affine:
            self.weight = torch.nn.Parameter(torch.empty(in_channels, device=device))
            self.bias = torch.nn.Parameter(torch.empty(in_channels, device=device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            torch.nn.init.ones_(self.weight)
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Tensor, batch: Tensor | None = None, batch_size: int | None = None) -> Tensor:
        if self.mode == "node":
            return F.layer_norm(x, (self.in_channels,), self.weight, self.bias, self.eps)
        if batch is None:
            x = x - x.mean()
            out = x / (x.std(unbiased=False) + self.eps)
        else:
            batch, batch_size = graph_counts(x, batch, batch_size, "LayerNorm")
            # half precision: each graph's statistics in float32 (its entry count, nodes x features,
            # passes float16's 65,504 too), the output rounded once
            dtype, x = x.dtype, widened(x)
            entries = graph_sizes(batch, batch_size, x.dtype) * x.shape[-1]
            mean = graph_sum(x, batch, batch_size).sum(-1, keepdim=True) / entries
            x = x - mean.index_select(0, batch)
            var = graph_sum(x * x, batch, batch_size).sum(-1, keepdim=True) / entries
            out = (x / (var + self.eps).sqrt().index_select(0, batch)).to(dtype)
        return out * self.weight + self.bias if self.affine else out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, affine={self.affine}, mode={self.mode})"


class GraphNorm(torch.nn.Module):
    r"""Graph normalization of `"GraphNorm: A Principled Approach to Accelerating Graph Neural
    Network Training" <https://arxiv.org/abs/2009.03294>`_: per graph and feature, with a learned
    share :math:`\alpha` (``mean_scale``) of the mean removed; see the module docstring.

    Args:
        in_channels (int): features per node.
        eps (float, optional): added for numerical stability. (default: ``1e-5``)
    """

    def __init__(self, in_channels: int, eps: float = 1e-5, device: torch.device | str | None = None):
        super().__init__()
        self.in_channels, self.eps = in_channels, eps
        self.weight = torch.nn.Parameter(torch.empty(in_channels, device=device))
        self.bias = torch.nn.Parameter(torch.empty(in_channels, device=device))
        self.mean_scale = torch.nn.Parameter(torch.empty(in_channels, device=device))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        torch.nn.init.ones_(self.weight)
        torch.nn.init.zeros_(self.bias)
        torch.nn.init.ones_(self.mean_scale)

    def forward(self, x: Tensor, batch: Tensor | None = None, batch_size: int | None = None) -> Tensor:
        batch, batch_size = graph_counts(x, batch, batch_size, "GraphNorm")
        dtype, x = x.dtype, widened(x)
        sizes = graph_sizes(batch, batch_size, x.dtype)
        mean = graph_sum(x, batch, batch_size) / sizes
        out = x - mean.index_select(0, batch) * self.mean_scale
        var = graph_sum(out * out, batch, batch_size) / sizes
        return self.weight * (out / (var + self.eps).sqrt().index_select(0, batch)).to(dtype) + self.bias

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels})"


class InstanceNorm(torch.nn.modules.instancenorm._InstanceNorm):
    r"""Instance normalization per graph: each feature of each graph normalized over the graph's
    nodes (the biased variance), from `"Instance Normalization: The Missing Ingredient for Fast
    Stylization" <https://arxiv.org/abs/1607.08022>`_. Parameters and running statistics as
    ``torch.nn.InstanceNorm1d`` (whose base class this is, so the state_dict keys match).

    Args:
        in_channels (int): features per node.
        eps, momentum (float, optional): as ``torch.nn.InstanceNorm1d``.
        affine (bool, optional): learn ``weight`` and ``bias``. (default: ``False``)
        track_running_stats (bool, optional): keep running mean and (unbiased) variance, used in
            eval mode. (default: ``False``)
    """

    def __init__(self, in_channels: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device: torch.device | str | None = None):
        super().__init__(in_channels, eps, momentum, affine, track_running_stats, device=device)

    def _check_input_dim(self, x: Tensor) -> None:  # torch's hook; rows are nodes here
        if x.dim() != 2:
            raise ValueError(f"InstanceNorm expects node features [N, F], got {list(x.shape)}")

    def forward(self, x: Tensor, batch: Tensor | None = None, batch_size: int | None = None) -> Tensor:
        self._check_input_dim(x)
        if batch is None:
            out = F.instance_norm(x.t().unsqueeze(0), self.running_mean, self.running_var, self.weight, self.bias,
                                  self.training or not self.track_running_stats, self.momentum, self.eps)
            return out.squeeze(0).t()
        batch, batch_size = graph_counts(x, batch, batch_size, "InstanceNorm")
        dtype = x.dtype
        if self.training or not self.track_running_stats:
            x = widened(x)
            sizes = graph_sizes(batch, batch_size, x.dtype)
            mean = graph_sum(x, batch, batch_size) / sizes
            x = x - mean.index_select(0, batch)
            squares = graph_sum(x * x, batch, batch_size)
            var = squares / sizes
            if self.track_running_stats:
                unbiased = squares / (sizes - 1).clamp(min=1)
                with torch.no_grad():
                    self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean.mean(0))
                    self.running_var.mul_(1 - self.momentum).add_(self.momentum * unbiased.mean(0))
        else:
            x = x - self.running_mean.view(1, -1)
            var = self.running_var.view(1, -1).expand(batch_size, -1)
        out = (x / (var + self.eps).sqrt().index_select(0, batch)).to(dtype)
        if self.weight is not None and self.bias is not None:
            out = out * self.weight.view(1, -1) + self.bias.view(1, -1)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.num_features})"


__all__ = ["BatchNorm", "LayerNorm", "GraphNorm", "InstanceNorm", "BatchIndexError"]
