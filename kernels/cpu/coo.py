r"""g-SpMM sums over the edge list itself (COO), on one thread: the small-graph kernels.

:math:`out_{v} = \sum_{k:\, dst_k = v} w_k \, x_{src_k}` (``w_k = 1`` for ``copy_u``)

One pass over the edges in edge-id order, adding each source row into its destination row. It
needs no CSR, no row blocks and no degree statistics, only the two index rows every graph keeps:
on a graph that is new every step (a mini-batch of small graphs) that is what the CSR kernels'
fresh-graph costs (the two CSRs, their plans, the selector's statistics) buy back only on large
graphs (``backends/small_graph.py`` says where the line lies). Serial by design: deterministic, and
on these sizes waking a thread team costs more than the work.

The backward of a sum is the same sum with the roles swapped (``grad_x[src_k] += w_k grad_out[dst_k]``),
so one kernel serves both directions. Index arrays are int64 (the graph's own, checked when the
graph was built); the caller guarantees ``x`` has a row for every source index and ``out`` one
for every destination index.
"""
from __future__ import annotations

import numba

from unigraph.kernels.cpu import FASTMATH


@numba.njit(cache=True, fastmath=FASTMATH)
def scatter_sum(src, dst, x, out):
    """``out[dst[k]] += x[src[k]]`` over the edges in order (``out`` [Nd, F], overwritten)."""
    out[:] = 0
    width = out.shape[1]
    for k in range(src.shape[0]):
        s, d = src[k], dst[k]
        for j in range(width):
            out[d, j] += x[s, j]


@numba.njit(cache=True, fastmath=FASTMATH)
def scatter_weighted_sum(src, dst, w, x, out):
    """``out[dst[k]] += w[k] * x[src[k]]`` over the edges in order (``out`` [Nd, F], overwritten)."""
    out[:] = 0
    width = out.shape[1]
    for k in range(src.shape[0]):
        s, d, weight = src[k], dst[k], w[k]
        for j in range(width):
            out[d, j] += weight * x[s, j]
