"""MixHopConv: the mix-hop graph convolution of Abu-El-Haija et al."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import Identity, Parameter

from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_positive
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.gcn_conv import gcn_norm
from unigraph.nn.layer_inputs import propagate_nodes, size_lazy, square_call


class MixHopConv(MessagePassing):
    r"""The mix-hop graph convolution from the `"MixHop: Higher-Order Graph Convolutional
    Architectures via Sparsified Neighborhood Mixing" <https://arxiv.org/abs/1905.00067>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = {\Big\Vert}_{p \in P} {\left( \mathbf{\hat{D}}^{-1/2}
        \mathbf{\hat{A}} \mathbf{\hat{D}}^{-1/2} \right)}^p \mathbf{X} \mathbf{\Theta}_p + \mathbf{b},

    with :math:`\mathbf{\hat{A}} = \mathbf{A} + \mathbf{I}` and :math:`\hat{D}_{ii} = \sum_{j}
    \hat{A}_{ji}` (PyG's ``gcn_norm``: :func:`unigraph.nn.gcn_conv.gcn_norm`) and :math:`\Vert` the
    concatenation over the powers, in the order given. Hop :math:`p` is computed from hop
    :math:`p - 1` (one g-SpMM each, up to the largest power).

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each power's output.
        powers (list of int, optional): the powers :math:`P` of the adjacency, each ``>= 0``.
            (default: ``[0, 1, 2]``)
        add_self_loops (bool, optional): add self-loops before normalizing. (default: ``True``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, ``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (any of its adjacency forms) or ``(g, x)``; node
          features :math:`(*, |\mathcal{V}|, F_{in})`, edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(*, |\mathcal{V}|, |P| \cdot F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, powers: list[int] | None = None,
                 add_self_loops: bool = True, bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        powers = [0, 1, 2] if powers is None else powers
        if (not isinstance(powers, (list, tuple)) or not powers
                or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in powers)):
            raise ValueError(f"MixHopConv powers must be a non-empty list of ints >= 0, got {powers!r}")
        self.in_channels = in_channels if in_channels == LAZY else check_positive(in_channels, "in_channels",
                                                                                   "MixHopConv")
        self.out_channels = check_positive(out_channels, "out_channels", "MixHopConv")
        self.powers, self.add_self_loops = powers, add_self_loops
        self._widths, self._lazy = (in_channels, in_channels), in_channels == LAZY
        # one projection per power used; an unused hop is passed on, not projected (PyG's layout)
        self.lins = torch.nn.ModuleList([make_linear(in_channels, out_channels, bias=False) if p in powers
                                         else Identity() for p in range(max(powers) + 1)])
        self.bias = Parameter(torch.empty(len(powers) * out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in self.lins:
            if hasattr(lin, "reset_parameters"):
                lin.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Tensor | Any, edge_index: Any, edge_weight: Tensor | None = None) -> Tensor:
        call = square_call(self, x, edge_index, edge_weight)
        size_lazy(self, call.x, tuple(lin for lin in self.lins if not isinstance(lin, Identity)))
        g, weights = gcn_norm(call.graph, call.edge_weight, call.x.dtype, call.form,
                              add_self_loops=self.add_self_loops)
        x = call.x
        hops = [self.lins[0](x)]
        for lin in self.lins[1:]:
            x = propagate_nodes(self, g, x, edge_weight=weights)
            hops.append(lin(x))
        out = torch.cat([hops[p] for p in self.powers], dim=-1)
        return out + self.bias if self.bias is not None else out

    def message(self, x_j: Tensor, edge_weight: Tensor | None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, powers={self.powers})"
