r"""DGL's ``GINEConv``: GIN with edge features (https://arxiv.org/abs/1905.12265).

.. math::
    h_i' = f_\Theta\Big((1 + \epsilon) h_i + \sum_{j \in N(i)} \mathrm{ReLU}(h_j + e_{ji})\Big)

``eps`` a parameter with ``learn_eps`` (else a buffer), starting at ``init_eps``; ``apply_func`` is
:math:`f_\Theta` (None: identity). The message and its sum run in one COO pass where unigraph's
small-graph rule takes the call (``native_lane.run_add_relu``: no ``[E, D]`` message); elsewhere
as one g-SDDMM (``h_j + e_ji``), a ReLU per edge and one g-SpMM sum.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_graph, expand_as_pair
from unigraph.nn.gin_conv import root_term
from unigraph.ops import native_lane


def rectified_sum(graph, feat_src: Tensor, edge_feat: Tensor) -> Tensor:
    """``sum_{(j, i)} relu(feat_src[j] + edge_feat[(j, i)])`` per destination ``i``."""
    fused = native_lane.run_add_relu(graph, "sum", feat_src, edge_feat)  # None where it does not apply
    if fused is not None:
        return fused
    messages = torch.relu(ops.gsddmm(graph, "add", feat_src, edge_feat, "u", "e"))
    return ops.gspmm(graph, "copy_e", "sum", None, messages)


class GINEConv(nn.Module):
    """Args (DGL's): ``apply_func`` (a module applied to the sum, or None), ``init_eps``,
    ``learn_eps``.

    Shapes: ``node_feat`` ``[N_src, D]`` (or a ``(src, dst)`` pair), ``edge_feat`` ``[E, D]`` (or
    any shape that broadcasts against the node features, as in DGL) -> ``apply_func``'s output
    for ``[N_dst, D]``.
    """

    def __init__(self, apply_func: Callable | None = None, init_eps: float = 0, learn_eps: bool = False):
        super().__init__()
        self.apply_func = apply_func
        eps = torch.tensor([float(init_eps)])
        if learn_eps:
            self.eps = nn.Parameter(eps)
        else:
            self.register_buffer("eps", eps)

    def forward(self, graph, node_feat, edge_feat: Tensor) -> Tensor:
        graph = check_graph(graph, "GINEConv")
        feat_src, feat_dst = expand_as_pair(node_feat, graph)
        if not isinstance(edge_feat, Tensor) or edge_feat.dim() == 0 or edge_feat.shape[0] != graph.num_edges:
            got = list(edge_feat.shape) if isinstance(edge_feat, Tensor) else type(edge_feat).__name__
            raise DGLError(f"GINEConv: edge_feat must have one row per edge ({graph.num_edges}), got {got}")
        if feat_dst.shape[0] != graph.num_dst_nodes:
            raise DGLError(f"GINEConv: destination features have {feat_dst.shape[0]} rows for "
                           f"{graph.num_dst_nodes} destination nodes")
        rst = root_term(self.eps, feat_dst) + rectified_sum(graph, feat_src, edge_feat)
        return self.apply_func(rst) if self.apply_func is not None else rst
