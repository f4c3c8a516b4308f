r"""DGL's ``GCN2Conv``: GCNII's layer, initial residual and identity mapping
(https://arxiv.org/abs/2007.02133).

.. math::
    S = (1 - \alpha)\, \hat A H + \alpha H^{(0)}, \qquad
    H' = \sigma\big((1 - \beta) S + \beta\, S W_1 + b\big), \qquad
    \beta = \log\Big(\frac{\lambda}{\ell} + 1\Big)

with :math:`\hat A = \hat D^{-1/2} A \hat D^{-1/2}`, :math:`\hat D = \operatorname{diag}(\max(d^{in}, 1))`
(both sides by the *in*-degree, as in DGL), or with ``edge_weight`` the weighted adjacency
normalised by ``EdgeWeightNorm('both')``. With ``project_initial_features=False`` the two parts are
projected apart: :math:`S W_1` becomes :math:`(1 - \alpha)\hat A H\, W_1 + \alpha H^{(0)} W_2`.
``H^{(0)}`` may have more rows than the graph has nodes (its first ``N`` are used, as in DGL).
Parameters as DGL's: ``weight1`` (and ``weight2``) ``[in, in]``, standard normal; ``bias`` ``[in]``,
zeros.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor, nn

from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.conv.edgeweightnorm import EdgeWeightNorm
from unigraph.dgl.nn.pytorch.utils import (
    aggregate, check_edge_weight, check_homogeneous, check_zero_in_degree, inv_sqrt_degree)


class GCN2Conv(nn.Module):
    """Args (DGL's): ``in_feats``, ``layer`` (:math:`\\ell`, from 1), ``alpha``, ``lambda_``,
    ``project_initial_features``, ``allow_zero_in_degree``, ``bias``, ``activation``.

    Shapes: ``feat`` ``[N, in_feats]``, ``feat_0`` ``[>= N, in_feats]`` -> ``[N, in_feats]``;
    ``edge_weight`` ``[E]`` (positive). A block, a bipartite graph or a ``(src, dst)`` pair is
    refused (DGL fails on them too).
    """

    def __init__(self, in_feats: int, layer: int, alpha: float = 0.1, lambda_: float = 1,
                 project_initial_features: bool = True, allow_zero_in_degree: bool = False, bias: bool = True,
                 activation: Callable | None = None):
        super().__init__()
        if layer <= 0:
            raise ValueError(f"GCN2Conv: layer (the index of this layer, from 1) must be > 0, got {layer}")
        self._in_feats = in_feats
        self._project_initial_features = project_initial_features
        self.alpha, self.beta = alpha, math.log(lambda_ / layer + 1)
        self._bias, self._activation = bias, activation
        self._allow_zero_in_degree = allow_zero_in_degree
        self.weight1 = nn.Parameter(torch.empty(in_feats, in_feats))
        if project_initial_features:
            self.register_parameter("weight2", None)
        else:
            self.weight2 = nn.Parameter(torch.empty(in_feats, in_feats))
        if bias:
            self.bias = nn.Parameter(torch.empty(in_feats))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight1)
        if self.weight2 is not None:
            nn.init.normal_(self.weight2)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        self._allow_zero_in_degree = set_value

    def forward(self, graph, feat: Tensor, feat_0: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        graph = check_homogeneous(graph, feat, "GCN2Conv", min_dim=2, max_dim=2)
        check_zero_in_degree(graph, "GCN2Conv", self._allow_zero_in_degree)
        if not isinstance(feat_0, Tensor) or feat_0.dim() != 2 or feat_0.shape[0] < graph.num_nodes:
            shape = tuple(feat_0.shape) if isinstance(feat_0, Tensor) else type(feat_0).__name__
            raise DGLError(f"GCN2Conv: feat_0 (the initial features) must be [N, in_feats] with at least "
                           f"N = {graph.num_nodes} rows; got {shape}")
        neigh = (1 - self.alpha) * self._hop(graph, feat, edge_weight)
        initial = feat_0[: graph.num_nodes] * self.alpha
        mixed = neigh + initial
        if self.weight2 is None:
            projected = mixed @ self.weight1
        else:
            projected = neigh @ self.weight1 + initial @ self.weight2
        rst = (1 - self.beta) * mixed + self.beta * projected
        if self.bias is not None:
            rst = rst + self.bias
        return self._activation(rst) if self._activation is not None else rst

    def _hop(self, graph, feat: Tensor, edge_weight: Tensor | None) -> Tensor:
        """:math:`\\hat A H`."""
        if edge_weight is not None:
            check_edge_weight(graph, edge_weight, "GCN2Conv")
            return aggregate(graph, feat, EdgeWeightNorm("both")(graph, edge_weight))
        scale = inv_sqrt_degree(graph.in_degrees(), feat)
        return aggregate(graph, feat * scale, None) * scale

    def extra_repr(self) -> str:
        return f"in={self._in_feats}, alpha={self.alpha}, beta={self.beta}"
