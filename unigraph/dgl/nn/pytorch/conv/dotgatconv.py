r"""DGL's ``DotGatConv``: scaled dot-product attention over the in-edges, ``num_heads`` heads.

.. math::
    e_{ij}^h = \frac{(W_d^h h_i)^\top (W_s^h h_j)}{\sqrt{F}}, \qquad
    \alpha_{ij}^h = \operatorname{softmax}_{j \in N(i)} e_{ij}^h, \qquad
    h_i'^h = \sum_{j \in N(i)} \alpha_{ij}^h W_s^h h_j

with ``F = out_feats`` and ``W_s = W_d`` unless ``in_feats`` is a ``(src, dst)`` pair. Scores by a
``dot`` g-SDDMM, then edge softmax and a g-SpMM. No bias, activation or dropout (DGL's layer has
none). Parameters as DGL's: ``fc`` (or ``fc_src``/``fc_dst``), Linear without bias, torch's
default Linear initialisation (DGL's layer does not re-initialise them). A ``(src, dst)`` pair is
read as such on any graph (DGL's layer, on a graph with one node set, scores and sums the
destination features on both ends: both sides land in one feature store there).
"""
from __future__ import annotations

from torch import nn

from unigraph import ops
from unigraph.dgl.nn.pytorch.utils import check_feature_widths, check_graph, check_zero_in_degree, expand_as_pair


class DotGatConv(nn.Module):
    """Args (DGL's): ``in_feats`` (an int or a ``(src, dst)`` pair), ``out_feats``, ``num_heads``,
    ``allow_zero_in_degree``.

    Shapes: ``feat`` ``[N_src, in]`` (or a pair) -> ``[N_dst, num_heads, out_feats]``; with
    ``get_attention=True`` also the attention ``[E, num_heads, 1]``.
    """

    def __init__(self, in_feats, out_feats: int, num_heads: int, allow_zero_in_degree: bool = False):
        super().__init__()
        self._in_src_feats, self._in_dst_feats = in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats)
        self._out_feats, self._num_heads = out_feats, num_heads
        self._allow_zero_in_degree = allow_zero_in_degree
        width = out_feats * num_heads
        if isinstance(in_feats, tuple):
            self.fc_src = nn.Linear(self._in_src_feats, width, bias=False)
            self.fc_dst = nn.Linear(self._in_dst_feats, width, bias=False)
        else:
            self.fc = nn.Linear(self._in_src_feats, width, bias=False)

    def reset_parameters(self) -> None:
        for module in self.children():
            module.reset_parameters()

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        self._allow_zero_in_degree = set_value

    def forward(self, graph, feat, get_attention: bool = False):
        graph = check_graph(graph, "DotGatConv")
        h_src, h_dst = expand_as_pair(feat, graph)
        check_feature_widths("DotGatConv", h_src, h_dst, self._in_src_feats, self._in_dst_feats)
        check_zero_in_degree(graph, "DotGatConv", self._allow_zero_in_degree)
        heads, width = self._num_heads, self._out_feats
        if hasattr(self, "fc"):  # one projection: a pair is projected by it on both sides
            feat_src = self.fc(h_src).view(-1, heads, width)
            feat_dst = self.fc(h_dst).view(-1, heads, width) if isinstance(feat, tuple) \
                else feat_src[: h_dst.shape[0]]
        else:
            feat_src = self.fc_src(h_src).view(-1, heads, width)
            feat_dst = self.fc_dst(h_dst).view(-1, heads, width)
        scores = ops.gsddmm(graph, "dot", feat_src, feat_dst, "u", "v") / width ** 0.5   # [E, H, 1]
        attention = ops.edge_softmax(graph, scores)
        rst = ops.gspmm(graph, "u_mul_e", "sum", feat_src, attention)
        return (rst, attention) if get_attention else rst
