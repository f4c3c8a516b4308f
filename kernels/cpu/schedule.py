"""Work-balanced row blocks for the node-parallel CPU kernels.

``prange`` over rows gives every thread the same number of rows; on power-law graphs one thread
then gets the hubs and the others wait (R-MAT, mean degree 128: 2 threads ran 1.6x, not 2x,
faster than one). Kernels instead loop ``prange`` over blocks of consecutive rows that carry
about equal work, counted as edges plus rows (a row costs its zeroing and write-back even when
it has no edges). Several blocks per thread absorb the rest of the imbalance (one hub row can
never be split: it stays in one block).
"""
from __future__ import annotations

import numba
import numpy as np

from unigraph.kernels.cpu import current_threads

BLOCKS_PER_THREAD = 4


@numba.njit(cache=True)
def _balanced_bounds(ptr, parts):
    rows = ptr.shape[0] - 1
    total = ptr[rows] + rows
    bounds = np.empty(parts + 1, dtype=np.int64)
    bounds[0] = 0
    bounds[parts] = rows
    for j in range(1, parts):
        target = total * j // parts
        lo, hi = 0, rows  # smallest row i with ptr[i] + i >= target (the work before row i)
        while lo < hi:
            mid = (lo + hi) // 2
            if ptr[mid] + mid < target:
                lo = mid + 1
            else:
                hi = mid
        bounds[j] = lo
    return bounds


def row_blocks(ptr: np.ndarray, threads: int | None = None) -> np.ndarray:
    """Non-decreasing row bounds ``b`` (``b[0] = 0``, ``b[-1] = rows``): block ``i`` is rows
    ``b[i]:b[i+1]``, about equal work each, ``BLOCKS_PER_THREAD`` blocks per numba thread
    (``threads``, else the calling thread's count: call it inside ``threads_for``)."""
    rows = ptr.shape[0] - 1
    parts = max(1, min(rows, BLOCKS_PER_THREAD * (threads if threads is not None else current_threads())))
    return _balanced_bounds(ptr, parts)
