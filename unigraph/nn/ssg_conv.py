"""SSGConv: the simple spectral graph convolution of Zhu and Koniusz."""
from __future__ import annotations

from typing import Any

from torch import Tensor

from unigraph.graph import Graph
from unigraph.nn.input_cache import refuse_cache_value
from unigraph.nn.layer_inputs import propagate_nodes
from unigraph.nn.sg_conv import GCNFilterThenLinear


class SSGConv(GCNFilterThenLinear):
    r"""The simple spectral graph convolution from the `"Simple Spectral Graph Convolution"
    <https://openreview.net/forum?id=CYO5T-YjWZV>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \left( \alpha \mathbf{X} + \frac{1 - \alpha}{K} \sum_{k=1}^K
        {\left(\mathbf{\hat{D}}^{-1/2} \mathbf{\hat{A}} \mathbf{\hat{D}}^{-1/2} \right)}^k
        \mathbf{X} \right) \mathbf{\Theta} + \mathbf{b},

    with :math:`\mathbf{\hat{A}} = \mathbf{A} + \mathbf{I}` and :math:`\hat{D}_{ii} = \sum_{j}
    \hat{A}_{ji}` (PyG's ``gcn_norm``: :func:`unigraph.nn.gcn_conv.gcn_norm`). Each hop is one g-SpMM.

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each output sample.
        alpha (float): teleport probability :math:`\alpha \in [0, 1]`.
        K (int, optional): number of hops :math:`K`. (default: ``1``)
        cached (bool, optional): keep the filtered features of the last call and return them
            (detached, as PyG does) while the same graph, unchanged features and edge weights come
            back with the same ``K`` and ``alpha``; any other call computes them again
            (:class:`~unigraph.nn.input_cache.InputCache`). PyG's ``_cached_h`` reads them; set it to
            ``None`` to drop them. (default: ``False``)
        add_self_loops (bool, optional): add self-loops before normalizing. (default: ``True``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, ``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (any of its adjacency forms) or ``(g, x)``; node
          features :math:`(*, |\mathcal{V}|, F_{in})`, edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(*, |\mathcal{V}|, F_{out})`
    """

    def __init__(self, in_channels: int, out_channels: int, alpha: float, K: int = 1, cached: bool = False,
                 add_self_loops: bool = True, bias: bool = True, **kwargs: Any):
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
            raise ValueError(f"SSGConv alpha must be a number, got {alpha!r}")
        self.alpha = alpha
        super().__init__(in_channels, out_channels, K, cached, add_self_loops, bias, min_hops=1, **kwargs)

    @property
    def _cached_h(self) -> Tensor | None:
        """PyG's name: the cached filtered features, or None."""
        return self._kept.value

    @_cached_h.setter
    def _cached_h(self, value: None) -> None:
        refuse_cache_value("SSGConv", "_cached_h", value)
        self._kept.clear()

    def _settings(self) -> tuple:
        return (self.K, self.alpha, self.add_self_loops)

    def _filtered(self, g: Graph, weights: Tensor, x: Tensor) -> Tensor:
        h = x * self.alpha
        for _ in range(self.K):
            x = propagate_nodes(self, g, x, edge_weight=weights)
            h = h + (1 - self.alpha) / self.K * x
        return h

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, K={self.K}, alpha={self.alpha})"
