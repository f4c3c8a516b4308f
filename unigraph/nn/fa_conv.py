"""FAConv: frequency-adaptive propagation with signed (tanh) attention (Bo et al.)."""
from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import Tensor

from unigraph import ops
from unigraph.call_forms import is_graph_object
from unigraph.graph import Graph
from unigraph.group_reduce import widened, widened_dtype
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.inputs import check_rows
from unigraph.nn.checks import check_probability, check_width, edge_input, reset_module
from unigraph.nn.dropout import dropout
from unigraph.nn.lazy import LAZY, make_linear, materialize
from unigraph.nn.projection import dense, linear
from unigraph.nn.static_graph import refuse_static
from unigraph.nn.transformer_conv import attention_result, wants_weights
from unigraph.nn.layer_inputs import pyg_call
from unigraph.self_loops import with_self_loops


def symmetric_norm(g: Graph, weights: Tensor | None, add_self_loops: bool, dtype: torch.dtype,
                   add_to_existing_loops: bool = False) -> tuple[Graph, Tensor]:
    """PyG's ``gcn_norm`` (fill value 1): the graph with one self-loop per node (when asked) and
    the weights :math:`w_{j,i} / \\sqrt{d_j d_i}`, :math:`d` the weighted in-degree of that graph.
    A node's loop weighs 1, plus the weights of its existing loops with ``add_to_existing_loops``
    (PyG's torch sparse path adds the identity to the matrix); otherwise the existing loops are
    dropped (PyG's other paths, which have no weights there). Summed and normalized in float32 at
    least (``group_reduce.widened``: a half-precision sum of a hub's weights stops growing at 256 or
    2,048), rounded to ``dtype`` once."""
    out_dtype = weights.dtype if weights is not None else dtype
    weights = widened(weights) if weights is not None else torch.ones(g.num_edges, dtype=widened_dtype(dtype),
                                                                       device=g.device)
    if add_self_loops:
        looped = with_self_loops(g)
        loops = torch.ones(looped.num_loops, dtype=weights.dtype, device=weights.device)
        if add_to_existing_loops:
            slots = weights.new_zeros(looped.num_loops + 1).index_add(0, looped.loop_slot, weights)
            loops = loops + slots[: looped.num_loops]
        g, weights = looped.graph, looped.edge_values(weights, loops)
    degree = weights.new_zeros(g.num_dst_nodes).index_add(0, g.dst, weights)
    inverse = degree.pow(-0.5)
    inverse = inverse.masked_fill(torch.isinf(inverse), 0.0)
    return g, (inverse.index_select(0, g.src) * weights * inverse.index_select(0, g.dst)).to(out_dtype)


