r"""DGL's ``DenseChebConv``: Chebyshev spectral graph convolution (https://arxiv.org/abs/1606.09375)
on a dense square adjacency matrix ``A`` (row = destination, column = source).

.. math::
    L = I - D^{-1/2} A D^{-1/2}, \quad \hat{L} = \frac{2 L}{\lambda_{max}} - I, \quad
    Z_0 = I,\; Z_1 = \hat{L},\; Z_k = 2 \hat{L} Z_{k-1} - Z_{k-2}, \quad
    H' = \sum_{k=0}^{K-1} Z_k X W_k + b

with :math:`D = \operatorname{diag}(\max(A\mathbf{1}, 1))`. ``lambda_max`` None: the largest real
part of :math:`L`'s eigenvalues (``torch.linalg.eigvals``; DGL 2.1 calls ``torch.eig``, which
current torch no longer has). Parameters as DGL's: ``W`` ``[k, in, out]`` (Glorot normal with the
ReLU gain per slice), ``bias`` ``[out]`` (zeros).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import dense_adjacency


class DenseChebConv(nn.Module):
    """Args (DGL's): ``in_feats``, ``out_feats``, ``k`` (the number of Chebyshev terms), ``bias``.

    Shapes: ``adj`` ``[N, N]``, ``feat`` ``[N, in_feats]`` -> ``[N, out_feats]``; ``lambda_max`` a
    number, a one-element tensor or list, or None.
    """

    def __init__(self, in_feats: int, out_feats: int, k: int, bias: bool = True):
        super().__init__()
        if k < 1:
            raise DGLError(f"DenseChebConv: k must be at least 1, got {k}")
        self._in_feats, self._out_feats, self._k = in_feats, out_feats, k
        self.W = nn.Parameter(torch.empty(k, in_feats, out_feats))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_feats))
        else:
            self.register_buffer("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        for i in range(self._k):
            nn.init.xavier_normal_(self.W[i], nn.init.calculate_gain("relu"))

    def forward(self, adj: Tensor, feat: Tensor, lambda_max=None) -> Tensor:
        a = dense_adjacency(adj, feat, "DenseChebConv", square=True)
        n = a.shape[0]
        scale = a.sum(1).clamp(min=1).rsqrt()
        eye = torch.eye(n, dtype=a.dtype, device=a.device)
        laplacian = eye - scale[:, None] * a * scale[None, :]
        if lambda_max is None:
            lambda_max = torch.linalg.eigvals(laplacian).real.max()
        elif isinstance(lambda_max, (list, tuple)):
            lambda_max = lambda_max[0]
        l_hat = 2 * laplacian / lambda_max - eye
        # sum_k Z_k X W_k with Z_k X built by the recurrence on X's columns (no N x N powers)
        terms = [feat]
        if self._k > 1:
            terms.append(l_hat @ feat)
        for _ in range(2, self._k):
            terms.append(2 * (l_hat @ terms[-1]) - terms[-2])
        rst = sum(t @ w for t, w in zip(terms, self.W))
        return rst + self.bias if self.bias is not None else rst
