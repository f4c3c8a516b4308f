"""MRConv: the max-relative graph convolution of DeepGCNs, used by Vision GNN."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor
from torch.nn import Linear

from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.call_forms import resolve
from unigraph.nn.checks import check_positive, node_inputs, reset_module
from unigraph.nn.projection import dense


class MRConv(MessagePassing):
    r"""The max-relative graph convolution from the `"DeepGCNs: Can GCNs Go as Deep as CNNs?"
    <https://arxiv.org/abs/1904.03751>`_ paper, the graph layer of `"Vision GNN: An Image is Worth
    Graph of Nodes" <https://arxiv.org/abs/2206.00272>`_.

    .. math::
        \mathbf{X}^{\prime} = h_{\mathbf{\Theta}}\big(\mathbf{X}_{dst} \,\Vert\,
        \operatorname{max}(\mathbf{A}, \mathbf{X}) - \mathbf{X}_{dst}\big)

    per node:

    .. math::
        \mathbf{x}^{\prime}_i = h_{\mathbf{\Theta}}\Big(\mathbf{x}_i \,\Big\Vert\,
        \max_{j \in \mathcal{N}(i)} (\mathbf{x}_j - \mathbf{x}_i)\Big)

    (the max is 0 for a node without in-edges). The message ``x_j - x_i`` under max compiles to one
    g-SpMM, :math:`\max_j \mathbf{x}_j - \mathbf{x}_i`: no per-edge tensor at all.

    Args:
        in_channels (int): size of each input sample.
        out_channels (int): size of each output sample.
        nn (torch.nn.Module, optional): :math:`h_{\mathbf{\Theta}}`, mapping ``[-1, 2 * in_channels]``
            to ``[-1, out_channels]``. (default: ``Linear(2 * in_channels, out_channels)``)
        bias (bool, optional): bias of the default ``Linear``. (default: ``True``)

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index)`` (:mod:`unigraph.call_forms`), node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_s|, F_{in}), (|\mathcal{V}_t|, F_{in}))`
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    def __init__(self, in_channels: int, out_channels: int, nn: Callable | None = None, bias: bool = True):
        super().__init__(aggr="max")
        self.in_channels = check_positive(in_channels, "in_channels", "MRConv")
        self.out_channels = check_positive(out_channels, "out_channels", "MRConv")
        if nn is not None and not callable(nn):
            raise TypeError(f"MRConv nn must be a callable network, got {type(nn).__name__}")
        self.nn = nn if nn is not None else Linear(2 * in_channels, out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.nn)

    def forward(self, g: Graph | Any, x: Any) -> Tensor:
        call = resolve("MRConv", g, x)
        g, x_src, x_dst = node_inputs(call.graph, call.x, "MRConv", (self.in_channels, self.in_channels))
        if x_dst is None:
            raise ValueError("MRConv needs destination features: pass (x_src, x_dst) with x_dst a tensor")
        x_src, x_dst = dense(x_src), dense(x_dst)
        relative = self.propagate(g, x=(x_src, x_dst))
        return self.nn(torch.cat([x_dst, relative], dim=-1))

    def message(self, x_i: Tensor, x_j: Tensor) -> Tensor:
        return x_j - x_i

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"
