r"""DGL's ``GraphConv``: Kipf and Welling's graph convolution (https://arxiv.org/abs/1609.02907).

.. math::
    h_i^{(l+1)} = \sigma\Big(b + \sum_{j \in N(i)} \frac{e_{ji}}{c_{ji}} h_j^{(l)} W\Big),
    \qquad c_{ji} = \sqrt{d^{out}_j}\sqrt{d^{in}_i} \;(\text{norm='both'})

``norm='right'``: :math:`c_{ji} = d^{in}_i`; ``'left'``: :math:`d^{out}_j`; ``'none'``: 1. Degrees
are clamped to at least 1; on a block they are the block's own. No self-loops are added: add them
to the graph (``dgl.add_self_loop``). Parameters as DGL's: ``weight`` ``[in, out]`` (Glorot
uniform), ``bias`` ``[out]`` (zeros).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.conv.edgeweightnorm import EdgeWeightNorm  # noqa: F401 (DGL defines it in graphconv)
from unigraph.dgl.nn.pytorch.utils import check_graph, check_zero_in_degree, expand_as_pair

NORMS = ("none", "both", "right", "left")


class GraphConv(nn.Module):
    """Args (DGL's): ``in_feats``, ``out_feats``, ``norm`` (see the module docstring),
    ``weight`` (learn ``W``; ``False``: pass it to ``forward``), ``bias``, ``activation``,
    ``allow_zero_in_degree``.

    Shapes: ``feat`` ``[N_src, in_feats]`` (or a ``(src, dst)`` pair) -> ``[N_dst, out_feats]``;
    ``edge_weight`` ``[E]`` multiplies each message.
    """

    def __init__(self, in_feats: int, out_feats: int, norm: str = "both", weight: bool = True, bias: bool = True,
                 activation: Callable | None = None, allow_zero_in_degree: bool = False):
        super().__init__()
        if norm not in NORMS:
            raise DGLError(f"norm must be one of {NORMS}, got {norm!r}")
        self._in_feats, self._out_feats, self._norm = in_feats, out_feats, norm
        self._allow_zero_in_degree = allow_zero_in_degree
        self._activation = activation
        self.weight = nn.Parameter(torch.empty(in_feats, out_feats)) if weight else None
        self.bias = nn.Parameter(torch.empty(out_feats)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        self._allow_zero_in_degree = set_value

    def forward(self, graph, feat, weight: Tensor | None = None, edge_weight: Tensor | None = None) -> Tensor:
        graph = check_graph(graph, "GraphConv")
        check_zero_in_degree(graph, "GraphConv", self._allow_zero_in_degree)
        feat_src, _ = expand_as_pair(feat, graph)
        if weight is not None and self.weight is not None:
            raise DGLError("GraphConv was built with its own weight (weight=True); do not pass one to forward")
        weight = self.weight if weight is None else weight
        if self._norm in ("left", "both"):
            degrees = graph.out_degrees().to(feat_src).clamp(min=1)
            scale = degrees.pow(-0.5) if self._norm == "both" else 1.0 / degrees
            feat_src = feat_src * scale.view(-1, *([1] * (feat_src.dim() - 1)))
        # multiply by W on the narrower side of the aggregation (fewer columns to move per edge)
        project_first = weight is not None and self._in_feats > self._out_feats
        if project_first:
            feat_src = feat_src @ weight
        rst = (ops.gspmm(graph, "copy_u", "sum", feat_src) if edge_weight is None
               else ops.gspmm(graph, "u_mul_e", "sum", feat_src, edge_weight))
        if weight is not None and not project_first:
            rst = rst @ weight
        if self._norm in ("right", "both"):
            degrees = graph.in_degrees().to(rst).clamp(min=1)
            scale = degrees.pow(-0.5) if self._norm == "both" else 1.0 / degrees
            rst = rst * scale.view(-1, *([1] * (rst.dim() - 1)))
        if self.bias is not None:
            rst = rst + self.bias
        return self._activation(rst) if self._activation is not None else rst

    def extra_repr(self) -> str:
        return f"in={self._in_feats}, out={self._out_feats}, normalization={self._norm}"
