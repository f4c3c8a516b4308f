r"""Edge softmax on the CPU, node-parallel over the in-CSR.

:math:`out_e = \exp(s_e - m_v) / \sum_{e' \in in(v)} \exp(s_{e'} - m_v)`, :math:`m_v = \max_{e' \in in(v)} s_{e'}`,
per feature column, in three sweeps over each row (max, exponentials and their sum, scale).
"""
from __future__ import annotations

import math

from numba import prange

from unigraph.kernels.cpu import FASTMATH, parallel_kernel


@parallel_kernel(fastmath=FASTMATH)
def edge_softmax(blocks, ptr, eid, scores, out):
    width = scores.shape[1]
    for b in prange(blocks.shape[0] - 1):
        for v in range(blocks[b], blocks[b + 1]):
            start, end = ptr[v], ptr[v + 1]
            if start == end:
                continue
            for k in range(width):
                top = scores[eid[start], k]
                for q in range(start + 1, end):
                    top = max(top, scores[eid[q], k])
                total = top * 0
                for q in range(start, end):
                    w = math.exp(scores[eid[q], k] - top)
                    out[eid[q], k] = w
                    total += w
                inv = 1 / total
                for q in range(start, end):
                    out[eid[q], k] *= inv
