"""Device functions shared by the kernels: the binary ops of g-SpMM and g-SDDMM, and how a
kernel finds an operand's element for an output element under DGL-style broadcasting."""
from __future__ import annotations

import triton
import triton.language as tl
from torch import Tensor

from unigraph.ops.spec import GSPMM_BINARY, broadcast_feature_shape, broadcast_offsets


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
    """This edge-parallel program's tile: its block of edge ids (``program_id(0)``) and of
    output columns (``program_id(1)``), their masks and the 2-D mask of the tile."""
    block = tl.program_id(0)
    if INDEX_64:
        block = block.to(tl.int64)
    edges = block * BLOCK_E + tl.arange(0, BLOCK_E)
    edge_mask = edges < num_edges
    cols = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    col_mask = cols < width
    return edges, edge_mask, cols, col_mask, edge_mask[:, None] & col_mask[None, :]


@triton.jit
def operand_columns(offsets_ptr, cols, mask, BROADCAST: tl.constexpr):
    """Column of an operand row feeding output column ``cols``: ``cols`` itself when the
    operand has the output's feature shape, else read from its offset table (see
    ``unigraph.ops.spec.broadcast_offsets``)."""
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


# ---------------------------------------------------------------------- host side
def kernel_op(op: str) -> str:
    """The kernels' OP for a gspmm op: copy_u/copy_e as they are, u_add_e -> add etc."""
    return GSPMM_BINARY.get(op, op)


def message_shape(op: str, u: Tensor | None, e: Tensor | None) -> tuple[int, ...]:
    """Feature shape of the messages (and of the output) of a gspmm op."""
    if op == "copy_u":
        return tuple(u.shape[1:])
    if op == "copy_e":
        return tuple(e.shape[1:])
    return broadcast_feature_shape(GSPMM_BINARY[op], tuple(u.shape[1:]), tuple(e.shape[1:]))


def offsets_for(x: Tensor | None, features: tuple[int, ...]) -> Tensor | None:
    """The broadcast offset table of operand ``x`` (None when it has the output's feature shape)."""
    if x is None or tuple(x.shape[1:]) == tuple(features):
        return None
    # contiguous: for a size-1 operand the table is an expanded (stride 0) view
    return broadcast_offsets(tuple(x.shape[1:]), tuple(features), x.device).contiguous()
