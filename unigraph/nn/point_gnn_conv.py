"""PointGNNConv: Point-GNN's auto-registered vertex update."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.message_passing.inputs import check_rows
from unigraph.nn.checks import reset_module
from unigraph.nn.point_conv import EdgeMessages, check_network, node_pair, point_graph


class PointGNNConv(EdgeMessages):
    r"""The PointGNN operator from the `"Point-GNN: Graph Neural Network for 3D Object Detection in
    a Point Cloud" <https://arxiv.org/abs/2003.01251>`_ paper.

    .. math::
        \Delta \textrm{pos}_i = h_{\mathbf{\Theta}}(\mathbf{x}_i), \qquad
        \mathbf{e}_{j,i} = f_{\mathbf{\Theta}}(\textrm{pos}_j - \textrm{pos}_i +
        \Delta \textrm{pos}_i \,\Vert\, \mathbf{x}_j),

    .. math::
        \mathbf{x}^{\prime}_i = g_{\mathbf{\Theta}}\Big(\max_{j \in \mathcal{N}(i)}
        \mathbf{e}_{j,i}\Big) + \mathbf{x}_i

    The three networks are ``mlp_h``, ``mlp_f`` and ``mlp_g``; :math:`h_{\mathbf{\Theta}}` and
    :math:`f_{\mathbf{\Theta}}` run on one row per edge (as in PyG, so a batch norm inside sees
    the edges' statistics), :math:`g_{\mathbf{\Theta}}` on the aggregated node rows. No self-loops
    are added.

    Args:
        mlp_h (torch.nn.Module): :math:`h_{\mathbf{\Theta}}`, ``[-1, F]`` to ``[-1, D]`` (D the
            position width, 3).
        mlp_f (torch.nn.Module): :math:`f_{\mathbf{\Theta}}`, ``[-1, D + F]`` to ``[-1, F]``.
        mlp_g (torch.nn.Module): :math:`g_{\mathbf{\Theta}}`, ``[-1, F]`` to ``[-1, F]``.
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, default
            ``"max"``; ``flow``; ...), as PyG's.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F)`, positions :math:`(|\mathcal{V}|, D)`,
          ``edge_index`` in any of PyG's forms or a graph object
          (:func:`~unigraph.nn.point_conv.point_graph`; a square one: the output adds
          :math:`\mathbf{x}`)
        - **output:** node features :math:`(|\mathcal{V}|, F)`
    """

    def __init__(self, mlp_h: torch.nn.Module, mlp_f: torch.nn.Module, mlp_g: torch.nn.Module, **kwargs: Any):
        kwargs.setdefault("aggr", "max")
        super().__init__(**kwargs)
        who = type(self).__name__
        self.mlp_h = check_network(mlp_h, "mlp_h", who, optional=False)
        self.mlp_f = check_network(mlp_f, "mlp_f", who, optional=False)
        self.mlp_g = check_network(mlp_g, "mlp_g", who, optional=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.aggr_module is not None:
            reset_module(self.aggr_module)
        reset_module(self.mlp_h)
        reset_module(self.mlp_f)
        reset_module(self.mlp_g)

    def forward(self, x: Tensor, pos: Tensor, edge_index: Any) -> Tensor:
        who = type(self).__name__
        if not isinstance(x, Tensor) or not isinstance(pos, Tensor):
            raise TypeError(f"{who} takes one feature tensor and one position tensor (no source/destination pairs: "
                            f"the output adds x), got {type(x).__name__} and {type(pos).__name__}")
        node_pair(x, "x", who)
        g, pos_src, pos_dst = point_graph(self, who, pos, edge_index)
        if g.is_bipartite:
            raise ValueError(f"{who} needs a square graph (its output adds x), got {g.num_src_nodes} source and "
                             f"{g.num_dst_nodes} destination nodes")
        check_rows(x, g.num_src_nodes, "x", "nodes")
        src, dst = g.src, g.dst
        x_dst = x.index_select(0, dst)
        shifted = pos_src.index_select(0, src) - pos_dst.index_select(0, dst) + self.mlp_h(x_dst)
        msg = self.mlp_f(torch.cat([shifted, x.index_select(0, src)], dim=-1))
        return x + self.mlp_g(self.propagate(g, msg=msg))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(\n  mlp_h={self.mlp_h},\n  mlp_f={self.mlp_f},\n"
                f"  mlp_g={self.mlp_g},\n)")
