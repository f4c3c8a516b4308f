r"""Rows reduced into groups, with exact gradients: the aggregation modules (``unigraph.nn.aggr``,
PNA's), GAT's self-loop edge features, the merged edge data of ``Graph.to_undirected``.

.. math::
    out_g = \operatorname{reduce}_{k:\ index_k = g} x_k \qquad (0 \text{ for a group without rows})

along dimension 0, for ``reduce`` in sum, mean, max, min. sum is ``index_add``; mean is that sum
over the group's row count; max and min are ``scatter_reduce(..., include_self=False)`` with a
backward of their own.

Why their own backward. torch's ``scatter_reduce(amax | amin, include_self=False)`` splits a
group's gradient among the rows equal to its extreme *and* the output's initial value wherever
that equals the extreme too (torch 2.13's formula counts ``self == result`` whatever
``include_self`` says): a group whose maximum is exactly 0 (ReLU'd, one-hot or difference
messages, the zeros a layer starts from) gave each of its ``k`` tied rows ``1/(k+1)`` of the
gradient instead of ``1/k`` (a lone row: half), silently. PyG's aggregations, which call it,
share the defect. It is also slow: gathers and scatters over an expanded index, ~8x the forward
(10,000 rows x 32 features, 2 threads: 1.8 ms, against 0.2 ms here). Here a group's gradient is
split evenly among its rows equal to its extreme, the rule torch's ``amax``/``amin`` follow on a
dense tensor; where the extreme is NaN (a NaN row: the reduction propagates it), the NaN rows
share it.
"""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.finite import all_finite

REDUCES = ("sum", "add", "mean", "max", "min")
_TORCH = {"sum": "sum", "add": "sum", "mean": "mean", "max": "amax", "min": "amin"}


def group_reduce(x: Tensor, index: Tensor, dim_size: int, reduce: str) -> Tensor:
    """``[dim_size, *x.shape[1:]]``: ``reduce`` of the rows of ``x`` per group ``index[k]`` (an int64
    vector of ``x.shape[0]`` groups in ``[0, dim_size)``, checked by the caller); 0 for an empty
    group."""
    shape = (dim_size,) + tuple(x.shape[1:])
    if reduce not in REDUCES:
        raise ValueError(f"group_reduce: reduce must be one of {', '.join(REDUCES)}, got {reduce!r}")
    if not (x.is_floating_point() or x.is_complex()):   # no gradient; torch's integer arithmetic as before
        return _scatter_reduce(x, index, dim_size, reduce)
    if reduce in ("sum", "add", "mean"):
        rows = widened(x)   # half precision: summed (and divided) in float32, rounded once
        total = rows.new_zeros(shape).index_add(0, index, rows)
        if reduce == "mean":
            total = total / _row_counts(index, dim_size, total)
        return total.to(x.dtype)
    if not x.requires_grad or not torch.is_grad_enabled():
        return _scatter_reduce(x, index, dim_size, reduce)
    return _GroupExtreme.apply(x, index, dim_size, reduce)


def widened(x: Tensor) -> Tensor:
    """``x`` in float32 where it is a half-precision float (else ``x`` itself): the precision sums
    over groups of its rows are taken in, the caller rounding the result once. torch's
    ``index_add`` of a 1-D float16 tensor accumulates in float16, whose running sum of ones stops
    at 2,048 (bfloat16's at 256), and a group's sum of squares passes float16's 65,504 on a graph
    of a few thousand nodes."""
    return x.to(widened_dtype(x.dtype)) if x.is_floating_point() else x


def widened_dtype(dtype: torch.dtype) -> torch.dtype:
    """:func:`widened`'s dtype for a tensor of ``dtype``: float32 for a half-precision float."""
    return torch.float32 if dtype.is_floating_point and dtype.itemsize < 4 else dtype


def group_sizes(index: Tensor, dim_size: int, like: Tensor) -> Tensor:
    """The rows of each group (``[dim_size]``), as a float of ``like``'s precision but float32 at
    least: float16 counts exactly only to 2,048 and bfloat16 to 256, so a hub's mean or PNA's
    degree scalers would read a rounded count. ``index_add`` of ones (``bincount``'s output size
    is data to torch.compile)."""
    wide = torch.float64 if like.dtype in (torch.float64, torch.complex128) else torch.float32   # (a real count)
    counts = torch.zeros(dim_size, dtype=wide, device=index.device)
    return counts.index_add_(0, index, torch.ones(index.shape[0], dtype=wide, device=index.device))


def _row_counts(index: Tensor, dim_size: int, like: Tensor) -> Tensor:
    """``max(rows of the group, 1)`` per group, shaped to divide ``like`` (:func:`group_sizes`)."""
    return group_sizes(index, dim_size, like).clamp_(min=1).view((-1,) + (1,) * (like.dim() - 1))


def _scatter_reduce(x: Tensor, index: Tensor, dim_size: int, reduce: str) -> Tensor:
    """torch's ``scatter_reduce`` (``include_self=False``) of ``x``'s rows, no autograd record."""
    expanded = index.view((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
    out = x.new_zeros((dim_size,) + tuple(x.shape[1:]))
    return out.scatter_reduce_(0, expanded, x.detach(), _TORCH[reduce], include_self=False)


def extreme_backward(x: Tensor, index: Tensor, out: Tensor, grad: Tensor) -> Tensor:
    """The gradient of :func:`group_reduce`'s max or min (``out``) with respect to ``x``: each
    group's ``grad`` split evenly among its rows equal to ``out`` (NaN rows where ``out`` is NaN).
    Differentiable in ``grad`` (a double backward records it)."""
    value = out.index_select(0, index)
    hit = torch.eq(x, value, out=torch.empty_like(x))   # 1.0 / 0.0 in x's dtype, one pass
    if torch.compiler.is_compiling() or not all_finite(out):
        hit = hit + (x.isnan() & value.isnan()).to(x.dtype)
    wide = torch.promote_types(x.dtype, torch.float32)   # counts past 2,048 ties exact in float16 too
    ties = torch.zeros(out.shape, dtype=wide, device=out.device).index_add_(0, index, hit.to(wide))
    share = (grad / ties.clamp_(min=1)).to(grad.dtype).index_select(0, index)
    return hit * share if torch.is_grad_enabled() else hit.mul_(share)


class _GroupExtreme(torch.autograd.Function):
    """:func:`group_reduce`'s max/min with :func:`extreme_backward` as its gradient."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, index: Tensor, dim_size: int, reduce: str) -> Tensor:
        return _scatter_reduce(x, index, dim_size, reduce)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        x, index, _, _ = inputs
        ctx.save_for_backward(x, index, output)

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, index, out = ctx.saved_tensors
        return extreme_backward(x.detach(), index, out.detach(), grad), None, None, None
