r"""DGL's ``EdgeConv``: the dynamic graph CNN's edge convolution (https://arxiv.org/abs/1801.07829).

.. math::
    h_i' = \max_{j \in N(i)} \Big(\Theta (x_i - x_j) + \Phi x_i\Big)

with :math:`\Theta`, :math:`\Phi` linear maps with biases (``theta``, ``phi``) and the max taken per
channel, :math:`x_i` the destination's features (DGL's ``v_sub_u``). ``batch_norm=True`` puts a
``BatchNorm1d`` over the edges' values before the max. A destination without in-edges gets 0
(allowed only with ``allow_zero_in_degree``). A ``(src, dst)`` pair on a graph that is not
bipartite uses the destination features at both ends, as DGL does (its source and destination
stores are one there, and the second write wins).

Because :math:`\Theta` is linear, with ``a = W_\Theta x``:
:math:`h_i' = \Phi x_i + b_\Theta + a_i - \min_j a_j`: one g-SpMM ``min`` over the projected
sources, no ``[E, F]`` tensor (without batch norm, while ``theta`` and ``phi`` are plain
``nn.Linear``\ s: a hook or another module runs the per-edge form as written).
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_graph, check_zero_in_degree, expand_as_pair, plain_linear


class EdgeConv(nn.Module):
    """Args (DGL's): ``in_feat``, ``out_feat``, ``batch_norm``, ``allow_zero_in_degree``.

    Shapes: ``feat`` ``[N_src, in_feat]`` (or a ``(src, dst)`` pair) -> ``[N_dst, out_feat]``.
    """

    def __init__(self, in_feat: int, out_feat: int, batch_norm: bool = False, allow_zero_in_degree: bool = False):
        super().__init__()
        self.batch_norm = batch_norm
        self._allow_zero_in_degree = allow_zero_in_degree
        self.theta = nn.Linear(in_feat, out_feat)
        self.phi = nn.Linear(in_feat, out_feat)
        if batch_norm:
            self.bn = nn.BatchNorm1d(out_feat)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        self._allow_zero_in_degree = set_value

    def forward(self, g, feat) -> Tensor:
        graph = check_graph(g, "EdgeConv")
        check_zero_in_degree(graph, "EdgeConv", self._allow_zero_in_degree)
        feat_src, feat_dst = expand_as_pair(feat, graph)
        if not graph.is_bipartite:   # one node set: DGL's x_j reads the features written last, x_i's
            feat_src = feat_dst
        if feat_src.shape[0] != graph.num_src_nodes or feat_dst.shape[0] != graph.num_dst_nodes:
            raise DGLError(f"EdgeConv: features have {feat_src.shape[0]} source and {feat_dst.shape[0]} destination "
                           f"rows for a graph of {graph.num_src_nodes} and {graph.num_dst_nodes} nodes")
        rearranged = plain_linear(self.theta) and plain_linear(self.phi)
        if rearranged and not self.batch_norm:
            return self._max_by_min(graph, feat, feat_src, feat_dst)
        scores = self._edge_values(graph, feat, feat_src, feat_dst, rearranged)
        if self.batch_norm:
            scores = self.bn(scores)
        return ops.gspmm(graph, "copy_e", "max", None, scores)

    def _projections(self, feat, feat_src: Tensor, feat_dst: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(a_src, a_dst, root)``: ``W_theta x`` of sources and destinations (a destination's row
        taken from the sources' where they share a tensor) and ``phi(x_i) + b_theta``."""
        a_src = F.linear(feat_src, self.theta.weight)
        shared = feat_src is feat_dst or not isinstance(feat, tuple)   # else a block's pair
        a_dst = a_src[: feat_dst.shape[0]] if shared else F.linear(feat_dst, self.theta.weight)
        root = self.phi(feat_dst)
        return a_src, a_dst, root if self.theta.bias is None else root + self.theta.bias

    def _max_by_min(self, graph, feat, feat_src: Tensor, feat_dst: Tensor) -> Tensor:
        a_src, a_dst, root = self._projections(feat, feat_src, feat_dst)
        out = root + (a_dst - ops.gspmm(graph, "copy_u", "min", a_src))
        if self._allow_zero_in_degree:   # DGL's max over no edges is 0, not the root term
            out = out.masked_fill((graph.in_degrees() == 0).to(out.device).unsqueeze(-1), 0.0)
        return out

    def _edge_values(self, graph, feat, feat_src: Tensor, feat_dst: Tensor, rearranged: bool) -> Tensor:
        """``theta(x_i - x_j) + phi(x_i)`` for every edge ``j -> i``: ``[E, out_feat]``."""
        if rearranged:
            a_src, a_dst, root = self._projections(feat, feat_src, feat_dst)
            return ops.gsddmm(graph, "sub", root + a_dst, a_src, "v", "u")
        difference = ops.gsddmm(graph, "sub", feat_dst, feat_src, "v", "u")
        return ops.gsddmm(graph, "add", self.theta(difference), self.phi(feat_dst), "e", "v")
