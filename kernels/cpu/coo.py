r"""g-SpMM sums over the edge list itself (COO): the small-graph kernels.

:math:`out_{v} = \sum_{k:\, dst_k = v} w_k \, x_{src_k}` (``w_k = 1`` for ``copy_u``)

They need no CSR, no row blocks and no degree statistics, only the two index rows every graph
keeps: on a graph that is new every step (a mini-batch of small graphs) that is what the CSR
kernels' fresh-graph costs (both CSRs, their plans, the selector's statistics) buy back only on
large graphs (``backends/small_graph.py`` says where the line lies).

Threads own ranges of destination rows (``bounds``, one range per thread: ``row_ranges``): each
zeroes its rows, scans the whole edge list and adds the edges that land in its rows, in edge-id
order. Every output row is written by one thread with its terms in edge order, so the result is
the same, bit for bit, at any thread count (deterministic, no atomics); the edge list is read once
per thread (16 bytes an edge), the rows' additions are divided among them.

GINEConv's message summed (:func:`scatter_add_relu`, ``out_v = \sum_k relu(x_{src_k} + e_k)``) runs in
the same pass, and its backward in two (:func:`add_relu_edge_grad`, parallel over edges, and
the same kernel with threads owning source rows): no ``[E, F]`` message in the forward.

The backward of a sum is the same sum with the roles swapped (``grad_x[src_k] += w_k grad_out[dst_k]``),
so one kernel serves both directions. The max/min kernel keeps each output element's winning
source (the first edge in edge-id order on ties; the first NaN, which no number replaces): the
CSR kernel's winner (``spmm.gather_extreme``: CSR rows keep the edges in edge-id order), so the
backward's scatter at the winners is the one every backend runs. Index arrays are int64 (the graph's own, checked when the
graph was built); the caller guarantees ``x`` has a row for every source index and ``out`` one
for every destination index.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from unigraph.kernels.cpu import FASTMATH, parallel_kernel
from unigraph.kernels.cpu.spmm import beats


def row_ranges(rows: int, threads: int) -> np.ndarray:
    """``threads + 1`` non-decreasing bounds splitting ``0..rows`` into equal ranges."""
    return np.array([rows * i // threads for i in range(threads + 1)], dtype=np.int64)


@parallel_kernel(fastmath=FASTMATH)
def scatter_sum(bounds, src, dst, w, weighted, x, out):
    """``out[dst[k]] += w[k] * x[src[k]]`` over the edges in order, or ``x[src[k]]`` alone where not
    ``weighted`` (``w`` is then not read); ``out`` [Nd, F] is overwritten. The two inner loops stay
    apart: multiplying by a weight of 1 instead measured 15-30% slower at widths 32 and 64 (the
    unweighted loop vectorizes as a copy-add)."""
    width = out.shape[1]
    for t in prange(bounds.shape[0] - 1):
        lo, hi = bounds[t], bounds[t + 1]
        out[lo:hi] = 0
        for k in range(src.shape[0]):
            d = dst[k]
            if lo <= d < hi:
                s = src[k]
                if weighted:
                    weight = w[k]
                    for j in range(width):
                        out[d, j] += weight * x[s, j]
                else:
                    for j in range(width):
                        out[d, j] += x[s, j]


@parallel_kernel()
def divide_rows(x, counts, out):
    """``out[v] = x[v] / max(counts[v], 1)`` for every row ``v`` (``out`` may be ``x``): a mean from
    its sum, or the mean's gradient, with torch's bits (``x / counts.clamp(min=1).to(x.dtype)[:, None]``):
    each count made ``x``'s dtype first (one rounding, as torch's ``.to``), then an IEEE division.
    Not fastmath: that would let the division become a product by the reciprocal."""
    rows, width = x.shape[0], x.shape[1]
    divisor = np.empty(rows, x.dtype)
    for v in range(rows):
        divisor[v] = max(counts[v], 1)
    for v in prange(rows):
        for j in range(width):
            out[v, j] = x[v, j] / divisor[v]


@parallel_kernel(fastmath=FASTMATH)
def scatter_extreme(bounds, src, dst, x, sign, out, arg):
    """``out[v, j]`` = max (``sign`` 1) or min (-1) of ``x[src[k], j]`` over the edges ``k`` into
    ``v``, ``arg[v, j]`` its source ``src[k]`` (the first edge on ties, see the module docstring);
    0 and -1 for a row without in-edges. ``out`` [Nd, F] and ``arg`` are overwritten."""
    width = out.shape[1]
    for t in prange(bounds.shape[0] - 1):
        lo, hi = bounds[t], bounds[t + 1]
        out[lo:hi] = 0
        arg[lo:hi] = -1
        for k in range(src.shape[0]):
            d = dst[k]
            if lo <= d < hi:
                s = src[k]
                for j in range(width):
                    value = x[s, j]
                    take = (arg[d, j] < 0) | beats(value, out[d, j], sign)
                    out[d, j] = value if take else out[d, j]
                    arg[d, j] = s if take else arg[d, j]


@parallel_kernel(fastmath=FASTMATH)
def scatter_add_relu(bounds, src, dst, x, e, grad_out, backward, out):
    """GINEConv's message summed: ``out[dst[k]] += relu(x[src[k]] + e[k])`` over the edges in order
    (``e`` [E, F], a row per edge; ``grad_out`` not read), threads owning destination rows; or,
    ``backward``, the nodes' gradient ``out[src[k]] += grad_out[dst[k]]`` where that term was not
    cut (:func:`add_relu_edge_grad`'s rule), threads owning source rows (``bounds`` over them).
    ``out`` is overwritten. A term ``<= 0`` adds nothing: the forward's row starts at +0 and only
    positive terms or NaN reach it, so skipping a 0 changes no bit; a NaN term is added (torch's
    relu keeps NaN, and its backward passes a NaN's gradient)."""
    width = out.shape[1]
    owner = src if backward else dst
    for t in prange(bounds.shape[0] - 1):
        lo, hi = bounds[t], bounds[t + 1]
        out[lo:hi] = 0
        for k in range(owner.shape[0]):
            row = owner[k]
            if lo <= row < hi:
                s, d = src[k], dst[k]
                for j in range(width):
                    value = x[s, j] + e[k, j]
                    if not value <= 0:
                        out[row, j] += grad_out[d, j] if backward else value


@parallel_kernel(fastmath=FASTMATH)
def add_relu_edge_grad(src, dst, x, e, grad_out, grad_e):
    """``grad_e[k] = grad_out[dst[k]]`` where ``x[src[k]] + e[k]`` is not ``<= 0``, else 0: torch's
    relu backward (``threshold_backward``: a NaN passes its gradient), a select, not a product (a
    NaN or infinite gradient where the term was cut gives 0, as in torch). Parallel over edges."""
    width = grad_e.shape[1]
    for k in prange(src.shape[0]):
        s, d = src[k], dst[k]
        for j in range(width):
            grad_e[k, j] = grad_out[d, j]
            if x[s, j] + e[k, j] <= 0:
                grad_e[k, j] = 0
