"""GATConv: graph attention (Velickovic et al.), on the fused ``ops.gat_attention`` path."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Linear, Parameter

from unigraph import ops
from unigraph.graph import Graph
from unigraph.group_reduce import group_reduce
from unigraph.call_forms import Call, resolve
from unigraph.nn.checks import (
    channels_pair, check_positive, check_probability, check_width, edge_input, glorot_, node_inputs)
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.dropout import keep_mask
from unigraph.nn.projection import linear
from unigraph.nn.static_graph import refuse_static
from unigraph.self_loops import SelfLooped, with_self_loops

LOOP_FILL_REDUCES = ("mean", "add", "sum", "max", "min")   # (unigraph.group_reduce's names)


def check_fill_value(fill_value, who: str):
    if isinstance(fill_value, str) and fill_value not in LOOP_FILL_REDUCES:
        raise ValueError(f"{who} fill_value must be a number, a tensor or one of "
                         f"{', '.join(LOOP_FILL_REDUCES)}; got {fill_value!r}")
    if not isinstance(fill_value, (str, int, float, Tensor)) or isinstance(fill_value, bool):
        raise TypeError(f"{who} fill_value must be a number, a tensor or a reduce name, got {type(fill_value).__name__}")
    return fill_value


def loop_edge_attr(g: Graph, looped: SelfLooped, edge_attr: Tensor, fill_value) -> Tensor:
    """Edge features of the self-loops, PyG's ``add_self_loops(fill_value=...)``: a constant, or
    the reduce of each node's incoming (non-loop) edge features (0 for a node without any)."""
    shape = (looped.num_loops,) + tuple(edge_attr.shape[1:])
    if not isinstance(fill_value, str):
        return torch.as_tensor(fill_value, dtype=edge_attr.dtype, device=edge_attr.device).expand(shape).clone()
    kept_attr = edge_attr.index_select(0, looped.kept)
    kept_dst = g.dst.index_select(0, looped.kept)
    return group_reduce(kept_attr, kept_dst, g.num_dst_nodes, fill_value)[: looped.num_loops]


def attention_dropout_mask(num_edges: int, heads: int, p: float, like: Tensor) -> Tensor:
    """``bernoulli(1 - p) / (1 - p)`` per edge and head: dropout on the attention weights."""
    return keep_mask((num_edges, heads), p, like)


def set_attention_settings(layer: torch.nn.Module, who: str, in_channels, out_channels: int, heads: int,
                           concat: bool, negative_slope: float, dropout: float, add_self_loops: bool,
                           edge_dim: int | None, fill_value, residual: bool) -> None:
    """Check and store the settings GATConv and GATv2Conv share (PyG's names)."""
    layer.in_channels = in_channels
    layer._widths = channels_pair(in_channels, who, lazy=True)
    layer._lazy = LAZY in layer._widths
    layer.out_channels = check_positive(out_channels, "out_channels", who)
    layer.heads = check_positive(heads, "heads", who)
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)) or negative_slope < 0:
        raise ValueError(f"{who} negative_slope must be a number >= 0, got {negative_slope!r}")
    layer.concat, layer.negative_slope = concat, float(negative_slope)
    layer.dropout = check_probability(dropout, "dropout", who)
    layer.add_self_loops, layer.edge_dim, layer.residual = add_self_loops, edge_dim, residual
    layer.fill_value = check_fill_value(fill_value, who)


def attention_inputs(layer: torch.nn.Module, who: str, x, edge_index, size, edge_attr: Tensor | None):
    """``(call, g, x_src, x_dst, edge_attr)`` of an attention layer's call in any accepted form
    (:mod:`unigraph.call_forms`), with a lazy layer sized and every input checked.

    A sparse adjacency's values, as PyG reads them: ignored without ``edge_dim``; with it, the
    edge features (a ``SparseTensor``'s values, or a torch sparse tensor's values of more than one
    dimension; one-dimensional torch sparse values are weights, ignored). A ``SparseTensor`` with
    ``edge_dim`` and ``add_self_loops=True`` is refused with ``NotImplementedError``, as PyG does:
    the self-loops' edge features need the ``[2, E]`` form."""
    refuse_static(who, x)
    with_features = layer.edge_dim is not None
    call = resolve(who, x, edge_index, size=size, edge_attr=edge_attr,
                   values="edge_attr" if with_features else "edge_weight")
    if with_features and call.form == "sparse_tensor" and layer.add_self_loops:
        raise NotImplementedError(f"{who}(edge_dim={layer.edge_dim}, add_self_loops=True) with a SparseTensor "
                                  "adjacency: the edge features of the added self-loops need the edge_index form "
                                  "([2, E] tensor with edge_attr), as in PyG")
    if edge_attr is None and call.edge_attr is not None and (call.form == "sparse_tensor" or call.edge_attr.dim() > 1):
        edge_attr = call.edge_attr
    g, x_src, x_dst = node_inputs(call.graph, call.x, who, layer=layer)
    return call, g, x_src, x_dst, checked_edge_attr(layer, g, edge_attr, who)


