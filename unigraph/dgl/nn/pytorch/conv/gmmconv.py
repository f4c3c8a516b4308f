r"""DGL's ``GMMConv``: MoNet's Gaussian mixture model convolution (https://arxiv.org/abs/1611.08402).

.. math::
    w_k(u_{ji}) = \exp\Big(-\tfrac{1}{2} \sum_{d} \big(u_{ji,d} - \mu_{k,d}\big)^2 \sigma^{-2}_{k,d}\Big),
    \qquad
    h_i' = \sum_{k=1}^{K} \operatorname{aggregate}_{j \in N(i)} w_k(u_{ji})\, W_k h_j
    \;(+\ \mathrm{res}(h_i) + b)

with :math:`u_{ji}` the edge's pseudo-coordinates (``pseudo``, ``dim`` of them), ``K = n_kernels``
Gaussian kernels (``mu`` and ``inv_sigma`` :math:`= \sigma^{-1}`, each ``[K, dim]``) and ``fc``
the ``K`` maps :math:`W_k` stacked. The aggregation (``sum``, ``mean`` or ``max``, per kernel) is
one g-SpMM of the ``[N, K, out]`` projections by the ``[E, K, 1]`` weights. Parameters as DGL's:
``fc`` and ``res_fc`` Glorot normal (ReLU gain), ``mu`` normal(0, 0.1), ``inv_sigma`` ones,
``bias`` zeros.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_graph, check_zero_in_degree, expand_as_pair

AGGREGATORS = ("sum", "mean", "max")


class GMMConv(nn.Module):
    """Args (DGL's): ``in_feats`` (an int or a ``(src, dst)`` pair), ``out_feats``, ``dim``,
    ``n_kernels``, ``aggregator_type``, ``residual``, ``bias``, ``allow_zero_in_degree``.

    Shapes: ``feat`` ``[N_src, in]`` (or a pair), ``pseudo`` ``[E, dim]`` -> ``[N_dst, out_feats]``.
    """

    def __init__(self, in_feats, out_feats: int, dim: int, n_kernels: int, aggregator_type: str = "sum",
                 residual: bool = False, bias: bool = True, allow_zero_in_degree: bool = False):
        super().__init__()
        if aggregator_type not in AGGREGATORS:
            raise DGLError(f"GMMConv: aggregator_type must be one of {AGGREGATORS}, got {aggregator_type!r}")
        self._in_src_feats, self._in_dst_feats = in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats)
        self._out_feats, self._dim, self._n_kernels = out_feats, dim, n_kernels
        self._aggre_type = aggregator_type
        self._allow_zero_in_degree = allow_zero_in_degree
        self.mu = nn.Parameter(torch.empty(n_kernels, dim))
        self.inv_sigma = nn.Parameter(torch.empty(n_kernels, dim))
        self.fc = nn.Linear(self._in_src_feats, n_kernels * out_feats, bias=False)
        if residual:
            self.res_fc = (nn.Linear(self._in_dst_feats, out_feats, bias=False) if self._in_dst_feats != out_feats
                           else nn.Identity())
        else:
            self.register_buffer("res_fc", None)
        if bias:
            self.bias = nn.Parameter(torch.empty(out_feats))
        else:
            self.register_buffer("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_normal_(self.fc.weight, gain=gain)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)
        nn.init.normal_(self.mu, 0, 0.1)
        nn.init.constant_(self.inv_sigma, 1)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        self._allow_zero_in_degree = set_value

    def kernel_weights(self, pseudo: Tensor) -> Tensor:
        """``w_k(u_e)`` for every edge and kernel: ``[E, K, 1]``."""
        offset = pseudo.reshape(-1, 1, self._dim) - self.mu.view(1, self._n_kernels, self._dim)
        exponent = -0.5 * offset.square() * self.inv_sigma.view(1, self._n_kernels, self._dim).square()
        return torch.exp(exponent.sum(dim=-1, keepdim=True))

    def forward(self, graph, feat, pseudo: Tensor) -> Tensor:
        graph = check_graph(graph, "GMMConv")
        check_zero_in_degree(graph, "GMMConv", self._allow_zero_in_degree)
        feat_src, feat_dst = expand_as_pair(feat, graph)
        if not isinstance(pseudo, Tensor) or pseudo.dim() == 0 or pseudo.shape[0] != graph.num_edges \
                or pseudo[0].numel() != self._dim:
            got = list(pseudo.shape) if isinstance(pseudo, Tensor) else type(pseudo).__name__
            raise DGLError(f"GMMConv: pseudo must be [{graph.num_edges}, {self._dim}] (one row of dim coordinates "
                           f"per edge), got {got}")
        projected = self.fc(feat_src).view(-1, self._n_kernels, self._out_feats)
        rst = ops.gspmm(graph, "u_mul_e", self._aggre_type, projected, self.kernel_weights(pseudo)).sum(dim=1)
        if self.res_fc is not None:
            rst = rst + self.res_fc(feat_dst)
        if self.bias is not None:
            rst = rst + self.bias
        return rst
