"""SignedConv: the signed graph convolution of SGCN (Derr et al.)."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.call_forms import is_graph_object, resolve
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.inputs import split_pair
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.checks import check_positive, check_width, reset_module
from unigraph.nn.lazy import LAZY, make_linear, materialize
from unigraph.nn.static_graph import refuse_static

_SPARSE_FORMS = ("sparse_tensor", "torch_sparse")


class SignedConv(MessagePassing):
    r"""The signed graph convolutional operator from the `"Signed Graph Convolutional Network"
    <https://arxiv.org/abs/1808.06354>`_ paper.

    With ``first_aggr=True`` (the first layer):

    .. math::
        \mathbf{x}_v^{(\textrm{pos})} &= \mathbf{\Theta}^{(\textrm{pos})}_1
        \operatorname{AGG}_{w \in \mathcal{N}^{+}(v)} \mathbf{x}_w
        + \mathbf{\Theta}^{(\textrm{pos})}_2 \mathbf{x}_v + \mathbf{b}^{(\textrm{pos})}

        \mathbf{x}_v^{(\textrm{neg})} &= \mathbf{\Theta}^{(\textrm{neg})}_1
        \operatorname{AGG}_{w \in \mathcal{N}^{-}(v)} \mathbf{x}_w
        + \mathbf{\Theta}^{(\textrm{neg})}_2 \mathbf{x}_v + \mathbf{b}^{(\textrm{neg})}

    and the output is :math:`[\mathbf{x}_v^{(\textrm{pos})} \Vert \mathbf{x}_v^{(\textrm{neg})}]`.
    With ``first_aggr=False`` the input is such a pair of halves
    :math:`[\mathbf{x}^{(\textrm{pos})} \Vert \mathbf{x}^{(\textrm{neg})}]` (``2 * in_channels``
    wide), and balanced paths cross signs:

    .. math::
        \mathbf{x}_v^{(\textrm{pos})} &= \mathbf{\Theta}^{(\textrm{pos})}_1
        \left[ \operatorname{AGG}_{w \in \mathcal{N}^{+}(v)} \mathbf{x}_w^{(\textrm{pos})} \,\Vert\,
        \operatorname{AGG}_{w \in \mathcal{N}^{-}(v)} \mathbf{x}_w^{(\textrm{neg})} \right]
        + \mathbf{\Theta}^{(\textrm{pos})}_2 \mathbf{x}_v^{(\textrm{pos})} + \mathbf{b}^{(\textrm{pos})}

        \mathbf{x}_v^{(\textrm{neg})} &= \mathbf{\Theta}^{(\textrm{neg})}_1
        \left[ \operatorname{AGG}_{w \in \mathcal{N}^{+}(v)} \mathbf{x}_w^{(\textrm{neg})} \,\Vert\,
        \operatorname{AGG}_{w \in \mathcal{N}^{-}(v)} \mathbf{x}_w^{(\textrm{pos})} \right]
        + \mathbf{\Theta}^{(\textrm{neg})}_2 \mathbf{x}_v^{(\textrm{neg})} + \mathbf{b}^{(\textrm{neg})}

    :math:`\operatorname{AGG}` is ``aggr`` (the mean by default), one g-SpMM per sign and half;
    :math:`\mathbf{\Theta}_1` are ``lin_pos_l``/``lin_neg_l``, :math:`\mathbf{\Theta}_2, \mathbf{b}`
    ``lin_pos_r``/``lin_neg_r``. A torch sparse adjacency's values weight the messages (PyG
    multiplies by them there: ``spmm``); a ``SparseTensor``'s values are ignored, as in PyG.

    Args:
        in_channels (int): size of each input sample (of each half when ``first_aggr=False``);
            ``-1`` infers it on the first call (``first_aggr=True`` only).
        out_channels (int): size of each output half.
        first_aggr (bool): whether this is the first layer (see above).
        bias (bool, optional): learn additive biases. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``,
            ``flow``, ...), as PyG's.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})` (``2 F_{in}`` with
          ``first_aggr=False``) or a pair :math:`((|\mathcal{V}_s|, \cdot), (|\mathcal{V}_t|, \cdot))`;
          positive and negative edges, each in any of PyG's forms (:mod:`unigraph.call_forms`) or a
          graph object
        - **output:** node features :math:`(|\mathcal{V}_t|, 2 F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, first_aggr: bool, bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "mean")
        super().__init__(**kwargs)
        who = type(self).__name__
        if in_channels == LAZY:
            if not first_aggr:
                raise ValueError(f"{who}(in_channels=-1) infers the width of the input only with first_aggr=True; "
                                 "with first_aggr=False pass the width of each half")
        else:
            check_positive(in_channels, "in_channels", who)
        self.in_channels, self.out_channels = in_channels, check_positive(out_channels, "out_channels", who)
        self.first_aggr = first_aggr
        self._widths, self._lazy = (in_channels, in_channels), in_channels == LAZY
        aggregated = in_channels if first_aggr else 2 * in_channels
        self.lin_pos_l = make_linear(aggregated, out_channels, bias=False)
        self.lin_pos_r = make_linear(in_channels, out_channels, bias=bias)
        self.lin_neg_l = make_linear(aggregated, out_channels, bias=False)
        self.lin_neg_r = make_linear(in_channels, out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.aggr_module)
        for lin in (self.lin_pos_l, self.lin_pos_r, self.lin_neg_l, self.lin_neg_r):
            lin.reset_parameters()

    def forward(self, x: Any, pos_edge_index: Any, neg_edge_index: Any) -> Tensor:
        who = type(self).__name__
        refuse_static(who, x)
        pos_graph, pos_weight, x_src, x_dst = self._signed_graph(x, pos_edge_index, "pos_edge_index")
        neg_graph, neg_weight, _, _ = self._signed_graph(x, neg_edge_index, "neg_edge_index")
        if self._lazy:
            materialize(self, x_src, x_dst, (self.lin_pos_l, self.lin_neg_l), (self.lin_pos_r, self.lin_neg_r))
        width = self._widths[0] if self.first_aggr else 2 * self.in_channels
        check_width(x_src, width, who, "x (source features)" if pos_graph.is_bipartite else "x")
        check_width(x_dst, width, who, "x (destination features)" if pos_graph.is_bipartite else "x")

        def aggregate(g: Graph, weight: Tensor | None, part: slice) -> Tensor:
            return self.propagate(g, x=(x_src[:, part], None), edge_weight=weight)

        if self.first_aggr:
            every = slice(None)
            out_pos = self.lin_pos_l(aggregate(pos_graph, pos_weight, every)) + self.lin_pos_r(x_dst)
            out_neg = self.lin_neg_l(aggregate(neg_graph, neg_weight, every)) + self.lin_neg_r(x_dst)
            return torch.cat([out_pos, out_neg], dim=-1)
        first, second = slice(None, self.in_channels), slice(self.in_channels, None)
        out_pos = torch.cat([aggregate(pos_graph, pos_weight, first), aggregate(neg_graph, neg_weight, second)], dim=-1)
        out_pos = self.lin_pos_l(out_pos) + self.lin_pos_r(x_dst[:, first])
        out_neg = torch.cat([aggregate(pos_graph, pos_weight, second), aggregate(neg_graph, neg_weight, first)], dim=-1)
        out_neg = self.lin_neg_l(out_neg) + self.lin_neg_r(x_dst[:, second])
        return torch.cat([out_pos, out_neg], dim=-1)

    def _signed_graph(self, x: Any, edge_index: Any, name: str) -> tuple[Graph, Tensor | None, Tensor, Tensor]:
        """``(g, weights, x_src, x_dst)`` for one sign's edges: the graph turned by ``flow``, the
        message weights (a torch sparse adjacency's values, else None) and the features."""
        who = f"{type(self).__name__} ({name})"
        if is_graph_object(edge_index):   # a unigraph / DGL / PyG graph per sign
            call = resolve(who, edge_index, x)
        else:   # entries as stored, as torch.sparse.mm reads them
            call = resolve(who, x, edge_index, values="edge_attr")
        if self.flow == "target_to_source" and call.form in _SPARSE_FORMS:
            raise ValueError(f"{who}: flow='target_to_source' with a sparse adjacency is refused (as in PyG); pass "
                             "the transposed adjacency (adj_t.t()) with the default flow instead")
        g = oriented(call.graph, self.flow, who)
        x_src, x_dst = split_pair(g, call.x, "x")
        if x_dst is None:
            raise ValueError(f"{who} needs destination features (the root term): pass (x_src, x_dst) with x_dst "
                             "a tensor")
        weight = call.edge_attr if call.form == "torch_sparse" else None
        if weight is not None and (weight.dim() != 1 or not weight.is_floating_point()):
            raise ValueError(f"{who}: a torch sparse adjacency's values weight the messages and must be one float per "
                             f"entry, got {weight.dtype} of shape {list(weight.shape)}")
        return g, weight, x_src, x_dst

    def message(self, x_j: Tensor, edge_weight: Tensor | None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, first_aggr={self.first_aggr})"
