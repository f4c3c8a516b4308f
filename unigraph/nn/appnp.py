"""APPNP: approximate personalized propagation of neural predictions (Gasteiger et al.), and the
cached normalization it shares with GCN2Conv."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.nn.input_cache import InputCache, refuse_cache_value
from unigraph.nn.layer_inputs import SquareCall, check_hops, propagate_nodes, square_call, weight_source
from unigraph.nn.gcn_conv import gcn_norm


class NormCache:
    """PyG's two caches of a normalized graph (``cached=True`` of APPNP and GCN2Conv): one for
    ``SparseTensor`` calls (``_cached_adj_t``), one for every other form (``_cached_edge_index``),
    each an :class:`~unigraph.nn.input_cache.InputCache` keyed on the graph, the edge weights (their
    source), the dtype and ``add_self_loops``. A call whose inputs differ is normalized again (and
    cached instead): a cache never answers for another graph or other weights. The cached weights
    are detached: edge weights given with ``cached=True`` are constants after the first call."""

    def __init__(self) -> None:
        self.slots = {"sparse_tensor": InputCache(), "other": InputCache()}

    def clear(self) -> None:
        for slot in self.slots.values():
            slot.clear()

    def normalized(self, call: SquareCall, dtype: torch.dtype, add_self_loops: bool,
                   cached: bool) -> tuple[Graph, Tensor]:
        if not cached:
            return gcn_norm(call.graph, call.edge_weight, dtype, call.form, add_self_loops=add_self_loops)
        slot = self.slots["sparse_tensor" if call.form == "sparse_tensor" else "other"]
        key = (call.graph, weight_source(call), dtype, add_self_loops)
        result = slot.get(key)
        if result is None:
            result = gcn_norm(call.graph, call.edge_weight, dtype, call.form, add_self_loops=add_self_loops)
            slot.put(key, (result[0], result[1].detach()))
        return result

    def edge_index(self) -> tuple[Tensor, Tensor] | None:
        """PyG's ``_cached_edge_index``: ``(edge_index, edge_weight)`` of the cached graph, or None."""
        value = self.slots["other"].value
        return None if value is None else (value[0].edge_index, value[1])

    def adj_t(self) -> Any:
        """PyG's ``_cached_adj_t``: the cached normalized ``SparseTensor``, or None."""
        value = self.slots["sparse_tensor"].value
        if value is None:
            return None
        from torch_sparse import SparseTensor   # (present: a SparseTensor call filled it)
        g, weights = value
        return SparseTensor(row=g.dst, col=g.src, value=weights, sparse_sizes=(g.num_dst_nodes, g.num_src_nodes))


class CachedNormalization:
    """PyG's cache attribute names on a layer holding a :class:`NormCache` as ``_norm_cache``."""

    @property
    def _cached_edge_index(self) -> tuple[Tensor, Tensor] | None:
        return self._norm_cache.edge_index()

    @_cached_edge_index.setter
    def _cached_edge_index(self, value: None) -> None:
        refuse_cache_value(type(self).__name__, "_cached_edge_index", value)
        self._norm_cache.slots["other"].clear()

    @property
    def _cached_adj_t(self) -> Any:
        return self._norm_cache.adj_t()

    @_cached_adj_t.setter
    def _cached_adj_t(self, value: None) -> None:
        refuse_cache_value(type(self).__name__, "_cached_adj_t", value)
        self._norm_cache.slots["sparse_tensor"].clear()


class APPNP(CachedNormalization, MessagePassing):
    r"""The approximate personalized propagation from the `"Predict then Propagate: Graph Neural
    Networks meet Personalized PageRank" <https://arxiv.org/abs/1810.05997>`_ paper.

    .. math::
        \mathbf{X}^{(0)} &= \mathbf{X}

        \mathbf{X}^{(k)} &= (1 - \alpha) \mathbf{\hat{D}}^{-1/2}
        \mathbf{\hat{A}} \mathbf{\hat{D}}^{-1/2} \mathbf{X}^{(k-1)} + \alpha
        \mathbf{X}^{(0)}

        \mathbf{X}^{\prime} &= \mathbf{X}^{(K)},

    with :math:`\mathbf{\hat{A}} = \mathbf{A} + \mathbf{I}` and :math:`\hat{D}_{ii} = \sum_{j}
    \hat{A}_{ji}` (PyG's ``gcn_norm``: :func:`unigraph.nn.gcn_conv.gcn_norm`); without ``normalize``
    :math:`\mathbf{A}` (the edge weights, or ones) as it is. Each step is one g-SpMM.

    Args:
        K (int): number of iterations :math:`K`.
        alpha (float): teleport probability :math:`\alpha`.
        dropout (float, optional): while training, drop each edge weight with this probability
            before each step, as PyG 2.8 does: the drop of step :math:`k` applies to the weights
            already dropped in the steps before it. Without ``normalize`` or edge weights, the
            weights dropped are ones (PyG asserts weights there). (default: ``0``)
        cached (bool, optional): cache the normalized graph per call form (PyG's
            ``_cached_edge_index`` and ``_cached_adj_t``), reused while the same graph and edge
            weights come back (:class:`NormCache`). (default: ``False``)
        add_self_loops (bool, optional): add self-loops in the normalization (only with
            ``normalize``, as in PyG). (default: ``True``)
        normalize (bool, optional): normalize symmetrically. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, ``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (any of its adjacency forms) or ``(g, x)``; node
          features :math:`(*, |\mathcal{V}|, F)`, edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(*, |\mathcal{V}|, F)`
    """

    resolves_flow = True

    def __init__(self, K: int, alpha: float, dropout: float = 0., cached: bool = False, add_self_loops: bool = True,
                 normalize: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
            raise ValueError(f"APPNP alpha must be a number, got {alpha!r}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout <= 1.0:
            raise ValueError(f"APPNP dropout must be in [0, 1], got {dropout!r}")
        self.K, self.alpha, self.dropout = check_hops(K, "APPNP"), alpha, dropout
        self.cached, self.add_self_loops, self.normalize = cached, add_self_loops, normalize
        self._norm_cache = NormCache()

    def reset_parameters(self) -> None:
        self._norm_cache.clear()

    def forward(self, x: Tensor | Any, edge_index: Any, edge_weight: Tensor | None = None) -> Tensor:
        call = square_call(self, x, edge_index, edge_weight)
        if self.normalize:
            g, weights = self._norm_cache.normalized(call, call.x.dtype, self.add_self_loops, self.cached)
        else:
            g, weights = call.graph, call.edge_weight
        h = x = call.x
        for _ in range(self.K):
            if self.dropout > 0 and self.training:
                if weights is None:
                    weights = torch.ones(g.num_edges, dtype=x.dtype, device=x.device)
                weights = F.dropout(weights, p=self.dropout)
            x = propagate_nodes(self, g, x, edge_weight=weights)
            x = x * (1 - self.alpha)
            x = x + self.alpha * h
        return x

    def message(self, x_j: Tensor, edge_weight: Tensor | None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}(K={self.K}, alpha={self.alpha})"
