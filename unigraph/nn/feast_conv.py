"""FeaStConv: the feature-steered convolution of FeaStNet."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import Parameter

from unigraph.call_forms import resolve
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.checks import check_positive
from unigraph.nn.lazy import LAZY, check_in_channels, make_linear
from unigraph.nn.layer_inputs import node_features, size_linear, uniform_
from unigraph.nn.projection import linear
from unigraph.self_loops import with_self_loops


class FeaStConv(MessagePassing):
    r"""The (translation-invariant) feature-steered convolution from `"FeaStNet: Feature-Steered
    Graph Convolutions for 3D Shape Analysis" <https://arxiv.org/abs/1706.05206>`_:

    .. math::
        \mathbf{x}^{\prime}_i = \bigoplus_{j \in \mathcal{N}(i)} \sum_{h=1}^H
        q_h(\mathbf{x}_i, \mathbf{x}_j) \mathbf{W}_h \mathbf{x}_j + \mathbf{b},
        \qquad q_h(\mathbf{x}_i, \mathbf{x}_j) = \mathrm{softmax}_h \left( \mathbf{u}_h^{\top}
        (\mathbf{x}_j - \mathbf{x}_i) + c_h \right)

    with :math:`\bigoplus` the mean by default and the softmax over the :math:`H` heads (not over
    the neighbours). With ``add_self_loops`` existing self-loops are replaced by one per node
    (PyG's ``remove_self_loops`` + ``add_self_loops``). :math:`\mathbf{u}_h^{\top}(\mathbf{x}_j -
    \mathbf{x}_i) = \mathbf{u}_h^{\top}\mathbf{x}_j - \mathbf{u}_h^{\top}\mathbf{x}_i`, so both
    projections (``u`` and the stacked :math:`\mathbf{W}_h`) run once per node, not per edge.

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each output sample.
        heads (int, optional): number of heads :math:`H`. (default: ``1``)
        add_self_loops (bool, optional): add self-loops. (default: ``True``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``,
            ``flow``, ...).

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index)`` (:mod:`unigraph.call_forms`; a sparse
          adjacency's values are not read), node features :math:`(|\mathcal{V}|, F_{in})` or a
          pair :math:`((|\mathcal{V}_s|, F_{in}), (|\mathcal{V}_t|, F_{in}))`
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, add_self_loops: bool = True,
                 bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "mean")
        super().__init__(**kwargs)
        who = type(self).__name__
        if not isinstance(in_channels, int):
            raise ValueError(f"{who} in_channels must be an int (source and destination features share it), "
                             f"got {in_channels!r}")
        self.in_channels = in_channels
        self._widths = check_in_channels(in_channels, who)
        self._lazy = in_channels == LAZY
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.heads = check_positive(heads, "heads", who)
        self.add_self_loops = bool(add_self_loops)
        self.lin = make_linear(in_channels, heads * out_channels, bias=False)
        self.u = make_linear(in_channels, heads, bias=False)
        self.c = Parameter(torch.empty(heads))
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        uniform_(self.lin.weight, self._widths[0])
        uniform_(self.u.weight, self._widths[0])
        torch.nn.init.normal_(self.c, mean=0.0, std=0.1)
        if self.bias is not None:
            torch.nn.init.normal_(self.bias, mean=0.0, std=0.1)

    def forward(self, x: Any, edge_index: Any) -> Tensor:
        who = type(self).__name__
        call = resolve(who, x, edge_index)
        g = oriented(call.graph, self.flow, who)
        g, x_src, x_dst = node_features(self, g, call.x)
        if x_dst is None:
            raise ValueError(f"{who} needs destination features (each message reads x_j - x_i): pass (x_src, x_dst) "
                             "with x_dst a tensor")
        if self.add_self_loops:
            g = with_self_loops(g).graph
        # per node: the stacked W_h x and the head scores u x (the source's with c, so x_j - x_i + c)
        values = linear(x_src, self.lin.weight)
        scores_src = linear(x_src, self.u.weight, self.c)
        scores_dst = linear(x_dst, self.u.weight)
        out = self.propagate(g, x=values, scores=(scores_src, scores_dst))
        return out + self.bias if self.bias is not None else out

    def message(self, x_j: Tensor, scores_j: Tensor, scores_i: Tensor) -> Tensor:
        weights = (scores_j - scores_i).softmax(dim=-1)                         # [E, H]
        num_heads = weights.shape[1]
        heads = x_j.view(x_j.shape[0], num_heads, x_j.shape[1] // num_heads)    # [E, H, F_out]
        return (heads * weights.unsqueeze(-1)).sum(dim=1)

    def _materialize(self, x_src: Tensor, x_dst: Tensor | None) -> None:
        width = x_src.shape[1]
        if x_dst is not None and x_dst.shape[1] != width:
            raise ValueError(f"{type(self).__name__} needs source and destination features of one width, got "
                             f"{width} and {x_dst.shape[1]}")
        self._widths = (width, width)
        for lin in (self.lin, self.u):
            size_linear(lin, width, lambda w: uniform_(w, w.shape[1]))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"
