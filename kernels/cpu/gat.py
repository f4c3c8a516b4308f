r"""Fused GAT attention on the CPU: scores, edge softmax and weighted sum in one pass per row.

Forward, per destination ``v`` and head ``h`` (no E x H score tensor, no E x H x F messages):

.. math::
    z_e = el_{u} + er_{v} (+ ee_e),\quad s_e = \mathrm{LeakyReLU}(z_e),\quad
    m_v = \max_e s_e,\quad d_v = \sum_e e^{s_e - m_v},\quad
    out_v = \sum_e \frac{e^{s_e - m_v}}{d_v} mask_e\, h_u

Each row's scores, then their exponentials, live in a per-block scratch of (largest degree in the
block) x H floats, edge-major so a row's heads are adjacent: one score and one ``exp`` per edge and
head (no E x H tensor is written), and the weighted sum reads each neighbour's row once for all heads.

Backward (formulas in ``unigraph.ops.gradients``), two node-parallel passes:

1. over destination rows (in-CSR): recompute ``a_e``; ``da_e = mask_e <h_u, go_v>``;
   ``ds_e = a_e (da_e - <out_v, go_v>)``; ``dz_e = ds_e LeakyReLU'(z_e)``; accumulate ``der_v``;
   keep ``dz`` and ``a_e mask_e`` per edge and head (E x H, small) in in-CSR slot order, so
   they are written sequentially (edge-id order is random with respect to the in-CSR);
2. over source rows (out-CSR): ``dh_u = sum a_e mask_e go_v`` and ``del_u = sum dz_e``,
   reading pass 1's values through the out-slot -> in-slot map (``indices.in_slots``).

Every loop walks a row's edges once, all heads of an edge together (each gathered row is read
once per pass), accumulates in a thread-local row and writes each output row once (rows
without edges get zeros: the outputs need no zeroing). The rows, scores and mask entries
:data:`~unigraph.kernels.cpu.prefetch.DISTANCE` slots ahead are prefetched (``prefetch.py``):
the gathers are random, so each would otherwise cost a full memory latency.
Each output row is written by one thread: no atomics, deterministic.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from unigraph.kernels.cpu import FASTMATH, parallel_kernel
from unigraph.kernels.cpu.prefetch import DISTANCE, prefetch_at, prefetch_row


@numba.njit(inline="always")
def _score(el, er, ee, has_ee, s, v, edge, head, slope):
    z = el[s, head] + er[v, head]
    if has_ee:
        z += ee[edge, head]
    return z if z > 0 else z * slope


@parallel_kernel(fastmath=FASTMATH)
def forward(blocks, ptr, src, eid, h, el, er, ee, has_ee, mask, has_mask, slope, out, row_max, row_sum):
    """out, row_max, row_sum: every row written (zeros for rows without in-edges)."""
    heads, width = h.shape[1], h.shape[2]
    rows = h.reshape((h.shape[0], heads * width))  # a 2-d view, for the row prefetch
    for b in prange(blocks.shape[0] - 1):
        widest = 0
        for v in range(blocks[b], blocks[b + 1]):
            widest = max(widest, ptr[v + 1] - ptr[v])
        weight = np.empty((widest, heads), dtype=h.dtype)  # this block's scratch: one row's scores
        top = np.empty(heads, dtype=h.dtype)
        total = np.empty(heads, dtype=h.dtype)
        scale = np.empty(heads, dtype=h.dtype)
        acc = np.empty((heads, width), dtype=h.dtype)
        last = ptr[blocks[b + 1]] - 1  # the block's last slot: prefetches stay inside the block
        for v in range(blocks[b], blocks[b + 1]):
            start, end = ptr[v], ptr[v + 1]
            acc[:] = 0
            top[:] = 0
            total[:] = 0
            for q in range(start, end):  # scores once per edge and head; the running max in edge order
                ahead = min(q + DISTANCE, last)
                prefetch_at(el, src[ahead], 0)
                if has_ee:
                    prefetch_at(ee, eid[ahead], 0)
                for head in range(heads):
                    z = _score(el, er, ee, has_ee, src[q], v, eid[q], head, slope)
                    weight[q - start, head] = z
                    top[head] = z if q == start else max(top[head], z)
            for q in range(start, end):  # one exp per edge and head
                for head in range(heads):
                    w = math.exp(weight[q - start, head] - top[head])
                    weight[q - start, head] = w
                    total[head] += w
            for head in range(heads):
                scale[head] = 1 / total[head] if end > start else 0.0
            for q in range(start, end):
                ahead = min(q + DISTANCE, last)
                prefetch_row(rows, src[ahead])
                if has_mask:
                    prefetch_at(mask, eid[ahead], 0)
                s = src[q]
                for head in range(heads):
                    w = weight[q - start, head] * scale[head]
                    if has_mask:
                        w *= mask[eid[q], head]
                    for f in range(width):
                        acc[head, f] += w * h[s, head, f]
            for head in range(heads):
                row_max[v, head] = top[head]
                row_sum[v, head] = total[head]
                for f in range(width):
                    out[v, head, f] = acc[head, f]


@parallel_kernel(fastmath=FASTMATH)
def backward_by_destination(blocks, ptr, src, eid, h, el, er, ee, has_ee, mask, has_mask, slope, out, row_max,
                            row_sum, grad_out, d_er, dz, kept):
    """Pass 1: d_er (every row written) and, per in-CSR slot and head, dz and the kept weight a * mask."""
    heads, width = h.shape[1], h.shape[2]
    rows = h.reshape((h.shape[0], heads * width))
    for b in prange(blocks.shape[0] - 1):
        centre = np.empty(heads, dtype=h.dtype)
        inv = np.empty(heads, dtype=h.dtype)
        base = np.empty(heads, dtype=h.dtype)
        acc = np.empty(heads, dtype=h.dtype)
        last = ptr[blocks[b + 1]] - 1
        for v in range(blocks[b], blocks[b + 1]):
            start, end = ptr[v], ptr[v + 1]
            for head in range(heads):
                c = out[v, head, 0] * grad_out[v, head, 0]  # seeded, not 0.0: sums stay in h's dtype
                for f in range(1, width):
                    c += out[v, head, f] * grad_out[v, head, f]
                centre[head] = c
                inv[head] = 1 / row_sum[v, head] if end > start else 0.0
                base[head] = er[v, head]
                acc[head] = 0
            for q in range(start, end):
                ahead = min(q + DISTANCE, last)
                prefetch_row(rows, src[ahead])
                prefetch_at(el, src[ahead], 0)
                if has_mask:
                    prefetch_at(mask, eid[ahead], 0)
                if has_ee:
                    prefetch_at(ee, eid[ahead], 0)
                s = src[q]
                edge = eid[q]
                for head in range(heads):
                    z = el[s, head] + base[head]
                    if has_ee:
                        z += ee[edge, head]
                    weight = math.exp((z if z > 0 else z * slope) - row_max[v, head]) * inv[head]
                    d_weight = h[s, head, 0] * grad_out[v, head, 0]
                    for f in range(1, width):
                        d_weight += h[s, head, f] * grad_out[v, head, f]
                    keep = mask[edge, head] if has_mask else 1.0
                    d_score = weight * (d_weight * keep - centre[head])
                    d_z = d_score if z > 0 else d_score * slope
                    dz[q, head] = d_z
                    kept[q, head] = weight * keep
                    acc[head] += d_z
            for head in range(heads):
                d_er[v, head] = acc[head]


@parallel_kernel(fastmath=FASTMATH)
def backward_by_source(blocks, out_ptr, out_dst, slot, grad_out, dz, kept, need_h, dh, d_el):
    """Pass 2: dh[u] = sum kept * grad_out[v] and d_el[u] = sum dz over u's out-edges (every row
    written); ``slot`` maps each out-CSR slot to the in-CSR slot where pass 1 left dz and kept."""
    heads, width = grad_out.shape[1], grad_out.shape[2]
    rows = grad_out.reshape((grad_out.shape[0], heads * width))
    for b in prange(blocks.shape[0] - 1):
        acc = np.empty((heads, width), dtype=grad_out.dtype)
        acc_el = np.empty(heads, dtype=grad_out.dtype)
        last = out_ptr[blocks[b + 1]] - 1
        for u in range(blocks[b], blocks[b + 1]):
            acc[:] = 0
            acc_el[:] = 0
            for q in range(out_ptr[u], out_ptr[u + 1]):
                ahead = min(q + DISTANCE, last)
                prefetch_at(dz, slot[ahead], 0)
                if need_h:
                    prefetch_row(rows, out_dst[ahead])
                    prefetch_at(kept, slot[ahead], 0)
                v = out_dst[q]
                k = slot[q]
                for head in range(heads):
                    acc_el[head] += dz[k, head]
                    if need_h:
                        w = kept[k, head]
                        for f in range(width):
                            acc[head, f] += w * grad_out[v, head, f]
            for head in range(heads):
                d_el[u, head] = acc_el[head]
                if need_h:
                    for f in range(width):
                        dh[u, head, f] = acc[head, f]