class FAConv(MessagePassing):
    r"""The Frequency Adaptive Graph Convolution operator from the `"Beyond Low-Frequency
    Information in Graph Convolutional Networks" <https://arxiv.org/abs/2101.00797>`_ paper.

    .. math::
        \mathbf{x}^{\prime}_i = \epsilon \cdot \mathbf{x}^{(0)}_i +
        \sum_{j \in \mathcal{N}(i)} \frac{\alpha_{i,j}}{\sqrt{d_i d_j}} \mathbf{x}_{j},
        \qquad
        \alpha_{i,j} = \tanh\left(\mathbf{a}_l^{\top} \mathbf{x}_j + \mathbf{a}_r^{\top} \mathbf{x}_i\right)

    with :math:`\mathbf{x}^{(0)}_i` the initial features and :math:`d_i` the degree (with
    self-loops unless ``add_self_loops=False``; with ``normalize=False`` the given edge weights
    replace :math:`1/\sqrt{d_i d_j}`). The coefficients are one ``add`` g-SDDMM of two per-node
    scores; the propagation is one ``u_mul_e`` g-SpMM (``propagate``).

    Args:
        channels (int): size of each input sample (``-1`` infers it on the first call).
        eps (float, optional): :math:`\epsilon`. (default: ``0.1``)
        dropout (float, optional): dropout probability of the coefficients. (default: ``0``)
        cached (bool, optional): keep the normalization of the graph seen first and reuse it while
            that same graph comes back (transductive training; PyG would reuse it for any graph).
            (default: ``False``)
        add_self_loops (bool, optional): add one self-loop per node before normalizing.
            (default: ``True``)
        normalize (bool, optional): compute the symmetric normalization; otherwise the edge
            weights (``edge_weight``, or a sparse adjacency's values) are required. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``,
            default ``"add"``; ``flow``, ...), as PyG's.

    Call forms: ``conv(x, x_0, edge_index, edge_weight)`` with ``edge_index`` a tensor, a
    ``SparseTensor`` or a torch sparse ``adj_t``, or ``conv(x, x_0, g, edge_weight)`` with a graph
    object. As in PyG, ``normalize=True`` refuses edge weights (given, or a ``SparseTensor``'s
    values) except a torch sparse adjacency's, which it normalizes. ``return_attention_weights``
    set to a bool returns ``(out, (edge_index, alpha))`` (the normalized graph's edges),
    ``(out, adj)`` for a ``SparseTensor``, ``(out, (adj_t, alpha))`` for a torch sparse adjacency;
    ``alpha`` (``[E']``) is the tanh coefficient before dropout.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F)`, initial features
          :math:`(|\mathcal{V}|, F)`, edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, F)`
    """

    resolves_flow = True

    def __init__(self, channels: int, eps: float = 0.1, dropout: float = 0.0, cached: bool = False,
                 add_self_loops: bool = True, normalize: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        who = "FAConv"
        if isinstance(channels, bool) or not isinstance(channels, int) or (channels <= 0 and channels != LAZY):
            raise ValueError(f"{who} channels must be a positive int or -1 (inferred on the first call), got {channels!r}")
        if isinstance(eps, bool) or not isinstance(eps, (int, float)):
            raise ValueError(f"{who} eps must be a number, got {eps!r}")
        self.channels = channels
        self._widths = (channels, channels)
        self._lazy = channels == LAZY
        self.eps = eps
        self.dropout = check_probability(dropout, "dropout", who)
        self.cached = cached
        self.add_self_loops = add_self_loops
        self.normalize = normalize
        self._cached_edge_index: tuple | None = None   # (weakref to the graph, its normalized graph, weights)
        self._cached_adj_t: tuple | None = None        # the same for a SparseTensor call
        self._alpha = None   # (PyG's attribute; the weights are returned, never kept)
        self.att_l = make_linear(channels, 1, bias=False)
        self.att_r = make_linear(channels, 1, bias=False)
        self.reset_parameters()

    def _lazy_linears(self) -> tuple[tuple, tuple]:
        return (self.att_l, self.att_r), ()

    def reset_parameters(self) -> None:
        if self.aggr_module is not None:
            reset_module(self.aggr_module)
        self.att_l.reset_parameters()
        self.att_r.reset_parameters()
        self._cached_edge_index = None
        self._cached_adj_t = None

    def forward(self, x: Tensor, x_0: Tensor, edge_index: Any, edge_weight: Tensor | None = None,
                return_attention_weights: bool | None = None):
        who = "FAConv"
        attention = wants_weights(return_attention_weights)
        if isinstance(x, (tuple, list)):
            raise ValueError(f"{who} takes one feature tensor x (a square graph), not a (source, destination) pair")
        refuse_static(who, x)
        first, second = (edge_index, x) if is_graph_object(edge_index) else (x, edge_index)   # (the graph form)
        call, g = pyg_call(self, who, first, second, edge_weight=edge_weight, values="edge_weight")
        if g.is_bipartite:
            raise ValueError(f"{who} needs a square graph (its normalization and x_0 are per node), got "
                             f"{g.num_src_nodes} source and {g.num_dst_nodes} destination nodes")
        x = call.x
        check_rows(x, g.num_src_nodes, "x", "nodes")
        if self._lazy:
            materialize(self, x, None, self._lazy_linears()[0], ())
        check_width(x, self._widths[0], who)
        if self.eps != 0.0:   # (PyG reads x_0 only then)
            check_rows(x_0, g.num_dst_nodes, "x_0", "nodes")
            check_width(x_0, self._widths[0], who, "x_0")
        x = dense(x)
        graph, weights = self._weights(who, call.form, g, call.edge_weight, x.dtype)

        alpha_l = linear(x, self.att_l.weight)   # [N, 1]
        alpha_r = linear(x, self.att_r.weight)
        alpha = ops.gsddmm(graph, "add", alpha_l, alpha_r, "u", "v").tanh().squeeze(-1)   # [E']
        coefficient = dropout(alpha, self.dropout, self.training) * weights
        out = self.propagate(graph, x=x, edge_weight=coefficient)
        if self.eps != 0.0:
            out = out + self.eps * x_0
        if attention:
            # the edges given, unless self-loops were added (or a torch sparse adjacency's were merged)
            same = not (self.normalize and self.add_self_loops) and call.form != "torch_sparse"
            return attention_result(self, call, out, graph, alpha, same_edges=same)
        return out

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return edge_weight.view(-1, 1) * x_j

    # ------------------------------------------------------------------ normalization
    def _weights(self, who: str, form: str, g: Graph, weights: Tensor | None, dtype: torch.dtype) -> tuple[Graph, Tensor]:
        """The graph to propagate on and its edge weights, as PyG's forms give them."""
        if weights is not None:
            weights = edge_input(g, weights, who, "edge_weight", vector=True)
        if not self.normalize:
            if weights is None:
                raise ValueError(f"{who}(normalize=False) needs edge weights: pass edge_weight, or a sparse adjacency "
                                 "with values")
            return g, weights
        if weights is not None and form != "torch_sparse":
            where = "the SparseTensor's values" if form == "sparse_tensor" else "edge_weight"
            raise ValueError(f"{who}(normalize=True) computes the edge weights itself and takes none ({where} given), "
                             "as in PyG; pass normalize=False to use your own")
        slot = "_cached_adj_t" if form == "sparse_tensor" else "_cached_edge_index"
        cache = getattr(self, slot)
        if self.cached and cache is not None and cache[0]() is g:
            return cache[1], cache[2]
        if weights is None and not torch.compiler.is_compiling():   # a function of the structure alone
            key = ("unigraph.nn", "fa_norm", self.add_self_loops, dtype)
            graph, norm = g.memo(key, lambda: symmetric_norm(g, None, self.add_self_loops, dtype))
        else:
            graph, norm = symmetric_norm(g, weights, self.add_self_loops, dtype, form == "torch_sparse")
        if self.cached and not torch.compiler.is_compiling():
            setattr(self, slot, (weakref.ref(g), graph, norm.detach()))
        return graph, norm

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.channels}, eps={self.eps})"
