"""GCNConv: the graph convolution of Kipf and Welling."""
from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import Tensor
from torch.nn import Parameter

from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.inputs import check_graph, check_rows
from unigraph.call_forms import resolve
from unigraph.nn.checks import check_positive, check_width, edge_input, glorot_
from unigraph.nn.lazy import LAZY, make_linear, materialize
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.projection import is_sparse, linear
from unigraph.nn.static_graph import batch_major, is_static, node_major
from unigraph.self_loops import with_self_loops


class GCNConv(MessagePassing):
    r"""The graph convolutional operator from the `"Semi-supervised Classification with Graph
    Convolutional Networks" <https://arxiv.org/abs/1609.02907>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \mathbf{\hat{D}}^{-1/2} \mathbf{\hat{A}}
        \mathbf{\hat{D}}^{-1/2} \mathbf{X} \mathbf{\Theta},

    where :math:`\mathbf{\hat{A}} = \mathbf{A} + \mathbf{I}` (the identity times 2 with
    ``improved=True``) and :math:`\hat{D}_{ii} = \sum_{j} \hat{A}_{ji}`. Per node:

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{\Theta}^{\top} \sum_{j \in \mathcal{N}(i) \cup \{ i \}}
        \frac{e_{j,i}}{\sqrt{\hat{d}_j \hat{d}_i}} \mathbf{x}_j + \mathbf{b},
        \qquad \hat{d}_i = 1 + \sum_{j \in \mathcal{N}(i)} e_{j,i},

    with :math:`e_{j,i}` the edge weight from source :math:`j` to target :math:`i` (1 without
    weights). Existing self-loops are replaced by one per node, whose weight follows PyG's rule for
    the call's form: with an ``edge_index`` (or a unigraph graph) it keeps the weight of the existing
    loop (``add_remaining_self_loops``); a ``SparseTensor``'s diagonal becomes the fill value (1, or 2
    with ``improved``: ``fill_diag``); a torch sparse adjacency's existing loop and the added one add
    up (``add_self_loops``). On a bipartite block :math:`\hat{d}_j` is
    the weighted out-degree of source :math:`j` in the block (DGL's ``norm="both"``); on a full
    graph both ends use the in-degree, as PyG does.

    The message is ``edge_weight.view(-1, 1) * x_j``; ``propagate`` compiles it to one g-SpMM.

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each output sample.
        improved (bool, optional): self-loop weight 2 instead of 1 (also without edge weights;
            PyG 2.8 applies it only when edge weights are given). (default: ``False``)
        cached (bool, optional): cache the normalized edge weights of the first graph seen and
            reuse them while the same graph comes back (transductive training); given edge
            weights are then treated as constants. Without edge weights the normalization is
            always cached on the graph. (default: ``False``)
        add_self_loops (bool, optional): add self-loops; ``None`` means ``normalize`` (as in PyG,
            which refuses self-loops without the normalization: so does this layer).
            (default: ``None``)
        normalize (bool, optional): apply the symmetric normalization. (default: ``True``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``, ``aggr``,
            ``node_dim``, ...), as PyG's. ``flow`` is read at call time.

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index)`` (:mod:`unigraph.call_forms`; a
          sparse adjacency's values are the edge weights), graph ``g`` with :math:`|\mathcal{V}|` nodes (or a block), node features
          :math:`(|\mathcal{V}|, F_{in})` (dense, or sparse CSR/COO), or :math:`(B, |\mathcal{V}|, F_{in})`
          for ``B`` feature sets over one graph (:mod:`unigraph.nn.static_graph`), edge weights
          :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, F_{out})` (:math:`|\mathcal{V}_{dst}|`
          rows for a block; :math:`(B, |\mathcal{V}|, F_{out})` for a static graph)
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, improved: bool = False, cached: bool = False,
                 add_self_loops: bool | None = None, normalize: bool = True, bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "sum")
        super().__init__(**kwargs)
        add_self_loops = normalize if add_self_loops is None else add_self_loops
        if add_self_loops and not normalize:
            raise ValueError("GCNConv does not support adding self-loops to the graph when no on-the-fly "
                             "normalization is applied (add_self_loops=True with normalize=False): the self-loops "
                             "are part of the normalization; add them to edge_index yourself")
        self.in_channels = in_channels if in_channels == LAZY else check_positive(in_channels, "in_channels", "GCNConv")
        self._widths = (in_channels, in_channels)
        self._lazy = in_channels == LAZY
        self.out_channels = check_positive(out_channels, "out_channels", "GCNConv")
        self.improved, self.cached = improved, cached
        self.add_self_loops, self.normalize = add_self_loops, normalize
        self.lin = make_linear(in_channels, out_channels, bias=False)
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self._cached_norm: tuple | None = None  # (weakref to graph, looped graph, weights, the call's form)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        glorot_(self.lin.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)
        self._cached_norm = None

    def forward(self, x: Tensor | Any, edge_index: Any, edge_weight: Tensor | None = None) -> Tensor:
        if isinstance(x, (tuple, list)) or isinstance(edge_index, (tuple, list)):
            raise ValueError("GCNConv takes one feature tensor, not a (source, destination) pair: for a block "
                             "pass the source features (its first num_dst_nodes rows are the destinations)")
        if is_static(x):  # [B, N, F]: B feature sets over one graph
            if self._lazy:
                raise ValueError("GCNConv(-1, ...) infers in_channels from [N, F] features; call it once on those first")
            check_width(x[0], self._widths[0], "GCNConv")
            call = resolve("GCNConv", node_major(x), edge_index, edge_weight=edge_weight)
            g = self._square(oriented(call.graph, self.flow, "GCNConv"), call.form)
            batch, h = x.shape[0], node_major(linear(x, self.lin.weight))
            weights = edge_input(g, call.edge_weight, "GCNConv", "edge_weight", vector=True)
            if self.normalize:
                g, weights = self._normalized(g, weights, h.dtype, call.form)
            out = batch_major(self.propagate(g, x=h, edge_weight=weights), batch)
            return out + self.bias if self.bias is not None else out
        call = resolve("GCNConv", x, edge_index, edge_weight=edge_weight)
        g, x, edge_weight = oriented(call.graph, self.flow, "GCNConv"), call.x, call.edge_weight
        g = self._square(g, call.form)
        check_graph(g, "GCNConv")
        check_rows(x, g.num_src_nodes, "x", "source nodes" if g.is_bipartite else "nodes")
        if self._lazy:
            materialize(self, x, None, (self.lin,), ())
        check_width(x, self._widths[0], "GCNConv")
        edge_weight = edge_input(g, edge_weight, "GCNConv", "edge_weight", vector=True)
        # A (X W) = (A X) W: aggregate at the narrower of the two widths (as DGL's GraphConv),
        # which moves fewer bytes through the g-SpMM, the layer's most expensive step. Not under
        # autocast, where the projection's output dtype (not x's) sets the aggregation's.
        aggregate_first = (self._widths[0] < self.out_channels and not is_sparse(x)
                           and not torch.is_autocast_enabled(x.device.type))
        h = x if aggregate_first else linear(x, self.lin.weight)
        if self.normalize:
            g, edge_weight = self._normalized(g, edge_weight, h.dtype, call.form)
        out = self.propagate(g, x=h, edge_weight=edge_weight)
        if aggregate_first:  # the bias rides in the product (addmm): no separate pass over the wide output
            return linear(out, self.lin.weight, self.bias)
        return out + self.bias if self.bias is not None else out

    def _square(self, g: Graph, form: str) -> Graph:
        """PyG normalizes a square adjacency only (it asserts so for sparse ones; a non-square
        ``EdgeIndex`` loses its size when the self-loops are added): in PyG's forms a bipartite
        graph is refused rather than normalized as a block (DGL's rule, the graph form's)."""
        if self.normalize and form != "graph" and g.is_bipartite:
            raise ValueError(f"GCNConv(normalize=True) in PyG's form conv(x, edge_index) needs a square adjacency, "
                             f"got {g.num_src_nodes} source and {g.num_dst_nodes} destination nodes (a sparse_size "
                             "or sparse shape); PyG refuses or resizes this. For a sampled block's normalization "
                             "pass a unigraph Graph block: conv(block, x)")
        return g

    def message(self, x_j: Tensor, edge_weight: Tensor | None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    # ------------------------------------------------------------------ normalization
    @property
    def _cached_edge_index(self) -> tuple | None:
        """PyG's name: the cached normalization of an edge_index (or torch sparse) call, or None."""
        return self._cached_norm[1:3] if self._cached_norm and self._cached_norm[3] != "sparse_tensor" else None

    @property
    def _cached_adj_t(self) -> tuple | None:
        """PyG's name: the cached normalization of a ``SparseTensor`` call, or None."""
        return self._cached_norm[1:3] if self._cached_norm and self._cached_norm[3] == "sparse_tensor" else None

    def _normalized(self, g: Graph, edge_weight: Tensor | None, dtype: torch.dtype,
                    form: str = "graph") -> tuple[Graph, Tensor]:
        """The graph to propagate on and its normalized edge weights, cached where the docstring
        says. While torch.compile traces, caches are not written (a write would be a side effect of the
        compiled code) and the graph's is not read: the weights are computed in the compiled graph."""
        if self.cached and self._cached_norm is not None and self._cached_norm[0]() is g:
            return self._cached_norm[1], self._cached_norm[2]
        compiling = torch.compiler.is_compiling()
        if compiling and self.cached and edge_weight is not None:
            # eager freezes the first call's weights; a compiled model cannot store them
            raise RuntimeError("GCNConv(cached=True) with edge weights cannot be compiled before its normalization is "
                               "cached: run it once eagerly on this graph first, or use cached=False")
        if edge_weight is None and not compiling:  # a function of the structure alone: cache it on the graph
            # (not read while compiling: whether a graph has it would be guarded, and a graph normalized
            # eagerly would recompile the model)
            key = ("unigraph.nn", "gcn_norm", self.improved, self.add_self_loops, dtype, _loop_rule(form))
            result = g.memo(key, lambda: self._normalize(g, None, dtype, form))
        else:
            result = self._normalize(g, edge_weight, dtype, form)
        if self.cached and not compiling:
            looped, weights = result
            self._cached_norm = (weakref.ref(g), looped, weights.detach(), form)
        return result

    def _normalize(self, g: Graph, edge_weight: Tensor | None, dtype: torch.dtype,
                   form: str = "graph") -> tuple[Graph, Tensor]:
        """Degrees are summed in float32 at least, then the weights cast to ``dtype``: in bfloat16
        (autocast) a sum of ones stops growing at 256, and a hub's degree would come out wrong.
        A node's existing self-loop is treated as PyG treats it in the call's form (:func:`loop_weights`)."""
        fill = 2.0 if self.improved else 1.0
        exact = torch.promote_types(dtype, torch.float32)
        weights = edge_weight if edge_weight is not None else torch.ones(g.num_edges, dtype=exact, device=g.device)
        weights = weights.to(exact)
        if self.add_self_loops:
            looped = with_self_loops(g)
            g, weights = looped.graph, looped.edge_values(weights, loop_weights(looped, weights, form, fill))
        in_degree = weights.new_zeros(g.num_dst_nodes).index_add(0, g.dst, weights)
        out_degree = weights.new_zeros(g.num_src_nodes).index_add(0, g.src, weights) if g.is_bipartite else in_degree
        norm = (_inverse_sqrt(out_degree).index_select(0, g.src) * weights
                * _inverse_sqrt(in_degree).index_select(0, g.dst))
        return g, norm.to(dtype)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"


