"""SuperGATConv: graph attention supervised by link prediction on its own logits (Kim and Oh),
trained against uniform negative edges (:mod:`unigraph.nn.negative_edges`)."""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from unigraph import ops
from unigraph.graph import Graph
from unigraph.group_reduce import group_reduce
from unigraph.nn.checks import check_positive, check_probability, glorot_, node_inputs, reset_module
from unigraph.message_passing import MessagePassing
from unigraph.nn.dropout import dropout
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.negative_edges import check_edge_index, negative_edges
from unigraph.nn.projection import linear
from unigraph.nn.transformer_conv import pyg_edge_index
from unigraph.nn.layer_inputs import pyg_call
from unigraph.self_loops import with_self_loops

ATTENTION_TYPES = ("MX", "SD")


# ---------------------------------------------------------------------- per-edge softmax by index
def segment_softmax(scores: Tensor, index: Tensor, num_segments: int) -> Tensor:
    """Softmax of ``scores`` (``[E, *]``) over the rows sharing ``index`` (PyG's
    ``softmax(src, index)``), shifted by each group's (constant) maximum so it cannot overflow."""
    peak = group_reduce(scores.detach(), index, num_segments, "max")
    exp = (scores - peak.index_select(0, index)).exp()
    return exp / group_reduce(exp, index, num_segments, "sum").index_select(0, index)


# ---------------------------------------------------------------------- negative edges


