r"""DGL's ``ChebConv``: Chebyshev spectral graph convolution (https://arxiv.org/abs/1606.09375).

.. math::
    \hat L = \frac{2}{\lambda_{max}} \big(I - \hat D^{-1/2} A \hat D^{-1/2}\big) - I, \qquad
    T_0 = X,\; T_1 = \hat L X,\; T_k = 2 \hat L T_{k-1} - T_{k-2}, \qquad
    H = \sigma\big([T_0 \,\|\, T_1 \,\|\, \cdots \,\|\, T_{K-1}]\, W^\top + b\big)

with :math:`\hat D = \operatorname{diag}(\max(d^{in}, 1))` on both sides (as in DGL) and
:math:`\lambda_{max}` the largest eigenvalue of each graph's normalised Laplacian, one per graph
of a batch (``dgl.laplacian_lambda_max``); not given, 2 for every graph (with a warning, as DGL).
``K`` is the number of Chebyshev terms (``k``). Parameters as DGL's: ``linear``
(``nn.Linear(k * in_feats, out_feats)``, its own initialisation).
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_homogeneous, inv_sqrt_degree


class ChebConv(nn.Module):
    """Args (DGL's): ``in_feats``, ``out_feats``, ``k`` (Chebyshev terms, >= 1), ``activation``
    (default ReLU), ``bias``.

    Shapes: ``feat`` ``[N, in_feats]`` -> ``[N, out_feats]``; ``lambda_max`` a list of floats or a
    tensor ``[B]`` / ``[B, 1]``, one value per graph of the batch. A block, a bipartite graph or a
    ``(src, dst)`` pair is refused (DGL fails on them too).
    """

    def __init__(self, in_feats: int, out_feats: int, k: int, activation: Callable | None = F.relu,
                 bias: bool = True):
        super().__init__()
        if k < 1:
            raise ValueError(f"ChebConv: k (the number of Chebyshev terms) must be >= 1, got {k}")
        self._k, self._in_feats, self._out_feats = k, in_feats, out_feats
        self.activation = activation
        self.linear = nn.Linear(k * in_feats, out_feats, bias)

    def reset_parameters(self) -> None:
        self.linear.reset_parameters()

    def forward(self, graph, feat: Tensor, lambda_max: Any = None) -> Tensor:
        graph = check_homogeneous(graph, feat, "ChebConv", min_dim=2, max_dim=2)
        re_norm = 2.0 / self._per_node_lambda_max(graph, lambda_max, feat)   # [N, 1]
        scale = inv_sqrt_degree(graph.in_degrees(), feat)

        def laplacian_part(x: Tensor) -> Tensor:   # \hat L x = -re_norm * (D^-1/2 A D^-1/2 x) + (re_norm - 1) x
            return -re_norm * (ops.gspmm(graph, "copy_u", "sum", x * scale) * scale) + x * (re_norm - 1)

        terms = [feat]
        if self._k > 1:
            terms.append(laplacian_part(feat))
        for _ in range(2, self._k):
            terms.append(2 * laplacian_part(terms[-1]) - terms[-2])
        rst = self.linear(torch.cat(terms, dim=1))
        return self.activation(rst) if self.activation else rst

    @staticmethod
    def _per_node_lambda_max(graph, lambda_max: Any, feat: Tensor) -> Tensor:
        """Each graph's :math:`\\lambda_{max}` repeated over its nodes, ``[N, 1]`` (``[N, D]`` from a
        ``[B, D]`` tensor), in ``feat``'s dtype and device."""
        batch = graph.batch_size
        if lambda_max is None:
            warnings.warn("ChebConv: lambda_max not given, using 2 for every graph; dgl.laplacian_lambda_max "
                          "computes the true value", UserWarning, stacklevel=3)
            lambda_max = [2.0] * batch
        if isinstance(lambda_max, (list, tuple)):   # Python floats: torch's default dtype first, as DGL
            lambda_max = torch.tensor(lambda_max, dtype=torch.get_default_dtype()).to(feat)
        if not isinstance(lambda_max, Tensor):
            raise TypeError(f"ChebConv: lambda_max must be a list of floats or a tensor (one value per graph), got "
                            f"{type(lambda_max).__name__}")
        if lambda_max.dim() == 1:
            lambda_max = lambda_max.unsqueeze(-1)
        if lambda_max.dim() != 2 or lambda_max.shape[0] != batch:
            raise DGLError(f"ChebConv: lambda_max needs one value per graph ({batch} in this batch); got shape "
                           f"{tuple(lambda_max.shape)}")
        counts = graph.batch_num_nodes().to(lambda_max.device)
        return torch.repeat_interleave(lambda_max.to(feat), counts, dim=0)

    def extra_repr(self) -> str:
        return f"in={self._in_feats}, out={self._out_feats}, k={self._k}"