def loop_weights(looped: Any, weights: Tensor, form: str, fill: float = 1.0) -> Tensor:
    """One weight per added self-loop (``looped``: :func:`unigraph.self_loops.with_self_loops`),
    as PyG's self-loop helper of the call's form sets it in ``gcn_norm``: an ``edge_index`` (and
    unigraph's graph form) keeps a node's existing loop weight, ``fill`` where it has none (the last
    loop where it has several: ``add_remaining_self_loops``); a ``SparseTensor``'s diagonal becomes
    ``fill`` (``fill_diag``); a torch sparse adjacency gets a loop of ``fill`` beside the existing one,
    the two weights adding up (``add_self_loops``)."""
    if form == "sparse_tensor":
        return weights.new_full((looped.num_loops,), fill)
    if form == "torch_sparse":
        slots = weights.new_full((looped.num_loops + 1,), fill)   # (the last slot takes the other edges)
        return slots.index_put((looped.loop_slot,), weights, accumulate=True)[: looped.num_loops]
    return looped.existing_loop_values(weights, fill)


def _loop_rule(form: str) -> str:
    """The part of the call's form :func:`loop_weights` reads (a cache key)."""
    return form if form in ("sparse_tensor", "torch_sparse") else "keep"


def _inverse_sqrt(degree: Tensor) -> Tensor:
    inv = degree.pow(-0.5)
    return inv.masked_fill(torch.isinf(inv), 0.0)


