"""SSGConv: the simple spectral graph convolution of Zhu and Koniusz."""
from __future__ import annotations

from typing import Any

from torch import Tensor

from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_positive
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.input_cache import InputCache, refuse_cache_value
from unigraph.nn.layer_inputs import check_hops, propagate_nodes, size_lazy, square_call, weight_source
from unigraph.nn.gcn_conv import gcn_norm


class SSGConv(MessagePassing):
    r"""The simple spectral graph convolution from the `"Simple Spectral Graph Convolution"
    <https://openreview.net/forum?id=CYO5T-YjWZV>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \left( \alpha \mathbf{X} + \frac{1 - \alpha}{K} \sum_{k=1}^K
        {\left(\mathbf{\hat{D}}^{-1/2} \mathbf{\hat{A}} \mathbf{\hat{D}}^{-1/2} \right)}^k
        \mathbf{X} \right) \mathbf{\Theta} + \mathbf{b},

    with :math:`\mathbf{\hat{A}} = \mathbf{A} + \mathbf{I}` and :math:`\hat{D}_{ii} = \sum_{j}
    \hat{A}_{ji}` (PyG's ``gcn_norm``: :func:`unigraph.nn.sg_conv.gcn_norm`). Each hop is one g-SpMM.

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each output sample.
        alpha (float): teleport probability :math:`\alpha \in [0, 1]`.
        K (int, optional): number of hops :math:`K`. (default: ``1``)
        cached (bool, optional): keep the filtered features of the last call and return them
            (detached, as PyG does) while the same graph, unchanged features and edge weights come
            back with the same ``K`` and ``alpha``; any other call computes them again
            (:class:`~unigraph.nn.sg_conv.InputCache`). PyG's ``_cached_h`` reads them; set it to
            ``None`` to drop them. (default: ``False``)
        add_self_loops (bool, optional): add self-loops before normalizing. (default: ``True``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, ``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (any of its adjacency forms) or ``(g, x)``; node
          features :math:`(*, |\mathcal{V}|, F_{in})`, edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(*, |\mathcal{V}|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, alpha: float, K: int = 1, cached: bool = False,
                 add_self_loops: bool = True, bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        self.in_channels = in_channels if in_channels == LAZY else check_positive(in_channels, "in_channels", "SSGConv")
        self.out_channels = check_positive(out_channels, "out_channels", "SSGConv")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
            raise ValueError(f"SSGConv alpha must be a number, got {alpha!r}")
        self.alpha, self.K = alpha, check_hops(K, "SSGConv", minimum=1)
        self.cached, self.add_self_loops = cached, add_self_loops
        self._widths, self._lazy = (in_channels, in_channels), in_channels == LAZY
        self._kept = InputCache()
        self.lin = make_linear(in_channels, out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()
        self._kept.clear()

    @property
    def _cached_h(self) -> Tensor | None:
        """PyG's name: the cached filtered features, or None."""
        return self._kept.value

    @_cached_h.setter
    def _cached_h(self, value: None) -> None:
        refuse_cache_value("SSGConv", "_cached_h", value)
        self._kept.clear()

    def forward(self, x: Tensor | Any, edge_index: Any, edge_weight: Tensor | None = None) -> Tensor:
        call = square_call(self, x, edge_index, edge_weight)
        size_lazy(self, call.x, (self.lin,))
        key = (call.graph, call.x, weight_source(call), self.K, self.alpha, self.add_self_loops)
        h = self._kept.get(key) if self.cached else None
        if h is None:
            h = self._filtered(call)
            if self.cached:
                self._kept.put(key, h.detach())
        return self.lin(h)

    def _filtered(self, call) -> Tensor:
        g, weights = gcn_norm(call.graph, call.edge_weight, call.x.dtype, call.form,
                              add_self_loops=self.add_self_loops)
        x = call.x
        h = x * self.alpha
        for _ in range(self.K):
            x = propagate_nodes(self, g, x, edge_weight=weights)
            h = h + (1 - self.alpha) / self.K * x
        return h

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, K={self.K}, alpha={self.alpha})"
