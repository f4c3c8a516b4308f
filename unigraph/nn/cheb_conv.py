"""ChebConv: the Chebyshev spectral graph convolution of Defferrard et al."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import Parameter

from unigraph.graph import Graph
from unigraph.group_reduce import widened
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_positive, glorot_
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.layer_inputs import SquareCall, check_hops, propagate_nodes, size_lazy, square_call
from unigraph.self_loops import with_self_loops

NORMALIZATIONS = (None, "sym", "rw")


class ChebConv(MessagePassing):
    r"""The Chebyshev spectral graph convolution from the `"Convolutional Neural Networks on
    Graphs with Fast Localized Spectral Filtering" <https://arxiv.org/abs/1606.09375>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \sum_{k=1}^{K} \mathbf{Z}^{(k)} \cdot \mathbf{\Theta}^{(k)} + \mathbf{b},
        \qquad \mathbf{Z}^{(1)} = \mathbf{X}, \quad \mathbf{Z}^{(2)} = \mathbf{\hat{L}} \mathbf{X},
        \quad \mathbf{Z}^{(k)} = 2 \mathbf{\hat{L}} \mathbf{Z}^{(k-1)} - \mathbf{Z}^{(k-2)},

    with the scaled Laplacian :math:`\mathbf{\hat{L}} = 2\mathbf{L} / \lambda_{\max} - \mathbf{I}` of
    the graph without its self-loops, as PyG's ``get_laplacian`` builds it: :math:`\mathbf{L} =
    \mathbf{D} - \mathbf{A}` (``normalization=None``), :math:`\mathbf{I} - \mathbf{D}^{-1/2} \mathbf{A}
    \mathbf{D}^{-1/2}` (``"sym"``) or :math:`\mathbf{I} - \mathbf{D}^{-1} \mathbf{A}` (``"rw"``), where
    :math:`D_{ii}` sums the weights of the edges leaving :math:`i` (``edge_index[0]``, PyG's
    choice, whichever ``flow``). :math:`\lambda_{\max}` defaults to twice the largest entry of
    :math:`\mathbf{L}` (differentiable, as PyG's); a given one may hold one value per graph of a
    batch (with ``batch``). Each product with :math:`\mathbf{\hat{L}}` is one g-SpMM.

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each output sample.
        K (int): Chebyshev filter size :math:`K \geq 1`.
        normalization (str, optional): ``None``, ``"sym"`` or ``"rw"`` (above). (default: ``"sym"``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, ``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (any of its adjacency forms; a sparse adjacency's
          values are the edge weights) or ``(g, x)``; node features :math:`(*, |\mathcal{V}|, F_{in})`,
          edge weights :math:`(|\mathcal{E}|)` *(optional)*, batch vector :math:`(|\mathcal{V}|)`
          *(optional)*, maximum eigenvalues :math:`(|\mathcal{G}|)` *(optional)*
        - **output:** node features :math:`(*, |\mathcal{V}|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, K: int, normalization: str | None = "sym",
                 bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"ChebConv normalization must be None, 'sym' or 'rw', got {normalization!r}")
        self.in_channels = in_channels if in_channels == LAZY else check_positive(in_channels, "in_channels",
                                                                                   "ChebConv")
        self.out_channels = check_positive(out_channels, "out_channels", "ChebConv")
        self.normalization = normalization
        self._widths, self._lazy = (in_channels, in_channels), in_channels == LAZY
        self.lins = torch.nn.ModuleList([make_linear(in_channels, out_channels, bias=False)
                                         for _ in range(check_hops(K, "ChebConv", minimum=1))])
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in self.lins:
            glorot_(lin.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Tensor | Any, edge_index: Any, edge_weight: Tensor | None = None,
                batch: Tensor | None = None, lambda_max: Tensor | float | None = None) -> Tensor:
        call = square_call(self, x, edge_index, edge_weight)
        size_lazy(self, call.x, tuple(self.lins))
        g, norm = self._scaled_laplacian(call, batch, lambda_max)
        tx_0 = call.x
        out = self.lins[0](tx_0)
        if len(self.lins) > 1:
            tx_1 = propagate_nodes(self, g, tx_0, norm=norm)
            out = out + self.lins[1](tx_1)
            for lin in self.lins[2:]:
                tx_2 = 2. * propagate_nodes(self, g, tx_1, norm=norm) - tx_0
                out = out + lin(tx_2)
                tx_0, tx_1 = tx_1, tx_2
        return out + self.bias if self.bias is not None else out

    def message(self, x_j: Tensor, norm: Tensor) -> Tensor:
        return norm.view(-1, 1) * x_j

    # ------------------------------------------------------------------ the scaled Laplacian
    def _scaled_laplacian(self, call: SquareCall, batch: Tensor | None,
                          lambda_max: Tensor | float | None) -> tuple[Graph, Tensor]:
        """The graph without its self-loops plus one loop per node (kept edges first, then the loops
        in node order: PyG's ``remove_self_loops`` + ``add_self_loops``) and the entries of
        :math:`\\mathbf{\\hat{L}}` on it."""
        g, dtype = call.graph, call.x.dtype
        looped = with_self_loops(g)
        lg, kept, n = looped.graph, looped.kept.numel(), looped.num_loops
        weights = call.edge_weight if call.edge_weight is not None else \
            torch.ones(g.num_edges, dtype=dtype, device=g.device)
        weights = weights.index_select(0, looped.kept)
        # PyG's edge_index[0]: the source, or on a reversed graph (flow="target_to_source") the destination
        row, col = (lg.src, lg.dst) if self.flow == "source_to_target" else (lg.dst, lg.src)
        laplacian = _laplacian(weights, row[:kept], col[:kept], n, self.normalization)
        scale = _lambda_max(laplacian, lambda_max, batch, row, dtype, n)
        laplacian = (2.0 * laplacian) / scale
        laplacian = laplacian.masked_fill(laplacian == float("inf"), 0)
        return lg, torch.cat([laplacian[:kept], laplacian[kept:] - 1])

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, K={len(self.lins)}, "
                f"normalization={self.normalization})")