def gcn_norm(g: Graph, edge_weight: Tensor | None, dtype: torch.dtype, form: str = "edge_index", *,
             add_self_loops: bool = True) -> tuple[Graph, Tensor]:
    """The graph to propagate on and its weights :math:`e_{j,i} / \\sqrt{\\hat{d}_j \\hat{d}_i}`, with
    :math:`\\hat{d}` the weighted in-degree after the self-loops: PyG's ``gcn_norm`` (``improved=False``).

    With ``add_self_loops`` every node gets one loop, and its weight is PyG's for the call form:
    an ``edge_index`` (or a graph object) keeps an existing loop's weight (``add_remaining_self_loops``),
    a ``SparseTensor`` replaces it by 1 (``fill_diag``), a torch sparse adjacency adds 1 to it
    (``add_self_loops``, then coalesced); 1 where a node had none, and always 1 without weights.
    Degrees are summed in float32 at least (GCNConv's rule). Without weights the result is a
    function of the structure: kept on the graph (not while compiling, as GCNConv)."""
    if edge_weight is None and not torch.compiler.is_compiling():
        def build() -> tuple[Graph, Tensor]:
            with torch.inference_mode(False):  # kept on the graph: a normal tensor whatever mode asked first
                return _gcn_norm(g, None, dtype, form, add_self_loops)
        return g.memo(("unigraph.nn", "pyg_gcn_norm", add_self_loops, dtype), build)
    return _gcn_norm(g, edge_weight, dtype, form, add_self_loops)


def _gcn_norm(g: Graph, edge_weight: Tensor | None, dtype: torch.dtype, form: str,
              add_self_loops: bool) -> tuple[Graph, Tensor]:
    exact = torch.promote_types(dtype, torch.float32)
    if edge_weight is None:
        weights = torch.ones(g.num_edges, dtype=exact, device=g.device)
    else:
        weights = edge_weight.to(exact)
    if add_self_loops:
        looped = with_self_loops(g)
        weights = looped.edge_values(weights, loop_weights(looped, weights, form))
        g = looped.graph
    inv = _inverse_sqrt(weights.new_zeros(g.num_dst_nodes).index_add(0, g.dst, weights))
    return g, (inv.index_select(0, g.src) * weights * inv.index_select(0, g.dst)).to(dtype)
