r"""Dropout's mask from counter-based random numbers, in one parallel pass (``unigraph.nn.dropout``).

Element ``i`` of a flat array is kept when its 32-bit draw is at least ``threshold``
(:math:`P(keep) = 1 - threshold / 2^{32}`); draws come in pairs from one splitmix64 value,
``mix64(key + (i // 2) * GOLDEN)``: the low 32 bits for even ``i``, the high 32 bits for odd ``i``.
The draw is a pure function of ``(key, i)``: the backward pass recomputes the mask instead of
storing it, and the result does not depend on the thread count.

``src * multiplier`` with ``multiplier`` 0 or ``scale``, not a select of 0: a dropped NaN or inf
gives NaN, as ``torch.nn.functional.dropout`` (``input * mask``) does. No fast-math: nothing here
reduces, and ``x * 0`` must stay an IEEE product.

Only ``import``ed when numba is installed (``unigraph.kernels.cpu.numba_status``).
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

from unigraph.kernels.counter_rng import GOLDEN
from unigraph.kernels.sampling import _mix64  # the same splitmix64 finalizer as the sampler's

_GOLDEN = np.uint64(GOLDEN)
_LOW32 = np.uint64(0xFFFFFFFF)
PAIRS_PER_CHUNK = 1 << 14  # 32k elements: a parallel chunk of a few hundred microseconds


@numba.njit(cache=True, inline="always")
def _multipliers(key, pair, threshold, scale, zero):
    bits = _mix64(key + np.uint64(pair) * _GOLDEN)
    low = scale if (bits & _LOW32) >= threshold else zero
    high = scale if (bits >> np.uint64(32)) >= threshold else zero
    return low, high


@numba.njit(parallel=True, cache=True)
def masked_scale(src, dst, key, threshold, scale):
    """dst[i] = src[i] * (scale if element i is kept else 0), flat contiguous arrays of one size."""
    n = dst.size
    zero = scale - scale
    pairs = (n + 1) // 2
    for chunk in prange((pairs + PAIRS_PER_CHUNK - 1) // PAIRS_PER_CHUNK):
        first = chunk * PAIRS_PER_CHUNK
        last = min(first + PAIRS_PER_CHUNK, n // 2)
        for pair in range(first, last):
            low, high = _multipliers(key, pair, threshold, scale, zero)
            dst[2 * pair] = src[2 * pair] * low
            dst[2 * pair + 1] = src[2 * pair + 1] * high
    if n % 2 == 1:  # the odd last element: the low half of its pair
        low, _ = _multipliers(key, n // 2, threshold, scale, zero)
        dst[n - 1] = src[n - 1] * low


@numba.njit(parallel=True, cache=True)
def mask_values(dst, key, threshold, scale):
    """dst[i] = scale if element i is kept else 0: the multipliers :func:`masked_scale` applies."""
    n = dst.size
    zero = scale - scale
    pairs = (n + 1) // 2
    for chunk in prange((pairs + PAIRS_PER_CHUNK - 1) // PAIRS_PER_CHUNK):
        first = chunk * PAIRS_PER_CHUNK
        last = min(first + PAIRS_PER_CHUNK, n // 2)
        for pair in range(first, last):
            dst[2 * pair], dst[2 * pair + 1] = _multipliers(key, pair, threshold, scale, zero)
    if n % 2 == 1:
        low, _ = _multipliers(key, n // 2, threshold, scale, zero)
        dst[n - 1] = low
