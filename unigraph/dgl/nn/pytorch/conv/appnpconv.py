r"""DGL's ``APPNPConv``: personalized-PageRank propagation of APPNP (https://arxiv.org/abs/1810.05997).

.. math::
    H^{0} = X, \qquad
    H^{l+1} = (1 - \alpha)\, D_{in}^{-1/2} A\, D_{out}^{-1/2} H^{l} + \alpha H^{0}, \qquad
    \text{output } H^{K}

with :math:`D_{out}`, :math:`D_{in}` the source out-degrees and destination in-degrees, clamped to
at least 1 (add self-loops to get :math:`\tilde A = A + I`). With ``edge_weight`` the hop is
:math:`\tilde A H^l`, :math:`\tilde A` the weights normalised by ``EdgeWeightNorm('both')``.
``edge_drop``: in training, every hop drops each edge's message with that probability (scaling the
kept ones by :math:`1/(1-p)`), a fresh draw per hop, as DGL does. No parameters.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from unigraph.dgl.nn.pytorch.conv.edgeweightnorm import EdgeWeightNorm
from unigraph.dgl.nn.pytorch.utils import aggregate, check_edge_weight, check_homogeneous, inv_sqrt_degree


class APPNPConv(nn.Module):
    """Args (DGL's): ``k`` (iterations), ``alpha`` (teleport probability), ``edge_drop``.

    Shapes: ``feat`` ``[N, *]`` (at least one feature dimension) -> ``[N, *]``; ``edge_weight``
    ``[E]`` (positive). A block, a bipartite graph or a ``(src, dst)`` pair is refused (DGL fails
    on them too).
    """

    def __init__(self, k: int, alpha: float, edge_drop: float = 0.0):
        super().__init__()
        if k < 0:
            raise ValueError(f"APPNPConv: k (the number of iterations) must be >= 0, got {k}")
        self._k, self._alpha = k, alpha
        self.edge_drop = nn.Dropout(edge_drop)

    def forward(self, graph, feat: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        graph = check_homogeneous(graph, feat, "APPNPConv")
        if edge_weight is not None:
            check_edge_weight(graph, edge_weight, "APPNPConv")
            edge_weight = EdgeWeightNorm("both")(graph, edge_weight)
        else:
            src_scale = inv_sqrt_degree(graph.out_degrees(), feat)
            dst_scale = inv_sqrt_degree(graph.in_degrees(), feat)
        feat_0 = feat
        for _ in range(self._k):
            if edge_weight is not None:
                feat = aggregate(graph, feat, self.edge_drop(edge_weight))
            else:
                feat = aggregate(graph, feat * src_scale, self._dropped_ones(graph, feat)) * dst_scale
            feat = (1 - self._alpha) * feat + self._alpha * feat_0
        return feat

    def _dropped_ones(self, graph, feat: Tensor) -> Tensor | None:
        """The edge mask of one hop, ``[E, 1]``; None (no mask: every weight 1) when nothing is dropped."""
        if not (self.training and self.edge_drop.p > 0):
            return None
        return self.edge_drop(torch.ones(graph.num_edges, 1, dtype=feat.dtype, device=feat.device))

    def extra_repr(self) -> str:
        return f"k={self._k}, alpha={self._alpha}"
