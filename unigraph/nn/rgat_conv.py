"""RGATConv: relational graph attention (Busbridge et al.), with the cardinality-preserving
variants of Zhang et al."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Linear, Parameter, ReLU

from unigraph import ops
from unigraph.call_forms import Call
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_positive, check_probability, glorot_, node_inputs, reset_module
from unigraph.nn.dropout import dropout
from unigraph.nn.projection import dense
from unigraph.nn.supergat_conv import segment_softmax
from unigraph.nn.transformer_conv import attention_result, wants_weights
from unigraph.nn.layer_inputs import SPARSE_FORMS, check_edge_dim, edge_features, pyg_call

MODS = ("additive", "scaled", "f-additive", "f-scaled")
MECHANISMS = ("within-relation", "across-relation")
MODES = ("additive-self-attention", "multiplicative-self-attention")


class RGATConv(MessagePassing):
    r"""The relational graph attentional operator from the `"Relational Graph Attention
    Networks" <https://arxiv.org/abs/1904.05811>`_ paper.

    Each relation :math:`r` projects the features, :math:`\mathbf{x}^{(r)}_i = \mathbf{W}^{(r)}
    \mathbf{x}_i` (``heads`` blocks of ``out_channels``), with queries and keys
    :math:`\mathbf{q}^{(r)}_i = \mathbf{x}^{(r)}_i \mathbf{Q}`, :math:`\mathbf{k}^{(r)}_j =
    \mathbf{x}^{(r)}_j \mathbf{K}` (``heads * dim`` columns). The logits are additive or
    multiplicative,

    .. math::
        a^{(r)}_{i,j} = \mathrm{LeakyReLU}(\mathbf{q}^{(r)}_i + \mathbf{k}^{(r)}_j + \mathbf{W}_2 \mathbf{e}_{j,i} \mathbf{E})
        \quad \text{or} \quad
        a^{(r)}_{i,j} = \mathbf{q}^{(r)}_i \odot \mathbf{k}^{(r)}_j \odot \mathbf{W}_2 \mathbf{e}_{j,i} \mathbf{E}

    (the edge term only with edge features), normalized over the in-edges of :math:`i` of all
    relations (``"across-relation"``) or of relation :math:`r` alone (``"within-relation"``):

    .. math::
        \alpha^{(r)}_{i,j} = \frac{\exp(a^{(r)}_{i,j})}
        {\sum_{r' \in \mathcal{R}} \sum_{k \in \mathcal{N}_{r'}(i)} \exp(a^{(r')}_{i,k})},
        \qquad
        \mathbf{x}^{\prime}_i = \sum_{r} \sum_{j \in \mathcal{N}_r(i)} \alpha^{(r)}_{i,j} \mathbf{x}^{(r)}_j
        + \mathbf{b}.

    ``mod`` preserves cardinality: ``"additive"`` adds :math:`\mathbf{w} \odot \sum_j
    \mathbf{x}^{(r)}_j`, ``"scaled"`` scales each message by :math:`\psi(|\mathcal{N}(i)|)` (a
    small MLP of the in-degree), ``"f-additive"`` uses :math:`\alpha + 1` where :math:`\alpha > 0`,
    ``"f-scaled"`` :math:`\alpha \cdot |\mathcal{N}(i)|`. Heads (and with the multiplicative
    mode, the ``dim`` query columns of each head) are concatenated or averaged.

    The projections are computed once per (node, relation) pair that an edge reads (one product
    per relation), not per edge; the messages depend on the relation, so they are built per edge
    and summed by ``propagate`` (one ``copy_e`` g-SpMM).

    Args:
        in_channels (int): size of each input sample.
        out_channels (int): size of each output sample per head.
        num_relations (int): number of relations.
        num_bases (int, optional): basis-decomposition of the relation weights. (default: ``None``)
        num_blocks (int, optional): block-diagonal relation weights (``in_channels`` and
            ``heads * out_channels`` divisible by it). (default: ``None``)
        mod (str, optional): ``"additive"``, ``"scaled"``, ``"f-additive"``, ``"f-scaled"`` or
            ``None``. (default: ``None``)
        attention_mechanism (str, optional): ``"within-relation"`` or ``"across-relation"``.
            (default: ``"across-relation"``)
        attention_mode (str, optional): ``"additive-self-attention"`` or
            ``"multiplicative-self-attention"``. (default: ``"additive-self-attention"``)
        heads (int, optional): number of attention heads. (default: ``1``)
        dim (int, optional): query/key columns per head (``1`` for the additive mode). (default: ``1``)
        concat (bool, optional): concatenate the heads (else average them). (default: ``True``)
        negative_slope (float, optional): LeakyReLU slope. (default: ``0.2``)
        dropout (float, optional): dropout probability of the attention weights (``mod=None``
            only). (default: ``0``)
        edge_dim (int, optional): edge feature size. (default: ``None``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``,
            default ``"add"``; ``flow``, ...), as PyG's.

    Call forms: ``conv(g, x, edge_type, edge_attr)`` or PyG's ``conv(x, edge_index, edge_type,
    edge_attr, size=...)`` with ``edge_index`` a tensor, a ``SparseTensor`` or a torch sparse
    ``adj_t``. With a sparse adjacency and no ``edge_type``, its values are the relation ids; with
    ``edge_type`` given (in storage order), its values are the edge features (a torch sparse
    tensor's of more than one dimension, as in PyG). ``return_attention_weights`` set to a bool
    returns ``(out, (edge_index, alpha))``, ``(out, adj)`` for a ``SparseTensor``, ``(out, (adj_t,
    alpha))`` for a torch sparse adjacency; ``alpha`` (``[E, heads * dim]``) is the softmax,
    before ``mod`` and dropout.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})`, relation ids
          :math:`(|\mathcal{E}|)`, edge features :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, H \cdot d \cdot F_{out})` with ``concat``
          (:math:`d` = ``dim`` in the multiplicative mode, else 1), :math:`(|\mathcal{V}|, d \cdot F_{out})`
          without
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, num_relations: int, num_bases: int | None = None,
                 num_blocks: int | None = None, mod: str | None = None, attention_mechanism: str = "across-relation",
                 attention_mode: str = "additive-self-attention", heads: int = 1, dim: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, edge_dim: int | None = None, bias: bool = True,
                 **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(node_dim=0, **kwargs)
        who = "RGATConv"
        self.in_channels = check_positive(in_channels, "in_channels", who)
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.num_relations = check_positive(num_relations, "num_relations", who)
        self.heads = check_positive(heads, "heads", who)
        self.dim = check_positive(dim, "dim", who)
        self.negative_slope = negative_slope
        self.dropout = check_probability(dropout, "dropout", who)
        self.edge_dim = check_edge_dim(edge_dim, who)
        self.concat = concat
        self._check_options(who, mod, attention_mechanism, attention_mode, num_bases, num_blocks)
        self.mod = mod
        self.attention_mechanism = attention_mechanism
        self.attention_mode = attention_mode
        self.num_bases = num_bases
        self.num_blocks = num_blocks
        self.activation = ReLU()
        self._alpha = None   # (PyG's attribute; the weights are returned, never kept)

        width = heads * out_channels
        self.q = Parameter(torch.empty(width, heads * dim))
        self.k = Parameter(torch.empty(width, heads * dim))
        self.bias = Parameter(torch.empty(heads * dim * out_channels if concat else dim * out_channels)) if bias \
            else None
        if edge_dim is not None:
            self.lin_edge = Linear(edge_dim, width, bias=False)
            self.e = Parameter(torch.empty(width, heads * dim))
        else:
            self.lin_edge = None
            self.register_parameter("e", None)
        if num_bases is not None:
            self.att = Parameter(torch.empty(num_relations, num_bases))
            self.basis = Parameter(torch.empty(num_bases, in_channels, width))
        elif num_blocks is not None:
            self.weight = Parameter(torch.empty(num_relations, num_blocks, in_channels // num_blocks,
                                                width // num_blocks))
        else:
            self.weight = Parameter(torch.empty(num_relations, in_channels, width))
        self.w = Parameter(torch.ones(out_channels))
        self.l1 = Parameter(torch.empty(1, out_channels))
        self.b1 = Parameter(torch.empty(1, out_channels))
        self.l2 = Parameter(torch.empty(out_channels, out_channels))
        self.b2 = Parameter(torch.empty(1, out_channels))
        self.reset_parameters()

    def _check_options(self, who: str, mod: Any, mechanism: Any, mode: Any, num_bases: Any, num_blocks: Any) -> None:
        if mod is not None and mod not in MODS:
            raise ValueError(f"{who} mod must be one of {', '.join(MODS)} or None, got {mod!r}")
        if mechanism not in MECHANISMS:
            raise ValueError(f"{who} attention_mechanism must be 'within-relation' or 'across-relation', got {mechanism!r}")
        if mode not in MODES:
            raise ValueError(f"{who} attention_mode must be 'additive-self-attention' or "
                             f"'multiplicative-self-attention', got {mode!r}")
        if mode == "additive-self-attention" and self.dim > 1:
            raise ValueError(f"{who}: 'additive-self-attention' needs dim=1 (got dim={self.dim}); use "
                             "'multiplicative-self-attention'")
        if self.dropout > 0.0 and mod is not None:
            raise ValueError(f"{who}: dropout={self.dropout} samples the attention weights, which needs mod=None "
                             f"(got mod={mod!r})")
        if num_bases is not None and num_blocks is not None:
            raise ValueError(f"{who}: num_bases and num_blocks (basis and block-diagonal decomposition) exclude each other")
        if num_bases is not None:
            check_positive(num_bases, "num_bases", who)
        if num_blocks is not None:
            check_positive(num_blocks, "num_blocks", who)
            if self.in_channels % num_blocks or (self.heads * self.out_channels) % num_blocks:
                raise ValueError(f"{who}: in_channels ({self.in_channels}) and heads * out_channels "
                                 f"({self.heads * self.out_channels}) must be multiples of num_blocks ({num_blocks})")

    def reset_parameters(self) -> None:
        if self.aggr_module is not None:
            reset_module(self.aggr_module)
        if self.num_bases is not None:
            glorot_(self.basis)
            glorot_(self.att)
        else:
            glorot_(self.weight)
        glorot_(self.q)
        glorot_(self.k)
        if self.lin_edge is not None:
            glorot_(self.lin_edge.weight)
            glorot_(self.e)
        with torch.no_grad():
            if self.bias is not None:
                self.bias.zero_()
            self.w.fill_(1.0)
            self.l1.fill_(1.0)
            self.b1.zero_()
            self.l2.fill_(1.0 / self.out_channels)   # (PyG means to; its torch.full result is discarded)
            self.b2.zero_()

    # ------------------------------------------------------------------ forward
    def forward(self, x: Tensor, edge_index: Any, edge_type: Tensor | None = None, edge_attr: Tensor | None = None,
                size: Any = None, return_attention_weights: bool | None = None):
        who = "RGATConv"
        attention = wants_weights(return_attention_weights)
        call, g = pyg_call(self, who, x, edge_index, size=size)
        edge_type, edge_attr = self._edge_inputs(who, call, g, edge_type, edge_attr)
        g, x_src, x_dst = node_inputs(g, call.x, who, widths=(self.in_channels, self.in_channels))
        if x_dst is None:
            raise ValueError(f"{who} needs destination features: pass (x_src, x_dst) with x_dst a tensor")
        if not (x_src.is_floating_point() and x_dst.is_floating_point()):
            raise TypeError(f"{who} expects floating-point node features [num_nodes, {self.in_channels}], got "
                            f"{x_src.dtype}")
        x_i, x_j = self._projections(g, dense(x_src), dense(x_dst) if isinstance(call.x, (tuple, list)) else None,
                                     edge_type)
        logits = self._logits(x_i @ self.q, x_j @ self.k, edge_attr)             # [E, H * dim]
        if self.attention_mechanism == "across-relation":
            alpha = ops.edge_softmax(g, logits)
        else:   # one softmax per (target, relation)
            alpha = segment_softmax(logits, g.dst * self.num_relations + edge_type,
                                    g.num_dst_nodes * self.num_relations)
        messages = self._messages(g, alpha, x_j)
        out = self.propagate(g, messages=messages)

        if self.concat:
            out = out.reshape(out.shape[0], -1)
        else:
            out = out.mean(dim=1).reshape(out.shape[0], self.dim * self.out_channels)
        if self.bias is not None:
            out = out + self.bias
        if attention:
            return attention_result(self, call, out, g, alpha, same_edges=True)
        return out

    def message(self, messages: Tensor) -> Tensor:
        return messages

    def _edge_inputs(self, who: str, call: Call, g: Graph, edge_type: Tensor | None,
                     edge_attr: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """The relation id of each edge and the edge features, from the arguments or (PyG's
        sparse forms) the adjacency's values: the relation ids where ``edge_type`` is not given,
        else the edge features."""
        types_from_values = edge_type is None and call.form in SPARSE_FORMS
        if types_from_values:
            edge_type = call.edge_attr
            if edge_type is None:
                raise ValueError(f"{who} got a sparse adjacency without values and no edge_type: pass edge_type, or "
                                 "the relation ids as the adjacency's values")
        if edge_type is None:
            raise ValueError(f"{who} needs edge_type, the relation id of each edge")
        if not isinstance(edge_type, Tensor) or edge_type.dim() != 1 or edge_type.is_floating_point() \
                or edge_type.is_complex() or edge_type.dtype == torch.bool or edge_type.shape[0] != g.num_edges:
            got = f"shape {list(edge_type.shape)}, {edge_type.dtype}" if isinstance(edge_type, Tensor) \
                else type(edge_type).__name__
            source = "the sparse adjacency's values" if types_from_values else "edge_type"
            raise ValueError(f"{who} expects {source} as one integer relation id per edge ([{g.num_edges}]), got {got}")
        edge_type = edge_type.long()
        if edge_type.numel() and (int(edge_type.min()) < 0 or int(edge_type.max()) >= self.num_relations):
            raise ValueError(f"{who}: edge_type holds relation ids outside [0, {self.num_relations})")
        edge_attr = edge_features(who, call, g, edge_attr, self.edge_dim, required=False,
                                  from_values=not types_from_values and _floating_values(call))
        return edge_type, edge_attr

    def _projections(self, g: Graph, x_src: Tensor, x_dst: Tensor | None, edge_type: Tensor) -> tuple[Tensor, Tensor]:
        """``(x_i, x_j)``: each edge's target and source features projected by its relation,
        ``[E, heads * out_channels]``, computed once per distinct (node, relation) pair (one
        product per relation present). ``x_dst`` separate destination features (else the
        destinations are the first source rows)."""
        features, dst = x_src, g.dst
        if x_dst is not None:
            features, dst = torch.cat([x_src, x_dst]), g.dst + x_src.shape[0]
        nodes = features.shape[0]
        keys = torch.cat([edge_type * nodes + g.src, edge_type * nodes + dst])   # relation-major
        pairs, inverse = torch.unique(keys, return_inverse=True)
        per_relation = torch.bincount(pairs // nodes, minlength=self.num_relations).tolist()
        weights = self._relation_weights()
        parts = [self._project(features.index_select(0, rows), weights, relation)
                 for relation, rows in enumerate(torch.split(pairs % nodes, per_relation)) if rows.numel()]
        # (no edge: an empty product all the same, so x and the weights get their zero gradients)
        projected = torch.cat(parts) if parts else self._project(features[:0], weights, 0)
        edges = g.num_edges
        return projected.index_select(0, inverse[edges:]), projected.index_select(0, inverse[:edges])

    def _relation_weights(self) -> Tensor:
        if self.num_bases is not None:
            return (self.att @ self.basis.view(self.num_bases, -1)).view(
                self.num_relations, self.in_channels, self.heads * self.out_channels)
        return self.weight

    def _project(self, x: Tensor, weights: Tensor, relation: int) -> Tensor:
        if self.num_blocks is None:
            return x @ weights[relation]
        blocks = weights[relation]                                       # [B, in / B, out / B]
        out = torch.einsum("nbi,bio->nbo", x.view(x.shape[0], blocks.shape[0], blocks.shape[1]), blocks)
        return out.reshape(x.shape[0], -1)

    def _logits(self, query: Tensor, key: Tensor, edge_attr: Tensor | None) -> Tensor:
        edge_term = None
        if edge_attr is not None:
            edge_term = self.lin_edge(edge_attr).view(-1, self.heads * self.out_channels) @ self.e
        if self.attention_mode == "additive-self-attention":
            logits = query + key if edge_term is None else query + key + edge_term
            return F.leaky_relu(logits, self.negative_slope)
        return query * key if edge_term is None else query * key * edge_term

    def _messages(self, g: Graph, alpha: Tensor, x_j: Tensor) -> Tensor:
        """Per edge ``[E, heads, (dim,) out_channels]``: the projected source weighted as ``mod`` says."""
        heads, channels, dim = self.heads, self.out_channels, self.dim
        additive = self.attention_mode == "additive-self-attention"
        weight = alpha.view(-1, heads, 1) if additive else alpha.view(-1, heads, dim, 1)
        value = x_j.view(-1, heads, channels) if additive else x_j.view(-1, heads, 1, channels)
        if self.mod == "additive":
            return value * weight + self.w * (value * torch.ones_like(weight))
        if self.mod in ("scaled", "f-scaled"):
            degree = torch.bincount(g.dst, minlength=g.num_dst_nodes).to(alpha.dtype).index_select(0, g.dst)
            if self.mod == "f-scaled":
                return value * (weight * degree.view((-1,) + (1,) * (weight.dim() - 1)))
            scale = self.activation(degree.view(-1, 1) @ self.l1 + self.b1) @ self.l2 + self.b2     # [E, C]
            return value * weight * scale.view((-1,) + (1,) * (value.dim() - 2) + (channels,))
        if self.mod == "f-additive":
            weight = torch.where(weight > 0, weight + 1, weight)
        elif self.training and self.dropout > 0.0:
            weight = dropout(weight, self.dropout, True)
        return weight * value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"


def _floating_values(call: Call) -> bool:
    return call.edge_attr is not None and call.edge_attr.is_floating_point()
