r"""Edge softmax, node-parallel: one program per (destination row of the in-CSR, feature block).

.. math::
    out_{j,k} = \frac{\exp(s_{j,k} - m_{v,k})}{\sum_{i \in in(v)} \exp(s_{i,k} - m_{v,k})},
    \qquad m_{v,k} = \max_{i \in in(v)} s_{i,k}

Two passes over the row's edges. The first keeps a running maximum and a running sum
rescaled whenever the maximum grows (``sum <- sum * exp(m_old - m_new) + sum(exp(s - m_new))``,
the online softmax of Milakov and Gimelshein, 2018), so the statistics need one read of the
scores instead of two. The second writes the normalized values. Subtracting the maximum keeps
``exp`` finite for any score. Its backward is the composite formula of
:mod:`unigraph.ops.gradients` (one g-SpMM and one g-SDDMM on this backend).
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from unigraph.kernels.triton.messages import csr_row
from unigraph.kernels.triton.runtime import (
    INTERPRETER_BLOCK_E, accumulator, check_launchable, checked_grid, degree_bucket, feature_block, flat, needs_int64,
    tuning)

CONFIGS = [
    triton.Config({"BLOCK_E": 16}, num_warps=2),
    triton.Config({"BLOCK_E": 32}, num_warps=4),
    triton.Config({"BLOCK_E": 64}, num_warps=4),
]


@triton.autotune(configs=tuning(CONFIGS, BLOCK_E=INTERPRETER_BLOCK_E), key=["width", "degree_bucket", "INDEX_64"])
@triton.jit
def edge_softmax_kernel(
    # pointers
    ptr_ptr, eid_ptr, scores_ptr, out_ptr,
    # sizes
    width, degree_bucket,
    # meta-parameters
    ACC: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr,
):
    row, start, end = csr_row(ptr_ptr, INDEX_64)
    cols = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    col_mask = cols < width

    row_max = tl.full([BLOCK_F], -float("inf"), dtype=ACC)
    row_sum = tl.zeros([BLOCK_F], dtype=ACC)
    for first in range(start, end, BLOCK_E):
        pos = first + tl.arange(0, BLOCK_E)
        pos_mask = pos < end
        eid = tl.load(eid_ptr + pos, mask=pos_mask, other=0)
        if not INDEX_64:
            eid = eid.to(tl.int32)
        x = tl.load(scores_ptr + eid[:, None] * width + cols[None, :],
                    mask=pos_mask[:, None] & col_mask[None, :], other=0).to(ACC)
        x = tl.where(pos_mask[:, None], x, -float("inf"))  # padding edges weigh exp(-inf) = 0
        new_max = tl.maximum(row_max, tl.max(x, axis=0))
        row_sum = row_sum * tl.exp(row_max - new_max) + tl.sum(tl.exp(x - new_max[None, :]), axis=0)
        row_max = new_max

    for first in range(start, end, BLOCK_E):
        pos = first + tl.arange(0, BLOCK_E)
        pos_mask = pos < end
        mask = pos_mask[:, None] & col_mask[None, :]
        eid = tl.load(eid_ptr + pos, mask=pos_mask, other=0)
        if not INDEX_64:
            eid = eid.to(tl.int32)
        at = eid[:, None] * width + cols[None, :]
        x = tl.load(scores_ptr + at, mask=mask, other=0).to(ACC)
        weights = tl.exp(x - row_max[None, :]) / row_sum[None, :]
        tl.store(out_ptr + at, weights.to(out_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------------- launcher
def edge_softmax(ptr: Tensor, eid: Tensor, num_dst: int, scores: Tensor) -> Tensor:
    """Softmax of ``scores [E, *features]`` over the in-edges of each row of the in-CSR
    ``(ptr, eid)``; the same shape back, in edge-id order."""
    check_launchable(ptr, scores)
    num_edges = scores.shape[0]
    width = math.prod(scores.shape[1:])
    out = torch.empty_like(scores, memory_format=torch.contiguous_format)
    if out.numel() == 0:
        return out
    block_f = feature_block(width)
    edge_softmax_kernel[checked_grid(num_dst, triton.cdiv(width, block_f))](
        ptr, eid, flat(scores, num_edges), out, width, degree_bucket(num_edges, num_dst),
        ACC=accumulator(scores.dtype), INDEX_64=needs_int64(num_edges * width), BLOCK_F=block_f)
    return out
