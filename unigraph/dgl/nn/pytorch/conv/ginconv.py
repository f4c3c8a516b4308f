r"""DGL's ``GINConv``: graph isomorphism network (https://arxiv.org/abs/1810.00826).

.. math::
    h_i' = f_\Theta\Big((1 + \epsilon) h_i + \operatorname{aggregate}_{j \in N(i)} e_{ji} h_j\Big)

``aggregator_type`` ``sum``, ``max`` or ``mean``; ``eps`` a parameter with ``learn_eps`` (else a
buffer), starting at ``init_eps``; ``apply_func`` is :math:`f_\Theta` (None: identity), then
``activation``.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_graph, expand_as_pair
from unigraph.nn.gin_conv import root_term

AGGREGATORS = ("sum", "max", "mean")


class GINConv(nn.Module):
    """Shapes: ``feat`` ``[N_src, D]`` (or a pair) -> ``apply_func``'s output for ``[N_dst, D]``."""

    def __init__(self, apply_func: Callable | None = None, aggregator_type: str = "sum", init_eps: float = 0.0,
                 learn_eps: bool = False, activation: Callable | None = None):
        super().__init__()
        if aggregator_type not in AGGREGATORS:
            raise DGLError(f"aggregator_type must be one of {AGGREGATORS}, got {aggregator_type!r}")
        self.apply_func, self._aggregator_type, self.activation = apply_func, aggregator_type, activation
        eps = torch.tensor([float(init_eps)])
        if learn_eps:
            self.eps = nn.Parameter(eps)
        else:
            self.register_buffer("eps", eps)

    def forward(self, graph, feat, edge_weight: Tensor | None = None) -> Tensor:
        graph = check_graph(graph, "GINConv")
        feat_src, feat_dst = expand_as_pair(feat, graph)
        neigh = (ops.gspmm(graph, "copy_u", self._aggregator_type, feat_src) if edge_weight is None
                 else ops.gspmm(graph, "u_mul_e", self._aggregator_type, feat_src, edge_weight))
        rst = root_term(self.eps, feat_dst) + neigh   # (1 + eps) * feat_dst, bit for bit
        if self.apply_func is not None:
            rst = self.apply_func(rst)
        return self.activation(rst) if self.activation is not None else rst
