r"""g-SpMM on the CPU, node-parallel over the in-CSR.

:math:`out_{v,k} = \bigoplus_{p \in [ptr_v, ptr_{v+1})} op(u_{src_p, uoff_k}, e_{eid_p, eoff_k})`

``uoff``/``eoff`` map each output element to its element in a (broadcast) operand row (see
``unigraph.ops.spec.broadcast_offsets``). Two specializations skip the offsets where the shapes
allow contiguous inner loops that LLVM vectorizes: ``copy_u`` + sum (the workhorse of GCN/SAGE
and of every backward pass) and per-slice edge weights ``u [N, P, Q] * e [E, P]`` + sum
(GAT's weighted sum, edge-weighted GCN). Rows without in-edges stay 0 and get arg -1.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

from unigraph.kernels.cpu import FASTMATH
from unigraph.kernels.cpu.messages import apply


@numba.njit(parallel=True, fastmath=FASTMATH, cache=True)
def copy_u_sum(ptr, src, u, out):
    """out[v] = sum of u[src] over v's in-edges (out zero-initialized, [Nd, K])."""
    width = out.shape[1]
    for v in prange(out.shape[0]):
        for p in range(ptr[v], ptr[v + 1]):
            s = src[p]
            for k in range(width):
                out[v, k] += u[s, k]


@numba.njit(parallel=True, fastmath=FASTMATH, cache=True)
def weighted_sum(ptr, src, eid, u, weights, out):
    """out[v, p, :] = sum over in-edges of weights[edge, p] * u[src, p, :] (u [Ns, P, Q], out zeroed)."""
    slices, width = out.shape[1], out.shape[2]
    for v in prange(out.shape[0]):
        for q in range(ptr[v], ptr[v + 1]):
            s = src[q]
            edge = eid[q]
            for p in range(slices):
                w = weights[edge, p]
                for k in range(width):
                    out[v, p, k] += w * u[s, p, k]


@numba.njit(parallel=True, fastmath=FASTMATH, cache=True)
def binary_sum(ptr, src, eid, u, e, uoff, eoff, op, out):
    """out[v, k] = sum over in-edges of op(u[src, uoff[k]], e[edge, eoff[k]]) (out zeroed)."""
    width = out.shape[1]
    for v in prange(out.shape[0]):
        for q in range(ptr[v], ptr[v + 1]):
            s = src[q]
            edge = eid[q]
            for k in range(width):
                out[v, k] += apply(op, u[s, uoff[k]], e[edge, eoff[k]])


@numba.njit(parallel=True, cache=True)
def binary_extreme(ptr, src, eid, u, e, uoff, eoff, op, is_max, out, arg_u, arg_e):
    """Max (is_max) or min over in-edges, with the source and edge id of the winner.

    Strict comparison keeps the first edge in CSR order on ties. Empty rows: 0 and -1.
    """
    width = out.shape[1]
    for v in prange(out.shape[0]):
        start, end = ptr[v], ptr[v + 1]
        if start == end:
            for k in range(width):
                out[v, k] = 0
                arg_u[v, k] = -1
                arg_e[v, k] = -1
            continue
        s = src[start]
        edge = eid[start]
        for k in range(width):
            out[v, k] = apply(op, u[s, uoff[k]], e[edge, eoff[k]])
            arg_u[v, k] = s
            arg_e[v, k] = edge
        for q in range(start + 1, end):
            s = src[q]
            edge = eid[q]
            for k in range(width):
                value = apply(op, u[s, uoff[k]], e[edge, eoff[k]])
                better = value > out[v, k] if is_max else value < out[v, k]
                if better:
                    out[v, k] = value
                    arg_u[v, k] = s
                    arg_e[v, k] = edge


DUMMY_ROWS = np.zeros((1, 1), dtype=np.float32)  # stands in for the operand an op does not read
