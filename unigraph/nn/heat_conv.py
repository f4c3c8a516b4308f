"""HEATConv: heterogeneous edge-enhanced graph attention (Mo et al.)."""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Embedding, Linear, Parameter
from torch.nn.parameter import UninitializedParameter

from unigraph import ops
from unigraph.graph import Graph
from unigraph.hetero.grouped import segment_matmul
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_positive, check_probability, check_width
from unigraph.nn.dropout import dropout
from unigraph.nn.lazy import LAZY
from unigraph.nn.projection import dense
from unigraph.nn.layer_inputs import edge_features, pyg_call


class TypeLinear(torch.nn.Module):
    r"""One linear map per node type, :math:`\mathbf{y}_i = \mathbf{x}_i \mathbf{W}_{\tau(i)} +
    \mathbf{b}_{\tau(i)}`, in PyG's ``HeteroLinear`` layout (``weight`` ``[T, in, out]``, ``bias``
    ``[T, out]``; both uniform in :math:`\pm 1/\sqrt{\text{in}}`). The rows are ordered by type
    and projected by one grouped product (:func:`~unigraph.hetero.grouped.segment_matmul`).
    ``in_channels=-1`` sizes the weight on the first call (or from a loaded state_dict)."""

    def __init__(self, in_channels: int, out_channels: int, num_types: int, bias: bool = True):
        super().__init__()
        self.in_channels, self.out_channels, self.num_types = in_channels, out_channels, num_types
        if in_channels == LAZY:
            self.weight = UninitializedParameter()
        else:
            self.weight = Parameter(torch.empty(num_types, in_channels, out_channels))
        self.bias = Parameter(torch.empty(num_types, out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if isinstance(self.weight, UninitializedParameter):
            return   # initialized by the first call
        bound = 1.0 / math.sqrt(self.weight.shape[1])
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def forward(self, x: Tensor, types: Tensor) -> Tensor:
        if isinstance(self.weight, UninitializedParameter):
            self.weight.materialize((self.num_types, x.shape[1], self.out_channels), dtype=x.dtype, device=x.device)
            self.reset_parameters()
        order = torch.argsort(types, stable=True)
        counts = torch.bincount(types, minlength=self.num_types)
        projected = segment_matmul(x.index_select(0, order), counts, self.weight)
        out = projected.new_empty(projected.shape).index_copy(0, order, projected)
        return out + self.bias.index_select(0, types) if self.bias is not None else out

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        saved = state_dict.get(prefix + "weight")
        if isinstance(self.weight, UninitializedParameter) and saved is not None:
            self.weight.materialize(saved.shape, dtype=saved.dtype, device=saved.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, num_types={self.num_types})"


class HEATConv(MessagePassing):
    r"""The heterogeneous edge-enhanced graph attentional operator from the `"Heterogeneous Edge-Enhanced
    Graph Attention Network For Multi-Agent Trajectory Prediction" <https://arxiv.org/abs/2106.07161>`_
    paper: GAT with a projection per node type and attention that also reads the edge's type and
    features.

    .. math::
        \mathbf{h}_i = \mathbf{W}_{\tau(i)}^{\top} \mathbf{x}_i + \mathbf{b}_{\tau(i)}, \quad
        \mathbf{t}_{ji} = \sigma(\mathbf{T}_{r(j,i)}), \quad
        \mathbf{f}_{ji} = \sigma(\mathbf{\Theta}_e \mathbf{e}_{ji})

    .. math::
        \alpha_{ji} = \operatorname{softmax}_{j \in \mathcal{N}(i)}\Big(\sigma\big(\mathbf{a}^{\top}
        [\mathbf{h}_i \,\Vert\, \mathbf{h}_j \,\Vert\, \mathbf{t}_{ji} \,\Vert\, \mathbf{f}_{ji}]\big)\Big),
        \qquad
        \mathbf{x}^{\prime}_i = \mathbf{h}_i + \sum_{j \in \mathcal{N}(i)} \alpha_{ji}\,
        \mathbf{\Theta}\, [\mathbf{h}_j \,\Vert\, \mathbf{f}_{ji}] + \mathbf{b}

    per head (:math:`\mathbf{a}` has one column per head), with :math:`\sigma` the LeakyReLU,
    :math:`\mathbf{T}` the edge-type embedding and :math:`r(j,i)` the edge's type. Heads are
    concatenated (each plus :math:`\mathbf{h}_i` with ``root_weight``) or averaged
    (``concat=False``, then plus :math:`\mathbf{h}_i`).

    How it runs: the attention vector is split by the blocks of the concatenation, so the node
    terms are two ``[N, H]`` products joined per edge by one g-SDDMM and the type term a
    ``[types, H]`` table; one edge softmax; the messages :math:`\mathbf{\Theta}[\mathbf{h}_j \Vert
    \mathbf{f}_{ji}]` (``[E, F]``) are weighted per head and summed by one g-SpMM that treats each
    edge as a source, so no ``[E, H, F]`` tensor is built (an aggregation module as ``aggr``
    materializes it).

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each output sample (per head).
        num_node_types (int): number of node types.
        num_edge_types (int): number of edge types.
        edge_type_emb_dim (int): size of the edge-type embedding.
        edge_dim (int): size of the edge features.
        edge_attr_emb_dim (int): size of the projected edge features.
        heads (int, optional): attention heads. (default: ``1``)
        concat (bool, optional): concatenate the heads (else average them). (default: ``True``)
        negative_slope (float, optional): LeakyReLU slope. (default: ``0.2``)
        dropout (float, optional): dropout of the attention coefficients. (default: ``0``)
        root_weight (bool, optional): add :math:`\mathbf{h}_i`. (default: ``True``)
        bias (bool, optional): biases of the type projection and of :math:`\mathbf{\Theta}`. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, default
            ``"add"``; ``flow``), as PyG's.

    Shapes:
        - **input:** ``(g, x, node_type, edge_type, edge_attr)`` or PyG's ``(x, edge_index,
          node_type, edge_type, edge_attr)`` (``edge_index`` a tensor, a ``SparseTensor`` whose
          values are the edge features, or a torch sparse ``adj_t``; ``edge_type`` then follows the
          adjacency's storage order, as in PyG); node features :math:`(|\mathcal{V}|, F_{in})`,
          node types :math:`(|\mathcal{V}|)`, edge types :math:`(|\mathcal{E}|)`, edge features
          :math:`(|\mathcal{E}|, D)` (required)
        - **output:** node features :math:`(|\mathcal{V}|, H \cdot F_{out})`, or
          :math:`(|\mathcal{V}|, F_{out})` with ``concat=False``
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, num_node_types: int, num_edge_types: int,
                 edge_type_emb_dim: int, edge_dim: int, edge_attr_emb_dim: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, root_weight: bool = True, bias: bool = True,
                 **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(node_dim=0, **kwargs)
        who = "HEATConv"
        if in_channels != LAZY:
            check_positive(in_channels, "in_channels", who)
        for name, value in (("edge_dim", edge_dim), ("out_channels", out_channels), ("num_node_types", num_node_types),
                            ("num_edge_types", num_edge_types), ("edge_type_emb_dim", edge_type_emb_dim),
                            ("edge_attr_emb_dim", edge_attr_emb_dim), ("heads", heads)):
            check_positive(value, name, who)
        if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)):
            raise ValueError(f"{who} negative_slope must be a number, got {negative_slope!r}")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope = concat, negative_slope
        self.dropout = check_probability(dropout, "dropout", who)
        self.root_weight = root_weight
        self.hetero_lin = TypeLinear(in_channels, out_channels, num_node_types, bias=bias)
        self.edge_type_emb = Embedding(num_edge_types, edge_type_emb_dim)
        self.edge_attr_emb = Linear(edge_dim, edge_attr_emb_dim, bias=False)
        self.att = Linear(2 * out_channels + edge_type_emb_dim + edge_attr_emb_dim, heads, bias=False)
        self.lin = Linear(out_channels + edge_attr_emb_dim, out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # (torch's Linear and Embedding initializations are PyG's Linear's and Embedding's)
        for module in (self.hetero_lin, self.edge_type_emb, self.edge_attr_emb, self.att, self.lin):
            module.reset_parameters()

    def forward(self, x: Tensor | Any, edge_index: Any, node_type: Tensor, edge_type: Tensor,
                edge_attr: Tensor | None = None) -> Tensor:
        who = "HEATConv"
        call, g = pyg_call(self, who, x, edge_index)   # (a sparse adjacency's values: the edge features)
        x = call.x
        if not isinstance(x, Tensor) or x.dim() != 2:
            raise ValueError(f"{who} expects node features [num_nodes, F] (one tensor: node_type gives the type of "
                             f"every row), got {list(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
        if g.is_bipartite or x.shape[0] != g.num_src_nodes:
            raise ValueError(f"{who} needs a square adjacency over the rows of x, got {g.num_src_nodes} source and "
                             f"{g.num_dst_nodes} destination nodes for {x.shape[0]} rows")
        if self.in_channels != LAZY:
            check_width(x, self.in_channels, who)
        _check_types(who, "node_type", node_type, x.shape[0], "nodes", self.hetero_lin.num_types)
        _check_types(who, "edge_type", edge_type, g.num_edges, "edges", self.edge_type_emb.num_embeddings)
        edge_attr = edge_features(who, call, g, edge_attr, self.edge_attr_emb.in_features)

        h = self.hetero_lin(dense(x), node_type)
        edge_emb = F.leaky_relu(self.edge_attr_emb(edge_attr), self.negative_slope)       # [E, D_a]
        alpha = self._attention(g, h, edge_type, edge_emb)                                # [E, H]
        out = self._aggregate(g, h, edge_emb, alpha)                                      # [N, H, F]
        if self.concat:
            if self.root_weight:
                out = out + h.unsqueeze(1)
            return out.reshape(-1, self.heads * self.out_channels)
        out = out.mean(dim=1)
        return out + h if self.root_weight else out

    def _attention(self, g: Graph, h: Tensor, edge_type: Tensor, edge_emb: Tensor) -> Tensor:
        """Edge softmax of ``LeakyReLU(att([h_i, h_j, t_ji, f_ji]))``, the product split by blocks."""
        channels, type_dim = self.out_channels, self.edge_type_emb.embedding_dim
        w_dst, w_src, w_type, w_edge = self.att.weight.split([channels, channels, type_dim, edge_emb.shape[1]], dim=1)
        type_scores = F.leaky_relu(self.edge_type_emb.weight, self.negative_slope) @ w_type.t()   # [types, H]
        scores = ops.gsddmm(g, "add", h @ w_src.t(), h @ w_dst.t(), "u", "v")
        scores = scores + type_scores.index_select(0, edge_type) + edge_emb @ w_edge.t()
        alpha = ops.edge_softmax(g, F.leaky_relu(scores, self.negative_slope))
        return dropout(alpha, self.dropout, self.training)

    def _aggregate(self, g: Graph, h: Tensor, edge_emb: Tensor, alpha: Tensor) -> Tensor:
        """``aggr_{j -> i} alpha_ji * lin([h_j, f_ji])`` per head: ``[N, H, F]``."""
        lin_node, lin_edge = self.lin.weight.split([self.out_channels, edge_emb.shape[1]], dim=1)
        messages = (h @ lin_node.t()).index_select(0, g.src) + edge_emb @ lin_edge.t()
        if self.lin.bias is not None:
            messages = messages + self.lin.bias
        if self.aggr_module is not None:   # a PyG aggregation module: on the materialized [E, H, F] messages
            return self.propagate(g, message_in=alpha.unsqueeze(-1) * messages.unsqueeze(1))
        # every edge a source of its own: the weighted sum is one g-SpMM over [E, 1, F] x [E, H, 1]
        def build() -> Graph:
            return Graph._trusted(torch.arange(g.num_edges, device=g.device), g.dst, g.num_edges, g.num_dst_nodes,
                                  True)
        # (kept on g, as its other formats; not while compiling, where a cache write would be a side effect)
        by_edge = build() if torch.compiler.is_compiling() else g.memo(("unigraph.nn", "edges_as_sources"), build)
        return ops.gspmm(by_edge, "u_mul_e", self.aggr, messages.unsqueeze(1), alpha.unsqueeze(-1))

    def message(self, message_in: Tensor) -> Tensor:
        return message_in

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"


def _check_types(who: str, name: str, types: Any, count: int, rows_are: str, num_types: int) -> None:
    if not isinstance(types, Tensor) or types.dtype != torch.long or types.dim() != 1:
        got = f"{types.dtype} of shape {list(types.shape)}" if isinstance(types, Tensor) else type(types).__name__
        raise TypeError(f"{who} expects {name} as a 1-D int64 tensor, got {got}")
    if types.shape[0] != count:
        raise ValueError(f"{who} expects one {name} per {rows_are[:-1]} ({count} {rows_are}), got {types.shape[0]}")
    if types.numel() and (int(types.min()) < 0 or int(types.max()) >= num_types):
        raise ValueError(f"{who} {name} must be in [0, {num_types}), got values in "
                         f"[{int(types.min())}, {int(types.max())}]")
