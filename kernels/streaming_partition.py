"""The inner loop of streaming partitioning (LDG and Fennel): one block of nodes, in order.

Written once as plain Python over numpy arrays. :func:`kernel` returns it compiled with numba
when numba is installed (the ``cpu`` extra), else the Python function itself: the same source,
so both give the same assignment (the Python one is slow: tests and small graphs only).
``unigraph.storage.stream_partition`` documents the algorithm and calls this.
"""
from __future__ import annotations

import functools

import numpy as np

LDG, FENNEL = 0, 1


def assign_block(first, indptr, indices, weights, assign, previous, hide_low, hide_high, loads, caps, limits,
                 method, alpha, gamma, counts):
    """Assign nodes ``first .. first + len(indptr) - 2`` in order.

    ``indptr``/``indices``: their in-CSR rows (``indptr`` rebased to the block, sources as global
    ids); ``weights[c, i]``: node ``first + i``'s weight in constraint ``c`` (``c = 0``: 1 per
    node); ``assign``: every node's part this pass (-1: none yet), updated in place;
    ``previous``: every node's part at the end of the previous pass (-1 in the first pass), read
    for the sources in ``hide_low .. hide_high - 1`` outside this block (nodes other processes
    assign concurrently); ``loads[c, p]``: part ``p``'s load in constraint ``c``, updated in
    place; ``caps[c]``: a part's capacity (LDG's ``C``, and the scale of the overfull fallback);
    ``limits[c, p]``: the most part ``p`` may hold after this block (``caps[c]`` for one process;
    a process's share of what is left when several assign at once); ``method``: LDG or FENNEL;
    ``alpha``, ``gamma``: Fennel's; ``counts``: scratch of one entry per part.
    """
    num_parts = loads.shape[1]
    constraints = loads.shape[0]
    last = first + indptr.shape[0] - 1
    for i in range(indptr.shape[0] - 1):
        v = first + i
        old = assign[v]
        if old >= 0:                                   # restreaming: take v out of its part first
            for c in range(constraints):
                loads[c, old] -= weights[c, i]
        for p in range(num_parts):
            counts[p] = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            u = indices[k]
            if u == v:
                continue
            if hide_low <= u < hide_high and not first <= u < last:
                p = previous[u]
            else:
                p = assign[u]
            if p >= 0:
                counts[p] += 1.0
        best, best_score, best_load = -1, -np.inf, np.inf
        fallback, fallback_excess = 0, np.inf
        for p in range(num_parts):
            fits = True
            excess = 0.0
            for c in range(constraints):
                if caps[c] > 0:
                    excess = max(excess, (loads[c, p] + weights[c, i]) / caps[c])
                    if loads[c, p] + weights[c, i] > limits[c, p] and loads[c, p] > 0:
                        fits = False
            if excess < fallback_excess:
                fallback, fallback_excess = p, excess
            if not fits:
                continue
            size = loads[0, p]
            if method == LDG:
                score = counts[p] * (1.0 - size / caps[0])
            else:
                score = counts[p] - alpha * gamma * size ** (gamma - 1.0)
            if score > best_score or (score == best_score and size < best_load):
                best, best_score, best_load = p, score, size
        if best < 0:                                   # no part fits every cap: the least overfull one
            best = fallback
        assign[v] = best
        for c in range(constraints):
            loads[c, best] += weights[c, i]


@functools.lru_cache(maxsize=1)
def kernel():
    """:func:`assign_block`, compiled with numba when it is installed (else the Python function)."""
    from unigraph.kernels.cpu import numba_status, start_numba_threads  # noqa: PLC0415
    usable, _ = numba_status()
    if not usable:
        return assign_block
    import numba  # noqa: PLC0415
    start_numba_threads()
    return numba.njit(cache=True, nogil=True)(assign_block)