def _laplacian(weights: Tensor, row: Tensor, col: Tensor, num_nodes: int, normalization: str | None) -> Tensor:
    """The entries of :math:`\\mathbf{L}` on the edges (negated weights) then the loops, as PyG's
    ``get_laplacian`` orders them; the degrees summed and normalized in float32 at least, rounded
    once (a half-precision sum of a hub's weights stops growing at 256 or 2,048)."""
    given, weights = weights.dtype, widened(weights)
    degree = weights.new_zeros(num_nodes).index_add(0, row, weights)
    if normalization is None:
        return torch.cat([-weights, degree]).to(given)
    if normalization == "sym":
        inv = degree.pow(-0.5)
        inv = inv.masked_fill(inv == float("inf"), 0)
        weights = inv.index_select(0, row) * weights * inv.index_select(0, col)
    else:
        inv = 1.0 / degree
        inv = inv.masked_fill(inv == float("inf"), 0)
        weights = inv.index_select(0, row) * weights
    return torch.cat([-weights, weights.new_ones(num_nodes)]).to(given)


def _lambda_max(laplacian: Tensor, lambda_max: Any, batch: Tensor | None, row: Tensor, dtype: torch.dtype,
                num_nodes: int) -> Tensor:
    """:math:`\\lambda_{\\max}`: a scalar, or one value per entry of :math:`\\mathbf{L}` (its graph's)."""
    if lambda_max is None:
        # PyG's default, differentiable in the weights (an empty graph has no entries: no scale is needed)
        return 2.0 * laplacian.max() if laplacian.numel() else laplacian.new_ones(())
    if not isinstance(lambda_max, Tensor):
        if isinstance(lambda_max, bool) or not isinstance(lambda_max, (int, float)):
            raise TypeError(f"ChebConv lambda_max must be a number or a tensor, got {type(lambda_max).__name__}")
        return torch.tensor(lambda_max, dtype=dtype, device=laplacian.device)
    if not lambda_max.is_floating_point():
        raise TypeError(f"ChebConv lambda_max must be floating point, got {lambda_max.dtype}")
    if lambda_max.numel() == 1:
        return lambda_max.reshape(())
    if lambda_max.dim() != 1 or lambda_max.numel() == 0:
        raise ValueError(f"ChebConv lambda_max must be a number or one value per graph [num_graphs], got shape "
                         f"{list(lambda_max.shape)}")
    if batch is None:
        raise ValueError(f"ChebConv got {lambda_max.numel()} values of lambda_max (one per graph) but no batch vector "
                         "saying which graph each node is in")
    if (not isinstance(batch, Tensor) or batch.dim() != 1 or batch.shape[0] != num_nodes
            or batch.is_floating_point() or batch.dtype == torch.bool):
        raise ValueError(f"ChebConv batch must be an integer tensor [num_nodes={num_nodes}], got "
                         f"{list(batch.shape) if isinstance(batch, Tensor) else type(batch).__name__}")
    if num_nodes and (int(batch.min()) < 0 or int(batch.max()) >= lambda_max.numel()):
        raise ValueError(f"ChebConv batch holds graph ids outside [0, {lambda_max.numel()}) (the values of lambda_max)")
    return lambda_max.index_select(0, batch.index_select(0, row))
