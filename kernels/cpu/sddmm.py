r"""g-SDDMM on the CPU, parallel over edges, no gathered operand tensors.

:math:`out_{e,k} = op(lhs_{r_l(e), loff_k}, rhs_{r_r(e), roff_k})` with ``r_l``/``r_r`` the row of
each edge in lhs/rhs (its source, destination or own id). ``dot`` sums products over the last
dimension: :math:`out_{e,j} = \sum_f lhs_{r_l(e), loff_{jF+f}}\, rhs_{r_r(e), roff_{jF+f}}`; when
both operands have the same shape (GAT's attention gradient) a contiguous kernel skips offsets.
"""
from __future__ import annotations

from numba import prange

from unigraph.kernels.cpu import FASTMATH, parallel_kernel
from unigraph.kernels.cpu.messages import ADD, MUL, SUB, apply


@parallel_kernel(fastmath=FASTMATH)
def binary(rows_l, rows_r, lhs, rhs, loff, roff, op, out):
    width = out.shape[1]
    for edge in prange(out.shape[0]):
        a = rows_l[edge]
        b = rows_r[edge]
        for k in range(width):
            out[edge, k] = apply(op, lhs[a, loff[k]], rhs[b, roff[k]])


@parallel_kernel(fastmath=FASTMATH)
def binary_same_shape(rows_l, rows_r, lhs, rhs, op, out):
    """``binary`` for operands of the output's shape: the op is chosen once per edge, outside
    the feature loop, so the loop is a contiguous vector operation (2-3x faster than ``binary``,
    whose per-element offsets and op test keep LLVM from vectorizing)."""
    width = out.shape[1]
    for edge in prange(out.shape[0]):
        a = rows_l[edge]
        b = rows_r[edge]
        if op == ADD:
            for k in range(width):
                out[edge, k] = lhs[a, k] + rhs[b, k]
        elif op == SUB:
            for k in range(width):
                out[edge, k] = lhs[a, k] - rhs[b, k]
        elif op == MUL:
            for k in range(width):
                out[edge, k] = lhs[a, k] * rhs[b, k]
        else:
            for k in range(width):
                out[edge, k] = lhs[a, k] / rhs[b, k]


@parallel_kernel(fastmath=FASTMATH)
def dot_same_shape(rows_l, rows_r, lhs, rhs, out):
    """out[e, j] = <lhs[r_l(e), j, :], rhs[r_r(e), j, :]> for lhs, rhs of shape [*, J, F]."""
    slices, width = lhs.shape[1], lhs.shape[2]
    for edge in prange(out.shape[0]):
        a = rows_l[edge]
        b = rows_r[edge]
        for j in range(slices):
            acc = lhs[a, j, 0] * rhs[b, j, 0]  # starts the sum in the operands' dtype (width >= 1)
            for f in range(1, width):
                acc += lhs[a, j, f] * rhs[b, j, f]
            out[edge, j] = acc


@parallel_kernel(fastmath=FASTMATH)
def dot_broadcast(rows_l, rows_r, lhs, rhs, loff, roff, width, out):
    """``dot`` with broadcast operands: offsets cover the full broadcast shape (out width x F)."""
    slices = out.shape[1]
    for edge in prange(out.shape[0]):
        a = rows_l[edge]
        b = rows_r[edge]
        for j in range(slices):
            k = j * width
            acc = lhs[a, loff[k]] * rhs[b, roff[k]]  # starts the sum in the operands' dtype (width >= 1)
            for f in range(1, width):
                acc += lhs[a, loff[k + f]] * rhs[b, roff[k + f]]
            out[edge, j] = acc
