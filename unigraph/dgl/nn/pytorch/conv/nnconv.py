r"""DGL's ``NNConv``: the edge-conditioned convolution of MPNN (https://arxiv.org/abs/1704.01212).

.. math::
    h_i' = \sum_{k} \operatorname{aggregate}_{j \in N(i)} \big(h_j \odot_k f_\Theta(e_{ji})\big)_{k,:}
    \;(+\ \mathrm{res}(h_i) + b)

where :math:`f_\Theta(e_{ji})` (``edge_func``) is viewed as an ``[in, out]`` matrix per edge
:math:`W_{ji}` and :math:`(h_j \odot_k W_{ji})_{k,:} = h_{j,k} W_{ji,k,:}`. For ``sum`` and ``mean``
this is :math:`\operatorname{aggregate}_j h_j W_{ji}`, computed so (one batched product per edge,
an ``[E, out]`` message); ``max`` takes the max per input channel ``k`` first, then sums over
``k``, as DGL does (a g-SpMM over ``[in, out]`` messages). ``residual``: ``res_fc`` (a linear map
without bias, or the identity when ``in == out``). Parameters as DGL's: ``edge_func`` (yours, not
reinitialized), ``res_fc`` (Glorot normal, ReLU gain), ``bias`` (zeros).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_graph, expand_as_pair

AGGREGATORS = ("sum", "mean", "max")


class NNConv(nn.Module):
    """Args (DGL's): ``in_feats`` (an int or a ``(src, dst)`` pair), ``out_feats``, ``edge_func``
    (a module mapping ``[E, *]`` edge features to ``[E, in * out]``), ``aggregator_type``,
    ``residual``, ``bias``.

    Shapes: ``feat`` ``[N_src, in]`` (or a pair), ``efeat`` ``[E, *]`` -> ``[N_dst, out_feats]``.
    """

    def __init__(self, in_feats, out_feats: int, edge_func: Callable, aggregator_type: str = "mean",
                 residual: bool = False, bias: bool = True):
        super().__init__()
        if aggregator_type not in AGGREGATORS:
            raise DGLError(f"NNConv: aggregator_type must be one of {AGGREGATORS}, got {aggregator_type!r}")
        self._in_src_feats, self._in_dst_feats = in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats)
        self._out_feats = out_feats
        self.edge_func = edge_func
        self._aggre_type = aggregator_type
        if residual:
            self.res_fc = (nn.Linear(self._in_dst_feats, out_feats, bias=False) if self._in_dst_feats != out_feats
                           else nn.Identity())
        else:
            self.register_buffer("res_fc", None)
        if bias:
            self.bias = nn.Parameter(torch.empty(out_feats))
        else:
            self.register_buffer("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=nn.init.calculate_gain("relu"))

    def _edge_weights(self, graph, efeat: Tensor) -> Tensor:
        """``edge_func(efeat)`` as one ``[in, out]`` matrix per edge."""
        if not isinstance(efeat, Tensor) or efeat.dim() == 0 or efeat.shape[0] != graph.num_edges:
            got = list(efeat.shape) if isinstance(efeat, Tensor) else type(efeat).__name__
            raise DGLError(f"NNConv: efeat must have one row per edge ({graph.num_edges}), got {got}")
        weights = self.edge_func(efeat)
        width = self._in_src_feats * self._out_feats
        if weights.numel() != graph.num_edges * width:
            raise DGLError(f"NNConv: edge_func gave {list(weights.shape)} for {graph.num_edges} edges; it must give "
                           f"in_feats * out_feats = {width} values per edge")
        return weights.view(-1, self._in_src_feats, self._out_feats)

    def forward(self, graph, feat, efeat: Tensor) -> Tensor:
        graph = check_graph(graph, "NNConv")
        feat_src, feat_dst = expand_as_pair(feat, graph)
        if feat_src.dim() != 2 or feat_src.shape[1] != self._in_src_feats:
            raise DGLError(f"NNConv: source features must be [N_src, {self._in_src_feats}], got {list(feat_src.shape)}")
        weights = self._edge_weights(graph, efeat)
        if self._aggre_type == "max":   # max per (input, output) channel pair, then summed over inputs
            rst = ops.gspmm(graph, "u_mul_e", "max", feat_src.unsqueeze(-1), weights).sum(dim=1)
        else:                           # the inputs summed first: one [out] message per edge
            messages = torch.bmm(ops.gsddmm(graph, "copy_lhs", feat_src, None, "u", "v").unsqueeze(1), weights)
            rst = ops.gspmm(graph, "copy_e", self._aggre_type, None, messages.squeeze(1))
        if self.res_fc is not None:
            rst = rst + self.res_fc(feat_dst)
        if self.bias is not None:
            rst = rst + self.bias
        return rst