# ---------------------------------------------------------------------- the layer
class SuperGATConv(MessagePassing):
    r"""The self-supervised graph attentional operator from the `"How to Find Your Friendly
    Neighborhood: Graph Attention Design with Self-Supervision"
    <https://openreview.net/forum?id=Wi5KUNlqWty>`_ paper.

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i) \cup \{ i \}} \alpha_{i,j}\mathbf{\Theta}\mathbf{x}_{j},
        \qquad
        \alpha_{i,j} = \operatorname{softmax}_{j}\left(\mathrm{LeakyReLU}(e_{i,j})\right)

    per head, with the MX or SD score

    .. math::
        e_{i,j}^{\mathrm{MX}} = \mathbf{a}^{\top} [\mathbf{\Theta}\mathbf{x}_i \Vert \mathbf{\Theta}\mathbf{x}_j]
        \cdot \sigma\left((\mathbf{\Theta}\mathbf{x}_i)^{\top} \mathbf{\Theta}\mathbf{x}_j\right),
        \qquad
        e_{i,j}^{\mathrm{SD}} = \frac{(\mathbf{\Theta}\mathbf{x}_i)^{\top} \mathbf{\Theta}\mathbf{x}_j}{\sqrt{d}}.

    In training, the logits :math:`\phi_{i,j}` (the dot product for MX, :math:`e^{\mathrm{SD}}` for
    SD) of the edges (a ``edge_sample_ratio`` sample of them) and of sampled non-edges are kept
    for :meth:`get_attention_loss`, the binary cross-entropy of their head-mean against
    1 (edge) / 0 (non-edge). The dot products are one ``dot`` g-SDDMM, the softmax
    ``edge_softmax``, the weighted sum ``propagate`` (one ``u_mul_e`` g-SpMM).

    Negative edges (:meth:`negative_sampling`) are drawn uniformly among the node pairs
    ``i != j`` that are not edges in either direction (within each graph of ``batch``), distinct,
    ``int(neg_sample_ratio * edge_sample_ratio * E)`` of them per graph (``E`` counting the
    self-loops), fewer where a graph has fewer non-edges; from torch's generator (PyG draws them
    with Python's ``random``, so the two differ for the same seed). The positive sample
    (:meth:`positive_sampling`) keeps each edge where ``torch.rand(E) >= 1 - edge_sample_ratio``,
    PyG's draw.

    Args:
        in_channels (int): size of each input sample (``-1`` infers it on the first call).
        out_channels (int): size of each output sample per head.
        heads (int, optional): number of attention heads. (default: ``1``)
        concat (bool, optional): concatenate the heads (else average them). (default: ``True``)
        negative_slope (float, optional): LeakyReLU slope. (default: ``0.2``)
        dropout (float, optional): dropout probability of the attention weights. (default: ``0``)
        add_self_loops (bool, optional): replace self-loops by one per node. (default: ``True``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        attention_type (str, optional): ``"MX"`` or ``"SD"``. (default: ``"MX"``)
        neg_sample_ratio (float, optional): negative edges per positive edge. (default: ``0.5``)
        edge_sample_ratio (float, optional): fraction of the edges used as positives, in ``(0, 1]``.
            (default: ``1.0``)
        is_undirected (bool, optional): the graph is undirected, so its edges are not mirrored
            before the negatives are drawn. (default: ``False``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``,
            default ``"add"``; ``flow``, ...), as PyG's.

    Call forms: ``conv(g, x)`` or PyG's ``conv(x, edge_index, neg_edge_index=None, batch=None)``
    with ``edge_index`` a tensor, a ``SparseTensor`` or a torch sparse ``adj_t`` (values ignored).

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})`, negative edges
          :math:`(2, |\mathcal{E}^{(-)}|)` *(optional)*, batch vector :math:`(|\mathcal{V}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, H * F_{out})`, or
          :math:`(|\mathcal{V}|, F_{out})` with ``concat=False``
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True, bias: bool = True,
                 attention_type: str = "MX", neg_sample_ratio: float = 0.5, edge_sample_ratio: float = 1.0,
                 is_undirected: bool = False, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(node_dim=0, **kwargs)
        who = "SuperGATConv"
        if isinstance(in_channels, bool) or not isinstance(in_channels, int) or (in_channels <= 0 and in_channels != LAZY):
            raise ValueError(f"{who} in_channels must be a positive int or -1 (inferred on the first call), "
                             f"got {in_channels!r}")
        if attention_type not in ATTENTION_TYPES:
            raise ValueError(f"{who} attention_type must be 'MX' or 'SD', got {attention_type!r}")
        if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)):
            raise ValueError(f"{who} negative_slope must be a number, got {negative_slope!r}")
        if not isinstance(neg_sample_ratio, (int, float)) or isinstance(neg_sample_ratio, bool) or neg_sample_ratio <= 0:
            raise ValueError(f"{who} neg_sample_ratio must be > 0, got {neg_sample_ratio!r}")
        if not isinstance(edge_sample_ratio, (int, float)) or isinstance(edge_sample_ratio, bool) \
                or not 0.0 < edge_sample_ratio <= 1.0:
            raise ValueError(f"{who} edge_sample_ratio must be in (0, 1], got {edge_sample_ratio!r}")
        self.in_channels = in_channels
        self._widths = (in_channels, in_channels)
        self._lazy = in_channels == LAZY
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.heads = check_positive(heads, "heads", who)
        self.concat = concat
        self.negative_slope = negative_slope
        self.dropout = check_probability(dropout, "dropout", who)
        self.add_self_loops = add_self_loops
        self.attention_type = attention_type
        self.neg_sample_ratio = neg_sample_ratio
        self.edge_sample_ratio = edge_sample_ratio
        self.is_undirected = is_undirected
        self.lin = make_linear(in_channels, heads * out_channels, bias=False)
        if attention_type == "MX":
            self.att_l = Parameter(torch.empty(1, heads, out_channels))
            self.att_r = Parameter(torch.empty(1, heads, out_channels))
        else:
            self.register_parameter("att_l", None)
            self.register_parameter("att_r", None)
        self.att_x: Tensor | None = None   # the training call's logits and labels, for get_attention_loss
        self.att_y: Tensor | None = None
        self.bias = Parameter(torch.empty(heads * out_channels if concat else out_channels)) if bias else None
        self.reset_parameters()

    def _lazy_linears(self) -> tuple[tuple, tuple]:
        return (self.lin,), ()

    def reset_parameters(self) -> None:
        if self.aggr_module is not None:
            reset_module(self.aggr_module)
        for weight in (self.lin.weight, self.att_l, self.att_r):
            if weight is not None:
                glorot_(weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Tensor, edge_index: Any, neg_edge_index: Tensor | None = None,
                batch: Tensor | None = None) -> Tensor:
        who = "SuperGATConv"
        if isinstance(x, (tuple, list)):
            raise ValueError(f"{who} takes one feature tensor x (a square graph), not a (source, destination) pair")
        call, g = pyg_call(self, who, x, edge_index)
        if g.is_bipartite:
            raise ValueError(f"{who} needs a square graph (its negatives are node pairs of one graph), got "
                             f"{g.num_src_nodes} source and {g.num_dst_nodes} destination nodes")
        g, x, _ = node_inputs(g, call.x, who, layer=self)
        num_nodes = x.shape[0]
        if self.training and neg_edge_index is not None:
            neg_edge_index = check_edge_index(neg_edge_index, num_nodes, who, "neg_edge_index")
        heads, channels = self.heads, self.out_channels
        graph = with_self_loops(g).graph if self.add_self_loops else g

        h = linear(x, self.lin.weight).view(-1, heads, channels)
        logits = ops.gsddmm(graph, "dot", h, h, "u", "v").squeeze(-1)        # [E, H]
        if self.attention_type == "MX":
            scores = ops.gsddmm(graph, "add", (h * self.att_l).sum(-1), (h * self.att_r).sum(-1), "u", "v")
            scores = scores * logits.sigmoid()
        else:
            logits = logits / math.sqrt(channels)
            scores = logits
        alpha = ops.edge_softmax(graph, F.leaky_relu(scores, self.negative_slope))
        out = self.propagate(graph, x=h, alpha=dropout(alpha, self.dropout, self.training))
        if self.training:
            self._keep_link_logits(graph, h, logits, neg_edge_index, batch)

        out = out.reshape(-1, heads * channels) if self.concat else out.mean(dim=1)
        return out + self.bias if self.bias is not None else out

    def message(self, x_j: Tensor, alpha: Tensor) -> Tensor:
        return x_j * alpha.unsqueeze(-1)

    # ------------------------------------------------------------------ self-supervision
    def _keep_link_logits(self, graph: Graph, h: Tensor, logits: Tensor, neg_edge_index: Tensor | None,
                          batch: Tensor | None) -> None:
        edge_index = pyg_edge_index(self, graph)
        positive = self.positive_sampling(edge_index)
        positive_logits = logits if positive is edge_index else self._link_logits(h, positive)
        if neg_edge_index is None:
            neg_edge_index = self.negative_sampling(edge_index, h.shape[0], batch)
        self.att_x = torch.cat([positive_logits, self._link_logits(h, neg_edge_index)], dim=0)
        self.att_y = self.att_x.new_zeros(self.att_x.shape[0])
        self.att_y[: positive.shape[1]] = 1.0

    def _link_logits(self, h: Tensor, pairs: Tensor) -> Tensor:
        """:math:`\\phi` of node pairs ``[2, K]`` (source, target): ``[K, H]``."""
        logits = (h.index_select(0, pairs[1]) * h.index_select(0, pairs[0])).sum(dim=-1)
        return logits / math.sqrt(self.out_channels) if self.attention_type == "SD" else logits

    def negative_sampling(self, edge_index: Tensor, num_nodes: int, batch: Tensor | None = None) -> Tensor:
        """``[2, K]`` uniformly drawn non-edges (see the class docstring), for ``edge_index``
        (``[2, E]``) over ``num_nodes`` nodes, per graph of ``batch`` when given."""
        who = "SuperGATConv.negative_sampling"
        edge_index = check_edge_index(edge_index, num_nodes, who)
        num_samples = int(self.neg_sample_ratio * self.edge_sample_ratio * edge_index.shape[1])
        return negative_edges(edge_index, num_nodes, num_samples, batch, symmetric=not self.is_undirected, who=who)

    def positive_sampling(self, edge_index: Tensor) -> Tensor:
        """The edges kept as positives: each with probability ``edge_sample_ratio`` in training
        (``torch.rand(E) >= 1 - edge_sample_ratio``, PyG's ``dropout_edge``), all otherwise."""
        p = 1.0 - self.edge_sample_ratio
        if not self.training or p == 0.0:
            return edge_index
        return edge_index[:, torch.rand(edge_index.shape[1], device=edge_index.device) >= p]

    def get_attention(self, edge_index_i: Tensor, x_i: Tensor, x_j: Tensor, num_nodes: int | None,
                      return_logits: bool = False) -> Tensor:
        """The attention of the edges whose targets are ``edge_index_i``, from the projected
        features ``x_i``/``x_j`` (``[E, H, C]``) per edge (PyG's method): the softmax over each
        target's edges, or the link logits with ``return_logits``."""
        logits = (x_i * x_j).sum(dim=-1)
        if self.attention_type == "MX":
            if return_logits:
                return logits
            scores = ((x_j * self.att_l).sum(-1) + (x_i * self.att_r).sum(-1)) * logits.sigmoid()
        else:
            scores = logits / math.sqrt(self.out_channels)
            if return_logits:
                return scores
        if num_nodes is None:
            num_nodes = int(edge_index_i.max()) + 1 if edge_index_i.numel() else 0
        return segment_softmax(F.leaky_relu(scores, self.negative_slope), edge_index_i, num_nodes)

    def get_attention_loss(self) -> Tensor:
        """The self-supervised attention loss of the last training call (``tensor([0])`` in eval mode)."""
        if not self.training:
            return torch.tensor([0], device=self.lin.weight.device)
        if self.att_x is None:
            raise RuntimeError("SuperGATConv.get_attention_loss needs a forward call in training mode first")
        return F.binary_cross_entropy_with_logits(self.att_x.mean(dim=-1), self.att_y)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads}, "
                f"type={self.attention_type})")
