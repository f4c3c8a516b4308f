r"""g-SpMM, node-parallel: one program per (destination row of the in-CSR, feature block).

.. math::
    out_{v,k} = \bigoplus_{p \in [ptr_v, ptr_{v+1})} op\big(u_{src_p,\, uoff_k},\; e_{eid_p,\, eoff_k}\big)

with :math:`\oplus` one of sum, max, min and ``op`` one of copy_u, copy_e, add, sub, mul, div.
``uoff``/``eoff`` map output column ``k`` to the operand's column under DGL broadcasting (the
identity when the operand has the output's feature shape, so no table is read).

Each program walks its row in chunks of ``BLOCK_E`` edges: it gathers a ``[BLOCK_E, BLOCK_F]``
tile of messages, reduces it along the edges and keeps the running result in registers, so every
output element is written once, without atomics, and the result is deterministic. For max/min
it also keeps the CSR position of the extreme edge (the first one on ties: strict comparisons
across chunks, the lowest index inside one; a NaN beats every number, so NaN propagates and the
first NaN edge is the arg) and finally writes that edge's source and id, the ``arg_u``/``arg_e``
the backward pass scatters to (-1 for rows without in-edges, whose value is 0).

Work is balanced when degrees are: one program serializes its whole row, so a hub with a
million in-edges keeps one program busy while the rest of the GPU idles (the edge-parallel
kernel in :mod:`~unigraph.kernels.triton.spmm_edge` is the answer there).
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from unigraph.kernels.triton.messages import beats, combine, csr_row, extreme_with_index, operand_columns
from unigraph.kernels.triton.runtime import (
    INTERPRETER_BLOCK_E, accumulator, accumulator_torch, check_launchable, checked_grid, degree_bucket, feature_block,
    flat, needs_int64, pointer_or, tuning)

# Edge-chunk sizes to try: short chunks waste fewer masked lanes on low-degree rows, long ones
# keep more loads in flight on high-degree rows (hence the mean degree in the tuning key).
CONFIGS = [
    triton.Config({"BLOCK_E": 8}, num_warps=2),
    triton.Config({"BLOCK_E": 16}, num_warps=4),
    triton.Config({"BLOCK_E": 32}, num_warps=4),
    triton.Config({"BLOCK_E": 64}, num_warps=8),
]


@triton.autotune(configs=tuning(CONFIGS, BLOCK_E=INTERPRETER_BLOCK_E),
                 key=["width", "degree_bucket", "OP", "REDUCE", "U_BROADCAST", "E_BROADCAST", "INDEX_64"])
@triton.jit
def spmm_node_kernel(
    # pointers
    ptr_ptr, src_ptr, eid_ptr, u_ptr, e_ptr, u_off_ptr, e_off_ptr, out_ptr, arg_u_ptr, arg_e_ptr,
    # sizes
    width, u_width, e_width, degree_bucket,
    # meta-parameters
    OP: tl.constexpr, REDUCE: tl.constexpr, U_BROADCAST: tl.constexpr, E_BROADCAST: tl.constexpr,
    ACC: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr,
):
    row, start, end = csr_row(ptr_ptr, INDEX_64)
    cols = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    col_mask = cols < width
    u_cols = operand_columns(u_off_ptr, cols, col_mask, U_BROADCAST)
    e_cols = operand_columns(e_off_ptr, cols, col_mask, E_BROADCAST)

    if REDUCE == "sum":
        acc = tl.zeros([BLOCK_F], dtype=ACC)
    else:
        best = tl.zeros([BLOCK_F], dtype=ACC)
        best_pos = tl.full([BLOCK_F], -1, dtype=tl.int64)
    for first in range(start, end, BLOCK_E):
        pos = first + tl.arange(0, BLOCK_E)
        pos_mask = pos < end
        mask = pos_mask[:, None] & col_mask[None, :]
        if OP != "copy_e":
            src = tl.load(src_ptr + pos, mask=pos_mask, other=0)
            if not INDEX_64:
                src = src.to(tl.int32)
            xu = tl.load(u_ptr + src[:, None] * u_width + u_cols[None, :], mask=mask, other=0).to(ACC)
        if OP != "copy_u":
            eid = tl.load(eid_ptr + pos, mask=pos_mask, other=0)
            if not INDEX_64:
                eid = eid.to(tl.int32)
            xe = tl.load(e_ptr + eid[:, None] * e_width + e_cols[None, :], mask=mask, other=1).to(ACC)
        if OP == "copy_u":
            msg = xu
        elif OP == "copy_e":
            msg = xe
        else:
            msg = combine(xu, xe, OP)
        if REDUCE == "sum":
            acc += tl.sum(tl.where(mask, msg, 0.0), axis=0)
        else:
            if REDUCE == "max":
                padded = tl.where(mask, msg, -float("inf"))
            else:
                padded = tl.where(mask, msg, float("inf"))
            chunk_best, chunk_arg = extreme_with_index(padded, BLOCK_E, REDUCE == "max")
            # the first chunk always counts (even at +-inf); a NaN, once there, stays
            better = beats(chunk_best, best, REDUCE == "max") | (best_pos < 0)
            best = tl.where(better, chunk_best, best)
            best_pos = tl.where(better, (first + chunk_arg).to(tl.int64), best_pos)

    out_at = row * width + cols
    if REDUCE == "sum":
        tl.store(out_ptr + out_at, acc.to(out_ptr.dtype.element_ty), mask=col_mask)
    else:
        found = best_pos >= 0
        tl.store(out_ptr + out_at, tl.where(found, best, 0.0).to(out_ptr.dtype.element_ty), mask=col_mask)
        arg_u = tl.load(src_ptr + best_pos, mask=col_mask & found, other=-1)
        arg_e = tl.load(eid_ptr + best_pos, mask=col_mask & found, other=-1)
        tl.store(arg_u_ptr + out_at, arg_u.to(tl.int64), mask=col_mask)
        tl.store(arg_e_ptr + out_at, arg_e.to(tl.int64), mask=col_mask)


# ---------------------------------------------------------------------- launcher
def spmm_node(ptr: Tensor, src: Tensor, eid: Tensor, num_dst: int, op: str, reduce: str,
              u: Tensor | None, e: Tensor | None, features: tuple[int, ...], u_off: Tensor | None,
              e_off: Tensor | None) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """g-SpMM over the in-CSR ``(ptr, src, eid)`` with ``num_dst`` rows.

    Args:
        op: copy_u, copy_e, or the binary op of the messages: add, sub, mul, div.
        reduce: sum, max or min.
        u, e: source and edge features of equal rank with broadcastable feature shapes.
        features: the output feature shape.
        u_off, e_off: each operand's broadcast offset table (None: it has the output's shape).

    Returns ``(out [num_dst, *features], arg_u, arg_e)``; the arg tensors (source node and edge
    id of the extreme edge, -1 for rows without edges) only for max/min, None for sum. A sum is
    stored in the accumulator's dtype (float32 for half precision), unrounded.
    """
    check_launchable(ptr, u, e)
    like = u if u is not None else e
    width = math.prod(features)
    extreme = reduce != "sum"
    out = torch.empty((num_dst,) + features, dtype=like.dtype if extreme else accumulator_torch(like.dtype),
                      device=like.device)
    arg_u = torch.empty(out.shape, dtype=torch.int64, device=out.device) if extreme else None
    arg_e = torch.empty(out.shape, dtype=torch.int64, device=out.device) if extreme else None
    if out.numel() == 0:
        return out, arg_u, arg_e
    num_edges = eid.numel()
    u2 = flat(u, u.shape[0]) if u is not None else None
    e2 = flat(e, num_edges) if e is not None else None
    u_width = u2.shape[1] if u2 is not None else 0
    e_width = e2.shape[1] if e2 is not None else 0
    index_64 = needs_int64(num_dst * width, num_edges, (u2.numel() if u2 is not None else 0),
                           (e2.numel() if e2 is not None else 0))
    block_f = feature_block(width)
    grid = checked_grid(num_dst, triton.cdiv(width, block_f))
    spmm_node_kernel[grid](
        ptr, src, eid, pointer_or(u2, out), pointer_or(e2, out), pointer_or(u_off, ptr), pointer_or(e_off, ptr), out,
        pointer_or(arg_u, ptr), pointer_or(arg_e, ptr),
        width, u_width, e_width, degree_bucket(num_edges, num_dst),
        OP=op, REDUCE=reduce, U_BROADCAST=u_off is not None, E_BROADCAST=e_off is not None,
        ACC=accumulator(like.dtype), INDEX_64=index_64, BLOCK_F=block_f,
    )
    return out, arg_u, arg_e

