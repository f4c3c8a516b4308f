"""TAGConv: the topology adaptive graph convolution of Du et al."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import Parameter

from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_positive
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.layer_inputs import check_hops, propagate_nodes, size_lazy, square_call
from unigraph.nn.gcn_conv import gcn_norm


class TAGConv(MessagePassing):
    r"""The topology adaptive graph convolution from the `"Topology Adaptive Graph Convolutional
    Networks" <https://arxiv.org/abs/1710.10370>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \sum_{k=0}^K \left( \mathbf{D}^{-1/2} \mathbf{A}
        \mathbf{D}^{-1/2} \right)^k \mathbf{X} \mathbf{W}_{k} + \mathbf{b},

    with :math:`\mathbf{A}` the weighted adjacency *without* added self-loops and
    :math:`D_{ii} = \sum_j A_{ji}` (PyG's ``gcn_norm(add_self_loops=False)``:
    :func:`unigraph.nn.gcn_conv.gcn_norm`); :math:`\mathbf{A}` as it is without ``normalize``.
    Each hop is one g-SpMM.

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each output sample.
        K (int, optional): number of hops :math:`K`. (default: ``3``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        normalize (bool, optional): normalize the adjacency symmetrically. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, ``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (any of its adjacency forms) or ``(g, x)``; node
          features :math:`(*, |\mathcal{V}|, F_{in})`, edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(*, |\mathcal{V}|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, K: int = 3, bias: bool = True, normalize: bool = True,
                 **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        self.in_channels = in_channels if in_channels == LAZY else check_positive(in_channels, "in_channels", "TAGConv")
        self.out_channels = check_positive(out_channels, "out_channels", "TAGConv")
        self.K, self.normalize = check_hops(K, "TAGConv"), normalize
        self._widths, self._lazy = (in_channels, in_channels), in_channels == LAZY
        self.lins = torch.nn.ModuleList([make_linear(in_channels, out_channels, bias=False) for _ in range(K + 1)])
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in self.lins:
            lin.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Tensor | Any, edge_index: Any, edge_weight: Tensor | None = None) -> Tensor:
        call = square_call(self, x, edge_index, edge_weight)
        size_lazy(self, call.x, tuple(self.lins))
        g, weights = call.graph, call.edge_weight
        if self.normalize:
            g, weights = gcn_norm(g, weights, call.x.dtype, call.form, add_self_loops=False)
        x = call.x
        out = self.lins[0](x)
        for lin in self.lins[1:]:
            x = propagate_nodes(self, g, x, edge_weight=weights)
            out = out + lin(x)
        return out + self.bias if self.bias is not None else out

    def message(self, x_j: Tensor, edge_weight: Tensor | None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, K={self.K})"
