"""GMMConv: the Gaussian mixture model convolution (MoNet)."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import Parameter
from torch.nn.parameter import UninitializedParameter

from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import channels_pair, check_positive, glorot_
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.layer_inputs import (
    aggr_name, edge_feature_inputs, pseudo_coordinates, root_and_bias, size_linear, sized_widths)
from unigraph.nn.nn_conv import row_times_matrix
from unigraph.nn.projection import dense, linear

# keeps a zero width from dividing by zero, as PyG's
_EPS = 1e-15


class GMMConv(MessagePassing):
    r"""The Gaussian mixture model convolution from `"Geometric Deep Learning on Graphs and
    Manifolds using Mixture Model CNNs" <https://arxiv.org/abs/1611.08402>`_:

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{\Theta}_r \mathbf{x}_i + \bigoplus_{j \in \mathcal{N}(i)}
        \frac{1}{K} \sum_{k=1}^K \mathbf{w}_k(\mathbf{e}_{j,i}) \odot \mathbf{\Theta}_k
        \mathbf{x}_j + \mathbf{b},
        \qquad \mathbf{w}_k(\mathbf{e}) = \exp \left( -\frac{1}{2} (\mathbf{e} -
        \mathbf{\mu}_k)^{\top} \Sigma_k^{-1} (\mathbf{e} - \mathbf{\mu}_k) \right)

    with learned means :math:`\mathbf{\mu}_k`, diagonal covariances
    :math:`\Sigma_k = \operatorname{diag}(\mathbf{\sigma}_k^2)` and :math:`\bigoplus` the mean by
    default. As in PyG, the :math:`1/K` is not applied (it is absorbed by :math:`\mathbf{\Theta}`).
    The pseudo-coordinates :math:`\mathbf{e}_{j,i}` are usually :math:`\mathbf{p}_j - \mathbf{p}_i`
    (PyG's ``Cartesian`` transform).

    The :math:`K` projections :math:`\mathbf{\Theta}_k \mathbf{x}_j` run once per source node
    (``x @ g``, ``[N, K * F_out]``) and the :math:`[E, K]` Gaussian weights once per edge; the
    message is their weighted sum over :math:`k`. With ``separate_gaussians`` every pair of input
    and output channels has its own mixture: each edge gets an :math:`F_{in} \times F_{out}`
    filter :math:`\sum_k g_{f,m,k} \mathbf{w}_{f,m,k}(\mathbf{e})`, applied to its source row.

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes;
            ``-1`` infers it on the first call.
        out_channels (int): size of each output sample.
        dim (int): pseudo-coordinate dimensionality :math:`D`.
        kernel_size (int): number of kernels :math:`K`.
        separate_gaussians (bool, optional): one mixture per (input, output) channel pair.
            (default: ``False``)
        aggr (str, optional): ``"mean"``, ``"add"``, ``"max"``, ... or an aggregation module, as
            PyG's. (default: ``"mean"``)
        root_weight (bool, optional): add :math:`\mathbf{\Theta}_r \mathbf{x}_i`. (default: ``True``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``, ...).

    Shapes:
        - **input:** ``(g, x, edge_attr)`` or PyG's ``(x, edge_index, edge_attr)`` with ``size``
          (:mod:`unigraph.call_forms`; a ``SparseTensor``'s values, or a torch sparse adjacency's
          ``[E, D]`` values, are the pseudo-coordinates), node features
          :math:`(|\mathcal{V}|, F_{in})` or a pair :math:`((|\mathcal{V}_s|, F_{s}),
          (|\mathcal{V}_t|, F_{t}))` (``x_t`` may be ``None``: no root term), pseudo-coordinates
          :math:`(|\mathcal{E}|, D)`
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, dim: int, kernel_size: int,
                 separate_gaussians: bool = False, aggr: Any = "mean", root_weight: bool = True, bias: bool = True,
                 **kwargs: Any):
        super().__init__(aggr=aggr, **kwargs)
        who = type(self).__name__
        self._aggr_name = aggr_name(aggr, self.aggr)
        self.in_channels = in_channels
        self._widths = channels_pair(in_channels, who, lazy=True)
        self._lazy = LAZY in self._widths
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.dim = check_positive(dim, "dim", who)
        self.kernel_size = check_positive(kernel_size, "kernel_size", who)
        self.separate_gaussians = bool(separate_gaussians)
        self.root_weight = bool(root_weight)
        self.rel_in_channels = self._widths[0]
        if self._widths[0] == LAZY:
            self.g, self.mu, self.sigma = UninitializedParameter(), UninitializedParameter(), UninitializedParameter()
        else:
            shapes = self._parameter_shapes(self._widths[0])
            self.g, self.mu, self.sigma = (Parameter(torch.empty(shape)) for shape in shapes)
        self.root = make_linear(self._widths[1], out_channels, bias=False) if root_weight else None
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def _parameter_shapes(self, width: int) -> tuple[tuple, tuple, tuple]:
        """The shapes of ``g`` (the K projections side by side), ``mu`` and ``sigma``."""
        M, K, D = self.out_channels, self.kernel_size, self.dim
        gaussians = (width, M, K, D) if self.separate_gaussians else (K, D)
        return (width, M * K), gaussians, gaussians

    def reset_parameters(self) -> None:
        for parameter in (self.g, self.mu, self.sigma):
            glorot_(parameter)   # (skips a lazy one: sized and initialized on the first call)
        if self.root is not None:
            glorot_(self.root.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Any, edge_index: Any, edge_attr: Tensor | None = None, size: Any = None) -> Tensor:
        g, x_src, x_dst, edge_attr = edge_feature_inputs(self, x, edge_index, edge_attr, size)
        edge_attr = pseudo_coordinates(edge_attr, self.dim, type(self).__name__)
        if self.separate_gaussians:
            out = self.propagate(g, x=dense(x_src), filters=self._edge_filters(edge_attr))
        else:
            # [N, K * F_out]: each source row through the K projections, before any gather
            projected = linear(x_src, self.g.t())
            out = self.propagate(g, x=projected, mixture=_gaussians(edge_attr, self.mu, self.sigma))
        return root_and_bias(out, x_dst, self.root, self.bias)

    def _edge_filters(self, edge_attr: Tensor) -> Tensor:
        """``[E, F_in, F_out]``: each edge's filter :math:`\\sum_k g_{f,m,k} w_{f,m,k}(e)`."""
        F, M, K, D = self.rel_in_channels, self.out_channels, self.kernel_size, self.dim
        weights = _gaussians(edge_attr, self.mu.view(-1, D), self.sigma.view(-1, D)).view(-1, F, M, K)
        return (weights * self.g.view(1, F, M, K)).sum(dim=-1)

    def message(self, x_j: Tensor, mixture: Tensor | None = None, filters: Tensor | None = None) -> Tensor:
        if filters is not None:
            return row_times_matrix(x_j, filters)
        # x_j: [E, K * F_out], the K projections of the source row; mixture: [E, K]
        kernels = mixture.shape[1]
        return (x_j.view(x_j.shape[0], kernels, x_j.shape[1] // kernels) * mixture.unsqueeze(-1)).sum(dim=1)

    def _materialize(self, x_src: Tensor, x_dst: Tensor | None) -> None:
        self._widths = sized_widths(self._widths, x_src, x_dst)
        self.rel_in_channels = self._widths[0]
        if isinstance(self.g, UninitializedParameter):
            with torch.no_grad():
                for parameter, shape in zip((self.g, self.mu, self.sigma), self._parameter_shapes(self._widths[0])):
                    parameter.materialize(shape)
                    glorot_(parameter)
        size_linear(self.root, self._widths[1], glorot_)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, dim={self.dim})"


def _gaussians(pseudo: Tensor, mu: Tensor, sigma: Tensor) -> Tensor:
    """``[E, C]``: :math:`\\exp(-\\frac{1}{2} \\sum_d (e_d - \\mu_{c,d})^2 / (\\epsilon + \\sigma_{c,d}^2))`
    for every edge and every one of the ``C`` Gaussians (``mu``, ``sigma``: ``[C, D]``), summed
    one dimension at a time (no ``[E, C, D]`` tensor)."""
    exponent = None
    for d in range(pseudo.shape[1]):   # (D, the pseudo-coordinates' dimensionality: 1 to 3)
        term = (pseudo[:, d:d + 1] - mu[:, d]).pow(2) / (_EPS + sigma[:, d].pow(2))
        exponent = term if exponent is None else exponent + term
    return torch.exp(-0.5 * exponent)
