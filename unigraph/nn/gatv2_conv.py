"""GATv2Conv: dynamic graph attention (Brody et al.)."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Linear, Parameter

from unigraph import ops
from unigraph.graph import Graph
from unigraph.nn.checks import check_positive, glorot_
from unigraph.nn.gat_conv import (
    attention_dropout_mask, attention_graph, attention_inputs, attention_output, merge_heads,
    set_attention_settings, wants_attention)
from unigraph.nn.lazy import is_lazy, make_linear
from unigraph.nn.projection import linear


class GATv2Conv(torch.nn.Module):
    r"""The GATv2 operator from the `"How Attentive are Graph Attention Networks?"
    <https://arxiv.org/abs/2105.14491>`_ paper, which fixes the static attention of GAT.

    .. math::
        \mathbf{X}^{\prime} = \big\Vert_{h=1}^{H} \mathbf{P}^{(h)} \mathbf{X} \mathbf{\Theta}_s^{(h)},
        \qquad \mathbf{P}^{(h)}_{ij} = \alpha^{(h)}_{i,j}

    per node and head:

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i) \cup \{ i \}}
        \alpha_{i,j}\mathbf{\Theta}_{s}\mathbf{x}_{j},
        \qquad
        \alpha_{i,j} = \operatorname{softmax}_{j}\left(\mathbf{a}^{\top}\mathrm{LeakyReLU}\left(
        \mathbf{\Theta}_{s} \mathbf{x}_j + \mathbf{\Theta}_{t} \mathbf{x}_{i}
        + \mathbf{\Theta}_{e} \mathbf{e}_{i,j}\right)\right)

    The LeakyReLU sits between the two linear maps, so each edge's score needs its own
    :math:`H \times F` vector: one g-SDDMM builds ``x_l[src] + x_r[dst]`` per edge, then the
    softmax (``edge_softmax``) and the weighted sum (a g-SpMM).

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes
            (``-1`` infers it on the first call).
        out_channels (int): size of each output sample per head.
        heads (int, optional): number of attention heads. (default: ``1``)
        concat (bool, optional): concatenate the heads (else average them). (default: ``True``)
        negative_slope (float, optional): LeakyReLU slope. (default: ``0.2``)
        dropout (float, optional): dropout probability of the attention weights. (default: ``0``)
        add_self_loops (bool, optional): replace self-loops by one per node. (default: ``True``)
        edge_dim (int, optional): edge feature size; enables the edge term. (default: ``None``)
        fill_value (float or Tensor or str, optional): edge features of added self-loops (see
            :class:`GATConv`). (default: ``"mean"``)
        bias (bool, optional): biases in both projections and an output bias. (default: ``True``)
        share_weights (bool, optional): one projection for sources and targets. (default: ``False``)
        residual (bool, optional): add a projected residual connection. (default: ``False``)

    Call forms: ``conv(g, x)`` or PyG's ``conv(x, edge_index, edge_attr, size=...)``, with
    ``edge_index`` a tensor, a ``SparseTensor`` or a torch sparse ``adj_t`` (see
    :mod:`unigraph.call_forms`). ``return_attention_weights=True`` returns
    ``(out, (edge_index, alpha))`` for a graph object or an edge_index tensor, ``(out, adj)`` with
    ``alpha`` as the values for a ``SparseTensor``, ``(out, (adj, alpha))`` for a torch sparse
    adjacency; ``alpha`` (``[E', H]``, after attention dropout) is exactly what weighted the sum, over
    the edges of the graph used (its self-loops included). ``get_attention=True`` is DGL's form,
    ``(out, alpha[E, H, 1])`` over the edges of the graph given (needs ``add_self_loops=False``).

    Shapes:
        - **input:** graph ``g``, node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_s|, F_{s}), (|\mathcal{V}_t|, F_{t}))`, edge features
          :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}_t|, H * F_{out})` or
          :math:`(|\mathcal{V}_t|, F_{out})` with ``concat=False``; with
          ``return_attention_weights=True`` also ``(edge_index, alpha)``.
    """

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 edge_dim: int | None = None, fill_value: float | Tensor | str = "mean", bias: bool = True,
                 share_weights: bool = False, residual: bool = False):
        super().__init__()
        who = "GATv2Conv"
        set_attention_settings(self, who, in_channels, out_channels, heads, concat, negative_slope, dropout,
                               add_self_loops, edge_dim, fill_value, residual)
        if share_weights and self._widths[0] != self._widths[1]:
            raise ValueError(f"{who} share_weights needs equal source and destination widths, got {in_channels}")
        self.share_weights = share_weights
        width = heads * out_channels
        self.lin_l = make_linear(self._widths[0], width, bias=bias)
        self.lin_r = self.lin_l if share_weights else make_linear(self._widths[1], width, bias=bias)
        self.att = Parameter(torch.empty(1, heads, out_channels))
        self.lin_edge = Linear(check_positive(edge_dim, "edge_dim", who), width, bias=False) if edge_dim is not None else None
        total = width if concat else out_channels
        self.res = make_linear(self._widths[1], total, bias=False) if residual else None
        self.bias = Parameter(torch.empty(total)) if bias else None
        self.reset_parameters()

    def _lazy_linears(self) -> tuple[tuple, tuple]:
        return (self.lin_l,), (self.lin_r, self.res)

    def reset_parameters(self) -> None:
        for lin in (self.lin_l, self.lin_r, self.lin_edge, self.res):
            if lin is not None and not is_lazy(lin):  # a lazy one is reset when the first call sizes it
                glorot_(lin.weight)
                if lin.bias is not None:
                    torch.nn.init.zeros_(lin.bias)
        glorot_(self.att)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Any, edge_index: Any, edge_attr: Tensor | None = None,
                return_attention_weights: bool | None = None, size: Any = None, get_attention: bool = False):
        who = "GATv2Conv"
        for features in (x, edge_index):
            if isinstance(features, (tuple, list)) and len(features) == 2 and features[1] is None:
                raise ValueError(f"{who} needs destination features: pass (x_src, x_dst) with x_dst a tensor")
        call, g, x_src, x_dst, edge_attr = attention_inputs(self, who, x, edge_index, size, edge_attr)
        if x_dst is None:
            raise ValueError(f"{who} needs destination features: pass (x_src, x_dst) with x_dst a tensor")
        wants_attention(self, who, return_attention_weights, get_attention)
        heads, channels = self.heads, self.out_channels

        x_l = linear(x_src, self.lin_l.weight, self.lin_l.bias).view(-1, heads, channels)
        if self.share_weights and not isinstance(call.x, (tuple, list)):
            x_r = x_l[: g.num_dst_nodes] if g.is_bipartite else x_l
        else:
            x_r = linear(x_dst, self.lin_r.weight, self.lin_r.bias).view(-1, heads, channels)

        graph, edge_attr = attention_graph(self, g, edge_attr)
        pair_sum = ops.gsddmm(graph, "add", x_l, x_r, "u", "v")  # [E, H, C]
        if edge_attr is not None:
            pair_sum = pair_sum + self.lin_edge(edge_attr).view(-1, heads, channels)
        scores = (F.leaky_relu(pair_sum, self.negative_slope) * self.att).sum(dim=-1)
        alpha = ops.edge_softmax(graph, scores)
        if self.training and self.dropout > 0.0:
            alpha = alpha * attention_dropout_mask(graph.num_edges, heads, self.dropout, alpha)
        out = ops.gspmm(graph, "u_mul_e", "sum", x_l, alpha.unsqueeze(-1))
        out = merge_heads(self, out, x_dst)
        return attention_output(self, call, out, graph, alpha, return_attention_weights, get_attention)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"
