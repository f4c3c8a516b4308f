r"""DGL's ``EdgeGATConv``: graph attention with edge features in the scores and in the messages
(https://arxiv.org/abs/2301.03512), ``num_heads`` heads.

.. math::
    e_{ij}^h = \mathrm{LeakyReLU}\big(a_l^h \cdot W^h h_j + a_r^h \cdot W^h h_i
        + a_e^h \cdot W_e^h f_{ij}\big), \qquad
    \alpha_{ij}^h = \operatorname{softmax}_{j \in N(i)} e_{ij}^h,

.. math::
    h_i'^h = \sum_{j \in N(i)} \alpha_{ij}^h \big(W^h h_j + W_e^h f_{ij}\big)
        \;(+\ W_r h_i + b)

The scores are per-node terms joined by a g-SDDMM plus the edge term; the sum splits into a
g-SpMM of the source projections and one of the weighted edge projections, so the
``[E, H, F]`` source messages are never built. Node features may carry leading dimensions
(``[N, *, in]``, as DGL). No self-loops are added. Parameters as DGL's: ``fc`` (or
``fc_src``/``fc_dst``), ``fc_edge``, ``attn_l``/``attn_r``/``attn_edge`` ``[1, H, F]``,
``res_fc`` (a Linear without bias, whatever the widths; ``residual`` defaults to True),
``bias`` ``[H * F]``; Glorot normal with the ReLU gain, zero bias.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import (
    check_feature_widths, check_graph, check_zero_in_degree, drop_and_split, expand_as_pair)


class EdgeGATConv(nn.Module):
    """Args (DGL's): ``in_feats`` (an int or a ``(src, dst)`` pair), ``edge_feats``, ``out_feats``,
    ``num_heads``, ``feat_drop``, ``attn_drop`` (on the attention, training mode only),
    ``negative_slope``, ``residual``, ``activation``, ``allow_zero_in_degree``, ``bias``.

    Shapes: ``feat`` ``[N_src, *, in]`` (or a pair), ``edge_feat`` ``[E, *, edge_feats]`` ->
    ``[N_dst, *, num_heads, out_feats]``; with ``get_attention=True`` also the attention
    ``[E, *, num_heads, 1]``.
    """

    def __init__(self, in_feats, edge_feats: int, out_feats: int, num_heads: int, feat_drop: float = 0.0,
                 attn_drop: float = 0.0, negative_slope: float = 0.2, residual: bool = True,
                 activation: Callable | None = None, allow_zero_in_degree: bool = False, bias: bool = True):
        super().__init__()
        self._num_heads, self._out_feats, self._edge_feats = num_heads, out_feats, edge_feats
        self._in_src_feats, self._in_dst_feats = in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats)
        self._allow_zero_in_degree = allow_zero_in_degree
        width = out_feats * num_heads
        if isinstance(in_feats, tuple):
            self.fc_src = nn.Linear(self._in_src_feats, width, bias=False)
            self.fc_dst = nn.Linear(self._in_dst_feats, width, bias=False)
        else:
            self.fc = nn.Linear(self._in_src_feats, width, bias=False)
        self.attn_l = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.attn_r = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        if bias:
            self.bias = nn.Parameter(torch.empty(width))
        else:
            self.register_buffer("bias", None)
        if residual:
            self.res_fc = nn.Linear(self._in_dst_feats, width, bias=False)
        else:
            self.register_buffer("res_fc", None)
        self.fc_edge = nn.Linear(edge_feats, width, bias=False)
        self.attn_edge = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.reset_parameters()
        self.activation = activation

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        for name in ("fc", "fc_src", "fc_dst", "fc_edge", "res_fc"):
            linear = getattr(self, name, None)
            if isinstance(linear, nn.Linear):
                nn.init.xavier_normal_(linear.weight, gain=gain)
        for attn in (self.attn_l, self.attn_r, self.attn_edge):
            nn.init.xavier_normal_(attn, gain=gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        self._allow_zero_in_degree = set_value

    def forward(self, graph, feat, edge_feat: Tensor, get_attention: bool = False):
        graph = check_graph(graph, "EdgeGATConv")
        raw_src, raw_dst = expand_as_pair(feat, graph)
        check_feature_widths("EdgeGATConv", raw_src, raw_dst, self._in_src_feats, self._in_dst_feats)
        if not isinstance(edge_feat, Tensor) or edge_feat.dim() < 2 or edge_feat.shape[0] != graph.num_edges \
                or edge_feat.shape[-1] != self._edge_feats:
            got = tuple(edge_feat.shape) if isinstance(edge_feat, Tensor) else type(edge_feat).__name__
            raise DGLError(f"EdgeGATConv: edge_feat must be [num_edges, ..., edge_feats] = "
                           f"[{graph.num_edges}, ..., {self._edge_feats}], got {got}")
        check_zero_in_degree(graph, "EdgeGATConv", self._allow_zero_in_degree)
        h_src, h_dst = drop_and_split(feat, graph, self.feat_drop)
        feat_src, feat_dst = self._project(h_src, h_dst, shared=not isinstance(feat, tuple))
        feat_edge = self._split_heads(self.fc_edge(edge_feat))                      # [E, *, H, F]
        el = (feat_src * self.attn_l).sum(-1, keepdim=True)
        er = (feat_dst * self.attn_r).sum(-1, keepdim=True)
        ee = (feat_edge * self.attn_edge).sum(-1, keepdim=True)
        scores = self.leaky_relu(ops.gsddmm(graph, "add", el, er, "u", "v") + ee)   # [E, *, H, 1]
        attention = self.attn_drop(ops.edge_softmax(graph, scores))
        # sum_j a_ij (W h_j + W_e f_ij), as two sums
        rst = ops.gspmm(graph, "u_mul_e", "sum", feat_src, attention) \
            + ops.gspmm(graph, "copy_e", "sum", None, feat_edge * attention)
        if self.res_fc is not None:
            rst = rst + self._split_heads(self.res_fc(h_dst))
        if self.bias is not None:
            rst = rst + self.bias.view(self._num_heads, self._out_feats)
        if self.activation is not None:
            rst = self.activation(rst)
        return (rst, attention) if get_attention else rst

    def _split_heads(self, x: Tensor) -> Tensor:
        return x.view(*x.shape[:-1], self._num_heads, self._out_feats)

    def _project(self, h_src: Tensor, h_dst: Tensor, shared: bool) -> tuple[Tensor, Tensor]:
        """Projected ``[N, *, H, F]`` sources and destinations; with one input tensor the
        destinations are the sources' first rows, projected once."""
        if hasattr(self, "fc"):
            feat_src = self._split_heads(self.fc(h_src))
            return feat_src, feat_src[: h_dst.shape[0]] if shared else self._split_heads(self.fc(h_dst))
        return self._split_heads(self.fc_src(h_src)), self._split_heads(self.fc_dst(h_dst))
