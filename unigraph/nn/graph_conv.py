"""GraphConv: the higher-order GNN operator of Morris et al."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.call_forms import resolve
from unigraph.nn.checks import channels_pair, check_positive, check_width, edge_input, node_inputs
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.projection import dense, linear
from unigraph.nn.static_graph import batch_major, is_static, node_major


class GraphConv(MessagePassing):
    r"""The graph neural network operator from the `"Weisfeiler and Leman Go Neural: Higher-order
    Graph Neural Networks" <https://arxiv.org/abs/1810.02244>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \mathbf{X}_{dst} \mathbf{W}_1^{\top} +
        \operatorname{AGG}(\mathbf{A}_w, \mathbf{X}) \mathbf{W}_2^{\top} + \mathbf{b}

    per node:

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{W}_1 \mathbf{x}_i + \mathbf{W}_2
        \bigoplus_{j \in \mathcal{N}(i)} e_{j,i} \cdot \mathbf{x}_j + \mathbf{b}

    with :math:`e_{j,i}` the edge weight (1 without weights) and :math:`\bigoplus` the sum, mean,
    max or min. The message ``edge_weight.view(-1, 1) * x_j`` compiles to one g-SpMM; for sum and
    mean :math:`\mathbf{W}_2` is applied before the aggregation when that narrows the features.

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes;
            ``-1`` infers it on the first call.
        out_channels (int): size of each output sample.
        aggr (str, optional): ``"sum"`` (``"add"``), ``"mean"``, ``"max"`` or ``"min"``. (default: ``"add"``)
        bias (bool, optional): learn an additive bias. (default: ``True``)

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index)`` with ``size`` (see
          :mod:`unigraph.call_forms`; a sparse adjacency's values are the edge weights); node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_s|, F_{s}), (|\mathcal{V}_t|, F_{t}))`, or :math:`(B, |\mathcal{V}|, F_{in})`
          (a static graph, :mod:`unigraph.nn.static_graph`), edge weights
          :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, aggr: str = "add", bias: bool = True,
                 **kwargs: Any):
        super().__init__(aggr=aggr, **kwargs)
        self.in_channels = in_channels
        self._widths = channels_pair(in_channels, "GraphConv", lazy=True)
        self._lazy = LAZY in self._widths
        self.out_channels = check_positive(out_channels, "out_channels", "GraphConv")
        self.lin_rel = make_linear(self._widths[0], out_channels, bias=bias)
        self.lin_root = make_linear(self._widths[1], out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin_rel.reset_parameters()
        self.lin_root.reset_parameters()

    def forward(self, x: Any, edge_index: Any, edge_weight: Tensor | None = None, size: Any = None) -> Tensor:
        if is_static(x):  # [B, N, F]: B feature sets over one graph
            batch = x.shape[0]
            check_width(x[0], self._widths[0], "GraphConv")
            call = resolve("GraphConv", node_major(x), edge_index, size=size, edge_weight=edge_weight)
            g = oriented(call.graph, self.flow, "GraphConv")
            edge_weight = edge_input(g, call.edge_weight, "GraphConv", "edge_weight", vector=True)
            aggregated = batch_major(self.propagate(g, x=node_major(x), edge_weight=edge_weight), batch)
            return self.lin_rel(aggregated) + linear(x, self.lin_root.weight)
        call = resolve("GraphConv", x, edge_index, size=size, edge_weight=edge_weight)
        g, x, edge_weight = oriented(call.graph, self.flow, "GraphConv"), call.x, call.edge_weight
        g, x_src, x_dst = node_inputs(g, x, "GraphConv", layer=self)
        edge_weight = edge_input(g, edge_weight, "GraphConv", "edge_weight", vector=True)
        if self.aggr in ("sum", "mean") and self._widths[0] > self.out_channels:
            out = self.propagate(g, x=linear(x_src, self.lin_rel.weight), edge_weight=edge_weight)
            if self.lin_rel.bias is not None:
                out = out + self.lin_rel.bias
        else:
            aggregated = self.propagate(g, x=dense(x_src), edge_weight=edge_weight)
            if x_dst is not None and aggregated.dim() == 2 and not torch.is_autocast_enabled(aggregated.device.type):
                # the root term carries the bias and the aggregation's product accumulates into it
                # (addmm_, as SAGEConv's): no separate pass over the output for the sum
                root = linear(x_dst, self.lin_root.weight, self.lin_rel.bias)   # (this call's own fresh tensor)
                return root.addmm_(aggregated, self.lin_rel.weight.t())
            out = self.lin_rel(aggregated)
        if x_dst is not None:
            out = out + linear(x_dst, self.lin_root.weight)
        return out

    def _lazy_linears(self) -> tuple[tuple, tuple]:
        return (self.lin_rel,), (self.lin_root,)

    def message(self, x_j: Tensor, edge_weight: Tensor | None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"
