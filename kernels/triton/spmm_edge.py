r"""g-SpMM, edge-parallel: one program per (block of ``BLOCK_E`` COO edges, feature block),
accumulating into the destination rows with atomics.

.. math::
    out_{v,k} \mathrel{\oplus}= op\big(u_{src_j,\, uoff_k},\; e_{j,\, eoff_k}\big)
    \quad \text{for every edge } j = (src_j, v)

Every program does the same amount of work whatever the degrees, so a hub with a million
in-edges is spread over the whole GPU instead of serializing one program (the weakness of
:mod:`~unigraph.kernels.triton.spmm_node`). The price is one atomic per message element
instead of one store per output element, and a sum whose rounding depends on the order the
atomics land in (not bitwise deterministic).

sum
    ``atomic_add`` into a zeroed accumulator (float32 for half-precision input, returned as it
    is: the caller rounds once, after a mean's division). When all edges of a block share one destination (a hub's run of
    edges in a destination-sorted edge list) the block first sums its tile and issues one
    atomic per feature instead of ``BLOCK_E``, which removes the contention on the hub's row.
max / min
    Two passes. The first ``atomic_max``/``atomic_min``s the messages into an accumulator that
    starts at -inf/+inf. The second recomputes each message and, where it equals the row's
    result, ``atomic_min``s its edge id into ``arg_e``: the lowest tying edge id, the same edge
    the node-parallel kernel picks. Triton implements float atomic max/min for float32 and
    float64 only (by the sign-split integer trick: signed max on non-negative bit patterns,
    unsigned min on negative ones), so half precision cannot use this kernel; the backend
    reports that and the ``triton`` backend runs those calls node-parallel. That trick lets a
    NaN win only with the right sign bit, so NaN messages are given it first
    (:func:`~unigraph.kernels.triton.messages.signed_nan`): NaN propagates, and the arg pass
    matches NaN with NaN.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from unigraph.kernels.triton.messages import combine, edge_tile, operand_columns, signed_nan
from unigraph.kernels.triton.runtime import (
    INTERPRETER_BLOCK_E, accumulator, accumulator_torch, check_launchable, checked_grid, feature_block, flat,
    needs_int64, pointer_or, tuning)

ATOMIC_DTYPES_FOR_EXTREMES = (torch.float32, torch.float64)

# Larger edge blocks amortize the index loads; the autotuner restores the accumulator between
# trials (restore_value), since every trial adds into it (tests/test_triton_kernels.py checks it).
RESTORE = ["acc_ptr", "arg_e_ptr"]
CONFIGS = [
    triton.Config({"BLOCK_E": 32}, num_warps=4),
    triton.Config({"BLOCK_E": 64}, num_warps=4),
    triton.Config({"BLOCK_E": 128}, num_warps=8),
]


@triton.autotune(configs=tuning(CONFIGS, BLOCK_E=INTERPRETER_BLOCK_E),
                 key=["width", "OP", "REDUCE", "ARG_PASS", "U_BROADCAST", "E_BROADCAST", "INDEX_64"],
                 restore_value=RESTORE)
@triton.jit
def spmm_edge_kernel(
    # pointers
    src_ptr, dst_ptr, u_ptr, e_ptr, u_off_ptr, e_off_ptr, acc_ptr, arg_e_ptr,
    # sizes
    num_edges, width, u_width, e_width,
    # meta-parameters
    OP: tl.constexpr, REDUCE: tl.constexpr, ARG_PASS: tl.constexpr, U_BROADCAST: tl.constexpr,
    E_BROADCAST: tl.constexpr, ACC: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_E: tl.constexpr,
    BLOCK_F: tl.constexpr,
):
    edges, edge_mask, cols, col_mask, mask, block_start = edge_tile(num_edges, width, INDEX_64, BLOCK_E, BLOCK_F)
    dst = tl.load(dst_ptr + edges, mask=edge_mask, other=0)
    if not INDEX_64:
        dst = dst.to(tl.int32)
    if OP != "copy_e":
        src = tl.load(src_ptr + edges, mask=edge_mask, other=0)
        if not INDEX_64:
            src = src.to(tl.int32)
        u_cols = operand_columns(u_off_ptr, cols, col_mask, U_BROADCAST)
        xu = tl.load(u_ptr + src[:, None] * u_width + u_cols[None, :], mask=mask, other=0).to(ACC)
    if OP != "copy_u":
        e_cols = operand_columns(e_off_ptr, cols, col_mask, E_BROADCAST)
        xe = tl.load(e_ptr + edges[:, None] * e_width + e_cols[None, :], mask=mask, other=1).to(ACC)
    if OP == "copy_u":
        msg = xu
    elif OP == "copy_e":
        msg = xe
    else:
        msg = combine(xu, xe, OP)

    out_at = dst[:, None] * width + cols[None, :]
    if REDUCE != "sum":  # the NaN that wins this atomic (see signed_nan)
        msg = tl.where(msg != msg, signed_nan(msg, REDUCE == "min", ACC), msg)
    if ARG_PASS:
        best = tl.load(acc_ptr + out_at, mask=mask, other=0)
        edge_ids = tl.broadcast_to(edges[:, None].to(tl.int64), (BLOCK_E, BLOCK_F))
        hit = (msg == best) | ((msg != msg) & (best != best))
        tl.atomic_min(arg_e_ptr + out_at, edge_ids, mask=mask & hit)
    elif REDUCE == "sum":
        msg = tl.where(mask, msg, 0.0)
        first = tl.load(dst_ptr + block_start).to(dst.dtype)  # the block's first edge always exists
        lowest = tl.min(tl.where(edge_mask, dst, first), axis=0)
        highest = tl.max(tl.where(edge_mask, dst, first), axis=0)
        if lowest == highest:  # one destination for the whole block: sum first, one atomic per column
            tl.atomic_add(acc_ptr + lowest * width + cols, tl.sum(msg, axis=0), mask=col_mask)
        else:
            tl.atomic_add(acc_ptr + out_at, msg, mask=mask)
    elif REDUCE == "max":
        tl.atomic_max(acc_ptr + out_at, msg, mask=mask)
    else:
        tl.atomic_min(acc_ptr + out_at, msg, mask=mask)


# ---------------------------------------------------------------------- launcher
def spmm_edge(src: Tensor, dst: Tensor, num_dst: int, op: str, reduce: str, u: Tensor | None,
              e: Tensor | None, features: tuple[int, ...], u_off: Tensor | None,
              e_off: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """g-SpMM over the COO edges ``src[j] -> dst[j]`` (edge id ``j``) into ``num_dst`` rows.

    Same arguments as :func:`unigraph.kernels.triton.spmm_node.spmm_node`; max/min need float32
    or float64 features (see the module docstring). Returns ``(out, arg_e)``: the edge id of
    each element's extreme edge (-1 for rows without edges) for max/min, None for sum. A sum
    comes back in the accumulator's dtype (float32 for half precision), unrounded.
    """
    check_launchable(src, u, e)
    like = u if u is not None else e
    if reduce != "sum" and like.dtype not in ATOMIC_DTYPES_FOR_EXTREMES:
        raise TypeError(f"edge-parallel {reduce} needs float32 or float64 features (Triton has no "
                        f"{like.dtype} atomic {reduce}); use the node-parallel kernel")
    width = math.prod(features)
    num_edges = src.numel()
    acc_dtype = accumulator_torch(like.dtype)
    fill = {"sum": 0.0, "max": float("-inf"), "min": float("inf")}[reduce]
    acc = torch.full((num_dst, width), fill, dtype=acc_dtype, device=like.device)
    arg_e = torch.full((num_dst, width), num_edges, dtype=torch.int64, device=like.device) if reduce != "sum" else None
    if num_edges and width:
        u2 = flat(u, u.shape[0]) if u is not None else None
        e2 = flat(e, num_edges) if e is not None else None
        block_f = feature_block(width)
        common = dict(
            OP=op, REDUCE=reduce, U_BROADCAST=u_off is not None, E_BROADCAST=e_off is not None,
            ACC=accumulator(like.dtype), BLOCK_F=block_f,
            INDEX_64=needs_int64(num_dst * width, num_edges * width, u2.numel() if u2 is not None else 0,
                                 e2.numel() if e2 is not None else 0))
        # arg_e_ptr is in RESTORE: the autotuner copies it back after each trial, so its placeholder
        # must be a scratch tensor of its own (a copy into src would bump the graph's version).
        unused_arg_e = arg_e if arg_e is not None else torch.empty(1, dtype=torch.int64, device=like.device)
        args = (src, dst, pointer_or(u2, acc), pointer_or(e2, acc), pointer_or(u_off, src), pointer_or(e_off, src),
                acc, unused_arg_e, num_edges, width,
                u2.shape[1] if u2 is not None else 0, e2.shape[1] if e2 is not None else 0)

        def grid(meta):
            return checked_grid(triton.cdiv(num_edges, meta["BLOCK_E"]) * triton.cdiv(width, block_f))

        spmm_edge_kernel[grid](*args, ARG_PASS=False, **common)
        if reduce != "sum":
            spmm_edge_kernel[grid](*args, ARG_PASS=True, **common)
    out_shape = (num_dst,) + features
    if reduce == "sum":  # unrounded: the caller divides a mean in it first
        return acc.reshape(out_shape), None
    found = arg_e < num_edges
    out = torch.where(found, acc, torch.zeros((), dtype=acc_dtype, device=acc.device)).to(like.dtype)
    return out.reshape(out_shape), torch.where(found, arg_e, -1).reshape(out_shape)
