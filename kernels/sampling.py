"""Neighbour-sampling kernels compiled with numba: the CPU fast path of ``unigraph.sampling``.

Same contract and bit-identical results as ``unigraph.sampling.torch_kernels`` (read its
docstring for the algorithm: Floyd's sampling without replacement, counter-based draws from
``unigraph.kernels.counter_rng``). What changes is the execution: one pass over the frontier
rows, in parallel (``prange``), each row drawing its ``fanout`` offsets in registers, instead of
``fanout`` vector passes over all rows; and a sequential relabelling pass with a scratch array
instead of a scatter. Both work in ``O(sampled edges)``; a hub costs ``O(fanout^2)``.

Only ``import``ed when numba is installed (``unigraph.kernels.cpu.numba_status``).
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

from unigraph.kernels.counter_rng import GOLDEN, MIX1, MIX2, TWO_POW_MINUS_53
from unigraph.kernels.cpu.threads import parallel_kernel

_GOLDEN = np.uint64(GOLDEN)
_MIX1 = np.uint64(MIX1)
_MIX2 = np.uint64(MIX2)


@numba.njit(cache=True, inline="always")
def _mix64(z):
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, inline="always")
def _uniform(row_key, step):
    bits = _mix64(row_key + np.uint64(step + 1) * _GOLDEN)
    return np.float64(bits >> np.uint64(11)) * TWO_POW_MINUS_53


def sample_layer(ptr, frontier, fanout, replace, key):
    """(indptr, positions): the in-edges kept for each frontier node (see the torch version;
    ``indptr`` is the running sum of its ``counts``). Python, not compiled: it calls
    ``sample_rows`` through this module, which a forked child rebinds to its serial twin."""
    return sample_rows(ptr, frontier, frontier, fanout, replace, key)


@parallel_kernel()
def sample_rows(ptr, frontier, key_ids, fanout, replace, key):
    """:func:`sample_layer` with row ``frontier[i]`` drawn under the id ``key_ids[i]`` (a CSR
    holding other ids' rows, e.g. a partition's, draws what the whole graph's CSR draws)."""
    rows = frontier.shape[0]
    indptr = np.empty(rows + 1, np.int64)
    indptr[0] = 0
    for i in prange(rows):
        degree = ptr[frontier[i] + 1] - ptr[frontier[i]]
        if replace:
            indptr[i + 1] = fanout if degree > 0 else 0
        else:
            indptr[i + 1] = min(degree, fanout)
    for i in range(rows):
        indptr[i + 1] += indptr[i]
    positions = np.empty(indptr[rows], np.int64)
    pass_key = np.uint64(key)
    for i in prange(rows):
        node = frontier[i]
        start = ptr[node]
        degree = ptr[node + 1] - start
        base = indptr[i]
        if (replace and degree > 0) or (not replace and degree > fanout):
            row_key = _mix64(np.uint64(key_ids[i]) * _GOLDEN + pass_key)
            for step in range(fanout):
                u = _uniform(row_key, step)
                if replace:
                    offset = np.int64(u * degree)
                else:  # Floyd: t in 0..j, or j itself if t is taken
                    j = degree - fanout + step
                    offset = np.int64(u * (j + 1))
                    for q in range(step):
                        if positions[base + q] - start == offset:
                            offset = j
                            break
                positions[base + step] = start + offset
        else:
            for q in range(indptr[i + 1] - base):
                positions[base + q] = start + q
    return indptr, positions


@numba.njit(cache=True)
def relabel(indices, positions, local_id, num_known):
    """(local ids of ``indices[positions]``, new nodes in first-occurrence order); ``local_id`` is
    the scratch map (-1 = not in the batch yet), updated in place."""
    local = np.empty(positions.shape[0], np.int64)
    new_nodes = np.empty(positions.shape[0], np.int64)
    num_new = 0
    for e in range(positions.shape[0]):
        node = indices[positions[e]]
        mapped = local_id[node]
        if mapped < 0:
            mapped = num_known + num_new
            local_id[node] = mapped
            new_nodes[num_new] = node
            num_new += 1
        local[e] = mapped
    return local, new_nodes[:num_new]


def sample_hop(ptr, indices, frontier, fanout, replace, key, local_id, num_known):
    """(indptr, local sources, positions, new nodes) of one hop (see the torch version). Python,
    not compiled: it calls ``sample_layer`` through this module, which a forked child rebinds to
    its serial twin (``unigraph.kernels.cpu.threads``); compiled code would keep the parallel one."""
    indptr, positions = sample_layer(ptr, frontier, fanout, replace, key)
    local, new_nodes = relabel(indices, positions, local_id, num_known)
    return indptr, local, positions, new_nodes


@numba.njit(cache=True)
def expand_rows(indptr):
    """(row of every entry, 0..nnz-1) of a CSR: a block's destination ids and edge ids."""
    rows = np.empty(indptr[-1], np.int64)
    for i in range(indptr.shape[0] - 1):
        for p in range(indptr[i], indptr[i + 1]):
            rows[p] = i
    return rows, np.arange(indptr[-1])


@numba.njit(cache=True)
def mark_seeds(local_id, seeds):
    """Local ids 0..S-1 for the seeds; False (nothing marked) if a seed repeats."""
    for i in range(seeds.shape[0]):
        if local_id[seeds[i]] >= 0:
            for j in range(i):
                local_id[seeds[j]] = -1
            return False
        local_id[seeds[i]] = i
    return True


@numba.njit(cache=True)
def unmark(local_id, nodes):
    for i in range(nodes.shape[0]):
        local_id[nodes[i]] = -1