def attention_output(layer: torch.nn.Module, call: Call, out: Tensor, graph: Graph, alpha: Tensor | None,
                     return_attention_weights: bool | None, get_attention: bool):
    """The layer's result: ``out``, or with the attention weights in PyG's form
    (``return_attention_weights``, see :meth:`Call.attention_result`) or DGL's (``get_attention``:
    ``(out, alpha[E, H, 1])`` over the edges of the graph given, so only without added self-loops)."""
    if return_attention_weights:
        return call.attention_result(out, graph, alpha)
    if get_attention:
        return out, alpha.unsqueeze(-1)
    return out


def wants_attention(layer: torch.nn.Module, who: str, return_attention_weights: bool | None,
                    get_attention: bool) -> bool:
    if get_attention and layer.add_self_loops:
        raise ValueError(f"{who}(get_attention=True) gives one weight per edge of the graph passed in, as DGL does, "
                         "but this layer adds self-loops (add_self_loops=True), so its weights belong to another "
                         "edge list: build it with add_self_loops=False, or use return_attention_weights=True, "
                         "which also returns the edge_index the weights belong to")
    return bool(return_attention_weights) or bool(get_attention)


def checked_edge_attr(layer: torch.nn.Module, g: Graph, edge_attr: Tensor | None, who: str) -> Tensor | None:
    """``edge_attr`` as ``[E, edge_dim]`` (a 1-D tensor is one feature per edge), or None; an
    error when the layer was built without ``edge_dim``."""
    edge_attr = edge_input(g, edge_attr, who, "edge_attr")
    if edge_attr is None:
        return None
    if layer.lin_edge is None:
        raise ValueError(f"{who} got edge_attr but was built without edge_dim; pass edge_dim=<features>")
    if edge_attr.dim() == 1:
        edge_attr = edge_attr.view(-1, 1)
    check_width(edge_attr, layer.edge_dim, who, "edge_attr", "edge_dim", "num_edges")
    return edge_attr


def attention_graph(layer: torch.nn.Module, g: Graph, edge_attr: Tensor | None) -> tuple[Graph, Tensor | None]:
    """The graph attention runs on (one self-loop per node when ``add_self_loops``) and its edge
    features (the loops' from ``fill_value``)."""
    if not layer.add_self_loops:
        return g, edge_attr
    looped = with_self_loops(g)
    if edge_attr is not None:
        edge_attr = looped.edge_values(edge_attr, loop_edge_attr(g, looped, edge_attr, layer.fill_value))
    return looped.graph, edge_attr


def merge_heads(layer: torch.nn.Module, out: Tensor, x_dst: Tensor | None) -> Tensor:
    """``[N, H, C]`` to the layer's output: heads concatenated or averaged, plus the projected
    residual (when there are destination features) and the bias."""
    out = out.reshape(-1, layer.heads * layer.out_channels) if layer.concat else out.mean(dim=1)
    if layer.res is not None and x_dst is not None:
        out = out + linear(x_dst, layer.res.weight)
    if layer.bias is not None:
        out = out + layer.bias
    return out


