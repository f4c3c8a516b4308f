"""Device functions shared by the kernels: the binary ops of g-SpMM and g-SDDMM, and how a
kernel finds an operand's element for an output element under DGL-style broadcasting.

Like every module of this package it imports nothing from unigraph above the kernels: the
backend (``unigraph.backends.triton``) hands each launcher plain tensors and a description of
the work (the kernel op, the output feature shape, the operands' broadcast offset tables).
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def combine(a, b, OP: tl.constexpr):
    """``a OP b`` for OP in add, sub, mul, div (resolved at compile time)."""
    if OP == "add":
        out = a + b
    elif OP == "sub":
        out = a - b
    elif OP == "mul":
        out = a * b
    else:
        tl.static_assert(OP == "div", "OP must be add, sub, mul or div")
        out = a / b
    return out


@triton.jit
def csr_row(ptr_ptr, INDEX_64: tl.constexpr):
    """This program's CSR row (``program_id(0)``) and its slot range ``[start, end)``, in int64
    when the sizes need it (``INDEX_64``), else int32 (cheaper address arithmetic)."""
    row = tl.program_id(0)
    if INDEX_64:
        row = row.to(tl.int64)
    start = tl.load(ptr_ptr + row)
    end = tl.load(ptr_ptr + row + 1)
    if not INDEX_64:
        start = start.to(tl.int32)
        end = end.to(tl.int32)
    return row, start, end


@triton.jit
def edge_tile(num_edges, width, INDEX_64: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr):
    """This edge-parallel program's tile: its block of edge ids and of output columns, their masks
    and the 2-D mask of the tile, and the block's first edge.

    ``program_id(0)`` enumerates (edge block, feature block) pairs, feature blocks fastest: grid
    axis 0 takes up to 2**31 - 1 programs, where axes 1 and 2 stop at 65535 on CUDA."""
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    feature_blocks = tl.cdiv(width, BLOCK_F)
    block_start = (pid // feature_blocks) * BLOCK_E
    edges = block_start + tl.arange(0, BLOCK_E)
    edge_mask = edges < num_edges
    cols = (pid % feature_blocks) * BLOCK_F + tl.arange(0, BLOCK_F)
    col_mask = cols < width
    return edges, edge_mask, cols, col_mask, edge_mask[:, None] & col_mask[None, :], block_start


@triton.jit
def operand_columns(offsets_ptr, cols, mask, BROADCAST: tl.constexpr):
    """Column of an operand row feeding output column ``cols``: ``cols`` itself when the
    operand has the output's feature shape, else read from its offset table (the flat offset,
    inside one operand row, of each output element)."""
    if BROADCAST:
        out = tl.load(offsets_ptr + cols, mask=mask, other=0).to(cols.dtype)
    else:
        out = cols
    return out


@triton.jit
def target_rows(src_ptr, dst_ptr, edges, edge_mask, TARGET: tl.constexpr, INDEX_64: tl.constexpr):
    """Row of a g-SDDMM operand for each edge: its source (u), destination (v) or itself (e)."""
    if TARGET == "u":
        rows = tl.load(src_ptr + edges, mask=edge_mask, other=0)
    elif TARGET == "v":
        rows = tl.load(dst_ptr + edges, mask=edge_mask, other=0)
    else:
        rows = edges
    if not INDEX_64:
        rows = rows.to(tl.int32)
    return rows


# ---------------------------------------------------------------------- max/min with NaN
# unigraph's max/min: a NaN beats every number (the result is NaN, as torch.amax), the first of
# equal values wins (lowest index), whatever the order the values arrive in.
@triton.jit
def _max_first(v1, i1, v2, i2):
    nan1 = v1 != v1
    nan2 = v2 != v2
    first = i1 < i2
    take1 = (nan1 & (~nan2 | first)) | (~nan1 & ~nan2 & ((v1 > v2) | ((v1 == v2) & first)))
    return tl.where(take1, v1, v2), tl.where(take1, i1, i2)


@triton.jit
def _min_first(v1, i1, v2, i2):
    nan1 = v1 != v1
    nan2 = v2 != v2
    first = i1 < i2
    take1 = (nan1 & (~nan2 | first)) | (~nan1 & ~nan2 & ((v1 < v2) | ((v1 == v2) & first)))
    return tl.where(take1, v1, v2), tl.where(take1, i1, i2)


@triton.jit
def extreme_with_index(values, ROWS: tl.constexpr, IS_MAX: tl.constexpr):
    """Per column of ``values [ROWS, C]``: the maximum (IS_MAX) or minimum and the row of its
    first occurrence, a NaN beating every number."""
    rows = tl.broadcast_to(tl.arange(0, ROWS)[:, None], values.shape)
    if IS_MAX:
        best, at = tl.reduce((values, rows), 0, _max_first)
    else:
        best, at = tl.reduce((values, rows), 0, _min_first)
    return best, at


@triton.jit
def beats(value, best, IS_MAX: tl.constexpr):
    """Whether ``value`` replaces the running extreme ``best`` (which arrived first)."""
    if IS_MAX:
        better = value > best
    else:
        better = value < best
    return (best == best) & ((value != value) | better)


@triton.jit
def signed_nan(x, NEGATIVE: tl.constexpr, ACC: tl.constexpr):
    """A NaN of ``x``'s shape in ``ACC`` (float32/float64) with the sign bit set or clear.

    Triton's float atomic max/min compare bit patterns (signed max on non-negative floats,
    unsigned min on negative ones, and the reverse for min), so a NaN wins an atomic max only
    with the sign bit clear and an atomic min only with it set: messages are given the right
    NaN before the atomics so that NaN propagates."""
    if ACC == tl.float64:
        if NEGATIVE:
            bits = tl.full(x.shape, -2251799813685248, tl.int64)  # 0xFFF8000000000000
        else:
            bits = tl.full(x.shape, 9221120237041090560, tl.int64)  # 0x7FF8000000000000
    else:
        if NEGATIVE:
            bits = tl.full(x.shape, -4194304, tl.int32)  # 0xFFC00000
        else:
            bits = tl.full(x.shape, 2143289344, tl.int32)  # 0x7FC00000
    return bits.to(ACC, bitcast=True)
