"""EGConv: the efficient graph convolution of Tailor et al."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import Parameter

from unigraph import ops
from unigraph.call_forms import resolve
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.inputs import check_graph, check_rows
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.checks import check_positive, check_width, edge_input, glorot_
from unigraph.nn.lazy import LAZY, make_linear, materialize
from unigraph.nn.projection import linear
from unigraph.nn.gcn_conv import loop_weights
from unigraph.nn.input_cache import InputCache, refuse_cache_value
from unigraph.nn.gcn_conv import gcn_norm
from unigraph.self_loops import with_self_loops

AGGREGATORS = ("sum", "mean", "symnorm", "min", "max", "var", "std")


class EGConv(MessagePassing):
    r"""The efficient graph convolution from the `"Adaptive Filters and Aggregator Fusion for
    Efficient Graph Convolutions" <https://arxiv.org/abs/2104.01481>`_ paper.

    .. math::
        \mathbf{x}_i^{\prime} = {\LARGE ||}_{h=1}^H \sum_{\oplus \in \mathcal{A}} \sum_{b = 1}^B
        w_{i, h, \oplus, b} \; \underset{j \in \mathcal{N}(i) \cup \{i\}}{\bigoplus}
        \mathbf{W}_b \mathbf{x}_{j} + \mathbf{b}

    with :math:`B` basis weights :math:`\mathbf{W}_b` (``bases_lin``, ``out_channels / H`` wide
    each), the per-node combination weights :math:`w_i = \mathbf{W}_c \mathbf{x}_i + \mathbf{b}_c`
    (``comb_lin``) and the aggregators :math:`\mathcal{A}`: ``"sum"``, ``"mean"``, ``"max"``,
    ``"min"``, ``"var"`` (:math:`\mathrm{mean}(x^2) - \mathrm{mean}(x)^2`), ``"std"`` (its square
    root, with PyG's guard against 0) and ``"symnorm"`` (GCN's
    :math:`\sum_j \hat{a}_{ji} / \sqrt{\hat{d}_j \hat{d}_i} \, \mathbf{x}_j`). Each aggregator is one
    g-SpMM of the ``N x B*out_channels/H`` bases; nothing per edge is stored (the
    :math:`\mathcal{O}(|\mathcal{V}|)` memory of the paper).

    As in PyG, a sparse adjacency's values weigh the messages (``SparseTensor``: self-loops of
    weight 1 replace the diagonal; torch sparse: 1 is added to it): every aggregator reads them
    when ``"symnorm"`` is the only one or absent, only ``"symnorm"`` otherwise; and ``"std"`` is
    then :math:`\sqrt{\mathrm{relu}(\mathrm{var}) + 10^{-5}}` rather than
    :math:`\sqrt{\max(\mathrm{var}, 10^{-5})}`. (PyG refuses a torch sparse adjacency with
    self-loops and no ``"symnorm"``; here it follows the torch sparse rule above. Without
    ``"symnorm"`` PyG also counts the nodes of an ``edge_index`` from its largest index, so trailing
    nodes without edges get no self-loop there; here every node gets one.)

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each output sample (a multiple of ``num_heads``).
        aggregators (list of str, optional): the aggregators :math:`\mathcal{A}`.
            (default: ``["symnorm"]``)
        num_heads (int, optional): number of heads :math:`H`. (default: ``8``)
        num_bases (int, optional): number of basis weights :math:`B`. (default: ``4``)
        cached (bool, optional): keep the graph with self-loops and its normalization of the last
            call and reuse them while the same graph (and edge weights) come back; PyG reuses
            the first graph's for every later call, this layer recomputes them for another graph.
            PyG's ``_cached_edge_index`` / ``_cached_adj_t`` read them. (default: ``False``)
        add_self_loops (bool, optional): add one self-loop per node. (default: ``True``)
        bias (bool, optional): learn an additive bias :math:`\mathbf{b}`. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (an ``edge_index``, ``SparseTensor`` or torch
          sparse ``adj_t``) or ``(g, x)``; node features :math:`(|\mathcal{V}|, F_{in})`, dense or
          sparse
        - **output:** node features :math:`(|\mathcal{V}|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, aggregators: list[str] | None = None,
                 num_heads: int = 8, num_bases: int = 4, cached: bool = False, add_self_loops: bool = True,
                 bias: bool = True, **kwargs: Any):
        who = "EGConv"
        super().__init__(node_dim=0, **kwargs)
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.num_heads = check_positive(num_heads, "num_heads", who)
        self.num_bases = check_positive(num_bases, "num_bases", who)
        if out_channels % num_heads != 0:
            raise ValueError(f"'out_channels' (got {out_channels}) must be divisible by the number of heads "
                             f"(got {num_heads})")
        self.in_channels = in_channels if in_channels == LAZY else check_positive(in_channels, "in_channels", who)
        self._widths, self._lazy = (in_channels, in_channels), in_channels == LAZY
        self.cached, self.add_self_loops = cached, add_self_loops
        self.aggregators = list(aggregators) if aggregators else ["symnorm"]
        for name in self.aggregators:
            if name not in AGGREGATORS:
                raise ValueError(f"Unsupported aggregator: {name!r} (EGConv takes {', '.join(AGGREGATORS)})")
        self.bases_lin = make_linear(in_channels, (out_channels // num_heads) * num_bases, bias=False)
        self.comb_lin = make_linear(in_channels, num_heads * num_bases * len(self.aggregators))
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        # the normalized graph of the last call, one per kind of adjacency (PyG's two caches)
        self._kept, self._cache_adj_t = InputCache(), InputCache()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        glorot_(self.bases_lin.weight)
        self.comb_lin.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)
        self._kept.clear()
        self._cache_adj_t.clear()

    # PyG's cache attributes: read them, or set them to None to drop the cache
    @property
    def _cached_edge_index(self) -> tuple | None:
        """PyG's name: ``(edge_index, symnorm weights or None)`` kept from an ``edge_index`` (or
        torch sparse) call, or None."""
        return None if self._kept.value is None else (self._kept.value[0].edge_index, self._kept.value[1])

    @_cached_edge_index.setter
    def _cached_edge_index(self, value: None) -> None:
        refuse_cache_value("EGConv", "_cached_edge_index", value)
        self._kept.clear()

    @property
    def _cached_adj_t(self) -> tuple | None:
        """PyG's name: what was kept from a ``SparseTensor`` call (the graph with its self-loops and
        its symnorm weights), or None."""
        return None if self._cache_adj_t.value is None else self._cache_adj_t.value[:2]

    @_cached_adj_t.setter
    def _cached_adj_t(self, value: None) -> None:
        refuse_cache_value("EGConv", "_cached_adj_t", value)
        self._cache_adj_t.clear()

    def forward(self, x: Tensor | Any, edge_index: Any) -> Tensor:
        who = "EGConv"
        if isinstance(x, (tuple, list)) or isinstance(edge_index, (tuple, list)):
            raise ValueError(f"{who} takes one node feature tensor, not a (source, destination) pair (as in PyG)")
        call = resolve(who, x, edge_index)
        g, x = oriented(call.graph, self.flow, who), call.x
        check_graph(g, who)
        if g.is_bipartite:
            raise ValueError(f"{who} needs a square adjacency, got {g.num_src_nodes} source and {g.num_dst_nodes} "
                             "destination nodes (a size, a sparse shape or a block)")
        check_rows(x, g.num_src_nodes, "x", "nodes")
        if not x.is_floating_point():
            raise TypeError(f"{who} expects floating point node features, got {x.dtype}")
        if self._lazy:
            materialize(self, x, None, (self.bases_lin, self.comb_lin), ())
        check_width(x, self._widths[0], who)
        weights = edge_input(g, call.edge_weight, who, "edge_weight (the sparse adjacency's values)", vector=True)
        g, norm, weights = self._graph(g, weights, x.dtype, call)
        bases = linear(x, self.bases_lin.weight)                           # [N, B * C/H]
        weightings = linear(x, self.comb_lin.weight, self.comb_lin.bias)   # [N, H * B * A]
        aggregated = torch.stack(self._aggregate_all(g, bases, norm, weights, call.form), dim=1)
        heads, width = self.num_heads, self.out_channels // self.num_heads
        out = torch.matmul(weightings.view(-1, heads, self.num_bases * len(self.aggregators)),
                           aggregated.view(-1, len(self.aggregators) * self.num_bases, width))
        out = out.reshape(-1, self.out_channels)
        return out + self.bias if self.bias is not None else out

    def _graph(self, g: Graph, weights: Tensor | None, dtype: torch.dtype, call: Any
               ) -> tuple[Graph, Tensor | None, Tensor | None]:
        """``(graph, symnorm weights, weights of the other aggregators)``: the graph with its
        self-loops (``add_self_loops``), the normalization when ``"symnorm"`` is asked for, and the
        adjacency's values for the others (None: unweighted), cached with ``cached``."""
        cache = self._cache_adj_t if call.form == "sparse_tensor" else self._kept
        source = call.adjacency if call.form == "torch_sparse" else weights
        key = (g, source, call.form, dtype, self.add_self_loops, ",".join(self.aggregators))
        found = cache.get(key) if self.cached else None
        if found is not None:
            return found
        norm = None
        if "symnorm" in self.aggregators:
            looped, norm = gcn_norm(g, weights, dtype, call.form, add_self_loops=self.add_self_loops)
        if weights is not None and "symnorm" in self.aggregators and len(self.aggregators) > 1:
            weights = None   # (PyG sets the values to one for the other aggregators)
        elif weights is not None and self.add_self_loops:
            parts = with_self_loops(g)
            weights = parts.edge_values(weights, loop_weights(parts, weights, call.form))
        if self.add_self_loops:
            g = with_self_loops(g).graph
        result = (g, norm, weights)
        if self.cached:
            cache.put(key, (g, None if norm is None else norm.detach(), None if weights is None else weights.detach()))
        return result

    def _aggregate_all(self, g: Graph, h: Tensor, norm: Tensor | None, weights: Tensor | None,
                       form: str) -> list[Tensor]:
        """One ``[N, B * C/H]`` aggregation of the bases per aggregator, in the given order."""
        outs = []
        for name in self.aggregators:
            if name == "symnorm":
                outs.append(ops.gspmm(g, "u_mul_e", "sum", u=h, e=norm))
            elif name in ("var", "std"):
                mean = _reduce(g, h, weights, "mean")
                var = _reduce(g, h * h, weights, "mean") - mean * mean
                if name == "std":
                    # PyG's two guards against sqrt(0): per edge list, and per sparse adjacency
                    var = var.relu() + 1e-5 if form in ("sparse_tensor", "torch_sparse") else var.clamp(min=1e-5)
                    var = var.sqrt()
                outs.append(var)
            else:
                outs.append(_reduce(g, h, weights, name))
        return outs

    def message(self, x_j: Tensor) -> Tensor:
        return x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, aggregators={self.aggregators})"


def _reduce(g: Graph, h: Tensor, weights: Tensor | None, reduce: str) -> Tensor:
    """``reduce`` over each node's in-edges of the source rows, each weighted by its edge's value
    where there are values (PyG's sparse-dense product with that reduce); 0 without in-edges."""
    if weights is None:
        return ops.gspmm(g, "copy_u", reduce, u=h)
    return ops.gspmm(g, "u_mul_e", reduce, u=h, e=weights.view(-1, 1))
