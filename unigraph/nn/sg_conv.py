"""SGConv: the simplified graph convolution of Wu et al. (its helpers, shared with the other layers
that propagate with PyG's ``gcn_norm``, live in :mod:`unigraph.nn.layer_inputs`,
:mod:`unigraph.nn.input_cache` and :func:`unigraph.nn.gcn_conv.gcn_norm`)."""
from __future__ import annotations

from typing import Any

from torch import Tensor

from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_positive
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.gcn_conv import gcn_norm
from unigraph.nn.input_cache import InputCache, refuse_cache_value
from unigraph.nn.layer_inputs import check_hops, propagate_nodes, size_lazy, square_call, weight_source


# ---------------------------------------------------------------------- SGConv
class GCNFilterThenLinear(MessagePassing):
    """What SGConv and SSGConv share: a fixed filter of the graph built from PyG's ``gcn_norm``
    (:meth:`_filtered`, over ``K`` hops), applied to ``x`` and kept with ``cached=True`` while the
    same unchanged inputs and settings (:meth:`_settings`) come back (:class:`InputCache`), then
    one linear layer ``lin``."""

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, K: int, cached: bool, add_self_loops: bool,
                 bias: bool, *, min_hops: int, **kwargs: Any):
        who = type(self).__name__
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        self.in_channels = in_channels if in_channels == LAZY else check_positive(in_channels, "in_channels", who)
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.K = check_hops(K, who, minimum=min_hops)
        self.cached, self.add_self_loops = cached, add_self_loops
        self._widths, self._lazy = (in_channels, in_channels), in_channels == LAZY
        self._kept = InputCache()
        self.lin = make_linear(in_channels, out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()
        self._kept.clear()

    def _settings(self) -> tuple:
        """What the filter depends on besides the inputs (part of the cache key)."""
        return (self.K, self.add_self_loops)

    def _filtered(self, g: Graph, weights: Tensor, x: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(self, x: Tensor | Any, edge_index: Any, edge_weight: Tensor | None = None) -> Tensor:
        call = square_call(self, x, edge_index, edge_weight)
        size_lazy(self, call.x, (self.lin,))
        key = (call.graph, call.x, weight_source(call)) + self._settings()
        h = self._kept.get(key) if self.cached else None
        if h is None:
            g, weights = gcn_norm(call.graph, call.edge_weight, call.x.dtype, call.form,
                                  add_self_loops=self.add_self_loops)
            h = self._filtered(g, weights, call.x)
            if self.cached:
                self._kept.put(key, h.detach())
        return self.lin(h)

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return edge_weight.view(-1, 1) * x_j


class SGConv(GCNFilterThenLinear):
    r"""The simple graph convolution from the `"Simplifying Graph Convolutional Networks"
    <https://arxiv.org/abs/1902.07153>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = {\left(\mathbf{\hat{D}}^{-1/2} \mathbf{\hat{A}}
        \mathbf{\hat{D}}^{-1/2} \right)}^K \mathbf{X} \mathbf{\Theta} + \mathbf{b},

    where :math:`\mathbf{\hat{A}} = \mathbf{A} + \mathbf{I}` (the edge weights, with one self-loop
    per node) and :math:`\hat{D}_{ii} = \sum_{j} \hat{A}_{ji}`: ``K`` hops of PyG's ``gcn_norm``
    (:func:`unigraph.nn.gcn_conv.gcn_norm`, its self-loop weights per call form), each one g-SpMM,
    then one linear layer.

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each output sample.
        K (int, optional): number of hops :math:`K`. (default: ``1``)
        cached (bool, optional): keep :math:`\mathbf{S}^K \mathbf{X}` of the last call and return it
            (detached, as PyG does) while the same graph, the same unchanged features ``x`` and edge
            weights come back with the same ``K`` (transductive learning); any other call computes
            it again and keeps that instead (:class:`InputCache` says what is compared). PyG's
            ``_cached_x`` reads it; set it to ``None`` to drop it. (default: ``False``)
        add_self_loops (bool, optional): add self-loops before normalizing. (default: ``True``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, ``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (an ``edge_index``, ``EdgeIndex``, ``SparseTensor`` or
          torch sparse ``adj_t``, whose values are the edge weights) or ``(g, x)``; node features
          :math:`(|\mathcal{V}|, F_{in})` or :math:`(*, |\mathcal{V}|, F_{in})`, edge weights
          :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(*, |\mathcal{V}|, F_{out})`
    """

    def __init__(self, in_channels: int, out_channels: int, K: int = 1, cached: bool = False,
                 add_self_loops: bool = True, bias: bool = True, **kwargs: Any):
        super().__init__(in_channels, out_channels, K, cached, add_self_loops, bias, min_hops=0, **kwargs)

    @property
    def _cached_x(self) -> Tensor | None:
        """PyG's name: the cached :math:`\\mathbf{S}^K \\mathbf{X}`, or None."""
        return self._kept.value

    @_cached_x.setter
    def _cached_x(self, value: None) -> None:
        refuse_cache_value("SGConv", "_cached_x", value)
        self._kept.clear()

    def _filtered(self, g: Graph, weights: Tensor, x: Tensor) -> Tensor:
        for _ in range(self.K):
            x = propagate_nodes(self, g, x, edge_weight=weights)
        return x

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, K={self.K})"