class GATConv(torch.nn.Module):
    r"""The graph attention operator from the `"Graph Attention Networks"
    <https://arxiv.org/abs/1710.10903>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \big\Vert_{h=1}^{H} \mathbf{P}^{(h)} \mathbf{X} \mathbf{\Theta}^{(h)},
        \qquad \mathbf{P}^{(h)}_{ij} = \alpha^{(h)}_{i,j}

    per node and head:

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i) \cup \{ i \}}
        \alpha_{i,j}\mathbf{\Theta}_{t}\mathbf{x}_{j},
        \qquad
        \alpha_{i,j} = \frac{\exp\left(\mathrm{LeakyReLU}\left(
        \mathbf{a}^{\top}_{s} \mathbf{\Theta}_{s}\mathbf{x}_j + \mathbf{a}^{\top}_{t}
        \mathbf{\Theta}_{t}\mathbf{x}_i + \mathbf{a}^{\top}_{e} \mathbf{\Theta}_{e} \mathbf{e}_{i,j}
        \right)\right)}{\sum_{k \in \mathcal{N}(i) \cup \{ i \}} \exp\left(\mathrm{LeakyReLU}\left(
        \mathbf{a}^{\top}_{s} \mathbf{\Theta}_{s}\mathbf{x}_k + \mathbf{a}^{\top}_{t}
        \mathbf{\Theta}_{t}\mathbf{x}_i + \mathbf{a}^{\top}_{e} \mathbf{\Theta}_{e} \mathbf{e}_{i,k}
        \right)\right)}

    (the edge term only with ``edge_dim``). Heads are concatenated, or averaged with
    ``concat=False``; ``residual`` adds :math:`\mathbf{\Theta}_r \mathbf{x}_i`, then the bias.

    Fast path: scores, edge softmax, attention dropout and the weighted sum run as one
    ``ops.gat_attention`` call, which never stores the E x H x F messages nor (on fused backends)
    the attention weights; the edge-feature term is folded into a ``[edge_dim, heads]`` matrix, so
    no E x H x F tensor of edge projections is built either. ``return_attention_weights=True``
    does not change the output (the same fused call computes it); the weights are computed
    beside it from the same scores by ``gsddmm`` and ``edge_softmax`` (equal to the weights inside
    the fused call up to rounding, about 1e-7 in float32).

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes
            (``-1`` infers it on the first call)
            (separate source and destination projections).
        out_channels (int): size of each output sample per head.
        heads (int, optional): number of attention heads. (default: ``1``)
        concat (bool, optional): concatenate the heads (else average them). (default: ``True``)
        negative_slope (float, optional): LeakyReLU slope. (default: ``0.2``)
        dropout (float, optional): dropout probability of the attention weights. (default: ``0``)
        add_self_loops (bool, optional): replace self-loops by one per node. (default: ``True``)
        edge_dim (int, optional): edge feature size; enables the edge term. (default: ``None``)
        fill_value (float or Tensor or str, optional): edge features of added self-loops: a value,
            or ``"mean"``/``"sum"``/``"max"``/``"min"`` of each node's incoming edge features.
            (default: ``"mean"``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        residual (bool, optional): add a projected residual connection. (default: ``False``)

    Call forms: ``conv(g, x)`` or PyG's ``conv(x, edge_index, edge_attr, size=...)``, with
    ``edge_index`` a tensor, a ``SparseTensor`` or a torch sparse ``adj_t`` (see
    :mod:`unigraph.call_forms`). ``return_attention_weights=True`` returns
    ``(out, (edge_index, alpha))`` for a graph object or an edge_index tensor, ``(out, adj)`` with
    ``alpha`` as the values for a ``SparseTensor``, ``(out, (adj, alpha))`` for a torch sparse
    adjacency; ``alpha`` (``[E', H]``, after attention dropout) is what weighted the sum, over
    the edges of the graph used (its self-loops included). ``get_attention=True`` is DGL's form,
    ``(out, alpha[E, H, 1])`` over the edges of the graph given (needs ``add_self_loops=False``).

    Shapes:
        - **input:** graph ``g``, node features :math:`(|\mathcal{V}|, F_{in})` (dense or sparse)
          or a pair :math:`((|\mathcal{V}_s|, F_{s}), (|\mathcal{V}_t|, F_{t}))` for a block,
          edge features :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}_t|, H * F_{out})`, or
          :math:`(|\mathcal{V}_t|, F_{out})` with ``concat=False``; with
          ``return_attention_weights=True`` also ``(edge_index, alpha)`` of the graph used (with
          its self-loops), ``alpha`` of shape :math:`(|\mathcal{E}'|, H)`.
    """

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 edge_dim: int | None = None, fill_value: float | Tensor | str = "mean", bias: bool = True,
                 residual: bool = False):
        super().__init__()
        who = "GATConv"
        set_attention_settings(self, who, in_channels, out_channels, heads, concat, negative_slope, dropout,
                               add_self_loops, edge_dim, fill_value, residual)
        width = heads * out_channels
        self.lin = self.lin_src = self.lin_dst = None
        if isinstance(in_channels, int):
            self.lin = make_linear(in_channels, width, bias=False)
        else:
            self.lin_src = make_linear(self._widths[0], width, bias=False)
            self.lin_dst = make_linear(self._widths[1], width, bias=False)
        self.att_src = Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = Parameter(torch.empty(1, heads, out_channels))
        if edge_dim is not None:
            self.lin_edge = Linear(check_positive(edge_dim, "edge_dim", who), width, bias=False)
            self.att_edge = Parameter(torch.empty(1, heads, out_channels))
        else:
            self.lin_edge = None
            self.register_parameter("att_edge", None)
        total = width if concat else out_channels
        self.res = make_linear(self._widths[1], total, bias=False) if residual else None
        self.bias = Parameter(torch.empty(total)) if bias else None
        self.reset_parameters()

    def _lazy_linears(self) -> tuple[tuple, tuple]:
        return (self.lin, self.lin_src), (self.lin_dst, self.res)

    def reset_parameters(self) -> None:
        for lin in (self.lin, self.lin_src, self.lin_dst, self.lin_edge, self.res):
            if lin is not None:
                glorot_(lin.weight)
        for att in (self.att_src, self.att_dst, self.att_edge):
            if att is not None:
                glorot_(att)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Any, edge_index: Any, edge_attr: Tensor | None = None, size: Any = None,
                return_attention_weights: bool | None = None, get_attention: bool = False):
        who = "GATConv"
        call, g, x_src, x_dst, edge_attr = attention_inputs(self, who, x, edge_index, size, edge_attr)
        attention = wants_attention(self, who, return_attention_weights, get_attention)
        heads, channels = self.heads, self.out_channels

        h_src, h_dst = self._project(g, call.x, x_src, x_dst)
        h_src = h_src.view(-1, heads, channels)
        el = (h_src * self.att_src).sum(-1)
        if h_dst is not None:
            er = (h_dst.view(-1, heads, channels) * self.att_dst).sum(-1)
        else:  # (x_src, None): scores from the source side only, as in PyG
            er = el.new_zeros((g.num_dst_nodes, heads))

        graph, edge_attr = attention_graph(self, g, edge_attr)
        edge_scores = self._edge_scores(edge_attr) if edge_attr is not None else None
        mask = None
        if self.training and self.dropout > 0.0:
            mask = attention_dropout_mask(graph.num_edges, heads, self.dropout, h_src)

        out = ops.gat_attention(graph, h_src, el, er, self.negative_slope, edge_scores=edge_scores, edge_mask=mask)
        # the weights beside the output: the same scores through the separate ops (out itself is
        # the call's result whether or not they are asked for)
        alpha = self._attention_weights(graph, el, er, edge_scores, mask) if attention else None
        out = merge_heads(self, out, x_dst)
        return attention_output(self, call, out, graph, alpha, return_attention_weights, get_attention)

    # ------------------------------------------------------------------ pieces
    def _project(self, g: Graph, x, x_src: Tensor, x_dst: Tensor | None) -> tuple[Tensor, Tensor | None]:
        if self.lin is None:
            h_src = linear(x_src, self.lin_src.weight)
            return h_src, linear(x_dst, self.lin_dst.weight) if x_dst is not None else None
        h_src = linear(x_src, self.lin.weight)
        if isinstance(x, (tuple, list)):  # separate destination features, shared projection
            return h_src, linear(x_dst, self.lin.weight) if x_dst is not None else None
        # one tensor: the destinations are the first num_dst_nodes sources (all of them if homogeneous)
        return h_src, h_src[: g.num_dst_nodes] if g.is_bipartite else h_src

    def _edge_scores(self, edge_attr: Tensor) -> Tensor:
        """``(lin_edge(e).view(-1, H, C) * att_edge).sum(-1)`` as ``e @ M`` with ``M = [edge_dim, H]``."""
        heads, channels = self.heads, self.out_channels
        weight = self.lin_edge.weight.view(heads, channels, -1)
        folded = torch.einsum("hcd,hc->dh", weight, self.att_edge[0])
        return edge_attr @ folded

    def _attention_weights(self, graph: Graph, el: Tensor, er: Tensor, edge_scores: Tensor | None,
                           mask: Tensor | None) -> Tensor:
        scores = ops.gsddmm(graph, "add", el, er, "u", "v")
        if edge_scores is not None:
            scores = scores + edge_scores
        alpha = ops.edge_softmax(graph, F.leaky_relu(scores, self.negative_slope))
        return alpha * mask if mask is not None else alpha

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"
