r"""g-SDDMM, edge-parallel: one program per (block of ``BLOCK_E`` edges, feature block).

.. math::
    out_{j,k} = op\big(lhs_{t_l(j),\, loff_k},\; rhs_{t_r(j),\, roff_k}\big)

where the target ``t(j)`` of edge ``j = (s, v)`` is ``s`` (u), ``v`` (v) or ``j`` itself (e), and
``op`` is add, sub, mul, div, copy_lhs or copy_rhs. Each output element is written once, by
the program that owns its edge: no atomics, and the edge id order of the output is the COO order.

``dot`` reduces the last feature dimension ``D``; its kernel runs one program per (edge block,
output column), both on grid axis 0 (the only one without CUDA's 65535 cap), and loops over
``D`` in chunks, so wide dot products (GAT's attention gradient
``<h_u, go_v>`` per head) never hold a ``[BLOCK_E, D]`` tile larger than ``BLOCK_D`` columns.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from unigraph.kernels.triton.messages import combine, edge_tile, operand_columns, target_rows
from unigraph.kernels.triton.runtime import (
    INTERPRETER_BLOCK_E, accumulator, check_launchable, checked_grid, feature_block, flat, needs_int64, pointer_or,
    tuning)

CONFIGS = [
    triton.Config({"BLOCK_E": 32}, num_warps=4),
    triton.Config({"BLOCK_E": 64}, num_warps=4),
    triton.Config({"BLOCK_E": 128}, num_warps=8),
]


@triton.autotune(configs=tuning(CONFIGS, BLOCK_E=INTERPRETER_BLOCK_E),
                 key=["width", "OP", "LHS_TARGET", "RHS_TARGET", "LHS_BROADCAST", "RHS_BROADCAST", "INDEX_64"])
@triton.jit
def sddmm_kernel(
    # pointers
    src_ptr, dst_ptr, lhs_ptr, rhs_ptr, lhs_off_ptr, rhs_off_ptr, out_ptr,
    # sizes
    num_edges, width, lhs_width, rhs_width,
    # meta-parameters
    OP: tl.constexpr, LHS_TARGET: tl.constexpr, RHS_TARGET: tl.constexpr, LHS_BROADCAST: tl.constexpr,
    RHS_BROADCAST: tl.constexpr, ACC: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_E: tl.constexpr,
    BLOCK_F: tl.constexpr,
):
    edges, edge_mask, cols, col_mask, mask, _start = edge_tile(num_edges, width, INDEX_64, BLOCK_E, BLOCK_F)
    if OP != "copy_rhs":
        lhs_rows = target_rows(src_ptr, dst_ptr, edges, edge_mask, LHS_TARGET, INDEX_64)
        lhs_cols = operand_columns(lhs_off_ptr, cols, col_mask, LHS_BROADCAST)
        x = tl.load(lhs_ptr + lhs_rows[:, None] * lhs_width + lhs_cols[None, :], mask=mask, other=0).to(ACC)
    if OP != "copy_lhs":
        rhs_rows = target_rows(src_ptr, dst_ptr, edges, edge_mask, RHS_TARGET, INDEX_64)
        rhs_cols = operand_columns(rhs_off_ptr, cols, col_mask, RHS_BROADCAST)
        y = tl.load(rhs_ptr + rhs_rows[:, None] * rhs_width + rhs_cols[None, :], mask=mask, other=1).to(ACC)
    if OP == "copy_lhs":
        out = x
    elif OP == "copy_rhs":
        out = y
    else:
        out = combine(x, y, OP)
    tl.store(out_ptr + edges[:, None] * width + cols[None, :], out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.autotune(configs=tuning(CONFIGS, BLOCK_E=INTERPRETER_BLOCK_E),
                 key=["out_width", "depth", "LHS_TARGET", "RHS_TARGET", "LHS_BROADCAST", "RHS_BROADCAST", "INDEX_64"])
@triton.jit
def sddmm_dot_kernel(
    # pointers
    src_ptr, dst_ptr, lhs_ptr, rhs_ptr, lhs_off_ptr, rhs_off_ptr, out_ptr,
    # sizes
    num_edges, out_width, depth, lhs_width, rhs_width,
    # meta-parameters
    LHS_TARGET: tl.constexpr, RHS_TARGET: tl.constexpr, LHS_BROADCAST: tl.constexpr, RHS_BROADCAST: tl.constexpr,
    ACC: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_D: tl.constexpr,
):
    pid = tl.program_id(0)  # (edge block, output column) pairs, columns fastest: axis 0 has room
    if INDEX_64:
        pid = pid.to(tl.int64)
    block = pid // out_width
    column = pid % out_width  # output column: the position among the leading (non-dot) dims
    edges = block * BLOCK_E + tl.arange(0, BLOCK_E)
    edge_mask = edges < num_edges
    lhs_rows = target_rows(src_ptr, dst_ptr, edges, edge_mask, LHS_TARGET, INDEX_64)
    rhs_rows = target_rows(src_ptr, dst_ptr, edges, edge_mask, RHS_TARGET, INDEX_64)
    acc = tl.zeros([BLOCK_E], dtype=ACC)
    for first in range(0, depth, BLOCK_D):
        d = first + tl.arange(0, BLOCK_D)
        d_mask = d < depth
        mask = edge_mask[:, None] & d_mask[None, :]
        full = column * depth + d  # flat index in the broadcast shape before the dot
        lhs_cols = operand_columns(lhs_off_ptr, full, d_mask, LHS_BROADCAST)
        rhs_cols = operand_columns(rhs_off_ptr, full, d_mask, RHS_BROADCAST)
        x = tl.load(lhs_ptr + lhs_rows[:, None] * lhs_width + lhs_cols[None, :], mask=mask, other=0).to(ACC)
        y = tl.load(rhs_ptr + rhs_rows[:, None] * rhs_width + rhs_cols[None, :], mask=mask, other=0).to(ACC)
        acc += tl.sum(x * y, axis=1)
    tl.store(out_ptr + edges * out_width + column, acc.to(out_ptr.dtype.element_ty), mask=edge_mask)


# ---------------------------------------------------------------------- launcher
def sddmm(src: Tensor, dst: Tensor, op: str, lhs: Tensor | None, rhs: Tensor | None,
          lhs_target: str, rhs_target: str, full: tuple[int, ...], lhs_off: Tensor | None,
          rhs_off: Tensor | None) -> Tensor:
    """g-SDDMM over the COO edges ``src[j] -> dst[j]``: ``[E, *features]`` in edge-id order.

    Args:
        op: add, sub, mul, div, dot, copy_lhs or copy_rhs.
        lhs, rhs: operands on their targets' rows (None for the unused side of a copy), equal
            rank, broadcastable feature shapes (``dot``: equal last dimension).
        lhs_target, rhs_target: u, v or e.
        full: the broadcast feature shape of the operands (for dot: before it reduces the last
            dimension to 1).
        lhs_off, rhs_off: each operand's broadcast offset table into ``full`` (None: it has
            that shape itself).
    """
    check_launchable(src, lhs, rhs)
    like = lhs if lhs is not None else rhs
    num_edges = src.numel()
    features = full[:-1] + (1,) if op == "dot" else full
    out = torch.empty((num_edges,) + features, dtype=like.dtype, device=like.device)
    if out.numel() == 0:
        return out
    lhs2 = flat(lhs, lhs.shape[0]) if lhs is not None else None
    rhs2 = flat(rhs, rhs.shape[0]) if rhs is not None else None
    index_64 = needs_int64(num_edges * math.prod(full), lhs2.numel() if lhs2 is not None else 0,
                           rhs2.numel() if rhs2 is not None else 0)
    args = (src, dst, pointer_or(lhs2, out), pointer_or(rhs2, out), pointer_or(lhs_off, src),
            pointer_or(rhs_off, src), out)
    meta = dict(LHS_TARGET=lhs_target, RHS_TARGET=rhs_target, LHS_BROADCAST=lhs_off is not None,
                RHS_BROADCAST=rhs_off is not None, ACC=accumulator(like.dtype), INDEX_64=index_64)
    widths = (lhs2.shape[1] if lhs2 is not None else 0, rhs2.shape[1] if rhs2 is not None else 0)
    if op == "dot":
        depth = full[-1]
        out_width = math.prod(features)
        sddmm_dot_kernel[lambda m: checked_grid(triton.cdiv(num_edges, m["BLOCK_E"]) * out_width)](
            *args, num_edges, out_width, depth, *widths, BLOCK_D=feature_block(depth), **meta)
    else:
        width = math.prod(features)
        block_f = feature_block(width)
        sddmm_kernel[lambda m: checked_grid(triton.cdiv(num_edges, m["BLOCK_E"]) * triton.cdiv(width, block_f))](
            *args, num_edges, width, *widths, OP=op, BLOCK_F=block_f, **meta)
    return out
