"""SplineConv: the continuous B-spline kernel convolution of SplineCNN, in plain torch.

PyG computes the B-spline basis and the weighting with compiled kernels (``pyg_lib.ops``, formerly
``torch_spline_conv``). Here both are tensor expressions, so autograd derives every gradient,
the pseudo-coordinates' included, and they run wherever torch runs:

* :func:`spline_basis`: for each edge the ``(degree + 1) ** D`` kernel weights that touch its
  pseudo-coordinates and their tensor-product B-spline values.
* :func:`spline_weighting`: each edge's source row through those weights, one
  ``torch.nn.functional.embedding_bag`` call (a weighted sum of weight rows per edge).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter
from torch.nn.parameter import UninitializedParameter

from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import channels_pair, check_positive
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.layer_inputs import (
    aggr_name, edge_feature_inputs, pseudo_coordinates, root_and_bias, size_linear, sized_widths, uniform_)
from unigraph.nn.projection import dense

DEGREES = (1, 2, 3)


class SplineConv(MessagePassing):
    r"""The spline-based convolution from `"SplineCNN: Fast Geometric Deep Learning with
    Continuous B-Spline Kernels" <https://arxiv.org/abs/1711.08920>`_:

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{\Theta}_r \mathbf{x}_i + \bigoplus_{j \in \mathcal{N}(i)}
        \mathbf{x}_j \cdot h_{\mathbf{\Theta}}(\mathbf{e}_{j,i}) + \mathbf{b},
        \qquad h_{\mathbf{\Theta}}(\mathbf{e}) = \sum_{\mathbf{p} \in \mathcal{P}(\mathbf{e})}
        \prod_{d=1}^{D} N_{p_d}(e_d) \, \mathbf{\Theta}_{\mathbf{p}}

    with :math:`\bigoplus` the mean by default, :math:`\mathbf{\Theta}_{\mathbf{p}}` one
    :math:`F_{in} \times F_{out}` weight per knot of a ``kernel_size[0] x ... x kernel_size[D-1]``
    grid, and :math:`N_{p_d}` the uniform B-spline basis of ``degree`` 1 (linear), 2 or 3 along
    dimension :math:`d`. Pseudo-coordinate :math:`e_d` is scaled to the grid
    (:math:`v = e_d \cdot (k_d - \mathrm{degree})` for an open spline, :math:`e_d \cdot k_d` for a
    closed one, whose last knot wraps around to the first); the ``degree + 1`` knots from
    :math:`\lfloor v \rfloor` on carry non-zero basis values, so each edge touches
    :math:`(\mathrm{degree} + 1)^D` of the :math:`\prod_d k_d` weights.

    .. note::
        The pseudo-coordinates must lie in :math:`[0, 1]` (as in PyG). Outside it the knots
        wrap around the grid (Python's ``%``) instead of reading out of bounds.

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes;
            ``-1`` infers it on the first call.
        out_channels (int): size of each output sample.
        dim (int): pseudo-coordinate dimensionality :math:`D`.
        kernel_size (int or [int]): knots per dimension (one for all, or one per dimension:
            a shorter list repeats its last entry, as PyG's ``repeat``).
        is_open_spline (bool or [bool], optional): open (``True``) or closed B-spline basis, per
            dimension as ``kernel_size``. (default: ``True``)
        degree (int, optional): B-spline degree, 1, 2 or 3. (default: ``1``)
        aggr (str, optional): ``"mean"``, ``"add"``, ``"max"``, ... or an aggregation module, as
            PyG's. (default: ``"mean"``)
        root_weight (bool, optional): add :math:`\mathbf{\Theta}_r \mathbf{x}_i`. (default: ``True``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``, ...).

    Shapes:
        - **input:** ``(g, x, edge_attr)`` or PyG's ``(x, edge_index, edge_attr)`` with ``size``
          (:mod:`unigraph.call_forms`; a ``SparseTensor``'s values, or a torch sparse adjacency's
          ``[E, D]`` values, are the pseudo-coordinates), node features
          :math:`(|\mathcal{V}|, F_{in})` or a pair :math:`((|\mathcal{V}_s|, F_{s}),
          (|\mathcal{V}_t|, F_{t}))` (``x_t`` may be ``None``: no root term), pseudo-coordinates
          :math:`(|\mathcal{E}|, D)` in :math:`[0, 1]`
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, dim: int, kernel_size: Any,
                 is_open_spline: Any = True, degree: int = 1, aggr: Any = "mean", root_weight: bool = True,
                 bias: bool = True, **kwargs: Any):
        super().__init__(aggr=aggr, **kwargs)
        who = type(self).__name__
        self._aggr_name = aggr_name(aggr, self.aggr)
        self.in_channels = in_channels
        self._widths = channels_pair(in_channels, who, lazy=True)
        self._lazy = LAZY in self._widths
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.dim = check_positive(dim, "dim", who)
        if isinstance(degree, bool) or degree not in DEGREES:
            raise ValueError(f"{who} degree must be 1, 2 or 3 (linear, quadratic or cubic B-splines), got {degree!r}")
        self.degree = degree
        self.root_weight = bool(root_weight)
        sizes = _per_dimension(kernel_size, dim, "kernel_size", who)
        opens = _per_dimension(is_open_spline, dim, "is_open_spline", who)
        if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in sizes):
            raise ValueError(f"{who} kernel_size must be positive ints, got {kernel_size!r}")
        if any(bool(o) and k < degree for k, o in zip(sizes, opens)):
            raise ValueError(f"{who}: an open B-spline of degree {degree} needs kernel_size >= {degree}, "
                             f"got {kernel_size!r}")
        self.register_buffer("kernel_size", torch.tensor(sizes, dtype=torch.long))
        self.register_buffer("is_open_spline", torch.tensor([bool(o) for o in opens], dtype=torch.uint8))
        self.K = 1
        for k in sizes:
            self.K *= k
        if self._widths[0] == LAZY:
            self.weight = UninitializedParameter()
        else:
            self.weight = Parameter(torch.empty(self.K, self._widths[0], out_channels))
        self.lin = make_linear(self._widths[1], out_channels, bias=False) if root_weight else None
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if not isinstance(self.weight, UninitializedParameter):
            uniform_(self.weight, self.weight.shape[0] * self.weight.shape[1])
        if self.lin is not None:
            uniform_(self.lin.weight, self._widths[1])
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Any, edge_index: Any, edge_attr: Tensor | None = None, size: Any = None) -> Tensor:
        g, x_src, x_dst, edge_attr = edge_feature_inputs(self, x, edge_index, edge_attr, size)
        edge_attr = pseudo_coordinates(edge_attr, self.dim, type(self).__name__, " in [0, 1]")
        basis, weight_index = spline_basis(edge_attr, self.kernel_size, self.is_open_spline, self.degree)
        out = self.propagate(g, x=dense(x_src), basis=basis, weight_index=weight_index)
        return root_and_bias(out, x_dst, self.lin, self.bias)

    def message(self, x_j: Tensor, basis: Tensor, weight_index: Tensor) -> Tensor:
        return spline_weighting(x_j, self.weight, basis, weight_index)

    def _materialize(self, x_src: Tensor, x_dst: Tensor | None) -> None:
        self._widths = sized_widths(self._widths, x_src, x_dst)
        if isinstance(self.weight, UninitializedParameter):
            with torch.no_grad():
                self.weight.materialize((self.K, self._widths[0], self.out_channels))
            uniform_(self.weight, self.K * self._widths[0])
        size_linear(self.lin, self._widths[1], lambda w: uniform_(w, w.shape[1]))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, dim={self.dim})"


