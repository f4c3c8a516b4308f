"""WLConvContinuous: the continuous Weisfeiler-Lehman refinement of the Wasserstein WL kernel."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.group_reduce import widened, widened_dtype
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import edge_input, node_inputs
from unigraph.nn.projection import dense
from unigraph.nn.layer_inputs import pyg_call


class WLConvContinuous(MessagePassing):
    r"""The Weisfeiler-Lehman operator from the `"Wasserstein Weisfeiler-Lehman Graph Kernels"
    <https://arxiv.org/abs/1906.01277>`_ paper: each node moves half way towards the weighted mean
    of its neighbours.

    .. math::
        \mathbf{X}^{\prime} = \tfrac{1}{2}\big(\mathbf{X}_{dst} + \mathbf{D}_w^{-1} \mathbf{A}_w
        \mathbf{X}\big)

    per node:

    .. math::
        \mathbf{x}^{\prime}_i = \frac{1}{2}\Big(\mathbf{x}_i + \frac{1}{\deg_w(i)}
        \sum_{j \in \mathcal{N}(i)} e_{j,i} \cdot \mathbf{x}_j \Big),
        \qquad \deg_w(i) = \sum_{j \in \mathcal{N}(i)} e_{j,i}

    with :math:`e_{j,i}` the edge weight (1 without weights; a sparse adjacency's values are the
    weights). A node whose weighted degree is 0 gets :math:`\tfrac{1}{2}\mathbf{x}_i`; with
    ``(x_src, None)`` the output is the weighted mean alone (no halving), as in PyG. The weighted
    sum is one ``u_mul_e`` g-SpMM.

    Args:
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``node_dim``,
            ...). The aggregation is always the sum (as in PyG); ``flow="target_to_source"`` is
            refused, because PyG's layer then aggregates by ``edge_index[0]`` but takes the degree
            by ``edge_index[1]``, a mixture no graph direction reproduces.

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index, edge_weight, size)``; node features
          :math:`(|\mathcal{V}|, F)` or a pair :math:`((|\mathcal{V}_s|, F), (|\mathcal{V}_t|, F))`
          (``x_dst`` may be ``None``), edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}_t|, F)`
    """

    resolves_flow = True

    def __init__(self, **kwargs: Any):
        if "aggr" in kwargs:
            raise TypeError("WLConvContinuous always sums (PyG passes aggr='add' itself); do not pass aggr")
        super().__init__(aggr="add", **kwargs)
        if self.flow != "source_to_target":
            raise ValueError("WLConvContinuous does not support flow='target_to_source': PyG's layer aggregates by "
                             "edge_index[0] but normalizes by the degree of edge_index[1]; pass the reversed "
                             "edge_index instead")

    def reset_parameters(self) -> None:
        """Nothing to reset: the layer has no parameters."""

    def forward(self, x: Tensor | Any, edge_index: Any, edge_weight: Tensor | None = None, size: Any = None) -> Tensor:
        who = "WLConvContinuous"
        if self.flow != "source_to_target":   # (also when flow was changed after construction)
            raise ValueError(f"{who} does not support flow='target_to_source' (see the class docstring)")
        call, g = pyg_call(self, who, x, edge_index, size=size, edge_weight=edge_weight, values="edge_weight")
        g, x_src, x_dst = node_inputs(g, call.x, who)
        x_src = dense(x_src)
        if x_src.dim() != 2:
            raise ValueError(f"{who} expects node features of shape [num_nodes, F], got {list(x_src.shape)}")
        if x_dst is not None and tuple(x_dst.shape[1:]) != tuple(x_src.shape[1:]):
            raise ValueError(f"{who} expects source and destination features of the same width, got "
                             f"{list(x_src.shape)} and {list(x_dst.shape)}")
        weights = edge_input(g, call.edge_weight, who, "edge_weight", vector=True)
        out = self.propagate(g, x=x_src, edge_weight=weights)
        # the degree summed and inverted in float32 at least, rounded once (a half-precision sum of a
        # hub's weights stops growing at 256 or 2,048)
        given = weights.dtype if weights is not None else out.dtype
        weights = (widened(weights) if weights is not None
                   else torch.ones(g.num_edges, dtype=widened_dtype(out.dtype), device=out.device))
        degree = weights.new_zeros(g.num_dst_nodes).index_add(0, g.dst, weights)
        inverse = 1.0 / degree
        inverse = inverse.masked_fill(inverse == float("inf"), 0.0).to(given)
        out = inverse.view(-1, 1) * out
        return out if x_dst is None else 0.5 * (dense(x_dst) + out)

    def message(self, x_j: Tensor, edge_weight: Tensor | None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
