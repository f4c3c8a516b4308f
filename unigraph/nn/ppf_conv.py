"""PPFConv: PPFNet's convolution over point pair features."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.message_passing.inputs import split_pair
from unigraph.nn.point_conv import (
    LocalGlobal, node_pair, point_graph, source_features, source_rows)


def angle(v1: Tensor, v2: Tensor) -> Tensor:
    r"""The angle between the rows of ``v1`` and ``v2`` (3-D vectors),
    :math:`\operatorname{atan2}(\lVert v_1 \times v_2 \rVert, v_1 \cdot v_2)`, in :math:`[0, \pi]`.
    With a zero vector it is ``atan2(0, 0) = 0``, with a zero gradient (eager torch sums from +0;
    under ``torch.compile`` the zero dot product may come out -0, and the angle :math:`\pi`, in
    PyG's layer too)."""
    sine = torch.linalg.vector_norm(torch.cross(v1, v2, dim=1), dim=1)
    return torch.atan2(sine, (v1 * v2).sum(dim=1))


def point_pair_features(pos_i: Tensor, pos_j: Tensor, normal_i: Tensor, normal_j: Tensor) -> Tensor:
    r"""``[E, 4]``: :math:`(\lVert d \rVert, \angle(n_i, d), \angle(n_j, d), \angle(n_i, n_j))` per
    pair, with :math:`d = p_j - p_i`."""
    d = pos_j - pos_i
    return torch.stack([torch.linalg.vector_norm(d, dim=1), angle(normal_i, d), angle(normal_j, d),
                        angle(normal_i, normal_j)], dim=1)


class PPFConv(LocalGlobal):
    r"""The PPFNet operator from the `"PPFNet: Global Context Aware Local Features for Robust 3D
    Point Matching" <https://arxiv.org/abs/1802.02669>`_ paper.

    .. math::
        \mathbf{x}^{\prime}_i = \gamma_{\mathbf{\Theta}} \left( \max_{j \in
        \mathcal{N}(i) \cup \{ i \}} h_{\mathbf{\Theta}} ( \mathbf{x}_j \,\Vert\,
        \| \mathbf{d}_{j,i} \| \,\Vert\, \angle(\mathbf{n}_i, \mathbf{d}_{j,i}) \,\Vert\,
        \angle(\mathbf{n}_j, \mathbf{d}_{j,i}) \,\Vert\, \angle(\mathbf{n}_i, \mathbf{n}_j) \right)

    with :math:`\mathbf{d}_{j,i} = \mathbf{p}_j - \mathbf{p}_i` (3-D positions),
    :math:`\mathbf{n}` the point normals, :math:`\angle(a, b) = \operatorname{atan2}(\lVert a \times
    b \rVert, a \cdot b)`, :math:`h_{\mathbf{\Theta}}` (``local_nn``) run on one row per edge and
    :math:`\gamma_{\mathbf{\Theta}}` (``global_nn``) on the aggregated rows; a missing network is
    the identity. An angle with the zero vector :math:`\mathbf{d}_{i,i}` of a self-loop is 0, with
    a zero gradient (:func:`angle`).

    Args:
        local_nn (torch.nn.Module, optional): :math:`h_{\mathbf{\Theta}}`, ``[-1, F_in + 4]`` to
            ``[-1, F_out]``. (default: ``None``)
        global_nn (torch.nn.Module, optional): :math:`\gamma_{\mathbf{\Theta}}`, ``[-1, F_out]`` to
            ``[-1, F_final]``. (default: ``None``)
        add_self_loops (bool, optional): replace the self-loops by one per node. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, default
            ``"max"``; ``flow``; ...), as PyG's.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})`, ``None``, or a pair whose
          destination part is not read; positions and normals :math:`(|\mathcal{V}|, 3)` or pairs
          :math:`((|\mathcal{V}_s|, 3), (|\mathcal{V}_t|, 3))` (bipartite); ``edge_index`` in any of
          PyG's forms or a graph object (:func:`~unigraph.nn.point_conv.point_graph`)
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    def forward(self, x: Any, pos: Any, normal: Any, edge_index: Any) -> Tensor:
        who = type(self).__name__
        g, pos_src, pos_dst = point_graph(self, who, pos, edge_index, loops_past_sources=False)
        node_pair(normal, "normal", who)
        normal_src, normal_dst = split_pair(g, normal, "normal")
        for name, value in (("pos", pos_src), ("normal", normal_src)):
            if value.shape[1] != 3:
                raise ValueError(f"{who} takes 3-D {name} (angles come from cross products), got width "
                                 f"{value.shape[1]}")
        x_src = source_rows(g, source_features(x, who), "x")
        msg = point_pair_features(pos_dst.index_select(0, g.dst), pos_src.index_select(0, g.src),
                                  normal_dst.index_select(0, g.dst), normal_src.index_select(0, g.src))
        return self._local_global(g, x_src, msg)
