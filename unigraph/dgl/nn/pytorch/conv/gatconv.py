r"""DGL's ``GATConv``: graph attention (https://arxiv.org/abs/1710.10903), ``num_heads`` heads.

.. math::
    e_{ij}^h = \mathrm{LeakyReLU}\big(a_l^h \cdot W^h h_j + a_r^h \cdot W^h h_i\big), \qquad
    \alpha_{ij}^h = \operatorname{softmax}_{j \in N(i)} e_{ij}^h, \qquad
    h_i'^h = \sum_{j \in N(i)} \alpha_{ij}^h W^h h_j \;(+\ \mathrm{res}(h_i) + b)

Output ``[N_dst, num_heads, out_feats]``, as DGL's (``h.flatten(1)`` or ``h.mean(1)`` after it).
Computed by :func:`unigraph.ops.gat_attention` (scores, edge softmax and weighted sum fused where
a backend can; attention dropout as a per-edge mask), or explicitly (g-SDDMM, edge softmax, g-SpMM)
when the attention is returned or edges are weighted. No self-loops are added. Parameters as DGL's:
``fc`` (or ``fc_src``/``fc_dst``), ``attn_l``/``attn_r`` ``[1, H, F]``, ``res_fc``, ``bias``;
Glorot normal with the ReLU gain, zero biases.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.nn.pytorch.utils import check_graph, check_zero_in_degree


class GATConv(nn.Module):
    """Args (DGL's): ``in_feats`` (an int or a ``(src, dst)`` pair), ``out_feats``, ``num_heads``,
    ``feat_drop``, ``attn_drop``, ``negative_slope``, ``residual``, ``activation``,
    ``allow_zero_in_degree``, ``bias``, ``share_weights``.

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
        self._negative_slope = negative_slope
        width = out_feats * num_heads
        if isinstance(in_feats, tuple):
            self.fc_src = nn.Linear(self._in_src_feats, width, bias=False)
            self.fc_dst = self.fc_src if share_weights else nn.Linear(self._in_dst_feats, width, bias=False)
        else:
            self.fc = nn.Linear(self._in_src_feats, width, bias=False)
        self.attn_l = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.attn_r = nn.Parameter(torch.empty(1, num_heads, out_feats))
        self.feat_drop = nn.Dropout(feat_drop)
        self.attn_drop = nn.Dropout(attn_drop)
        self.leaky_relu = nn.LeakyReLU(negative_slope)
        self.has_linear_res = residual and self._in_dst_feats != width
        if residual:
            self.res_fc = nn.Linear(self._in_dst_feats, width, bias=bias) if self.has_linear_res else nn.Identity()
        else:
            self.register_buffer("res_fc", None)
        self.has_explicit_bias = bias and not self.has_linear_res
        if self.has_explicit_bias:
            self.bias = nn.Parameter(torch.empty(width))
        else:
            self.register_buffer("bias", None)
        self.activation = activation
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        for name in ("fc", "fc_src", "fc_dst"):
            if hasattr(self, name):
                nn.init.xavier_normal_(getattr(self, name).weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)
        if self.has_explicit_bias:
            nn.init.zeros_(self.bias)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)
            if self.res_fc.bias is not None:
                nn.init.zeros_(self.res_fc.bias)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        self._allow_zero_in_degree = set_value

    def forward(self, graph, feat, edge_weight: Tensor | None = None, get_attention: bool = False):
        graph = check_graph(graph, "GATConv")
        check_zero_in_degree(graph, "GATConv", self._allow_zero_in_degree)
        heads, width = self._num_heads, self._out_feats
        if isinstance(feat, tuple):
            h_src, h_dst = self.feat_drop(feat[0]), self.feat_drop(feat[1])
            fc_src = getattr(self, "fc_src", getattr(self, "fc", None))
            fc_dst = getattr(self, "fc_dst", getattr(self, "fc", None))
            feat_src = fc_src(h_src).view(-1, heads, width)
            feat_dst = fc_dst(h_dst).view(-1, heads, width)
        else:
            h_src = h_dst = self.feat_drop(feat)
            feat_src = feat_dst = self.fc(h_src).view(-1, heads, width)
            if graph.is_bipartite and getattr(graph, "is_block", True):  # destinations first among sources
                h_dst = h_dst[: graph.num_dst_nodes]
                feat_dst = feat_src[: graph.num_dst_nodes]
        el = (feat_src * self.attn_l).sum(-1)   # [N_src, H]
        er = (feat_dst * self.attn_r).sum(-1)   # [N_dst, H]
        attention = None
        if get_attention or edge_weight is not None:
            scores = self.leaky_relu(ops.gsddmm(graph, "add", el.unsqueeze(-1), er.unsqueeze(-1), "u", "v"))
            attention = self.attn_drop(ops.edge_softmax(graph, scores))          # [E, H, 1]
            weights = attention if edge_weight is None else attention * edge_weight.view(-1, 1, 1)
            rst = ops.gspmm(graph, "u_mul_e", "sum", feat_src, weights)
        else:
            mask = None
            if self.training and self.attn_drop.p > 0:
                keep = 1.0 - self.attn_drop.p
                mask = torch.bernoulli(torch.full((graph.num_edges, heads), keep, dtype=el.dtype,
                                                  device=el.device)) / keep
            rst = ops.gat_attention(graph, feat_src, el, er, self._negative_slope, edge_mask=mask)
        if self.res_fc is not None:
            rst = rst + self.res_fc(h_dst).view(h_dst.shape[0], -1, width)
        if self.bias is not None:
            rst = rst + self.bias.view(1, heads, width)
        if self.activation is not None:
            rst = self.activation(rst)
        return (rst, attention) if get_attention else rst
