"""GINConv: the graph isomorphism network operator."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.nn.call_forms import resolve
from unigraph.nn.checks import node_inputs, reset_module
from unigraph.nn.projection import dense


class GINConv(MessagePassing):
    r"""The graph isomorphism operator from the `"How Powerful are Graph Neural Networks?"
    <https://arxiv.org/abs/1810.00826>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = h_{\mathbf{\Theta}} \left( \left( \mathbf{A} + (1 + \epsilon)
        \mathbf{I} \right) \cdot \mathbf{X} \right)

    per node:

    .. math::
        \mathbf{x}^{\prime}_i = h_{\mathbf{\Theta}} \left( (1 + \epsilon) \cdot \mathbf{x}_i +
        \sum_{j \in \mathcal{N}(i)} \mathbf{x}_j \right)

    The neighbour sum is one g-SpMM (``copy_u``, sum).

    Args:
        nn (torch.nn.Module): the network :math:`h_{\mathbf{\Theta}}` mapping
            ``[-1, in_channels]`` to ``[-1, out_channels]`` (an MLP, say).
        eps (float, optional): (initial) :math:`\epsilon`. (default: ``0.``)
        train_eps (bool, optional): learn :math:`\epsilon`. (default: ``False``)

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index)`` (:mod:`unigraph.nn.call_forms`), node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_s|, F_{in}), (|\mathcal{V}_t|, F_{in}))` for a block
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    def __init__(self, nn: Callable, eps: float = 0.0, train_eps: bool = False):
        super().__init__(aggr="sum")
        if not callable(nn):
            raise TypeError(f"GINConv nn must be a callable network, got {type(nn).__name__}")
        self.nn = nn
        self.initial_eps = float(eps)
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.nn)
        with torch.no_grad():
            self.eps.fill_(self.initial_eps)

    def forward(self, g: Graph | Any, x: Any, size: Any = None) -> Tensor:
        call = resolve("GINConv", g, x, size=size)
        g, x_src, x_dst = node_inputs(call.graph, call.x, "GINConv")
        if x_dst is not None and x_src.shape[1:] != x_dst.shape[1:]:
            raise ValueError(f"GINConv needs source and destination features of one width, got "
                             f"{list(x_src.shape[1:])} and {list(x_dst.shape[1:])}")
        out = self.propagate(g, x=dense(x_src))
        if x_dst is not None:
            out = out + (1 + self.eps) * dense(x_dst)
        return self.nn(out)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(nn={self.nn})"
