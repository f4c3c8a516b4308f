r"""DGL's ``DenseSAGEConv``: GraphSAGE's ``gcn`` aggregator on a dense adjacency matrix ``A``
``[N_dst, N_src]`` (row = destination, column = source).

.. math::
    h_i' = \mathrm{norm}\Big(\sigma\Big(W \,\frac{x_i + \sum_j A_{ij} x_j}{1 + \sum_j A_{ij}} + b\Big)\Big)

The same function as :class:`SAGEConv` with ``aggregator_type='gcn'`` on the graph of ``A``.
Parameters as DGL's: ``fc`` (an ``nn.Linear``, Glorot uniform with the ReLU gain); ``feat_drop``
drops input features; ``norm`` is applied last (a callable, e.g. a normalisation layer).
"""
from __future__ import annotations

from typing import Callable

from torch import Tensor, nn

from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import dense_adjacency


class DenseSAGEConv(nn.Module):
    """Args (DGL's): ``in_feats``, ``out_feats``, ``feat_drop``, ``bias``, ``norm``, ``activation``.

    Shapes: ``adj`` ``[N_dst, N_src]``, ``feat`` ``[N_src, in_feats]`` (or a ``(src, dst)`` pair,
    ``[N_dst, in_feats]`` the second) -> ``[N_dst, out_feats]``.
    """

    def __init__(self, in_feats: int, out_feats: int, feat_drop: float = 0.0, bias: bool = True,
                 norm: Callable | None = None, activation: Callable | None = None):
        super().__init__()
        self._in_feats, self._out_feats, self._norm = in_feats, out_feats, norm
        self.feat_drop = nn.Dropout(feat_drop)
        self.activation = activation
        self.fc = nn.Linear(in_feats, out_feats, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.fc.weight, gain=nn.init.calculate_gain("relu"))

    def forward(self, adj: Tensor, feat) -> Tensor:
        if isinstance(feat, tuple):
            if feat[0].shape[1:] != feat[1].shape[1:]:
                raise DGLError(f"DenseSAGEConv: source and destination features must have the same width, got "
                               f"{list(feat[0].shape)} and {list(feat[1].shape)}")
            feat_src, feat_dst = self.feat_drop(feat[0]), self.feat_drop(feat[1])
        else:
            feat_src = feat_dst = self.feat_drop(feat)
        adj = dense_adjacency(adj, feat_src, "DenseSAGEConv")
        if feat_dst.shape[0] != adj.shape[0]:
            raise DGLError(f"DenseSAGEConv: adjacency of shape {list(adj.shape)} has {adj.shape[0]} destinations, "
                           f"the destination features {feat_dst.shape[0]} rows")
        h = (adj @ feat_src + feat_dst) / (adj.sum(1, keepdim=True) + 1)
        rst = self.fc(h)
        if self.activation is not None:
            rst = self.activation(rst)
        return self._norm(rst) if self._norm is not None else rst
