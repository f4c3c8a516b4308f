r"""DGL's ``DenseGraphConv``: :class:`GraphConv` on a dense adjacency matrix ``A`` ``[N_dst, N_src]``
(row = destination, column = source; entries are edge counts or weights).

.. math::
    H' = \sigma\big(D_{dst}^{-1/2} A D_{src}^{-1/2} X W + b\big) \;(\text{norm='both'}),
    \qquad D_{dst} = \operatorname{diag}(\max(A \mathbf{1}, 1)),\;
    D_{src} = \operatorname{diag}(\max(A^\top \mathbf{1}, 1))

``norm='right'``: :math:`D_{dst}^{-1} A X W`; ``'none'``: :math:`A X W`. The degrees are the sums of
``A``'s rows and columns, clamped to at least 1. The same function as :class:`GraphConv` on the
graph of ``A`` (DGL's tests check exactly that); parameters as DGL's: ``weight`` ``[in, out]``
(Glorot uniform), ``bias`` ``[out]`` (zeros).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import dense_adjacency

NORMS = ("none", "both", "right")


def _column(scale: Tensor, like: Tensor) -> Tensor:
    """``scale`` ``[N]`` shaped to multiply the rows of ``like`` ``[N, ...]``."""
    return scale.view(-1, *([1] * (like.dim() - 1)))


class DenseGraphConv(nn.Module):
    """Args (DGL's): ``in_feats``, ``out_feats``, ``norm`` (``'both'``, ``'right'``, ``'none'``),
    ``bias``, ``activation``.

    Shapes: ``adj`` ``[N_dst, N_src]``, ``feat`` ``[N_src, in_feats]`` -> ``[N_dst, out_feats]``.
    """

    def __init__(self, in_feats: int, out_feats: int, norm: str = "both", bias: bool = True,
                 activation: Callable | None = None):
        super().__init__()
        if norm not in NORMS:
            raise DGLError(f"DenseGraphConv: norm must be one of {NORMS}, got {norm!r}")
        self._in_feats, self._out_feats, self._norm = in_feats, out_feats, norm
        self.weight = nn.Parameter(torch.empty(in_feats, out_feats))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_feats))
        else:
            self.register_buffer("bias", None)
        self._activation = activation
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, adj: Tensor, feat: Tensor) -> Tensor:
        adj = dense_adjacency(adj, feat, "DenseGraphConv")
        h = feat
        if self._norm == "both":
            h = h * _column(adj.sum(0).clamp(min=1).pow(-0.5), h)
        if self._in_feats > self._out_feats:   # W on the narrower side of the product with A
            rst = adj @ (h @ self.weight)
        else:
            rst = (adj @ h) @ self.weight
        if self._norm != "none":
            degrees = adj.sum(1).clamp(min=1)
            rst = rst * _column(degrees.pow(-0.5) if self._norm == "both" else 1.0 / degrees, rst)
        if self.bias is not None:
            rst = rst + self.bias
        return self._activation(rst) if self._activation is not None else rst

    def extra_repr(self) -> str:
        return f"in={self._in_feats}, out={self._out_feats}, normalization={self._norm}"
