r"""DGL's ``SGConv``: simplified graph convolution (https://arxiv.org/abs/1902.07153).

.. math::
    H = \operatorname{norm}\Big(\big(\hat D^{-1/2} A \hat D^{-1/2}\big)^{K} X\Big)\,\Theta + b,
    \qquad \hat D = \operatorname{diag}(\max(d^{in}, 1))

As in DGL, both sides are scaled by the *in*-degree (add self-loops first: ``dgl.add_self_loop``).
With ``edge_weight`` the hop is :math:`\tilde A X` with :math:`\tilde A` the weights normalised by
``EdgeWeightNorm('both')``. ``norm`` (a callable, e.g. ``nn.LayerNorm``) is applied once after the
``K`` hops, before ``fc``. Parameters as DGL's: ``fc`` (``nn.Linear``, Glorot uniform weight,
zero bias).

``cached=True`` (DGL's transductive mode): the first call stores the propagated (and ``norm``-ed)
features and every later call reuses them, whatever features, edge weights or graph it is given,
exactly as DGL does; only ``fc`` is recomputed. Where the stored result cannot belong to the call
(another number of nodes or another feature shape), the call is refused instead of returning it.
Set ``_cached_h = None`` (DGL's attribute) to recompute on the next call.
"""
from __future__ import annotations

from typing import Callable

from torch import Tensor, nn

from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.conv.edgeweightnorm import EdgeWeightNorm
from unigraph.dgl.nn.pytorch.utils import (
    aggregate, check_edge_weight, check_homogeneous, check_zero_in_degree, inv_sqrt_degree)


class SGConv(nn.Module):
    """Args (DGL's): ``in_feats``, ``out_feats``, ``k`` (hops), ``cached`` (see the module
    docstring), ``bias``, ``norm`` (callable or None), ``allow_zero_in_degree``.

    Shapes: ``feat`` ``[N, in_feats]`` -> ``[N, out_feats]``; ``edge_weight`` ``[E]`` (positive).
    A block, a bipartite graph or a ``(src, dst)`` pair is refused (DGL fails on them too).
    """

    def __init__(self, in_feats: int, out_feats: int, k: int = 1, cached: bool = False, bias: bool = True,
                 norm: Callable | None = None, allow_zero_in_degree: bool = False):
        super().__init__()
        if k < 0:
            raise ValueError(f"SGConv: k (the number of hops) must be >= 0, got {k}")
        self.fc = nn.Linear(in_feats, out_feats, bias=bias)
        self._k, self._cached, self.norm = k, cached, norm
        self._allow_zero_in_degree = allow_zero_in_degree
        self._cached_h: Tensor | None = None
        self._cached_for: tuple | None = None   # (number of nodes, feature shape) of the cached call
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.fc.weight)
        if self.fc.bias is not None:
            nn.init.zeros_(self.fc.bias)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        self._allow_zero_in_degree = set_value

    def forward(self, graph, feat: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        graph = check_homogeneous(graph, feat, "SGConv", min_dim=2, max_dim=2)
        check_zero_in_degree(graph, "SGConv", self._allow_zero_in_degree)
        if self._cached_h is not None:
            self._check_cache_fits(graph, feat)
            return self.fc(self._cached_h)
        h = self._propagate(graph, feat, edge_weight)
        if self.norm is not None:
            h = self.norm(h)
        if self._cached:
            self._cached_h, self._cached_for = h, (graph.num_nodes, tuple(feat.shape))
        return self.fc(h)

    def _propagate(self, graph, feat: Tensor, edge_weight: Tensor | None) -> Tensor:
        """:math:`(\\hat D^{-1/2} A \\hat D^{-1/2})^K X`, or :math:`\\tilde A^K X` with edge weights."""
        if edge_weight is not None:
            check_edge_weight(graph, edge_weight, "SGConv")
            weight = EdgeWeightNorm("both")(graph, edge_weight)
            for _ in range(self._k):
                feat = aggregate(graph, feat, weight)
            return feat
        scale = inv_sqrt_degree(graph.in_degrees(), feat)
        for _ in range(self._k):
            feat = aggregate(graph, feat * scale, None) * scale
        return feat

    def _check_cache_fits(self, graph, feat: Tensor) -> None:
        if self._cached_for is not None and self._cached_for != (graph.num_nodes, tuple(feat.shape)):
            nodes, shape = self._cached_for
            raise DGLError(f"SGConv(cached=True) holds the propagated features of a graph of {nodes} nodes with "
                           f"features {shape}; this call has {graph.num_nodes} nodes and features "
                           f"{tuple(feat.shape)}. Set _cached_h = None to recompute (the cache is for one fixed "
                           "graph and feature tensor, transductive use)")

    def extra_repr(self) -> str:
        return f"in={self.fc.in_features}, out={self.fc.out_features}, k={self._k}, cached={self._cached}"
