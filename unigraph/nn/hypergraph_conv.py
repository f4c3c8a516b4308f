"""HypergraphConv: hypergraph convolution and hypergraph attention (Bai et al.)."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from unigraph import ops
from unigraph.call_forms import propagate_structure
from unigraph.graph import Graph
from unigraph.group_reduce import widened, widened_dtype
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_positive, check_width, glorot_, reset_module
from unigraph.nn.dropout import check_p, dropout
from unigraph.nn.lazy import LAZY, make_linear, materialize

ATTENTION_MODES = ("node", "edge")


class HypergraphConv(MessagePassing):
    r"""The hypergraph convolutional operator from the `"Hypergraph Convolution and Hypergraph
    Attention" <https://arxiv.org/abs/1901.08150>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \mathbf{D}^{-1} \mathbf{H} \mathbf{B}^{-1}
        \mathbf{H}^{\top} \mathbf{X} \mathbf{\Theta} + \mathbf{b}

    with :math:`\mathbf{H} \in \{ 0, 1 \}^{N \times M}` the incidence matrix (``hyperedge_index``
    lists its non-zeros: row 0 the node, row 1 the hyperedge), :math:`B_{ee} = \sum_{i} H_{ie}`
    the hyperedge sizes and :math:`D_{ii} = \sum_{e} H_{ie} w_e` the nodes' degrees weighted by
    the hyperedge weights :math:`w_e` (1 without them); a zero degree or size gives a zero
    inverse. As in PyG, the weights enter through :math:`\mathbf{D}` only (the paper's
    :math:`\mathbf{H}\mathbf{W}\mathbf{B}^{-1}\mathbf{H}^{\top}` has :math:`\mathbf{W}` between).
    Per node:

    .. math::
        \mathbf{x}^{\prime}_i = \frac{1}{D_{ii}} \sum_{e \ni i} \frac{1}{B_{ee}}
        \sum_{j \in e} \mathbf{\Theta}^{\top} \mathbf{x}_j + \mathbf{b}

    (sums: the ``aggr`` of both steps). With ``use_attention`` each incidence :math:`(i, e)` and
    head gets a weight that multiplies both steps,

    .. math::
        \alpha_{i,e} = \operatorname{softmax}\left(\mathrm{LeakyReLU}\left(\mathbf{a}^{\top}
        [\mathbf{\Theta}\mathbf{x}_i \,\Vert\, \mathbf{\Theta}\mathbf{e}_e]\right)\right),

    normalized over the nodes of each hyperedge (``attention_mode="node"``) or over the
    hyperedges of each node (``"edge"``), with :math:`\mathbf{e}_e` the hyperedge features
    (``hyperedge_attr``, required then) and dropout on :math:`\alpha`; heads are concatenated
    or averaged (``concat=False``). The score splits into a node part and a hyperedge part,
    computed on node and hyperedge rows; the softmax is one ``edge_softmax`` on the incidence
    graph (nodes to hyperedges) or its reverse.

    Args:
        in_channels (int): size of each input sample (``-1``: inferred on the first call).
        out_channels (int): size of each output sample (per head).
        use_attention (bool, optional): hypergraph attention. (default: ``False``)
        attention_mode (str, optional): ``"node"`` or ``"edge"``, see above. (default: ``"node"``)
        heads (int, optional): attention heads (with ``use_attention``). (default: ``1``)
        concat (bool, optional): concatenate the heads (else average them). (default: ``True``)
        negative_slope (float, optional): LeakyReLU slope. (default: ``0.2``)
        dropout (float, optional): dropout probability of the attention weights. (default: ``0``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, ...),
            as PyG's; ``flow`` and ``node_dim`` are fixed (``"source_to_target"``, 0).

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})`, ``hyperedge_index``
          :math:`(2, |\mathcal{V}| \times |\mathcal{E}|)` *(sparse: one column per incidence)*,
          hyperedge weights :math:`(|\mathcal{E}|)` *(optional)*, hyperedge features
          :math:`(|\mathcal{E}|, F_{in})` *(optional)*, ``num_edges`` (default: the largest
          hyperedge id + 1)
        - **output:** node features :math:`(|\mathcal{V}|, H * F_{out})`, or
          :math:`(|\mathcal{V}|, F_{out})` with ``concat=False``
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, use_attention: bool = False, attention_mode: str = "node",
                 heads: int = 1, concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(flow="source_to_target", node_dim=0, **kwargs)
        who = type(self).__name__
        if attention_mode not in ATTENTION_MODES:
            raise ValueError(f"{who} attention_mode must be 'node' or 'edge', got {attention_mode!r}")
        if in_channels != LAZY:
            check_positive(in_channels, "in_channels", who)
        check_positive(heads, "heads", who)
        if bias and concat and heads > 1 and not use_attention:
            raise ValueError(f"{who}(heads={heads}) without use_attention has one head, but concat=True with bias=True "
                             f"would size the bias for {heads} heads (PyG builds it so and fails in forward); "
                             "pass heads=1 or use_attention=True")
        self.in_channels, self.out_channels = in_channels, check_positive(out_channels, "out_channels", who)
        self._widths, self._lazy = (in_channels, in_channels), in_channels == LAZY
        self.use_attention, self.attention_mode = use_attention, attention_mode
        self.heads, self.concat = (heads, concat) if use_attention else (1, True)
        self.negative_slope, self.dropout = negative_slope, check_p(dropout)
        self.lin = make_linear(in_channels, self.heads * out_channels, bias=False)
        if use_attention:
            self.att = Parameter(torch.empty(1, heads, 2 * out_channels))
        else:
            self.register_parameter("att", None)
        # (sized from the arguments, as PyG does: without attention only heads=1 fits, checked above)
        self.bias = Parameter(torch.empty(heads * out_channels if concat else out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.aggr_module)
        glorot_(self.lin.weight)
        if self.att is not None:
            glorot_(self.att)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Tensor, hyperedge_index: Tensor, hyperedge_weight: Tensor | None = None,
                hyperedge_attr: Tensor | None = None, num_edges: int | None = None) -> Tensor:
        who = type(self).__name__
        if not isinstance(x, Tensor) or x.dim() != 2 or not x.is_floating_point():
            raise ValueError(f"{who} expects node features x as a floating-point [num_nodes, F] tensor, got "
                             f"{list(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
        g = _incidence_graph(who, hyperedge_index, x.shape[0], num_edges)
        hyperedge_weight = _per_hyperedge(who, hyperedge_weight, g.num_dst_nodes, "hyperedge_weight", vector=True)
        if self._lazy:
            materialize(self, x, None, (self.lin,), ())
        check_width(x, self._widths[0], who)
        if self.use_attention:
            hyperedge_attr = self._checked_attr(g, hyperedge_attr)
        h = self.lin(x).view(-1, self.heads, self.out_channels)
        alpha = self._attention(g, h, hyperedge_attr) if self.use_attention else None
        edge_norm, node_norm = _normalizers(g, hyperedge_weight, h)
        out = self.propagate(g, x=h, norm=edge_norm, alpha=alpha)                 # nodes -> hyperedges
        reverse = g.memo(("unigraph.nn", "reversed"), g.reverse)
        out = self.propagate(reverse, x=out, norm=node_norm, alpha=alpha)         # hyperedges -> nodes
        out = out.reshape(-1, self.heads * self.out_channels) if self.concat else out.mean(dim=1)
        return out + self.bias if self.bias is not None else out

    def _checked_attr(self, g: Graph, hyperedge_attr: Tensor | None) -> Tensor:
        who = type(self).__name__
        if hyperedge_attr is None:
            raise ValueError(f"{who}(use_attention=True) needs hyperedge_attr, the [num_edges, {self._widths[0]}] "
                             "hyperedge features")
        hyperedge_attr = _per_hyperedge(who, hyperedge_attr, g.num_dst_nodes, "hyperedge_attr")
        check_width(hyperedge_attr, self._widths[0], who, "hyperedge_attr", rows="num_hyperedges")
        return hyperedge_attr

    def _attention(self, g: Graph, h: Tensor, hyperedge_attr: Tensor) -> Tensor:
        """``[incidences, heads]``: the attention weights, after dropout."""
        e = self.lin(hyperedge_attr).view(-1, self.heads, self.out_channels)
        channels = self.out_channels
        node_score = (h * self.att[..., :channels]).sum(-1)       # [N, H]: a_node^T Theta x_i
        edge_score = (e * self.att[..., channels:]).sum(-1)       # [M, H]: a_edge^T Theta e_e
        scores = node_score.index_select(0, g.src) + edge_score.index_select(0, g.dst)
        scores = F.leaky_relu(scores, self.negative_slope)
        if self.attention_mode == "node":    # over the nodes of each hyperedge: the incidence graph's in-edges
            alpha = ops.edge_softmax(g, scores)
        else:                                # over the hyperedges of each node: the reversed graph's
            alpha = ops.edge_softmax(g.memo(("unigraph.nn", "reversed"), g.reverse), scores)
        return dropout(alpha, self.dropout, self.training)

    def message(self, x_j: Tensor, norm: Tensor, alpha: Tensor | None) -> Tensor:
        out = norm.view(-1, 1, 1) * x_j
        return out if alpha is None else alpha.unsqueeze(-1) * out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"


def _incidence_graph(who: str, hyperedge_index: Any, num_nodes: int, num_edges: Any) -> Graph:
    """The bipartite graph nodes -> hyperedges of ``hyperedge_index`` (cached per index tensor,
    :func:`unigraph.call_forms.propagate_structure`); ``num_edges`` defaults to the largest
    hyperedge id + 1, as in PyG."""
    if not isinstance(hyperedge_index, Tensor) or hyperedge_index.layout != torch.strided:
        raise TypeError(f"{who} expects hyperedge_index as a [2, num_incidences] integer tensor, got "
                        f"{type(hyperedge_index).__name__}")
    if hyperedge_index.dim() != 2 or hyperedge_index.shape[0] != 2 or hyperedge_index.is_floating_point():
        raise ValueError(f"{who} expects hyperedge_index as a [2, num_incidences] integer tensor, got "
                         f"{hyperedge_index.dtype} of shape {list(hyperedge_index.shape)}")
    if num_edges is None:
        num_edges = int(hyperedge_index[1].max()) + 1 if hyperedge_index.numel() else 0
    elif isinstance(num_edges, bool) or not isinstance(num_edges, int) or num_edges < 0:
        raise ValueError(f"{who} num_edges must be an int >= 0, got {num_edges!r}")
    try:
        graph, _ = propagate_structure(who, hyperedge_index, (num_nodes, num_edges))
    except ValueError as err:   # (said in the graph's words: edge_index, source and destination nodes)
        raise ValueError(f"{err}; in hyperedge_index, row 0 holds node ids (< {num_nodes}, the rows of x) and row 1 "
                         f"hyperedge ids (< num_edges={num_edges})") from None
    return graph


def _per_hyperedge(who: str, value: Tensor | None, num_edges: int, name: str, vector: bool = False) -> Tensor | None:
    if value is None:
        return None
    if not isinstance(value, Tensor) or not value.is_floating_point():
        raise TypeError(f"{who} expects {name} to be a floating-point tensor, got "
                        f"{getattr(value, 'dtype', type(value).__name__)}")
    if value.dim() != (1 if vector else 2) or value.shape[0] != num_edges:
        shape = f"[{num_edges}]" if vector else f"[{num_edges}, F]"
        raise ValueError(f"{who} expects {name} of shape {shape} (one row per hyperedge), got {list(value.shape)}")
    return value


def _normalizers(g: Graph, hyperedge_weight: Tensor | None, like: Tensor) -> tuple[Tensor, Tensor]:
    """Per incidence (the edges of ``g``): :math:`1 / B_{ee}` of its hyperedge and :math:`1 / D_{ii}`
    of its node (the sizes count incidences; the degrees sum hyperedge weights). Summed and
    inverted in float32 at least, rounded once (a half-precision sum stops growing at 256 or 2,048)."""
    if hyperedge_weight is None:
        hyperedge_weight = like.new_ones(g.num_dst_nodes)
    given, wide = hyperedge_weight.dtype, widened(hyperedge_weight)
    per_incidence = wide.index_select(0, g.dst)
    node_degree = wide.new_zeros(g.num_src_nodes).index_add(0, g.src, per_incidence)
    edge_size = torch.bincount(g.dst, minlength=g.num_dst_nodes).to(widened_dtype(like.dtype))
    return (_inverse(edge_size).to(like.dtype).index_select(0, g.dst),
            _inverse(node_degree).to(given).index_select(0, g.src))


def _inverse(value: Tensor) -> Tensor:
    """``1 / value``, 0 where that is infinite (an empty hyperedge, a node of degree 0), with a
    zero gradient there too (a plain masked ``1 / value`` sends NaN back through the division)."""
    undefined = torch.isinf(1.0 / value.detach())
    return (1.0 / value.masked_fill(undefined, 1.0)).masked_fill(undefined, 0.0)