def spline_basis(pseudo: Tensor, kernel_size: Tensor, is_open_spline: Tensor, degree: int) -> tuple[Tensor, Tensor]:
    """``(basis, weight_index)``, both ``[E, S]`` with ``S = (degree + 1) ** D``: for each edge and
    each combination ``s`` of knot offsets (digit ``d`` of ``s`` in base ``degree + 1`` is the
    offset along dimension ``d``) the knot's index into the flattened grid (dimension 0 varies
    fastest) and the product of the 1-D basis values. ``kernel_size``: ``[D]`` knots per
    dimension; ``is_open_spline``: ``[D]``, non-zero for an open basis."""
    if degree not in DEGREES:
        raise ValueError(f"spline_basis: degree must be 1, 2 or 3, got {degree!r}")
    num_dims = pseudo.shape[1]
    device = pseudo.device
    offsets = _knot_offsets(num_dims, degree, device)                       # [S, D]
    # the position on the knot grid; floor() has no gradient, so d(frac)/d(pseudo) = scale
    scaled = pseudo * (kernel_size - degree * is_open_spline.long()).to(pseudo.dtype)
    frac = scaled - scaled.detach().floor()
    # the first knot: C's truncating cast, as PyG's kernel (the same as floor() in [0, 1])
    first = scaled.detach().trunc().long()
    knot = torch.remainder(first.unsqueeze(1) + offsets, kernel_size)        # [E, S, D]
    stride = torch.cumprod(torch.cat([kernel_size.new_ones(1), kernel_size[:-1]]), 0)
    weight_index = (knot * stride).sum(dim=-1)
    values = _basis_1d(frac, degree)                                          # [E, D, degree + 1]
    basis = None
    for d in range(num_dims):   # (D, the pseudo-coordinates' dimensionality: a product of D factors)
        factor = values[:, d, :].index_select(1, offsets[:, d])
        basis = factor if basis is None else basis * factor
    return basis, weight_index


