"""GeneralConv: the general GNN layer of the GNN design space (You et al.)."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from unigraph import ops
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_positive, check_width, channels_pair, glorot_
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.layer_inputs import edge_feature_inputs, sized_widths
from unigraph.nn.projection import dense
from unigraph.nn.static_graph import refuse_static

ATTENTION_TYPES = ("additive", "dot_product")


class GeneralConv(MessagePassing):
    r"""A general GNN layer adapted from the `"Design Space for Graph Neural Networks"
    <https://arxiv.org/abs/2011.08843>`_ paper.

    .. math::
        \mathbf{x}^{\prime}_i = \frac{1}{H} \sum_{h=1}^{H}
        \bigoplus_{j \in \mathcal{N}(i)} \alpha^{(h)}_{i,j} \, \mathbf{m}^{(h)}_{j,i}
        + \mathbf{W}_s \mathbf{x}_i,
        \qquad
        \mathbf{m}_{j,i} = \mathbf{W}_m \mathbf{x}_j + \mathbf{b}_m
        \;[+\, \mathbf{W}_{m'} \mathbf{x}_i + \mathbf{b}_{m'}]\;
        [+\, \mathbf{W}_e \mathbf{e}_{j,i} + \mathbf{b}_e]

    with :math:`\mathbf{m}_{j,i}` split into :math:`H` heads of ``out_channels`` each, the
    destination term only with ``directed_msg=False``, the edge term with ``in_edge_channels``,
    and :math:`\bigoplus` the sum by default. Without attention :math:`\alpha = 1`; with it
    :math:`\alpha^{(h)}_{i,j}` is the softmax over :math:`j` of
    :math:`\mathrm{LeakyReLU}_{0.2}(s^{(h)}_{j,i})`, where :math:`s = \mathbf{a}^{\top}
    \mathbf{m}_{j,i}` (``"additive"``) or :math:`s = \mathbf{m}_{i,j}^{\top} \mathbf{m}_{j,i} /
    \sqrt{F_{out}}` (``"dot_product"``; :math:`\mathbf{m}_{i,j}` is the message with source and
    destination swapped). :math:`\mathbf{W}_s` is the identity unless ``skip_linear`` or the
    widths differ. With ``l2_normalize`` the output rows are divided by their 2-norm.

    The source and destination terms are projected once per node and gathered per edge; the
    additive score is a sum of per-node and per-edge dot products, and the softmax runs on
    :func:`unigraph.ops.edge_softmax`.

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes;
            ``-1`` infers it on the first call.
        out_channels (int): size of each output sample (and of each head).
        in_edge_channels (int, optional): edge feature size (``-1``: inferred); enables the edge
            term. (default: ``None``)
        aggr (str, optional): ``"add"``, ``"mean"``, ``"max"``, ... (default: ``"add"``)
        skip_linear (bool, optional): project the skip connection even where the widths agree.
            (default: ``False``)
        directed_msg (bool, optional): messages from the source only; ``False`` adds the
            destination term. (default: ``True``)
        heads (int, optional): number of message heads :math:`H`. (default: ``1``)
        attention (bool, optional): weigh the messages by attention. (default: ``False``)
        attention_type (str, optional): ``"additive"`` or ``"dot_product"``.
            (default: ``"additive"``)
        l2_normalize (bool, optional): :math:`\ell_2`-normalize the output. (default: ``False``)
        bias (bool, optional): biases in the linear maps. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index[, edge_attr], size=...)`` (an ``edge_index``,
          ``SparseTensor`` or torch sparse ``adj_t``, whose ``[E, D]`` values are the edge
          features) or ``(g, x[, edge_attr])``; node features :math:`(|\mathcal{V}|, F_{in})` or a
          pair :math:`((|\mathcal{V}_s|, F_{s}), (|\mathcal{V}_t|, F_{t}))`, edge features
          :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, in_edge_channels: int | None = None,
                 aggr: Any = "add", skip_linear: bool = False, directed_msg: bool = True, heads: int = 1,
                 attention: bool = False, attention_type: str = "additive", l2_normalize: bool = False,
                 bias: bool = True, **kwargs: Any):
        who = "GeneralConv"
        kwargs.setdefault("aggr", aggr)
        super().__init__(node_dim=0, **kwargs)
        self.in_channels = in_channels
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self._widths = channels_pair(in_channels, who, lazy=True)
        self._lazy = LAZY in self._widths
        self.in_edge_channels = in_edge_channels
        self.skip_linear, self.directed_msg = skip_linear, directed_msg
        self.heads = check_positive(heads, "heads", who)
        self.attention = attention
        if attention and attention_type not in ATTENTION_TYPES:
            raise ValueError(f"{who} attention_type must be one of {', '.join(ATTENTION_TYPES)}, got "
                             f"{attention_type!r}")
        self.attention_type = attention_type
        self.normalize_l2 = l2_normalize
        width = heads * out_channels
        self.lin_msg = make_linear(self._widths[0], width, bias=bias)
        if not directed_msg:   # (PyG sizes it for the source width too: x_i must then be as wide)
            self.lin_msg_i = make_linear(self._widths[0], width, bias=bias)
        if skip_linear or in_channels != out_channels:
            self.lin_self = make_linear(self._widths[1], out_channels, bias=bias)
        else:
            self.lin_self = torch.nn.Identity()
        if in_edge_channels is not None:
            if in_edge_channels != LAZY:
                check_positive(in_edge_channels, "in_edge_channels", who)
            self.lin_edge = make_linear(in_edge_channels, width, bias=bias)
        if attention and attention_type == "additive":
            self.att_msg = Parameter(torch.empty(1, heads, out_channels))
        elif attention:
            # float32, as PyG stores it (its state_dict holds this buffer)
            self.register_buffer("scaler", torch.tensor(out_channels, dtype=torch.float).sqrt())
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for name in ("lin_msg", "lin_msg_i", "lin_self", "lin_edge"):
            module = getattr(self, name, None)
            if module is not None and hasattr(module, "reset_parameters"):
                module.reset_parameters()
        if hasattr(self, "att_msg"):
            glorot_(self.att_msg)

    def _materialize(self, x_src: Tensor, x_dst: Tensor | None) -> None:
        # the lazy linear maps size themselves on their first call (LazyLinear, PyG's initializer)
        self._widths = sized_widths(self._widths, x_src, x_dst)

    def forward(self, x: Any, edge_index: Any, edge_attr: Tensor | None = None, size: Any = None) -> Tensor:
        who = "GeneralConv"
        refuse_static(who, x)
        g, x_src, x_dst, edge_attr = edge_feature_inputs(self, x, edge_index, edge_attr, size)
        if x_dst is None:
            raise ValueError(f"{who} adds the destination features (its skip connection): pass (x_src, x_dst) with "
                             "x_dst a tensor")
        x_src, x_dst = dense(x_src), dense(x_dst)
        if not self.directed_msg or (self.attention and self.attention_type == "dot_product"):
            # these terms run the source's linear maps on destination rows too
            check_width(x_dst, self._widths[0], who, "x (destination features, projected by the source's maps)")
        heads = (-1, self.heads, self.out_channels)
        h_src = self.lin_msg(x_src).view(heads)
        towards, edges = self._edge_terms(g, x_dst, edge_attr)
        edge_term = _total(towards, edges)
        alpha = self._attention(g, x_src, x_dst, h_src, edge_term, edges) if self.attention else None
        out = self.propagate(g, x=h_src, edge_term=edge_term, alpha=alpha).mean(dim=1)
        out = out + self.lin_self(x_dst)
        return F.normalize(out, p=2.0, dim=-1) if self.normalize_l2 else out

    def _edge_terms(self, g: Graph, x_dst: Tensor, edge_attr: Tensor | None) -> tuple[Tensor | None, Tensor | None]:
        """What each message adds to its projected source, ``[E, H, F_out]`` each (None where it
        does not apply): the projected destination (``directed_msg=False``) and the projected
        edge features."""
        who = "GeneralConv"
        heads = (-1, self.heads, self.out_channels)
        towards = self.lin_msg_i(x_dst).view(heads).index_select(0, g.dst) if not self.directed_msg else None
        if edge_attr is None:
            return towards, None
        if not hasattr(self, "lin_edge"):
            raise ValueError(f"{who} got edge_attr but was built without in_edge_channels; pass "
                             "in_edge_channels=<features>")
        if edge_attr.dim() != 2:
            raise ValueError(f"{who} expects edge_attr of shape [num_edges, {self.in_edge_channels}], got "
                             f"{list(edge_attr.shape)}")
        if self.in_edge_channels != LAZY:
            check_width(edge_attr, self.in_edge_channels, who, "edge_attr", "in_edge_channels", "num_edges")
        return towards, self.lin_edge(edge_attr).view(heads)

    def _attention(self, g: Graph, x_src: Tensor, x_dst: Tensor, h_src: Tensor, edge_term: Tensor | None,
                   edges: Tensor | None) -> Tensor:
        """The attention weights ``[E, H, 1]``: the softmax over each destination's in-edges."""
        if self.attention_type == "additive":
            # a^T (W x_j + t_ji): the source's share once per node, the edge term's per edge
            scores = (h_src * self.att_msg).sum(dim=-1).index_select(0, g.src)
            if edge_term is not None:
                scores = scores + (edge_term * self.att_msg).sum(dim=-1)
        else:
            scores = self._dot_scores(g, x_src, x_dst, h_src, edge_term, edges)
        scores = F.leaky_relu(scores, negative_slope=0.2)
        return ops.edge_softmax(g, scores).unsqueeze(-1)

    def _dot_scores(self, g: Graph, x_src: Tensor, x_dst: Tensor, h_src: Tensor, edge_term: Tensor | None,
                    edges: Tensor | None) -> Tensor:
        """:math:`\\mathbf{m}_{i,j}^{\\top} \\mathbf{m}_{j,i} / \\sqrt{F_{out}}` per edge and head: the
        message with source and destination swapped (the destination through ``lin_msg``, the
        source through ``lin_msg_i``, the same edge term) against the message itself."""
        heads = (-1, self.heads, self.out_channels)
        h_dst = self.lin_msg(x_dst).view(heads)
        if edge_term is None:   # both messages are projected node rows: one g-SDDMM dot
            return ops.gsddmm(g, "dot", h_src, h_dst, "u", "v").squeeze(-1) / self.scaler
        swapped = h_dst.index_select(0, g.dst)
        if not self.directed_msg:
            swapped = swapped + self.lin_msg_i(x_src).view(heads).index_select(0, g.src)
        if edges is not None:
            swapped = swapped + edges
        return (swapped * (h_src.index_select(0, g.src) + edge_term)).sum(dim=-1) / self.scaler

    def message(self, x_j: Tensor, edge_term: Tensor | None, alpha: Tensor | None) -> Tensor:
        msg = x_j if edge_term is None else x_j + edge_term
        return msg if alpha is None else msg * alpha

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"


def _total(first: Tensor | None, second: Tensor | None) -> Tensor | None:
    """The sum of the terms that are given (None when neither is)."""
    if first is None or second is None:
        return second if first is None else first
    return first + second
