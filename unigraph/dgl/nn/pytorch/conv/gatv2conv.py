r"""DGL's ``GATv2Conv``: dynamic graph attention (https://arxiv.org/abs/2105.14491), ``num_heads`` heads.

.. math::
    e_{ij}^h = a^h \cdot \mathrm{LeakyReLU}\big(W_s^h h_j + W_d^h h_i\big), \qquad
    \alpha_{ij}^h = \operatorname{softmax}_{j \in N(i)} e_{ij}^h, \qquad
    h_i'^h = \sum_{j \in N(i)} \alpha_{ij}^h W_s^h h_j \;(+\ \mathrm{res}(h_i))

Unlike GAT the nonlinearity sits between the projections and the attention vector, so the score
is not a sum of a source and a destination term: it is computed per edge on the ``[E, H, F]``
g-SDDMM sum, then edge softmax and a g-SpMM. No self-loops are added. Parameters as DGL's:
``fc_src``/``fc_dst`` (with bias when ``bias``; ``fc_dst`` *is* ``fc_src`` under ``share_weights``),
``attn`` ``[1, H, F]``, ``res_fc`` (a Linear when the widths differ, else the identity); Glorot
normal with the ReLU gain, zero biases. There is no separate output bias (``self.bias`` is DGL's
flag for the projections' biases).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from unigraph import ops
from unigraph.dgl.nn.pytorch.utils import (check_feature_widths, check_graph, check_zero_in_degree, drop_and_split,
                                          expand_as_pair)


class GATv2Conv(nn.Module):
    """Args (DGL's): ``in_feats`` (an int or a ``(src, dst)`` pair), ``out_feats``, ``num_heads``,
    ``feat_drop``, ``attn_drop`` (on the attention, training mode only), ``negative_slope``,
    ``residual``, ``activation``, ``allow_zero_in_degree``, ``bias`` (of ``fc_src``, ``fc_dst``,
    ``res_fc``), ``share_weights`` (one projection for both ends; with a pair ``in_feats`` DGL keeps
    two, and so do we).

    Shapes: ``feat`` ``[N_src, in]`` (or a pair) -> ``[N_dst, num_heads, out_feats]``; with
    ``get_attention=True`` also the attention ``[E, num_heads, 1]``.
    """

    def __init__(self, in_feats, out_feats: int, num_heads: int, feat_drop: float = 0.0, attn_drop: float = 0.0,
                 negative_slope: float = 0.2, residual: bool = False, activation: Callable | None = None,
                 allow_zero_in_degree: bool = False, bias: bool = True, share_weights: bool = False):
        super().__init__()
        self._num_heads, self._out_feats = num_heads, out_feats
        self._in_src_feats, self._in_dst_feats = in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats)
        self._allow_zero_in_degree = allow_zero_in_degree
        width = out_feats * num_heads
        self.fc_src = nn.Linear(self._in_src_feats, width, bias=bias)
        shared = share_weights and not isinstance(in_feats, tuple)
        self.fc_dst = self.fc_src if shared else nn.Linear(self._in_dst_feats, width, bias=bias)
        self.attn = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        if residual:
            self.res_fc = nn.Linear(self._in_dst_feats, width, bias=bias) if self._in_dst_feats != width \
                else nn.Identity()
        else:
            self.register_buffer("res_fc", None)
        self.activation = activation
        self.share_weights = share_weights
        self.bias = bias
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        for linear in (self.fc_src, self.fc_dst, self.res_fc):
            if isinstance(linear, nn.Linear):  # fc_dst may be fc_src: initialised twice, harmlessly
                nn.init.xavier_normal_(linear.weight, gain=gain)
                if linear.bias is not None:
                    nn.init.zeros_(linear.bias)
        nn.init.xavier_normal_(self.attn, gain=gain)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        self._allow_zero_in_degree = set_value

    def forward(self, graph, feat, get_attention: bool = False):
        graph = check_graph(graph, "GATv2Conv")
        raw_src, raw_dst = expand_as_pair(feat, graph)
        check_feature_widths("GATv2Conv", raw_src, raw_dst, self._in_src_feats, self._in_dst_feats)
        check_zero_in_degree(graph, "GATv2Conv", self._allow_zero_in_degree)
        heads, width = self._num_heads, self._out_feats
        h_src, h_dst = drop_and_split(feat, graph, self.feat_drop)
        feat_src = self.fc_src(h_src).view(-1, heads, width)
        if self.fc_dst is self.fc_src and not isinstance(feat, tuple):
            feat_dst = feat_src[: h_dst.shape[0]]  # the same rows, projected once
        else:
            feat_dst = self.fc_dst(h_dst).view(-1, heads, width)
        hidden = self.leaky_relu(ops.gsddmm(graph, "add", feat_src, feat_dst, "u", "v"))   # [E, H, F]
        scores = (hidden * self.attn).sum(-1, keepdim=True)                                # [E, H, 1]
        attention = self.attn_drop(ops.edge_softmax(graph, scores))
        rst = ops.gspmm(graph, "u_mul_e", "sum", feat_src, attention)
        if self.res_fc is not None:
            rst = rst + self.res_fc(h_dst).view(h_dst.shape[0], -1, width)
        if self.activation is not None:
            rst = self.activation(rst)
        return (rst, attention) if get_attention else rst
