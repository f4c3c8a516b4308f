"""NNConv: the edge-conditioned convolution, whose filter is a network of the edge features.

What the layers conditioned on edge features share (reading ``edge_attr`` in every call form, PyG's
``uniform`` initializer, its ``aggr`` name) is in :mod:`unigraph.nn.layer_inputs`."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import Tensor
from torch.nn import Parameter

from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import channels_pair, check_positive, reset_module
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.projection import dense
from unigraph.nn.layer_inputs import aggr_name, edge_feature_inputs, root_and_bias, size_linear, sized_widths, uniform_


class NNConv(MessagePassing):
    r"""The continuous kernel-based convolution from `"Neural Message Passing for Quantum
    Chemistry" <https://arxiv.org/abs/1704.01212>`_, also known as the edge-conditioned
    convolution of `"Dynamic Edge-Conditioned Filters in Convolutional Neural Networks on
    Graphs" <https://arxiv.org/abs/1704.02901>`_ (``ECConv``):

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{\Theta} \mathbf{x}_i + \bigoplus_{j \in \mathcal{N}(i)}
        \mathbf{x}_j \cdot h_{\mathbf{\Theta}}(\mathbf{e}_{j,i}) + \mathbf{b}

    with :math:`h_{\mathbf{\Theta}}` a network mapping each edge's features to an
    :math:`F_{in} \times F_{out}` matrix and :math:`\bigoplus` the sum by default. The network runs
    once over all edges; each message is the source row times its edge's matrix (a batched
    row-matrix product, ``[E, 1, F_in] @ [E, F_in, F_out]``).

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes;
            ``-1`` infers it on the first call.
        out_channels (int): size of each output sample.
        nn (torch.nn.Module): :math:`h_{\mathbf{\Theta}}`, mapping ``edge_attr`` of shape
            ``[E, D]`` to ``[E, in_channels * out_channels]`` (source ``in_channels``).
        aggr (str, optional): ``"add"``, ``"mean"``, ``"max"``, ... or an aggregation module, as
            PyG's. (default: ``"add"``)
        root_weight (bool, optional): add :math:`\mathbf{\Theta} \mathbf{x}_i`. (default: ``True``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``, ...).

    Shapes:
        - **input:** ``(g, x, edge_attr)`` or PyG's ``(x, edge_index, edge_attr)`` with ``size``
          (:mod:`unigraph.call_forms`; a ``SparseTensor``'s values, or a torch sparse adjacency's
          ``[E, D]`` values, are the edge features), node features :math:`(|\mathcal{V}|, F_{in})`
          or a pair :math:`((|\mathcal{V}_s|, F_{s}), (|\mathcal{V}_t|, F_{t}))` (``x_t`` may be
          ``None``: no root term), edge features :math:`(|\mathcal{E}|, D)`
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, nn: Callable, aggr: Any = "add",
                 root_weight: bool = True, bias: bool = True, **kwargs: Any):
        super().__init__(aggr=aggr, **kwargs)
        who = type(self).__name__
        if not callable(nn):
            raise TypeError(f"{who} nn must be a callable network, got {type(nn).__name__}")
        self._aggr_name = aggr_name(aggr, self.aggr)
        self.in_channels = in_channels
        self._widths = channels_pair(in_channels, who, lazy=True)
        self._lazy = LAZY in self._widths
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.nn = nn
        self.root_weight = bool(root_weight)
        self.in_channels_l = self._widths[0]
        self.lin = make_linear(self._widths[1], out_channels, bias=False) if root_weight else None
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.nn)
        if self.lin is not None:
            uniform_(self.lin.weight, self._widths[1])
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Any, edge_index: Any, edge_attr: Tensor | None = None, size: Any = None) -> Tensor:
        g, x_src, x_dst, edge_attr = edge_feature_inputs(self, x, edge_index, edge_attr, size)
        weight = self._edge_matrices(g, edge_attr)
        out = self.propagate(g, x=dense(x_src), weight=weight)
        return root_and_bias(out, x_dst, self.lin, self.bias)

    def _edge_matrices(self, g: Graph, edge_attr: Tensor | None) -> Tensor:
        """``nn(edge_attr)`` as one ``[F_in, F_out]`` matrix per edge."""
        who = type(self).__name__
        if edge_attr is None:
            raise ValueError(f"{who} needs edge_attr (the features its nn maps to each edge's filter)")
        weight = self.nn(edge_attr)
        expected = self._widths[0] * self.out_channels
        if not isinstance(weight, Tensor) or weight.dim() == 0 or weight.shape[0] != g.num_edges \
                or math.prod(weight.shape[1:]) != expected:
            got = list(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__
            raise ValueError(f"{who} nn must map edge_attr to [num_edges={g.num_edges}, in_channels * out_channels="
                             f"{expected}], got {got}")
        return weight.reshape(g.num_edges, self._widths[0], self.out_channels)

    def message(self, x_j: Tensor, weight: Tensor) -> Tensor:
        return row_times_matrix(x_j, weight)

    def _materialize(self, x_src: Tensor, x_dst: Tensor | None) -> None:
        self._widths = sized_widths(self._widths, x_src, x_dst)
        self.in_channels_l = self._widths[0]
        size_linear(self.lin, self._widths[1], lambda w: uniform_(w, w.shape[1]))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, aggr={self._aggr_name}, nn={self.nn})"


#: PyG's alias (``torch_geometric.nn.ECConv``)
ECConv = NNConv


def row_times_matrix(rows: Tensor, matrices: Tensor) -> Tensor:
    """``rows[e] @ matrices[e]`` for every edge: ``[E, F]`` and ``[E, F, M]`` to ``[E, M]`` (a
    message that reads only its arguments: its trace is cached)."""
    return rows.unsqueeze(1).matmul(matrices).squeeze(1)


