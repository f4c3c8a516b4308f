"""ResGatedGraphConv: edge-gated aggregation with a residual root term (Bresson and Laurent)."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor
from torch.nn import Linear, Parameter, Sigmoid

from unigraph import ops
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import channels_pair, check_positive, check_width, node_inputs, reset_module
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.projection import linear
from unigraph.nn.static_graph import batch_major, is_static, node_major
from unigraph.nn.layer_inputs import check_edge_dim, edge_features, pyg_call


class ResGatedGraphConv(MessagePassing):
    r"""The residual gated graph convolutional operator from the `"Residual Gated Graph
    ConvNets" <https://arxiv.org/abs/1711.07553>`_ paper.

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{W}_1 \mathbf{x}_i +
        \sum_{j \in \mathcal{N}(i)} \eta_{i,j} \odot \mathbf{W}_2 \mathbf{x}_j + \mathbf{b},
        \qquad
        \eta_{i,j} = \sigma(\mathbf{W}_3 \mathbf{x}_i + \mathbf{W}_4 \mathbf{x}_j)

    with :math:`\sigma` the gate (``act``, a sigmoid by default). With ``edge_dim``, the key,
    query and value projections read the concatenation of the node's features and the edge's,
    :math:`\mathbf{W}_3 [\mathbf{x}_i \Vert \mathbf{e}_{j,i}]` (and so on): their node parts are
    projected per node and their edge parts per edge, which is the same sum. The gate's argument
    is one ``add`` g-SDDMM; the gated sum is ``propagate`` (one ``u_mul_e`` g-SpMM without edge
    features).

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes
            (``-1`` infers it on the first call; not with ``edge_dim``).
        out_channels (int): size of each output sample.
        act (callable, optional): the gate :math:`\sigma`, applied to ``[E, F_out]`` (or
            ``[E, B, F_out]`` for a static graph). (default: ``torch.nn.Sigmoid()``)
        edge_dim (int, optional): edge feature size. (default: ``None``)
        root_weight (bool, optional): add :math:`\mathbf{W}_1 \mathbf{x}_i`. (default: ``True``)
        bias (bool, optional): learn the additive bias :math:`\mathbf{b}`. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``,
            default ``"add"``; ``flow``, ...), as PyG's.

    Call forms: ``conv(g, x)`` or PyG's ``conv(x, edge_index, edge_attr)`` with ``edge_index`` a
    tensor, a ``SparseTensor`` or a torch sparse ``adj_t`` (a ``SparseTensor``'s values, or a torch
    sparse tensor's values of more than one dimension, are the edge features when ``edge_attr``
    is not given and ``edge_dim`` is set; a given ``edge_attr`` follows the adjacency's storage
    order, as in PyG). Without ``edge_dim``, ``x`` may also be a static graph's ``[B, N, F]``.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_s|, F_{s}), (|\mathcal{V}_t|, F_{t}))`, or :math:`(B, |\mathcal{V}|, F_{in})`,
          edge features :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})` (or :math:`(B, |\mathcal{V}|, F_{out})`)
    """

    resolves_flow = True

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, act: Callable | None = Sigmoid(),
                 edge_dim: int | None = None, root_weight: bool = True, bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        who = "ResGatedGraphConv"
        self.in_channels = in_channels
        self._widths = channels_pair(in_channels, who, lazy=True)
        self._lazy = LAZY in self._widths
        self.edge_dim = check_edge_dim(edge_dim, who)
        if self._lazy and edge_dim is not None:
            raise ValueError(f"{who}(in_channels=-1) infers the widths of projections that read node features alone; "
                             f"with edge_dim={edge_dim} they also read the edge features: give in_channels")
        if not callable(act):
            raise ValueError(f"{who} act (the gate) must be callable, e.g. torch.nn.Sigmoid(), got {act!r}")
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.act = act
        self.root_weight = root_weight
        extra = edge_dim or 0
        self.lin_key = make_linear(self._widths[1] + extra, out_channels)   # (-1 stays -1: lazy has no edge_dim)
        self.lin_query = make_linear(self._widths[0] + extra, out_channels)
        self.lin_value = make_linear(self._widths[0] + extra, out_channels)
        self.lin_skip = make_linear(self._widths[1], out_channels, bias=False) if root_weight else None
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def _lazy_linears(self) -> tuple[tuple, tuple]:
        return (self.lin_query, self.lin_value), (self.lin_key, self.lin_skip)

    def reset_parameters(self) -> None:
        if self.aggr_module is not None:
            reset_module(self.aggr_module)
        for lin in (self.lin_key, self.lin_query, self.lin_value, self.lin_skip):
            if lin is not None:
                lin.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Any, edge_index: Any, edge_attr: Tensor | None = None) -> Tensor:
        who = "ResGatedGraphConv"
        if is_static(x):
            return self._static(who, x, edge_index, edge_attr)
        call, g = pyg_call(self, who, x, edge_index)
        edge_attr = edge_features(who, call, g, edge_attr, self.edge_dim)
        g, x_src, x_dst = node_inputs(g, call.x, who, layer=self)
        if x_dst is None:
            raise ValueError(f"{who} needs destination features (the keys): pass (x_src, x_dst) with x_dst a tensor")
        out = self._gated_sum(g, x_src, x_dst, edge_attr)
        return self._root(out, x_dst)

    def _gated_sum(self, g: Graph, x_src: Tensor, x_dst: Tensor, edge_attr: Tensor | None) -> Tensor:
        """:math:`\\sum_j \\eta_{i,j} \\odot v_j` (plus the edge part of each value)."""
        width = x_src.shape[-1]
        key = _node_part(self.lin_key, x_dst, x_dst.shape[-1])
        query = _node_part(self.lin_query, x_src, width)
        value = _node_part(self.lin_value, x_src, width)
        pre_gate = ops.gsddmm(g, "add", query, key, "u", "v")
        edge_value = None
        if edge_attr is not None:   # the edge parts of the three projections, per edge
            pre_gate = pre_gate + linear(edge_attr, self.lin_key.weight[:, x_dst.shape[-1]:] +
                                         self.lin_query.weight[:, width:])
            edge_value = linear(edge_attr, self.lin_value.weight[:, width:])
        return self.propagate(g, x=value, gate=self.act(pre_gate), edge_value=edge_value)

    def _root(self, out: Tensor, x_dst: Tensor) -> Tensor:
        if self.lin_skip is not None:
            out = out + linear(x_dst, self.lin_skip.weight)
        if self.bias is not None:
            out = out + self.bias
        return out

    def _static(self, who: str, x: Tensor, edge_index: Any, edge_attr: Tensor | None) -> Tensor:
        """``[B, N, F]``: B feature sets over one graph, as one call on ``[N, B, F]`` (the gate
        sees each set's channels on the last dimension)."""
        if self.edge_dim is not None or edge_attr is not None:
            raise ValueError(f"{who} with edge features takes node features [N, F], not a static graph's "
                             f"{list(x.shape)} (PyG cannot concatenate [B, E, F] and [E, D] either)")
        if self._lazy:
            raise ValueError(f"{who}(-1, ...) infers in_channels from [N, F] features; call it once on those first")
        batch = x.shape[0]
        check_width(x[0], self._widths[0], who)
        call, g = pyg_call(self, who, node_major(x), edge_index)
        if g.is_bipartite:
            raise ValueError(f"{who}: static graphs (x of shape [B, N, F]) need a square graph")
        nodes = x.transpose(0, 1)                                   # [N, B, F]
        key = linear(nodes, self.lin_key.weight, self.lin_key.bias)
        query = linear(nodes, self.lin_query.weight, self.lin_query.bias)
        value = linear(nodes, self.lin_value.weight, self.lin_value.bias)
        gate = self.act(ops.gsddmm(g, "add", query, key, "u", "v"))      # [E, B, F_out]
        out = self.propagate(g, x=value.reshape(value.shape[0], -1), gate=gate.reshape(gate.shape[0], -1),
                             edge_value=None)
        return self._root(batch_major(out, batch), x)

    def message(self, x_j: Tensor, gate: Tensor, edge_value: Tensor | None) -> Tensor:
        if edge_value is not None:
            x_j = x_j + edge_value
        return gate * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"


def _node_part(lin: Linear, x: Tensor, width: int) -> Tensor:
    """The projection of the node features alone: the first ``width`` input columns of ``lin``,
    with its bias (its other columns read the edge features)."""
    weight = lin.weight
    return linear(x, weight if weight.shape[1] == width else weight[:, :width], lin.bias)
