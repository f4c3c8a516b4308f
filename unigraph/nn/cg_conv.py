"""CGConv: the crystal graph convolution."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import BatchNorm1d, Linear

from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import channels_pair, check_width
from unigraph.nn.layer_inputs import edge_feature_inputs
from unigraph.nn.projection import dense, linear


class CGConv(MessagePassing):
    r"""The crystal graph convolution from `"Crystal Graph Convolutional Neural Networks for an
    Accurate and Interpretable Prediction of Material Properties"
    <https://journals.aps.org/prl/abstract/10.1103/PhysRevLett.120.145301>`_:

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{x}_i + \bigoplus_{j \in \mathcal{N}(i)}
        \sigma \left( \mathbf{z}_{i,j} \mathbf{W}_f + \mathbf{b}_f \right) \odot
        g \left( \mathbf{z}_{i,j} \mathbf{W}_s + \mathbf{b}_s \right),
        \qquad \mathbf{z}_{i,j} = [\mathbf{x}_i \,\Vert\, \mathbf{x}_j \,\Vert\, \mathbf{e}_{j,i}]

    with :math:`\sigma` the sigmoid, :math:`g` the softplus and :math:`\bigoplus` the sum by
    default; with ``batch_norm`` the aggregation is batch-normalized before the residual term.
    The concatenation is never built: :math:`\mathbf{z}_{i,j} \mathbf{W}` is split into the
    destination's, the source's and the edge's column blocks, each projected once per node (or
    edge), both gates at once, and the three added per edge.

    Args:
        channels (int or tuple): size of each input sample, or (source, destination) sizes (the
            output has the destination's).
        dim (int, optional): edge feature size (0: no edge features). (default: ``0``)
        aggr (str, optional): ``"add"``, ``"mean"``, ``"max"``, ... or an aggregation module, as
            PyG's. (default: ``"add"``)
        batch_norm (bool, optional): batch-normalize the aggregation. (default: ``False``)
        bias (bool, optional): learn the additive biases :math:`\mathbf{b}_f, \mathbf{b}_s`.
            (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``, ...).

    Shapes:
        - **input:** ``(g, x[, edge_attr])`` or PyG's ``(x, edge_index[, edge_attr])``
          (:mod:`unigraph.call_forms`; a ``SparseTensor``'s values, or a torch sparse adjacency's
          ``[E, D]`` values, are the edge features), node features :math:`(|\mathcal{V}|, F)` or a
          pair :math:`((|\mathcal{V}_s|, F_{s}), (|\mathcal{V}_t|, F_{t}))`, edge features
          :math:`(|\mathcal{E}|, D)` *(with* ``dim`` *> 0)*
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{t})`
    """

    resolves_flow = True

    def __init__(self, channels: int | tuple[int, int], dim: int = 0, aggr: Any = "add", batch_norm: bool = False,
                 bias: bool = True, **kwargs: Any):
        super().__init__(aggr=aggr, **kwargs)
        who = type(self).__name__
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            raise ValueError(f"{who} dim must be an int >= 0 (the edge feature size), got {dim!r}")
        self.channels = channels
        self._widths = channels_pair(channels, who)
        self._lazy = False
        self.dim = dim
        self.batch_norm = batch_norm
        width = sum(self._widths) + dim
        self.lin_f = Linear(width, self._widths[1], bias=bias)
        self.lin_s = Linear(width, self._widths[1], bias=bias)
        self.bn = BatchNorm1d(self._widths[1]) if batch_norm else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin_f.reset_parameters()
        self.lin_s.reset_parameters()
        if self.bn is not None:
            self.bn.reset_parameters()

    def forward(self, x: Any, edge_index: Any, edge_attr: Tensor | None = None) -> Tensor:
        who = type(self).__name__
        g, x_src, x_dst, edge_attr = edge_feature_inputs(self, x, edge_index, edge_attr)
        if x_dst is None:
            raise ValueError(f"{who} needs destination features (they enter every message and the residual "
                             "term): pass (x_src, x_dst) with x_dst a tensor")
        x_src, x_dst = dense(x_src), dense(x_dst)
        # the weight's column blocks: [x_i | x_j | e], both gates stacked (filter first, then core)
        weight = torch.cat([self.lin_f.weight, self.lin_s.weight])
        src_width, dst_width = self._widths
        bias = None if self.lin_f.bias is None else torch.cat([self.lin_f.bias, self.lin_s.bias])
        gates_dst = linear(x_dst, weight[:, :dst_width], bias)   # (the biases ride on the destination's share)
        gates_src = linear(x_src, weight[:, dst_width:dst_width + src_width])
        gates_edge = self._edge_gates(edge_attr, weight[:, dst_width + src_width:])
        out = self.propagate(g, x=(gates_src, gates_dst), gates_edge=gates_edge)
        if self.bn is not None:
            out = self.bn(out)
        return out + x_dst

    def _edge_gates(self, edge_attr: Tensor | None, weight: Tensor) -> Tensor | None:
        """The edge features' share of both gates per edge (None without edge features)."""
        who = type(self).__name__
        if edge_attr is None and self.dim > 0:
            raise ValueError(f"{who}(dim={self.dim}) needs edge_attr with {self.dim} features per edge")
        if edge_attr is not None:
            if self.dim == 0:
                raise ValueError(f"{who} was built with dim=0 (no edge features) but got edge_attr; "
                                 "pass dim=<features>")
            if edge_attr.dim() == 1 and self.dim == 1:
                edge_attr = edge_attr.view(-1, 1)
            check_width(edge_attr, self.dim, who, "edge_attr", "dim", "num_edges")
        return None if edge_attr is None else linear(edge_attr, weight)

    def message(self, x_i: Tensor, x_j: Tensor, gates_edge: Tensor | None) -> Tensor:
        gates = x_i + x_j if gates_edge is None else x_i + x_j + gates_edge
        filter_gate, core = gates.chunk(2, dim=-1)
        return filter_gate.sigmoid() * torch.nn.functional.softplus(core)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.channels}, dim={self.dim})"
