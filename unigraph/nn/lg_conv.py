"""LGConv: LightGCN's light graph convolution (He et al.)."""
from __future__ import annotations

from typing import Any

from torch import Tensor

from unigraph.message_passing import MessagePassing
from unigraph.nn.gcn_conv import gcn_norm
from unigraph.nn.layer_inputs import propagate_nodes, square_call


class LGConv(MessagePassing):
    r"""The light graph convolution from the `"LightGCN: Simplifying and Powering Graph
    Convolution Network for Recommendation" <https://arxiv.org/abs/2002.02126>`_ paper.

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i)}
        \frac{e_{j,i}}{\sqrt{\deg(i)\deg(j)}} \mathbf{x}_j

    with :math:`\deg` the weighted in-degree, no self-loops added (PyG's
    ``gcn_norm(add_self_loops=False)``: :func:`unigraph.nn.gcn_conv.gcn_norm`); the edge weights
    :math:`e_{j,i}` (1 without) as they are without ``normalize``. One g-SpMM; no parameters.

    Args:
        normalize (bool, optional): normalize the adjacency symmetrically. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, ``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (any of its adjacency forms) or ``(g, x)``; node
          features :math:`(*, |\mathcal{V}|, F)`, edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(*, |\mathcal{V}|, F)`
    """

    resolves_flow = True

    def __init__(self, normalize: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        self.normalize = normalize

    def reset_parameters(self) -> None:
        pass   # (no parameters; PyG's interface)

    def forward(self, x: Tensor | Any, edge_index: Any, edge_weight: Tensor | None = None) -> Tensor:
        call = square_call(self, x, edge_index, edge_weight)
        g, weights = call.graph, call.edge_weight
        if self.normalize:
            g, weights = gcn_norm(g, weights, call.x.dtype, call.form, add_self_loops=False)
        return propagate_nodes(self, g, call.x, edge_weight=weights)

    def message(self, x_j: Tensor, edge_weight: Tensor | None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
