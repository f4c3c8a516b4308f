r"""g-SpMM on the CPU, node-parallel over the in-CSR.

:math:`out_{v,k} = \bigoplus_{p \in [ptr_v, ptr_{v+1})} op(u_{src_p, uoff_k}, e_{eid_p, eoff_k})`

Copy ops read one operand row per edge: ``rows`` is ``src`` (copy_u) or ``eid`` (copy_e), so
one kernel serves both and never touches an operand the op does not read. Binary ops map each
output element to its element in a (broadcast) operand row with ``uoff``/``eoff`` (see
``unigraph.ops.broadcast.broadcast_offsets``); per-slice edge weights ``u [N, P, Q] * e [E, P]``
(GAT's weighted sum, edge-weighted GCN) have their own contiguous kernel, which LLVM
vectorizes like the copy kernels.

Max/min kernels write, per output element, the winning edge's row of each operand it reads
(first on ties), as the backward pass needs them: the copy kernel only that of its one operand
(the source for copy_u, the edge for copy_e), the binary kernel source and edge id. A NaN
message wins and stays (the result is NaN, as ``torch.amax`` gives; the winner is the row's
first NaN edge), whatever the edge order; a row whose messages are all -inf (max) gives -inf.
Rows without in-edges give 0 and ids -1.

Index arrays (``rows``, ``src``, ``eid``) are int32 or int64 (``indices.py`` picks int32 where
every index fits); the kernels are compiled for both and only index with them. The copy
kernel's ``arg`` has the dtype of ``rows`` (the numba backend's ``arg_dtype``, by the same
rule), so the winners of a 500k-node graph are int32: half the bytes written here and read by
the backward scatter.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

from unigraph.kernels.cpu import FASTMATH, parallel_kernel
from unigraph.kernels.cpu.messages import apply
from unigraph.kernels.cpu.prefetch import DISTANCE, SCATTER_AHEAD, prefetch_at, prefetch_row


@parallel_kernel(fastmath=FASTMATH)
def gather_sum(blocks, ptr, rows, x, out):
    """out[v] = sum of x[rows[p]] over v's CSR slots p (out [Nd, K], overwritten).

    Four edges per step into a thread-local accumulator: four independent row loads in flight
    hide more of the gather latency and the accumulator is read and written once per four rows
    (1.5-2x faster than one edge per step at mean degree 8-128, F = 64, 2 threads). The rows
    :data:`~unigraph.kernels.cpu.prefetch.DISTANCE` slots ahead are prefetched (the next rows
    of the block, across row ends)."""
    width = out.shape[1]
    for b in prange(blocks.shape[0] - 1):
        acc = np.empty(width, dtype=out.dtype)
        last = ptr[blocks[b + 1]] - 1  # the block's last slot: prefetches stay inside the block
        for v in range(blocks[b], blocks[b + 1]):
            for k in range(width):
                acc[k] = 0
            p, end = ptr[v], ptr[v + 1]
            while p + 3 < end:
                ahead = min(p + DISTANCE, last - 3)
                for j in range(4):
                    prefetch_row(x, rows[ahead + j])
                r0, r1, r2, r3 = rows[p], rows[p + 1], rows[p + 2], rows[p + 3]
                for k in range(width):
                    acc[k] += (x[r0, k] + x[r1, k]) + (x[r2, k] + x[r3, k])
                p += 4
            while p < end:
                prefetch_row(x, rows[min(p + DISTANCE, last)])
                r0 = rows[p]
                for k in range(width):
                    acc[k] += x[r0, k]
                p += 1
            for k in range(width):
                out[v, k] = acc[k]


@numba.njit(inline="always")
def beats(value, best, sign):
    """Whether ``value`` replaces the running extreme ``best`` (``sign`` 1 for max, -1 for min:
    negation is exact, so ``-value > -best`` is ``value < best``). NaN beats every number and is
    never replaced (NaN propagates, as in torch.amax); otherwise strictly greater, so the first
    of equal values is kept. Branch-free, so the feature loop vectorizes."""
    return (sign * value > sign * best) | ((value != value) & (best == best))


@parallel_kernel(fastmath=FASTMATH)
def gather_extreme(blocks, ptr, rows, x, sign, slot_like, out, arg):
    """out[v] = elementwise max (``sign`` 1) or min (-1) of x[rows[p]] over v's slots; ``arg``
    gets the winning row ``rows[p]`` (the first on ties), -1 for a row without in-edges. The
    winning slots are kept per row in a scratch array of ``slot_like``'s dtype (int32 where the
    edge count allows: twice the lanes per vector)."""
    width = out.shape[1]
    for b in prange(blocks.shape[0] - 1):
        best = np.empty(width, dtype=out.dtype)
        slot = np.empty(width, dtype=slot_like.dtype)
        last = ptr[blocks[b + 1]] - 1
        for v in range(blocks[b], blocks[b + 1]):
            start, end = ptr[v], ptr[v + 1]
            if start == end:
                for k in range(width):
                    out[v, k] = 0
                    arg[v, k] = -1
                continue
            r = rows[start]
            for k in range(width):
                best[k] = x[r, k]
                slot[k] = start
            for p in range(start + 1, end):
                prefetch_row(x, rows[min(p + DISTANCE, last)])
                r = rows[p]
                for k in range(width):
                    value = x[r, k]
                    take = beats(value, best[k], sign)
                    best[k] = value if take else best[k]
                    slot[k] = p if take else slot[k]
            for k in range(width):
                out[v, k] = best[k]
                arg[v, k] = rows[slot[k]]


@parallel_kernel(fastmath=FASTMATH)
def weighted_sum(blocks, ptr, src, eid, u, weights, out):
    """out[v, p, :] = sum over in-edges of weights[edge, p] * u[src, p, :] (u [Ns, P, Q], out overwritten)."""
    slices, width = out.shape[1], out.shape[2]
    for b in prange(blocks.shape[0] - 1):
        for v in range(blocks[b], blocks[b + 1]):
            for p in range(slices):
                for k in range(width):
                    out[v, p, k] = 0
            for q in range(ptr[v], ptr[v + 1]):
                s = src[q]
                edge = eid[q]
                for p in range(slices):
                    w = weights[edge, p]
                    for k in range(width):
                        out[v, p, k] += w * u[s, p, k]


@parallel_kernel(fastmath=FASTMATH)
def binary_sum(blocks, ptr, src, eid, u, e, uoff, eoff, op, out):
    """out[v, k] = sum over in-edges of op(u[src, uoff[k]], e[edge, eoff[k]]) (out overwritten)."""
    width = out.shape[1]
    for b in prange(blocks.shape[0] - 1):
        for v in range(blocks[b], blocks[b + 1]):
            for k in range(width):
                out[v, k] = 0
            for q in range(ptr[v], ptr[v + 1]):
                s = src[q]
                edge = eid[q]
                for k in range(width):
                    out[v, k] += apply(op, u[s, uoff[k]], e[edge, eoff[k]])


@parallel_kernel()
def binary_extreme(blocks, ptr, src, eid, u, e, uoff, eoff, op, sign, out, arg_u, arg_e):
    """Max (``sign`` 1) or min (-1) over in-edges of op(u[src, uoff[k]], e[edge, eoff[k]]), and
    the winning edge's source and edge id (-1 for a row without in-edges)."""
    width = out.shape[1]
    for b in prange(blocks.shape[0] - 1):
        slot = np.empty(width, dtype=np.int64)
        for v in range(blocks[b], blocks[b + 1]):
            start, end = ptr[v], ptr[v + 1]
            if start == end:
                for k in range(width):
                    out[v, k] = 0
                    arg_u[v, k] = -1
                    arg_e[v, k] = -1
                continue
            s, edge = src[start], eid[start]
            for k in range(width):
                out[v, k] = apply(op, u[s, uoff[k]], e[edge, eoff[k]])
                slot[k] = start
            for q in range(start + 1, end):
                s, edge = src[q], eid[q]
                for k in range(width):
                    value = apply(op, u[s, uoff[k]], e[edge, eoff[k]])
                    if beats(value, out[v, k], sign):
                        out[v, k] = value
                        slot[k] = q
            for k in range(width):
                arg_u[v, k] = src[slot[k]]
                arg_e[v, k] = eid[slot[k]]


@parallel_kernel()
def scatter_columns(parts, rows, values, out):
    """``out[rows[v, k], k] += values[v, k]`` where ``rows[v, k] >= 0``: the gradient of a
    max/min reaching the winning operand rows. Threads own column ranges ``parts[c]:parts[c+1]``
    (whole cache lines), so no two write the same element: no atomics, and the sums are
    deterministic (each element adds its contributions in order of ``v``). The target lines of
    row ``v + SCATTER_AHEAD`` are prefetched: each element lands in a random row, so the loop is
    bound by misses the hardware cannot predict (a -1 prefetches row 0, harmlessly)."""
    num = values.shape[0]
    for c in prange(parts.shape[0] - 1):
        lo, hi = parts[c], parts[c + 1]
        for v in range(num):
            ahead = min(v + SCATTER_AHEAD, num - 1)
            for k in range(lo, hi):
                prefetch_at(out, max(rows[ahead, k], 0), k)
            for k in range(lo, hi):
                r = rows[v, k]
                if r >= 0:
                    out[r, k] += values[v, k]
