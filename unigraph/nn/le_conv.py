"""LEConv: the local extremum graph convolution of ASAP (Ranjan et al.)."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.call_forms import resolve
from unigraph.graph import Graph
from unigraph.group_reduce import widened
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.checks import channels_pair, check_positive, edge_input, node_inputs
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.layer_inputs import propagate_nodes, size_lazy
from unigraph.nn.static_graph import is_static


class LEConv(MessagePassing):
    r"""The local extremum graph neural network operator from the `"ASAP: Adaptive Structure Aware
    Pooling for Learning Hierarchical Graph Representations" <https://arxiv.org/abs/1911.07979>`_
    paper.

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i)} e_{j,i} \cdot
        (\mathbf{\Theta}_1 \mathbf{x}_j - \mathbf{\Theta}_2 \mathbf{x}_i)
        + \mathbf{\Theta}_3 \mathbf{x}_i

    with :math:`e_{j,i}` the edge weight (1 without weights) and :math:`\mathbf{\Theta}_1`,
    :math:`\mathbf{\Theta}_3` with biases. Computed as :math:`\sum_j e_{j,i} \mathbf{\Theta}_1
    \mathbf{x}_j - (\sum_j e_{j,i}) \mathbf{\Theta}_2 \mathbf{x}_i + \mathbf{\Theta}_3 \mathbf{x}_i`:
    one g-SpMM and a weighted in-degree, no per-edge message tensor (so ``message`` is the weighted
    :math:`\mathbf{\Theta}_1 \mathbf{x}_j` alone, not PyG's difference).

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes;
            ``-1`` infers it on the first call.
        out_channels (int): size of each output sample.
        bias (bool, optional): learn additive biases (in :math:`\mathbf{\Theta}_1` and
            :math:`\mathbf{\Theta}_3`). (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``, ...);
            the aggregation is the sum.

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (any of its adjacency forms; a sparse adjacency's
          values are the edge weights) or ``(g, x)``; node features :math:`(|\mathcal{V}|, F_{in})`, a
          pair :math:`((|\mathcal{V}_s|, F_{s}), (|\mathcal{V}_t|, F_{t}))` or
          :math:`(B, |\mathcal{V}|, F_{in})` (a static graph), edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})` (:math:`(B, |\mathcal{V}|, F_{out})`)
    """

    resolves_flow = True

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, bias: bool = True, **kwargs: Any):
        aggr = kwargs.setdefault("aggr", "add")
        if aggr not in ("add", "sum"):
            raise ValueError(f"LEConv sums its messages (its degree term assumes it), got aggr={aggr!r}")
        super().__init__(**kwargs)
        self.in_channels = in_channels
        self._widths = channels_pair(in_channels, "LEConv", lazy=True)
        self._lazy = LAZY in self._widths
        self.out_channels = check_positive(out_channels, "out_channels", "LEConv")
        self.lin1 = make_linear(self._widths[0], out_channels, bias=bias)
        self.lin2 = make_linear(self._widths[1], out_channels, bias=False)
        self.lin3 = make_linear(self._widths[1], out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin1, self.lin2, self.lin3):
            lin.reset_parameters()

    def _lazy_linears(self) -> tuple[tuple, tuple]:
        return (self.lin1,), (self.lin2, self.lin3)

    def forward(self, x: Any, edge_index: Any, edge_weight: Tensor | None = None) -> Tensor:
        if is_static(x):  # [B, N, F]: B feature sets over one square graph
            call = resolve("LEConv", x.movedim(-2, 0), edge_index, edge_weight=edge_weight)
            g = oriented(call.graph, self.flow, "LEConv")
            if g.is_bipartite:
                raise ValueError("LEConv takes static graphs (x of shape [B, N, F]) on a square graph only")
            size_lazy(self, x, (self.lin1, self.lin2, self.lin3))
            x_src = x_dst = x
        else:
            call = resolve("LEConv", x, edge_index, edge_weight=edge_weight)
            g = oriented(call.graph, self.flow, "LEConv")
            g, x_src, x_dst = node_inputs(g, call.x, "LEConv", layer=self)
            if x_dst is None:
                raise ValueError("LEConv needs destination features: got a (source, None) pair")
        weights = edge_input(g, call.edge_weight, "LEConv", "edge_weight", vector=True)
        out = propagate_nodes(self, g, self.lin1(x_src), edge_weight=weights)
        out = out - self.lin2(x_dst) * _in_weights(g, weights, out.dtype).view(-1, 1)
        return out + self.lin3(x_dst)

    def message(self, x_j: Tensor, edge_weight: Tensor | None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"


def _in_weights(g: Graph, weights: Tensor | None, dtype: torch.dtype) -> Tensor:
    """Each destination's summed in-edge weights (its in-degree without weights), summed in float32
    at least and rounded once (a half-precision sum of a hub's weights stops growing at 256 or 2,048)."""
    if weights is None:
        return g.in_degree_counts().to(dtype)
    wide = widened(weights)
    return wide.new_zeros(g.num_dst_nodes).index_add(0, g.dst, wide).to(dtype)
