r"""DGL's ``PathEncoder``: Graphormer's edge encoding along shortest paths
(https://arxiv.org/abs/2106.05234), one attention bias per node pair and head.

.. math::
    b_{xy}^h = \frac{1}{\min(\max(d_{xy}, 1), L)} \sum_{l=1}^{L} \big\langle p_{xy}^{(l)},\, w^{h}_{l} \big\rangle

with :math:`d_{xy}` the shortest-path distance (-1 where unreachable, so clamped to 1),
:math:`p_{xy}^{(l)}` the features of the path's ``l``-th edge (zero padding past the path's end)
and :math:`w^h_l` the learned embedding of position ``l`` for head ``h``; :math:`L` =
``max_len``. The inputs are DGL 2.1's: ``dist`` and the edge features gathered along the paths
(``edata[path[..., :max_len]]`` from ``dgl.shortest_dist(g, return_paths=True)`` with a zero
row appended for the padding index -1), batched with zero padding; not the graph itself.

Parameters as DGL's: ``embedding_table`` (``nn.Embedding(max_len * num_heads, feat_dim)``, row
``l * num_heads + h``), PyTorch's default initialisation.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from unigraph.dgl.base import DGLError


class PathEncoder(nn.Module):
    """Args (DGL's): ``max_len`` (path edges encoded; longer paths are cut), ``feat_dim`` (edge
    feature width), ``num_heads``.

    Shapes: ``dist`` ``[B, N, N]``, ``path_data`` ``[B, N, N, max_len, feat_dim]`` ->
    ``[B, N, N, num_heads]``.
    """

    def __init__(self, max_len: int, feat_dim: int, num_heads: int = 1):
        super().__init__()
        for name, value in (("max_len", max_len), ("feat_dim", feat_dim), ("num_heads", num_heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DGLError(f"PathEncoder: {name} must be a positive int, got {value!r}")
        self.max_len, self.feat_dim, self.num_heads = max_len, feat_dim, num_heads
        self.embedding_table = nn.Embedding(max_len * num_heads, feat_dim)

    def _check(self, dist, path_data) -> None:
        if not isinstance(dist, Tensor) or dist.dim() != 3:
            raise DGLError("PathEncoder: dist must be a tensor [B, N, N] of shortest-path distances, got "
                           + (f"shape {list(dist.shape)}" if isinstance(dist, Tensor) else type(dist).__name__))
        if not isinstance(path_data, Tensor) or not path_data.is_floating_point() or path_data.dim() != 5:
            raise DGLError("PathEncoder: path_data must be a floating-point tensor [B, N, N, max_len, feat_dim], got "
                           + (f"{path_data.dtype} {list(path_data.shape)}" if isinstance(path_data, Tensor)
                              else type(path_data).__name__))
        want = tuple(dist.shape) + (self.max_len, self.feat_dim)
        if tuple(path_data.shape) != want:
            raise DGLError(f"PathEncoder: path_data must be {list(want)} for dist {list(dist.shape)} (max_len="
                           f"{self.max_len}, feat_dim={self.feat_dim}; pad shorter paths with zero features), got "
                           f"{list(path_data.shape)}")

    def forward(self, dist: Tensor, path_data: Tensor) -> Tensor:
        self._check(dist, path_data)
        hops = torch.clamp(dist, min=1, max=self.max_len).unsqueeze(-1)            # [B, N, N, 1]
        position = self.embedding_table.weight.view(self.max_len, self.num_heads, self.feat_dim)
        return torch.einsum("bxyld,lhd->bxyh", path_data, position) / hops
