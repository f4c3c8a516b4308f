"""GatedGraphConv: a GRU over rounds of weighted message passing (Li et al.)."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from torch.nn import Parameter

from unigraph.message_passing import MessagePassing
from unigraph.message_passing.inputs import check_rows
from unigraph.nn.checks import check_positive, edge_input, reset_module
from unigraph.nn.projection import dense
from unigraph.nn.layer_inputs import pyg_call


class GatedGraphConv(MessagePassing):
    r"""The gated graph convolution operator from the `"Gated Graph Sequence Neural Networks"
    <https://arxiv.org/abs/1511.05493>`_ paper.

    .. math::
        \mathbf{h}_i^{(0)} = \mathbf{x}_i \, \Vert \, \mathbf{0}, \qquad
        \mathbf{m}_i^{(l+1)} = \bigoplus_{j \in \mathcal{N}(i)} e_{j,i} \cdot
        \mathbf{\Theta}^{(l)} \mathbf{h}_j^{(l)}, \qquad
        \mathbf{h}_i^{(l+1)} = \textrm{GRU}(\mathbf{m}_i^{(l+1)}, \mathbf{h}_i^{(l)})

    up to :math:`\mathbf{h}_i^{(L)}`, the output. The input is padded with zeros to
    ``out_channels`` (so it may not be wider); :math:`e_{j,i}` is the edge weight (1 without
    weights) and :math:`\bigoplus` the aggregation. Each round's message
    ``edge_weight.view(-1, 1) * x_j`` is one g-SpMM (``propagate``).

    Args:
        out_channels (int): size of each output sample (and of the hidden state).
        num_layers (int): the number of rounds :math:`L`.
        aggr (str, optional): ``"add"``, ``"mean"``, ``"max"`` (or PyG's other aggregations).
            (default: ``"add"``)
        bias (bool, optional): biases in the GRU cell. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``, ...), as PyG's.

    Call forms: ``conv(g, x)`` or PyG's ``conv(x, edge_index, edge_weight)`` with ``edge_index`` a
    tensor, a ``SparseTensor`` or a torch sparse ``adj_t`` (whose values are the edge weights).

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})` with :math:`F_{in} \le F_{out}`,
          edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, out_channels: int, num_layers: int, aggr: str = "add", bias: bool = True, **kwargs: Any):
        super().__init__(aggr=aggr, **kwargs)
        who = "GatedGraphConv"
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.num_layers = check_positive(num_layers, "num_layers", who)
        self.weight = Parameter(torch.empty(num_layers, out_channels, out_channels))
        self.rnn = torch.nn.GRUCell(out_channels, out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.aggr_module is not None:
            reset_module(self.aggr_module)
        bound = 1.0 / math.sqrt(self.out_channels)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
        self.rnn.reset_parameters()

    def forward(self, x: Tensor, edge_index: Any, edge_weight: Tensor | None = None) -> Tensor:
        who = "GatedGraphConv"
        if isinstance(x, (tuple, list)):
            raise ValueError(f"{who} takes one feature tensor x (its hidden state is per node of a square graph), "
                             "not a (source, destination) pair")
        call, g = pyg_call(self, who, x, edge_index, edge_weight=edge_weight, values="edge_weight")
        if g.is_bipartite:
            raise ValueError(f"{who} needs a square graph (the GRU updates every node each round), got "
                             f"{g.num_src_nodes} source and {g.num_dst_nodes} destination nodes")
        x = call.x
        check_rows(x, g.num_src_nodes, "x", "nodes")
        if x.dim() != 2:
            raise ValueError(f"{who} expects x of shape [num_nodes, F] with F <= {self.out_channels}, got {list(x.shape)}")
        if x.shape[1] > self.out_channels:
            raise ValueError(f"{who}: the number of input channels ({x.shape[1]}) may not be larger than "
                             f"out_channels ({self.out_channels}); the input is padded with zeros to out_channels")
        edge_weight = edge_input(g, call.edge_weight, who, "edge_weight", vector=True)
        h = dense(x)
        if h.shape[1] < self.out_channels:
            h = torch.cat([h, h.new_zeros(h.shape[0], self.out_channels - h.shape[1])], dim=1)
        for layer in range(self.num_layers):   # (rounds, not nodes or edges)
            m = self.propagate(g, x=h @ self.weight[layer], edge_weight=edge_weight)
            h = self.rnn(m, h)
        return h

    def message(self, x_j: Tensor, edge_weight: Tensor | None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.out_channels}, num_layers={self.num_layers})"
