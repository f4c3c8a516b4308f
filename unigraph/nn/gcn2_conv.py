"""GCN2Conv: GCNII's graph convolution with initial residual and identity mapping (Chen et al.)."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from torch.nn import Parameter

from unigraph.call_forms import is_graph_object
from unigraph.message_passing import MessagePassing
from unigraph.nn.appnp import CachedNormalization, NormCache
from unigraph.nn.checks import check_positive, glorot_
from unigraph.nn.layer_inputs import square_call


class GCN2Conv(CachedNormalization, MessagePassing):
    r"""The graph convolution with initial residual connections and identity mapping (GCNII) from
    the `"Simple and Deep Graph Convolutional Networks" <https://arxiv.org/abs/2007.02133>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \left( (1 - \alpha) \mathbf{\hat{P}}\mathbf{X} +
        \alpha \mathbf{X^{(0)}}\right) \left( (1 - \beta) \mathbf{I} + \beta
        \mathbf{\Theta} \right)

    with :math:`\mathbf{\hat{P}} = \mathbf{\hat{D}}^{-1/2} \mathbf{\hat{A}} \mathbf{\hat{D}}^{-1/2}`,
    :math:`\mathbf{\hat{A}} = \mathbf{A} + \mathbf{I}` (PyG's ``gcn_norm``:
    :func:`unigraph.nn.gcn_conv.gcn_norm`; :math:`\mathbf{A}` as it is without ``normalize``),
    :math:`\mathbf{X}^{(0)}` the initial features and :math:`\beta = \log(\theta / \ell + 1)`
    (1 without ``theta``). Without ``shared_weights`` the two terms get their own weights:

    .. math::
        \mathbf{X}^{\prime} = (1 - \alpha) \mathbf{\hat{P}}\mathbf{X} \left( (1 - \beta) \mathbf{I} + \beta
        \mathbf{\Theta}_1 \right) + \alpha \mathbf{X^{(0)}} \left( (1 - \beta) \mathbf{I} + \beta
        \mathbf{\Theta}_2 \right)

    Args:
        channels (int): size of each input and output sample.
        alpha (float): the weight :math:`\alpha` of the initial residual.
        theta (float, optional): :math:`\theta`, for :math:`\beta` (with ``layer``). (default: ``None``)
        layer (int, optional): the layer's depth :math:`\ell`, for :math:`\beta` (with ``theta``).
            (default: ``None``)
        shared_weights (bool, optional): one weight :math:`\mathbf{\Theta}` for both terms.
            (default: ``True``)
        cached (bool, optional): cache the normalized graph per call form (PyG's
            ``_cached_edge_index`` and ``_cached_adj_t``), reused while the same graph and edge
            weights come back (:class:`~unigraph.nn.appnp.NormCache`). (default: ``False``)
        add_self_loops (bool, optional): add self-loops in the normalization (only with
            ``normalize``, as in PyG). (default: ``True``)
        normalize (bool, optional): normalize symmetrically. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, ``flow``, ...).

    Shapes:
        - **input:** ``(x, x_0, edge_index)`` with any of PyG's adjacency forms, or ``(g, x, x_0)``;
          node features :math:`(|\mathcal{V}|, F)`, initial features :math:`(|\mathcal{V}|, F)`
          (more rows are cut to :math:`|\mathcal{V}|`, as in PyG), edge weights
          :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, F)`
    """

    resolves_flow = True

    def __init__(self, channels: int, alpha: float, theta: float | None = None, layer: int | None = None,
                 shared_weights: bool = True, cached: bool = False, add_self_loops: bool = True,
                 normalize: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        self.channels = check_positive(channels, "channels", "GCN2Conv")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
            raise ValueError(f"GCN2Conv alpha must be a number, got {alpha!r}")
        self.alpha = alpha
        self.beta = 1.
        if theta is not None or layer is not None:
            if theta is None or layer is None:
                raise ValueError(f"GCN2Conv needs theta and layer together (beta = log(theta / layer + 1)), got "
                                 f"theta={theta!r}, layer={layer!r}")
            self.beta = math.log(theta / layer + 1)
        self.cached, self.add_self_loops, self.normalize = cached, add_self_loops, normalize
        self._norm_cache = NormCache()
        self.weight1 = Parameter(torch.empty(channels, channels))
        self.weight2 = None if shared_weights else Parameter(torch.empty(channels, channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        glorot_(self.weight1)
        if self.weight2 is not None:
            glorot_(self.weight2)
        self._norm_cache.clear()

    def forward(self, x: Tensor | Any, x_0: Tensor, edge_index: Any, edge_weight: Tensor | None = None) -> Tensor:
        if is_graph_object(x):   # unigraph's graph form conv(g, x, x_0): the same arguments, the graph first
            call = square_call(self, x, x_0, edge_weight, static=False)
            x_0 = edge_index
        else:
            call = square_call(self, x, edge_index, edge_weight, static=False)
        x = call.x
        if x.shape[1] != self.channels:
            raise ValueError(f"GCN2Conv expects x with {self.channels} features (its channels), got {x.shape[1]}")
        x_0 = self._initial(x_0, x)
        if self.normalize:
            g, weights = self._norm_cache.normalized(call, x.dtype, self.add_self_loops, self.cached)
        else:
            g, weights = call.graph, call.edge_weight
        h = self.propagate(g, x=x, edge_weight=weights) * (1 - self.alpha)
        x_0 = self.alpha * x_0
        if self.weight2 is None:
            out = h + x_0
            return torch.addmm(out, out, self.weight1, beta=1. - self.beta, alpha=self.beta)
        out = torch.addmm(h, h, self.weight1, beta=1. - self.beta, alpha=self.beta)
        return out + torch.addmm(x_0, x_0, self.weight2, beta=1. - self.beta, alpha=self.beta)

    def _initial(self, x_0: Any, x: Tensor) -> Tensor:
        """``x_0``'s first ``N`` rows, checked (PyG cuts a longer ``x_0`` the same way)."""
        if not isinstance(x_0, Tensor) or x_0.layout != torch.strided:
            raise TypeError(f"GCN2Conv expects the initial features x_0 as a dense tensor, got {type(x_0).__name__}")
        if x_0.dim() != 2 or x_0.shape[1] != self.channels or x_0.shape[0] < x.shape[0]:
            raise ValueError(f"GCN2Conv expects x_0 of shape [num_nodes (at least {x.shape[0]}), {self.channels}], "
                             f"got {list(x_0.shape)}")
        return x_0[:x.shape[0]]

    def message(self, x_j: Tensor, edge_weight: Tensor | None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.channels}, alpha={self.alpha}, beta={self.beta})"
