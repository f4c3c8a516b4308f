r"""DGL's ``TAGConv``: topology adaptive graph convolution (https://arxiv.org/abs/1710.10370).

.. math::
    H = \sigma\Big(\big[X \,\|\, \hat A X \,\|\, \hat A^{2} X \,\|\, \cdots \,\|\, \hat A^{K} X\big]\,
    W^\top + b\Big), \qquad \hat A = \hat D^{-1/2} A \hat D^{-1/2},\;
    \hat D = \operatorname{diag}(\max(d^{in}, 1))

As in DGL, both sides are scaled by the *in*-degree. With ``edge_weight``, :math:`\hat A` is the
weighted adjacency normalised by ``EdgeWeightNorm('both')``. Parameters as DGL's: ``lin``
(``nn.Linear(in_feats * (k + 1), out_feats)``), its weight Glorot normal with the ReLU gain, its
bias left at ``nn.Linear``'s own initialisation (DGL does not reset it).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from unigraph.dgl.nn.pytorch.conv.edgeweightnorm import EdgeWeightNorm
from unigraph.dgl.nn.pytorch.utils import aggregate, check_edge_weight, check_homogeneous, inv_sqrt_degree


class TAGConv(nn.Module):
    """Args (DGL's): ``in_feats``, ``out_feats``, ``k`` (hops), ``bias``, ``activation``.

    Shapes: ``feat`` ``[N, *, in_feats]`` -> ``[N, *, out_feats]``; ``edge_weight`` ``[E]``
    (positive). A block, a bipartite graph or a ``(src, dst)`` pair is refused (DGL refuses a graph
    that is not homogeneous).
    """

    def __init__(self, in_feats: int, out_feats: int, k: int = 2, bias: bool = True,
                 activation: Callable | None = None):
        super().__init__()
        if k < 0:
            raise ValueError(f"TAGConv: k (the number of hops) must be >= 0, got {k}")
        self._in_feats, self._out_feats, self._k = in_feats, out_feats, k
        self._activation = activation
        self.lin = nn.Linear(in_feats * (k + 1), out_feats, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_normal_(self.lin.weight, gain=nn.init.calculate_gain("relu"))

    def forward(self, graph, feat: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        graph = check_homogeneous(graph, feat, "TAGConv")
        hops = [feat]
        if edge_weight is not None:
            check_edge_weight(graph, edge_weight, "TAGConv")
            weight = EdgeWeightNorm("both")(graph, edge_weight)
            for _ in range(self._k):
                hops.append(aggregate(graph, hops[-1], weight))
        else:
            scale = inv_sqrt_degree(graph.in_degrees(), feat)
            for _ in range(self._k):
                hops.append(aggregate(graph, hops[-1] * scale, None) * scale)
        rst = self.lin(torch.cat(hops, dim=-1))
        return self._activation(rst) if self._activation is not None else rst

    def extra_repr(self) -> str:
        return f"in={self._in_feats}, out={self._out_feats}, k={self._k}"
