"""Compressed rows of an edge list by counting, O(E + N), one pass over the edges each way.

``torch.sort(rows, stable=True)`` (what ``unigraph.structure.build_csr`` does without numba) is
O(E log E) and took ~0.56 ms for 5,400 edges on the 2-core development machine (under load),
while counting took ~0.014 ms: a mini-batch of small graphs builds a new graph every step, in
and out CSR, so the sort was most of a 3 ms GIN step. The result is the same: edges keep their
input order inside each row (a stable counting sort).

Serial (no ``prange``): small graphs are the case it is for, and a serial kernel runs in any
process (see ``threads.py`` on forked children). Only ``import``ed when numba is installed.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _fill(rows, cols, ptr, sorted_cols, perm):
    """The second pass of a counting sort: ``ptr`` holds the row starts; each row keeps input order."""
    fill = ptr[:-1].copy()
    for k in range(rows.shape[0]):
        slot = fill[rows[k]]
        fill[rows[k]] = slot + 1
        perm[slot] = k
        sorted_cols[slot] = cols[k]


@numba.njit(cache=True)
def counting_csr(rows, cols, num_rows):
    """``(ptr, cols in row order, perm)`` for the edges ``rows[k] -> cols[k]`` (``0 <= rows[k] <
    num_rows``, checked by the caller): ``perm`` lists the edge ids row by row, each row's in
    input order."""
    edges = rows.shape[0]
    ptr = np.zeros(num_rows + 1, np.int64)
    for k in range(edges):
        ptr[rows[k] + 1] += 1
    for i in range(num_rows):
        ptr[i + 1] += ptr[i]
    perm = np.empty(edges, np.int64)
    sorted_cols = np.empty(edges, np.int64)
    _fill(rows, cols, ptr, sorted_cols, perm)
    return ptr, sorted_cols, perm


@numba.njit(cache=True)
def _degree_moments(ptr):
    """(largest row length, sum of squared row lengths) of a CSR pointer."""
    largest, squares = 0, 0
    for i in range(ptr.shape[0] - 1):
        d = ptr[i + 1] - ptr[i]
        largest = max(largest, d)
        squares += d * d
    return largest, squares


@numba.njit(cache=True)
def both_csr(src, dst, num_src, num_dst):
    """The in-CSR (rows = destinations) and out-CSR (rows = sources) of ``src[k] -> dst[k]`` in one
    call (one dispatch from Python instead of two), and the degree figures the selector reads:
    ``(in_ptr, in_src, in_eid, out_ptr, out_dst, out_eid, max_in, max_out, sum of squared in-degrees)``."""
    in_ptr, in_src, in_eid = counting_csr(dst, src, num_dst)
    out_ptr, out_dst, out_eid = counting_csr(src, dst, num_src)
    max_in, squares_in = _degree_moments(in_ptr)
    max_out, _ = _degree_moments(out_ptr)
    return in_ptr, in_src, in_eid, out_ptr, out_dst, out_eid, max_in, max_out, squares_in


@numba.njit(cache=True)
def _copy_checked(edge_index, num_src, num_dst, src, dst, in_counts, out_counts, count_out):
    """The edge list's rows copied into ``src``/``dst`` and range-checked (``0 <= src < num_src``,
    ``0 <= dst < num_dst``) in one pass, counting each destination in ``in_counts`` and, where
    ``count_out``, each source in ``out_counts``: -1, or the first edge with an index out of range
    (the copies and counts stop there)."""
    for k in range(edge_index.shape[1]):
        s, d = edge_index[0, k], edge_index[1, k]
        if s < 0 or s >= num_src or d < 0 or d >= num_dst:
            return k
        src[k] = s
        dst[k] = d
        in_counts[d] += 1
        if count_out:
            out_counts[s] += 1
    return -1


@numba.njit(cache=True)
def ingest_edges(edge_index, num_src, num_dst):
    """A new ``[2, E]`` edge list's rows copied and range-checked in one pass, with the in-degree
    of every destination counted on the way (a graph that needs no CSR: the small-graph rule's,
    ``backends/small_graph.py``): ``(bad, src, dst, in_degree)``, ``bad`` as in :func:`ingest`."""
    edges = edge_index.shape[1]
    src = np.empty(edges, np.int64)
    dst = np.empty(edges, np.int64)
    in_degree = np.zeros(num_dst, np.int64)
    bad = _copy_checked(edge_index, num_src, num_dst, src, dst, in_degree, in_degree[:0], False)
    return bad, src, dst, in_degree


@numba.njit(cache=True)
def ingest(edge_index, num_src, num_dst):
    """A new ``[2, E]`` edge list made into a graph's structure in one call: its rows copied and
    range-checked (``0 <= src < num_src``, ``0 <= dst < num_dst``), both CSRs built by counting,
    and the degree figures the selector reads: ``(bad, src, dst, in_ptr, in_src, in_eid, out_ptr,
    out_dst, out_eid, max_in, max_out, sum of squared in-degrees)``. ``bad`` is -1, or the first
    edge with an index out of range (then nothing else is meaningful; the caller names the
    problem). One pass over the edges where copies, checks and counts were three."""
    edges = edge_index.shape[1]
    src = np.empty(edges, np.int64)
    dst = np.empty(edges, np.int64)
    in_ptr = np.zeros(num_dst + 1, np.int64)
    out_ptr = np.zeros(num_src + 1, np.int64)
    bad = _copy_checked(edge_index, num_src, num_dst, src, dst, in_ptr[1:], out_ptr[1:], True)
    in_src = np.empty(edges if bad < 0 else 0, np.int64)
    in_eid = np.empty(edges if bad < 0 else 0, np.int64)
    out_dst = np.empty(edges if bad < 0 else 0, np.int64)
    out_eid = np.empty(edges if bad < 0 else 0, np.int64)
    if bad >= 0:
        return bad, src, dst, in_ptr, in_src, in_eid, out_ptr, out_dst, out_eid, 0, 0, 0
    for i in range(num_dst):
        in_ptr[i + 1] += in_ptr[i]
    for i in range(num_src):
        out_ptr[i + 1] += out_ptr[i]
    max_in, squares_in = _degree_moments(in_ptr)
    max_out, _ = _degree_moments(out_ptr)
    _fill(dst, src, in_ptr, in_src, in_eid)
    _fill(src, dst, out_ptr, out_dst, out_eid)
    return bad, src, dst, in_ptr, in_src, in_eid, out_ptr, out_dst, out_eid, max_in, max_out, squares_in


@numba.njit(cache=True)
def self_looped(src, dst, num_loops):
    """The edge list without its self-loops and with one loop ``i -> i`` per node ``i <
    num_loops`` appended (``unigraph.self_loops``), in one call: ``(new_src, new_dst, kept,
    loop_slot)`` with ``kept`` the ids of the edges that are not loops (in order) and
    ``loop_slot[k]`` the node of edge ``k`` if it is a loop, else ``num_loops``. (torch's
    ``nonzero``, ``where``, two gathers and two concatenations: six passes and allocations.)"""
    edges = src.shape[0]
    loop_slot = np.empty(edges, np.int64)
    kept_count = 0
    for k in range(edges):
        if src[k] == dst[k]:
            loop_slot[k] = src[k]
        else:
            loop_slot[k] = num_loops
            kept_count += 1
    kept = np.empty(kept_count, np.int64)
    new_src = np.empty(kept_count + num_loops, np.int64)
    new_dst = np.empty(kept_count + num_loops, np.int64)
    slot = 0
    for k in range(edges):
        if loop_slot[k] == num_loops:
            kept[slot] = k
            new_src[slot] = src[k]
            new_dst[slot] = dst[k]
            slot += 1
    for i in range(num_loops):
        new_src[kept_count + i] = i
        new_dst[kept_count + i] = i
    return new_src, new_dst, kept, loop_slot
