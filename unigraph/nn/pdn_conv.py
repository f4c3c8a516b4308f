"""PDNConv: the pathfinder discovery network convolution."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import Linear, Parameter, ReLU, Sequential, Sigmoid

from unigraph.call_forms import is_sparse_adjacency, resolve
from unigraph.graph import Graph
from unigraph.group_reduce import widened, widened_dtype
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.inputs import check_graph, check_rows
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.checks import check_positive, check_width, edge_input, glorot_
from unigraph.nn.projection import linear
from unigraph.self_loops import with_self_loops


class PDNConv(MessagePassing):
    r"""The pathfinder discovery network convolution from `"Pathfinder Discovery Networks for
    Neural Message Passing" <https://arxiv.org/abs/2010.12878>`_:

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i) \cup \{i\}}
        \frac{w_{j,i}}{\sqrt{\hat{d}_j \hat{d}_i}} \, \mathbf{\Theta} \mathbf{x}_j + \mathbf{b},
        \qquad w_{j,i} = f_{\Omega}(\mathbf{e}_{j,i}), \quad \hat{d}_i = \sum_{j} w_{j,i}

    with :math:`f_{\Omega}` an MLP (``Linear, ReLU, Linear, Sigmoid``) mapping each edge's features
    to one weight in :math:`(0, 1)`: GCN's symmetric normalization of the learned edge weights
    (``normalize=False``: the weights as they are, no self-loops). Without edge features every
    weight is 1. With ``add_self_loops`` each node gets one self-loop; its weight is that of the
    node's existing self-loop (the last one, PyG's ``add_remaining_self_loops``) where it has one,
    else 1 for an ``edge_index`` or a graph; a sparse adjacency's self-loops are all replaced by
    loops of weight 1 (PyG's ``fill_diag`` on a ``SparseTensor``). The propagation is one
    g-SpMM (``edge_weight.view(-1, 1) * x_j``).

    Args:
        in_channels (int): size of each input sample.
        out_channels (int): size of each output sample.
        edge_dim (int): edge feature size.
        hidden_channels (int): hidden width of :math:`f_{\Omega}`.
        add_self_loops (bool, optional): add self-loops (as part of the normalization).
            (default: ``True``)
        normalize (bool, optional): add self-loops and normalize symmetrically.
            (default: ``True``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``, ...).

    Shapes:
        - **input:** ``(g, x[, edge_attr])`` or PyG's ``(x, edge_index[, edge_attr])``
          (:mod:`unigraph.call_forms`: a sparse adjacency's values are the edge features, ``[E,
          edge_dim]``; an ``edge_attr`` passed beside a ``SparseTensor`` is not read, as in PyG),
          node features :math:`(|\mathcal{V}|, F_{in})` (dense or sparse), edge features
          :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, edge_dim: int, hidden_channels: int,
                 add_self_loops: bool = True, normalize: bool = True, bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        who = type(self).__name__
        self.in_channels = check_positive(in_channels, "in_channels", who)
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.edge_dim = check_positive(edge_dim, "edge_dim", who)
        self.hidden_channels = check_positive(hidden_channels, "hidden_channels", who)
        self.add_self_loops = bool(add_self_loops)
        self.normalize = bool(normalize)
        self.lin = Linear(in_channels, out_channels, bias=False)
        self.mlp = Sequential(Linear(edge_dim, hidden_channels), ReLU(inplace=True), Linear(hidden_channels, 1),
                              Sigmoid())
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for weight in (self.lin.weight, self.mlp[0].weight, self.mlp[2].weight):
            glorot_(weight)
        for bias in (self.mlp[0].bias, self.mlp[2].bias, self.bias):
            if bias is not None:
                torch.nn.init.zeros_(bias)

    def forward(self, x: Tensor, edge_index: Any, edge_attr: Tensor | None = None) -> Tensor:
        who = type(self).__name__
        sparse = is_sparse_adjacency(edge_index)
        # with a sparse adjacency its values are the edge features (PyG reads a SparseTensor's so)
        call = resolve(who, x, edge_index, edge_attr=None if sparse else edge_attr, values="edge_attr")
        if sparse:
            if call.edge_attr is None and edge_attr is not None:
                raise ValueError(f"{who} got edge_attr beside a sparse adjacency without values: the edges have no "
                                 "order for its rows; pass the features as the adjacency's values, or edge_index "
                                 "as a [2, E] tensor")
            edge_attr = call.edge_attr
        x = call.x
        if isinstance(x, (tuple, list)):
            raise ValueError(f"{who} takes one node feature tensor, not a (source, destination) pair")
        g = oriented(call.graph, self.flow, who)
        check_graph(g, who)
        check_rows(x, g.num_src_nodes, "x", "source nodes" if g.is_bipartite else "nodes")
        check_width(x, self.in_channels, who)
        weights = self._edge_weights(g, edge_attr)
        if self.normalize:
            g, weights = self._normalized(g, weights, x.dtype, replace_loops=sparse)
        elif weights is None:
            raise ValueError(f"{who}(normalize=False) needs edge_attr: the edge weights come from it")
        out = self.propagate(g, x=linear(x, self.lin.weight), edge_weight=weights)
        return out + self.bias if self.bias is not None else out

    def _edge_weights(self, g: Graph, edge_attr: Tensor | None) -> Tensor | None:
        """``f_Omega(edge_attr)``: one weight per edge (None without edge features)."""
        who = type(self).__name__
        edge_attr = edge_input(g, edge_attr, who, "edge_attr")
        if edge_attr is None:
            return None
        if edge_attr.dim() == 1 and self.edge_dim == 1:
            edge_attr = edge_attr.view(-1, 1)
        check_width(edge_attr, self.edge_dim, who, "edge_attr", "edge_dim", "num_edges")
        return self.mlp(edge_attr).squeeze(-1)

    def _normalized(self, g: Graph, weights: Tensor | None, dtype: torch.dtype,
                    replace_loops: bool) -> tuple[Graph, Tensor]:
        """The graph with its self-loops (if added) and GCN's normalized weights
        ``w / sqrt(d_src d_dst)`` (in-degrees of the weighted graph at both ends)."""
        who = type(self).__name__
        if g.is_bipartite:
            raise ValueError(f"{who}(normalize=True) needs a square adjacency (one node set), got {g.num_src_nodes} "
                             f"source and {g.num_dst_nodes} destination nodes; pass normalize=False for a block")
        # summed and normalized in float32 at least, rounded once (a half-precision sum of a hub's
        # weights stops growing at 256 or 2,048)
        given = weights.dtype if weights is not None else dtype
        weights = (widened(weights) if weights is not None
                   else torch.ones(g.num_edges, dtype=widened_dtype(dtype), device=g.device))
        if self.add_self_loops:
            looped = with_self_loops(g)
            if replace_loops:
                loop_weights = weights.new_ones(looped.num_loops)
            else:
                loop_weights = looped.existing_loop_values(weights, 1.0)
            g, weights = looped.graph, looped.edge_values(weights, loop_weights)
        degree = weights.new_zeros(g.num_dst_nodes).index_add(0, g.dst, weights)
        inverse_sqrt = degree.pow(-0.5)
        inverse_sqrt = inverse_sqrt.masked_fill(torch.isinf(inverse_sqrt), 0.0)
        return g, (inverse_sqrt.index_select(0, g.src) * weights * inverse_sqrt.index_select(0, g.dst)).to(given)

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"
