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
   keep ``dz`` and ``a_e mask_e`` per edge and head (E x H, small);
2. over source rows (out-CSR): ``dh_u = sum a_e mask_e go_v`` and ``del_u = sum dz_e``.

Each output row is written by one thread: no atomics, deterministic.
"""
from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from unigraph.kernels.cpu import FASTMATH


@numba.njit(inline="always")
def _score(el, er, ee, has_ee, s, v, edge, head, slope):
    z = el[s, head] + er[v, head]
    if has_ee:
        z += ee[edge, head]
    return z if z > 0 else z * slope


@numba.njit(parallel=True, fastmath=FASTMATH, cache=True)
def forward(blocks, ptr, src, eid, h, el, er, ee, has_ee, mask, has_mask, slope, out, row_max, row_sum):
    heads, width = h.shape[1], h.shape[2]
    for b in prange(blocks.shape[0] - 1):
        widest = 0
        for v in range(blocks[b], blocks[b + 1]):
            widest = max(widest, ptr[v + 1] - ptr[v])
        weight = np.empty((widest, heads), dtype=h.dtype)  # this block's scratch: one row's scores
        top = np.empty(heads, dtype=h.dtype)
        total = np.empty(heads, dtype=h.dtype)
        for v in range(blocks[b], blocks[b + 1]):
            start, end = ptr[v], ptr[v + 1]
            if start == end:
                continue  # out, row_max, row_sum were zero-initialized
            for q in range(start, end):  # scores once per edge and head; the running max in edge order
                for head in range(heads):
                    z = _score(el, er, ee, has_ee, src[q], v, eid[q], head, slope)
                    weight[q - start, head] = z
                    top[head] = z if q == start else max(top[head], z)
            total[:] = 0
            for q in range(start, end):  # one exp per edge and head
                for head in range(heads):
                    w = math.exp(weight[q - start, head] - top[head])
                    weight[q - start, head] = w
                    total[head] += w
            for q in range(start, end):
                s = src[q]
                for head in range(heads):
                    w = weight[q - start, head] / total[head]
                    if has_mask:
                        w *= mask[eid[q], head]
                    for f in range(width):
                        out[v, head, f] += w * h[s, head, f]
            for head in range(heads):
                row_max[v, head] = top[head]
                row_sum[v, head] = total[head]


@numba.njit(parallel=True, fastmath=FASTMATH, cache=True)
def backward_by_destination(blocks, ptr, src, eid, h, el, er, ee, has_ee, mask, has_mask, slope, out, row_max,
                            row_sum, grad_out, d_er, dz, kept):
    """Pass 1: d_er (zeroed) and, per edge and head, dz and the kept weight a * mask."""
    heads, width = h.shape[1], h.shape[2]
    for b in prange(blocks.shape[0] - 1):
        for v in range(blocks[b], blocks[b + 1]):
            for head in range(heads):
                centre = out[v, head, 0] * grad_out[v, head, 0]
                for f in range(1, width):
                    centre += out[v, head, f] * grad_out[v, head, f]
                inv = 1 / row_sum[v, head] if ptr[v + 1] > ptr[v] else 0.0
                for q in range(ptr[v], ptr[v + 1]):
                    s = src[q]
                    edge = eid[q]
                    z = el[s, head] + er[v, head]
                    if has_ee:
                        z += ee[edge, head]
                    weight = math.exp((z if z > 0 else z * slope) - row_max[v, head]) * inv
                    d_weight = h[s, head, 0] * grad_out[v, head, 0]
                    for f in range(1, width):
                        d_weight += h[s, head, f] * grad_out[v, head, f]
                    keep = mask[edge, head] if has_mask else 1.0
                    d_score = weight * (d_weight * keep - centre)
                    d_z = d_score if z > 0 else d_score * slope
                    dz[edge, head] = d_z
                    kept[edge, head] = weight * keep
                    d_er[v, head] += d_z


@numba.njit(parallel=True, fastmath=FASTMATH, cache=True)
def backward_by_source(blocks, out_ptr, out_dst, out_eid, grad_out, dz, kept, need_h, dh, d_el):
    """Pass 2: dh[u] = sum kept * grad_out[v] and d_el[u] = sum dz over u's out-edges (zeroed)."""
    heads, width = grad_out.shape[1], grad_out.shape[2]
    for b in prange(blocks.shape[0] - 1):
        for u in range(blocks[b], blocks[b + 1]):
            for q in range(out_ptr[u], out_ptr[u + 1]):
                v = out_dst[q]
                edge = out_eid[q]
                for head in range(heads):
                    d_el[u, head] += dz[edge, head]
                    if need_h:
                        w = kept[edge, head]
                        for f in range(width):
                            dh[u, head, f] += w * grad_out[v, head, f]