def _knot_offsets(num_dims: int, degree: int, device: torch.device) -> Tensor:
    """``[S, D]``: the digits of ``s = 0 .. (degree + 1) ** D - 1`` in base ``degree + 1``, least
    significant first (one knot offset per dimension)."""
    base = degree + 1
    s = torch.arange(base ** num_dims, device=device)
    powers = base ** torch.arange(num_dims, device=device)
    return torch.div(s.unsqueeze(1), powers, rounding_mode="floor") % base


def _basis_1d(t: Tensor, degree: int) -> Tensor:
    """``[..., degree + 1]``: the uniform B-spline pieces at ``t`` in ``[0, 1)``, the weight of knot
    ``first + k`` for ``k = 0 .. degree`` (they sum to 1)."""
    if degree == 1:
        pieces = [1 - t, t]
    elif degree == 2:
        pieces = [0.5 * (1 - t).pow(2), -t * t + t + 0.5, 0.5 * t * t]
    else:
        t2, t3 = t * t, t * t * t
        pieces = [(1 - t).pow(3) / 6, (3 * t3 - 6 * t2 + 4) / 6, (-3 * t3 + 3 * t2 + 3 * t + 1) / 6, t3 / 6]
    return torch.stack(pieces, dim=-1)


def spline_weighting(x: Tensor, weight: Tensor, basis: Tensor, weight_index: Tensor) -> Tensor:
    """``[E, F_out]``: ``sum_s basis[e, s] * x[e] @ weight[weight_index[e, s]]`` for rows ``x``
    (``[E, F_in]``) and ``weight`` (``[K, F_in, F_out]``). One ``embedding_bag`` (mode sum): bag
    ``e`` holds row ``weight_index[e, s] * F_in + f`` of the ``[K * F_in, F_out]`` weight with
    sample weight ``basis[e, s] * x[e, f]``, so no ``[E, F_in, F_out]`` filter is built."""
    num_edges, width = x.shape
    bag = basis.shape[1] * width
    rows = (weight_index.unsqueeze(-1) * width + torch.arange(width, device=x.device)).reshape(num_edges, bag)
    scales = (basis.unsqueeze(-1) * x.unsqueeze(1)).reshape(num_edges, bag)
    return F.embedding_bag(rows, weight.reshape(-1, weight.shape[-1]), per_sample_weights=scales, mode="sum")


def _per_dimension(value: Any, dim: int, name: str, who: str) -> list:
    """One entry per dimension, as PyG's ``repeat``: a scalar for all, a shorter sequence padded
    with its last entry, a longer one cut."""
    if isinstance(value, Tensor):
        value = value.tolist() if value.dim() else value.item()
    if isinstance(value, (bool, int, float)):
        return [value] * dim
    value = list(value)
    if not value:
        raise ValueError(f"{who} {name} must be a value or a non-empty sequence of them, got {value!r}")
    return (value + [value[-1]] * dim)[:dim]
