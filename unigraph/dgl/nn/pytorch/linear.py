r"""DGL's ``TypedLinear``: a linear map chosen by each row's type, with R-GCN's weight regularizers
(https://arxiv.org/abs/1703.06103).

.. math::
    y_i = x_i W_{t_i}, \qquad
    W_t = \sum_{b=1}^{B} a_{tb} V_b \;(\text{'basis'}), \qquad
    W_t = \operatorname{diag}(Q_{t1}, \dots, Q_{tB}) \;(\text{'bdd'})

Without a regularizer each type has its own ``W_t``. The rows are grouped by type and multiplied
in one grouped product (:func:`unigraph.hetero.segment_matmul`; the block-diagonal form as
``T * B`` groups of ``in/B x out/B`` blocks by :func:`unigraph.hetero.block_segment_matmul`), never
one matmul per row. Parameters as DGL's: ``W`` ``[T, in, out]`` (``[B, in, out]`` with 'basis',
``[T, B * in/B * out/B]`` with 'bdd'), ``coeff`` ``[T, B]`` ('basis'); ``W`` uniform in
:math:`\pm 1/\sqrt{in}` (:math:`\pm 1/\sqrt{in/B}` with 'bdd'), ``coeff`` Glorot uniform (ReLU gain).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from unigraph.dgl.base import DGLError
from unigraph.hetero import block_segment_matmul, segment_matmul

REGULARIZERS = (None, "basis", "bdd")


class TypedLinear(nn.Module):
    """Args (DGL's): ``in_size``, ``out_size``, ``num_types``, ``regularizer`` (``None``,
    ``'basis'`` or ``'bdd'``), ``num_bases`` (required with a regularizer; with 'bdd' it must
    divide ``in_size`` and ``out_size``).

    Shapes: ``x`` ``[N, in_size]``, ``x_type`` ``[N]`` integers in ``[0, num_types)`` ->
    ``[N, out_size]``. ``sorted_by_type=True`` promises ``x_type`` is non-decreasing (the rows
    need no regrouping); an unsorted ``x_type`` is then refused.
    """

    def __init__(self, in_size: int, out_size: int, num_types: int, regularizer: str | None = None,
                 num_bases: int | None = None):
        super().__init__()
        if regularizer not in REGULARIZERS:
            raise ValueError(f"TypedLinear: regularizer must be None, 'basis' or 'bdd', got {regularizer!r}")
        if regularizer is not None and num_bases is None:
            raise ValueError(f"TypedLinear: regularizer={regularizer!r} needs num_bases")
        self.in_size, self.out_size, self.num_types = in_size, out_size, num_types
        self.regularizer = regularizer
        if regularizer is None:
            self.W = nn.Parameter(torch.empty(num_types, in_size, out_size))
        elif regularizer == "basis":
            self.num_bases = num_bases
            self.W = nn.Parameter(torch.empty(num_bases, in_size, out_size))
            self.coeff = nn.Parameter(torch.empty(num_types, num_bases))
        else:
            if in_size % num_bases or out_size % num_bases:
                raise ValueError(f"TypedLinear: with 'bdd', num_bases ({num_bases}) must divide in_size ({in_size}) "
                                 f"and out_size ({out_size})")
            self.num_bases = num_bases
            self.submat_in, self.submat_out = in_size // num_bases, out_size // num_bases
            self.W = nn.Parameter(torch.empty(num_types, num_bases * self.submat_in * self.submat_out))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # nn.Linear's range on the width one output entry sums over (one block's width with 'bdd')
        fan_in = self.submat_in if self.regularizer == "bdd" else self.in_size
        with torch.no_grad():
            nn.init.uniform_(self.W, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))
            if self.regularizer == "basis":
                nn.init.xavier_uniform_(self.coeff, gain=nn.init.calculate_gain("relu"))

    def get_weight(self) -> Tensor:
        """The weights per type: ``[T, in, out]``, or with 'bdd' DGL's flat ``[T, B * in/B * out/B]``."""
        if self.regularizer == "basis":
            combined = self.coeff @ self.W.view(self.num_bases, self.in_size * self.out_size)
            return combined.view(self.num_types, self.in_size, self.out_size)
        return self.W

    def forward(self, x: Tensor, x_type: Tensor, sorted_by_type: bool = False) -> Tensor:
        x_type = self._check_inputs(x, x_type, sorted_by_type)
        if self.regularizer == "bdd":
            weight = self.W.view(self.num_types, self.num_bases, self.submat_in, self.submat_out)
            product = block_segment_matmul
        else:
            weight, product = self.get_weight(), segment_matmul
        counts = torch.bincount(x_type, minlength=self.num_types)
        if sorted_by_type:
            return product(x, counts, weight)
        order = torch.argsort(x_type, stable=True)  # group the rows by type, multiply, put them back
        grouped = product(x.index_select(0, order), counts, weight)
        return torch.empty_like(grouped).index_copy(0, order, grouped)

    def _check_inputs(self, x: Tensor, x_type, sorted_by_type: bool) -> Tensor:
        if not isinstance(x, Tensor) or x.dim() != 2 or x.shape[1] != self.in_size:
            raise DGLError(f"TypedLinear: x must be [N, {self.in_size}], got "
                           f"{list(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
        if not isinstance(x_type, Tensor):
            x_type = torch.as_tensor(x_type, device=x.device)
        if x_type.dim() != 1 or x_type.is_floating_point() or x_type.is_complex() or x_type.dtype == torch.bool:
            raise DGLError(f"TypedLinear: x_type must be a 1-D integer tensor, got {x_type.dtype} {list(x_type.shape)}")
        if x_type.numel() != x.shape[0]:
            raise DGLError(f"TypedLinear: x_type has {x_type.numel()} entries for {x.shape[0]} rows of x")
        x_type = x_type.to(device=x.device, dtype=torch.int64)
        if x_type.numel() and (int(x_type.min()) < 0 or int(x_type.max()) >= self.num_types):
            raise DGLError(f"TypedLinear: x_type holds values outside 0..{self.num_types - 1}")
        if sorted_by_type and bool((x_type[1:] < x_type[:-1]).any()):
            raise DGLError("TypedLinear: sorted_by_type=True but x_type is not sorted (non-decreasing)")
        return x_type

    def __repr__(self) -> str:
        extra = "" if self.regularizer is None else f", regularizer={self.regularizer}, num_bases={self.num_bases}"
        return f"TypedLinear(in_size={self.in_size}, out_size={self.out_size}, num_types={self.num_types}{extra})"
