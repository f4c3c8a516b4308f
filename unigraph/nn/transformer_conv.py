"""TransformerConv: multi-head dot-product attention over the in-edges (Shi et al.); the attention
result forms the attention layers share (AGNN, FA, SuperGAT, ResGated, RGAT) are here, the call
reading in :mod:`unigraph.nn.layer_inputs`."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from torch.nn import Linear

from unigraph import ops
from unigraph.call_forms import Call
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import channels_pair, check_positive, check_probability, node_inputs
from unigraph.nn.dropout import dropout
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.projection import linear
from unigraph.nn.layer_inputs import check_edge_dim, edge_features, pyg_call

SPARSE_FORMS = ("sparse_tensor", "torch_sparse")


def pyg_edge_index(layer: MessagePassing, graph: Graph) -> Tensor:
    """``graph``'s ``[2, E]`` edges in the caller's orientation (the graph is reversed under
    ``flow='target_to_source'``)."""
    edge_index = graph.edge_index
    return edge_index.flip(0) if layer.flow == "target_to_source" else edge_index


def attention_result(layer: MessagePassing, call: Call, out: Tensor, graph: Graph, alpha: Tensor,
                     same_edges: bool, keep_adjacency: bool = False):
    """``out`` with the attention weights in PyG's return form: ``(out, (edge_index, alpha))`` for
    an edge_index tensor or a graph object (the edge_index given when ``graph`` has its edges,
    ``same_edges``, else ``graph``'s with its self-loops), ``(out, adj)`` with ``alpha`` as the
    values for a ``SparseTensor``, ``(out, (adj_t, alpha))`` for a torch sparse adjacency: with
    ``same_edges`` the given one with ``alpha`` as its values (in its storage order, which is the
    graph's edge order), or as given with ``keep_adjacency`` (TransformerConv's form in PyG)."""
    if call.form == "edge_index" and same_edges:
        return out, (call.adjacency, alpha)
    if call.form in ("edge_index", "graph"):
        return out, (pyg_edge_index(layer, graph), alpha)
    if call.form == "torch_sparse" and same_edges:
        adj = call.adjacency
        return out, (adj if keep_adjacency else with_values(adj, alpha), alpha)
    return call.attention_result(out, graph, alpha)


def with_values(adj: Tensor, values: Tensor) -> Tensor:
    """A torch sparse matrix with ``adj``'s layout and indices and ``values`` (one row per stored entry)."""
    size = tuple(adj.shape[:2]) + tuple(values.shape[1:])
    if adj.layout == torch.sparse_coo:
        return torch.sparse_coo_tensor(adj._indices(), values, size, is_coalesced=adj.is_coalesced())
    if adj.layout == torch.sparse_csr:
        return torch.sparse_csr_tensor(adj.crow_indices(), adj.col_indices(), values, size)
    return torch.sparse_csc_tensor(adj.ccol_indices(), adj.row_indices(), values, size)


def wants_weights(return_attention_weights: Any) -> bool:
    """PyG's rule: any bool (``False`` included) asks for the weights; None does not."""
    if return_attention_weights is not None and not isinstance(return_attention_weights, bool):
        raise TypeError(f"return_attention_weights must be a bool or None, got {type(return_attention_weights).__name__}")
    return isinstance(return_attention_weights, bool)


# ---------------------------------------------------------------------- the layer
class TransformerConv(MessagePassing):
    r"""The graph transformer operator from the `"Masked Label Prediction: Unified Message
    Passing Model for Semi-Supervised Classification" <https://arxiv.org/abs/2009.03509>`_ paper.

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{W}_1 \mathbf{x}_i +
        \sum_{j \in \mathcal{N}(i)} \alpha_{i,j} \left(\mathbf{W}_2 \mathbf{x}_{j}
        + \mathbf{W}_6 \mathbf{e}_{j,i}\right),
        \qquad
        \alpha_{i,j} = \operatorname{softmax}_{j \in \mathcal{N}(i)} \left(
        \frac{(\mathbf{W}_3\mathbf{x}_i)^{\top} (\mathbf{W}_4\mathbf{x}_j + \mathbf{W}_6 \mathbf{e}_{j,i})}
        {\sqrt{d}} \right)

    per head (:math:`d` = ``out_channels``; the edge terms only with ``edge_dim``). Heads are
    concatenated, or averaged with ``concat=False``. With ``beta`` the root term is gated:

    .. math::
        \mathbf{x}^{\prime}_i = \beta_i \mathbf{W}_1 \mathbf{x}_i + (1 - \beta_i) \mathbf{m}_i,
        \qquad \beta_i = \sigma\left(\mathbf{w}_5^{\top} [\mathbf{m}_i \,\Vert\,
        \mathbf{W}_1 \mathbf{x}_i \,\Vert\, \mathbf{m}_i - \mathbf{W}_1 \mathbf{x}_i]\right)

    with :math:`\mathbf{m}_i` the aggregated (merged) messages. The scores are one ``dot``
    g-SDDMM (plus one over the edge features), normalized by ``edge_softmax``; the weighted sum of
    the values is ``propagate`` (one ``u_mul_e`` g-SpMM without edge features).

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes
            (``-1`` infers it on the first call).
        out_channels (int): size of each output sample per head.
        heads (int, optional): number of attention heads. (default: ``1``)
        concat (bool, optional): concatenate the heads (else average them). (default: ``True``)
        beta (bool, optional): gate the root term as above (only with ``root_weight``).
            (default: ``False``)
        dropout (float, optional): dropout probability of the attention weights. (default: ``0``)
        edge_dim (int, optional): edge feature size; adds the edge terms. (default: ``None``)
        bias (bool, optional): biases in the key, query, value and skip projections.
            (default: ``True``)
        root_weight (bool, optional): add the projected root features. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``,
            default ``"add"``; ``flow``, ...), as PyG's.

    Call forms: ``conv(g, x)`` or PyG's ``conv(x, edge_index, edge_attr)`` with ``edge_index`` a
    tensor, a ``SparseTensor`` or a torch sparse ``adj_t`` (a ``SparseTensor``'s values, or a torch
    sparse tensor's values of more than one dimension, are the edge features when ``edge_attr``
    is not given; a given ``edge_attr`` follows the adjacency's storage order, as in PyG).
    ``return_attention_weights`` set to a bool returns ``(out, (edge_index, alpha))``, ``(out,
    adj)`` with ``alpha`` as the values of a ``SparseTensor``, or ``(out, (adj_t, alpha))`` for a
    torch sparse adjacency; ``alpha`` (``[E, H]``) is the softmax before dropout.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_s|, F_{s}), (|\mathcal{V}_t|, F_{t}))`, edge features
          :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}_t|, H * F_{out})`, or
          :math:`(|\mathcal{V}_t|, F_{out})` with ``concat=False``
    """

    resolves_flow = True

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, heads: int = 1, concat: bool = True,
                 beta: bool = False, dropout: float = 0.0, edge_dim: int | None = None, bias: bool = True,
                 root_weight: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(node_dim=0, **kwargs)
        who = "TransformerConv"
        self.in_channels = in_channels
        self._widths = channels_pair(in_channels, who, lazy=True)
        self._lazy = LAZY in self._widths
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.heads = check_positive(heads, "heads", who)
        self.beta = bool(beta and root_weight)
        self.root_weight = root_weight
        self.concat = concat
        self.dropout = check_probability(dropout, "dropout", who)
        self.edge_dim = check_edge_dim(edge_dim, who)
        self._alpha = None   # (PyG's attribute; the weights are returned, never kept)
        width = heads * out_channels
        self.lin_key = make_linear(self._widths[0], width, bias=bias)
        self.lin_query = make_linear(self._widths[1], width, bias=bias)
        self.lin_value = make_linear(self._widths[0], width, bias=bias)
        self.lin_edge = Linear(edge_dim, width, bias=False) if edge_dim is not None else None
        merged = width if concat else out_channels
        self.lin_skip = make_linear(self._widths[1], merged, bias=bias)   # (built even without root_weight, as PyG)
        self.lin_beta = Linear(3 * merged, 1, bias=False) if self.beta else None
        self.reset_parameters()

    def _lazy_linears(self) -> tuple[tuple, tuple]:
        return (self.lin_key, self.lin_value), (self.lin_query, self.lin_skip)

    def reset_parameters(self) -> None:
        for lin in (self.lin_key, self.lin_query, self.lin_value, self.lin_edge, self.lin_skip, self.lin_beta):
            if lin is not None:
                lin.reset_parameters()   # (torch's Linear init, PyG's Linear default; a lazy one waits)

    def forward(self, x: Any, edge_index: Any, edge_attr: Tensor | None = None,
                return_attention_weights: bool | None = None):
        who = "TransformerConv"
        attention = wants_weights(return_attention_weights)
        call, g = pyg_call(self, who, x, edge_index)
        edge_attr = edge_features(who, call, g, edge_attr, self.edge_dim)
        g, x_src, x_dst = node_inputs(g, call.x, who, layer=self)
        if x_dst is None:
            raise ValueError(f"{who} needs destination features (the queries): pass (x_src, x_dst) with x_dst a tensor")
        heads, channels = self.heads, self.out_channels

        query = linear(x_dst, self.lin_query.weight, self.lin_query.bias).view(-1, heads, channels)
        key = linear(x_src, self.lin_key.weight, self.lin_key.bias).view(-1, heads, channels)
        value = linear(x_src, self.lin_value.weight, self.lin_value.bias).view(-1, heads, channels)
        edge_value = None
        scores = ops.gsddmm(g, "dot", key, query, "u", "v")                    # [E, H, 1]
        if edge_attr is not None:   # the projected edge features join the keys and the values
            edge_value = self.lin_edge(edge_attr).view(-1, heads, channels)
            scores = scores + ops.gsddmm(g, "dot", edge_value, query, "e", "v")
        alpha = ops.edge_softmax(g, scores.squeeze(-1) / math.sqrt(channels))  # [E, H]
        out = self.propagate(g, value=value, alpha=dropout(alpha, self.dropout, self.training),
                             edge_value=edge_value)

        out = out.reshape(-1, heads * channels) if self.concat else out.mean(dim=1)
        if self.root_weight:
            x_r = linear(x_dst, self.lin_skip.weight, self.lin_skip.bias)
            if self.lin_beta is not None:
                gate = self.lin_beta(torch.cat([out, x_r, out - x_r], dim=-1)).sigmoid()
                out = gate * x_r + (1 - gate) * out
            else:
                out = out + x_r
        if attention:
            return attention_result(self, call, out, g, alpha, same_edges=True, keep_adjacency=True)
        return out

    def message(self, value_j: Tensor, alpha: Tensor, edge_value: Tensor | None) -> Tensor:
        if edge_value is not None:
            value_j = value_j + edge_value
        return value_j * alpha.unsqueeze(-1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"
