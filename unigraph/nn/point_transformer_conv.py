"""PointTransformerConv: the Point Transformer's vector self-attention."""
from __future__ import annotations

from typing import Any, Callable

from torch import Tensor
from torch.nn import Linear

from unigraph import ops
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.inputs import split_pair
from unigraph.nn.checks import check_positive, check_width, reset_module
from unigraph.nn.lazy import LAZY, check_in_channels, make_linear, materialize
from unigraph.nn.point_conv import check_network, node_pair, point_graph


class PointTransformerConv(MessagePassing):
    r"""The Point Transformer layer from the `"Point Transformer"
    <https://arxiv.org/abs/2012.09164>`_ paper.

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i) \cup \{ i \}}
        \alpha_{i,j} \odot \left(\mathbf{W}_3 \mathbf{x}_j + \delta_{i,j} \right),
        \qquad \delta_{i,j} = h_{\mathbf{\Theta}}(\mathbf{p}_i - \mathbf{p}_j),

    with attention weights per channel, a softmax over the in-edges of each node:

    .. math::
        \alpha_{i,j} = \operatorname{softmax}_{j} \left( \gamma_{\mathbf{\Theta}}
        (\mathbf{W}_1 \mathbf{x}_i - \mathbf{W}_2 \mathbf{x}_j + \delta_{i,j}) \right)

    :math:`h_{\mathbf{\Theta}}` (``pos_nn``, a ``Linear(3, out_channels)`` by default) and
    :math:`\gamma_{\mathbf{\Theta}}` (``attn_nn``, the identity by default) run on one row per
    edge; :math:`\mathbf{W}_1` is ``lin_dst``, :math:`\mathbf{W}_2` ``lin_src``, :math:`\mathbf{W}_3`
    ``lin`` (no biases). The three projections run on node rows; the softmax is one
    ``edge_softmax``, the weighted sum one aggregation (``aggr``, the sum by default).

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes;
            ``-1`` infers it on the first call.
        out_channels (int): size of each output sample.
        pos_nn (torch.nn.Module, optional): :math:`h_{\mathbf{\Theta}}`, ``[-1, 3]`` (the position
            width) to ``[-1, out_channels]``. (default: ``None``: a ``Linear(3, out_channels)``)
        attn_nn (torch.nn.Module, optional): :math:`\gamma_{\mathbf{\Theta}}`, ``[-1,
            out_channels]`` to ``[-1, out_channels]``. (default: ``None``)
        add_self_loops (bool, optional): replace the self-loops by one per node. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``,
            ``flow``, ...), as PyG's.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_s|, F_{s}), (|\mathcal{V}_t|, F_{t}))`; positions
          :math:`(|\mathcal{V}|, 3)` or a pair :math:`((|\mathcal{V}_s|, 3), (|\mathcal{V}_t|, 3))`;
          ``edge_index`` in any of PyG's forms or a graph object
          (:func:`~unigraph.nn.point_conv.point_graph`)
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, pos_nn: Callable | None = None,
                 attn_nn: Callable | None = None, add_self_loops: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        who = type(self).__name__
        self.in_channels = in_channels
        self._widths = check_in_channels(in_channels, who)
        self._lazy = LAZY in self._widths
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.add_self_loops = add_self_loops
        self.pos_nn = Linear(3, out_channels) if pos_nn is None else check_network(pos_nn, "pos_nn", who)
        self.attn_nn = check_network(attn_nn, "attn_nn", who)
        self.lin = make_linear(self._widths[0], out_channels, bias=False)
        self.lin_src = make_linear(self._widths[0], out_channels, bias=False)
        self.lin_dst = make_linear(self._widths[1], out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.aggr_module is not None:
            reset_module(self.aggr_module)
        reset_module(self.pos_nn)
        reset_module(self.attn_nn)
        for lin in (self.lin, self.lin_src, self.lin_dst):
            lin.reset_parameters()

    def forward(self, x: Any, pos: Any, edge_index: Any) -> Tensor:
        who = type(self).__name__
        node_pair(x, "x", who)
        g, pos_src, pos_dst = point_graph(self, who, pos, edge_index)
        x_src, x_dst = split_pair(g, x, "x")
        if self._lazy:
            materialize(self, x_src, x_dst, (self.lin, self.lin_src), (self.lin_dst,))
        check_width(x_src, self._widths[0], who, "x (source features)" if g.is_bipartite else "x")
        check_width(x_dst, self._widths[1], who, "x (destination features)" if g.is_bipartite else "x")
        src, dst = g.src, g.dst
        delta = self.pos_nn(pos_dst.index_select(0, dst) - pos_src.index_select(0, src))
        scores = self.lin_dst(x_dst).index_select(0, dst) - self.lin_src(x_src).index_select(0, src) + delta
        if self.attn_nn is not None:
            scores = self.attn_nn(scores)
        alpha = ops.edge_softmax(g, scores)
        return self.propagate(g, x=self.lin(x_src), delta=delta, alpha=alpha)

    def message(self, x_j: Tensor, delta: Tensor, alpha: Tensor) -> Tensor:
        return alpha * (x_j + delta)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"
