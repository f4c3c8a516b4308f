r"""DGL's ``AGNNConv``: attention-based propagation (https://arxiv.org/abs/1803.03735).

.. math::
    P_{ij} = \operatorname{softmax}_{j \in N(i)}\big(\beta \cos(h_i, h_j)\big), \qquad
    h_i' = \sum_{j \in N(i)} P_{ij} h_j

The cosine is a ``dot`` g-SDDMM of the L2-normalised features (over their last dimension, so
``[N, *, F]`` features get one weight per leading slot), then edge softmax and a g-SpMM. No
weights besides ``beta``, a ``[1]`` parameter (``learn_beta``) or buffer holding ``init_beta``.
A ``(src, dst)`` pair is read as such on any graph (DGL's layer, on a graph with one node set,
takes the cosine of the destination features on both ends: both land in one feature store).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_graph, check_zero_in_degree, expand_as_pair


class AGNNConv(nn.Module):
    """Args (DGL's): ``init_beta`` (the initial temperature), ``learn_beta`` (a parameter, else a
    buffer), ``allow_zero_in_degree``.

    Shapes: ``feat`` ``[N_src, *, F]`` (or a ``(src, dst)`` pair of equal feature shapes) ->
    ``[N_dst, *, F]``.
    """

    def __init__(self, init_beta: float = 1.0, learn_beta: bool = True, allow_zero_in_degree: bool = False):
        super().__init__()
        self._allow_zero_in_degree = allow_zero_in_degree
        beta = torch.tensor([float(init_beta)])
        if learn_beta:
            self.beta = nn.Parameter(beta)
        else:
            self.register_buffer("beta", beta)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        self._allow_zero_in_degree = set_value

    def forward(self, graph, feat):
        graph = check_graph(graph, "AGNNConv")
        feat_src, feat_dst = expand_as_pair(feat, graph)
        if not isinstance(feat_src, torch.Tensor) or not isinstance(feat_dst, torch.Tensor) or feat_src.dim() < 2:
            raise DGLError("AGNNConv: feat must be a tensor [num_nodes, ..., F] or a (src, dst) pair of them")
        if feat_src.shape[1:] != feat_dst.shape[1:]:
            raise DGLError(f"AGNNConv: source and destination features must have the same feature shape "
                           f"(their cosine is taken), got {tuple(feat_src.shape[1:])} and {tuple(feat_dst.shape[1:])}")
        check_zero_in_degree(graph, "AGNNConv", self._allow_zero_in_degree)
        unit_src = F.normalize(feat_src, p=2, dim=-1)
        # one tensor: the destinations are the sources' first rows, already normalised
        unit_dst = F.normalize(feat_dst, p=2, dim=-1) if isinstance(feat, tuple) else unit_src[: feat_dst.shape[0]]
        cos = ops.gsddmm(graph, "dot", unit_src, unit_dst, "u", "v")          # [E, *, 1]
        weights = ops.edge_softmax(graph, self.beta * cos)
        return ops.gspmm(graph, "u_mul_e", "sum", feat_src, weights)
