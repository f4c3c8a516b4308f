r"""Dropout's mask from counter-based random numbers, in one parallel pass (``unigraph.nn.dropout``).

Element ``i`` of a flat array is kept when its 32-bit draw is at least ``threshold``
(:math:`P(keep) = 1 - threshold / 2^{32}`); draws come in pairs from one splitmix64 value
``mix64(key + q * GOLDEN)``. The array is cut into fixed blocks of ``2 * PAIRS_PER_BLOCK``
elements (the last one shorter); in a block of ``size`` elements starting at pair ``q0``, with
``half = ceil(size / 2)``, element ``j < half`` takes the low 32 bits of pair ``q0 + j`` and element
``half + j`` the high 32 bits of the same pair. Fixed blocks: the mapping does not depend on threads.
The draw is a pure function of ``(key, i)``: the backward pass recomputes the mask instead of
storing it, and the result does not depend on the thread count.

``src * multiplier`` with ``multiplier`` 0 or ``scale``, not a select of 0: a dropped NaN or inf
gives NaN, as ``torch.nn.functional.dropout`` (``input * mask``) does. No fast-math: nothing here
reduces, and ``x * 0`` must stay an IEEE product.

One kernel, :func:`masked`, serves four element rules (``mode``): the dropout itself
(``SCALE``: ``a * m``), its multipliers alone (``MASK``: ``m``, for fused GAT attention), dropout
of a ReLU (``RELU``: ``relu(a) * m``) and that one's backward (``RELU_BACKWARD``: 0 where
``b <= 0``, else ``a * m``: a NaN ``b`` passes, as in torch's relu). ``mode`` is the same for every element, so the branch is predicted (LLVM may
also hoist it out of the loop).

Only ``import``ed when numba is installed (``unigraph.kernels.cpu.numba_status``).
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

from unigraph.kernels.counter_rng import GOLDEN
from unigraph.kernels.cpu.threads import parallel_kernel
from unigraph.kernels.sampling import _mix64  # the same splitmix64 finalizer as the sampler's

_GOLDEN = np.uint64(GOLDEN)
_LOW32 = np.uint64(0xFFFFFFFF)
PAIRS_PER_BLOCK = 1 << 14  # 32k elements per parallel block (tens of microseconds)


SCALE, MASK, RELU, RELU_BACKWARD = 0, 1, 2, 3


@numba.njit(cache=True, inline="always")
def _element(mode, a, b, multiplier, zero):
    if mode == SCALE:
        return a * multiplier
    if mode == MASK:
        return multiplier
    if mode == RELU:  # relu keeps NaN, as torch.relu: 0 only where a <= 0
        return (zero if a <= zero else a) * multiplier
    # RELU_BACKWARD: torch's threshold_backward of the dropout's gradient: 0 only where b <= 0, so
    # a NaN input passes its gradient as torch's relu does (and a NaN gradient of a dropped
    # positive element stays NaN there too)
    return zero if b <= zero else a * multiplier


@numba.njit(inline="always")
def _masked(mode, a, b, dst, key, threshold, scale):
    """dst[i] = the ``mode`` rule of (a[i], b[i], multiplier i), flat contiguous arrays of one size
    (``a``/``b`` unread by the rules that do not use them: pass ``dst``). Inlined into one compiled
    kernel per rule below, where ``mode`` is a constant: with ``mode`` a run-time value, LLVM kept
    RELU_BACKWARD's data-dependent choice as a branch, mispredicted half the time (~3x slower).
    Each block's two halves are sliced into views first: indexed as ``dst[first + half + j]``
    beside ``a[first + half + j]``, LLVM could not show the stores miss the loads and kept the
    loop scalar (8.5x slower: 265 vs 31 ms for 43M float32 elements on one thread)."""
    n = dst.size
    zero = scale - scale
    block = 2 * PAIRS_PER_BLOCK
    for index in prange((n + block - 1) // block):
        first = index * block
        size = min(block, n - first)
        half = (size + 1) // 2  # elements first + j (low bits) and first + half + j (high bits)
        pair0 = np.uint64(index * PAIRS_PER_BLOCK)
        a_low, a_high = a[first:first + half], a[first + half:first + size]
        b_low, b_high = b[first:first + half], b[first + half:first + size]
        low_out, high_out = dst[first:first + half], dst[first + half:first + size]
        for j in range(size - half):  # both halves: contiguous streams, so the loop vectorizes
            bits = _mix64(key + (pair0 + np.uint64(j)) * _GOLDEN)
            low = scale if (bits & _LOW32) >= threshold else zero
            high = scale if (bits >> np.uint64(32)) >= threshold else zero
            low_out[j] = _element(mode, a_low[j], b_low[j], low, zero)
            high_out[j] = _element(mode, a_high[j], b_high[j], high, zero)
        if size % 2 == 1:  # an odd last block: its middle element takes the low bits of one more pair
            bits = _mix64(key + (pair0 + np.uint64(half - 1)) * _GOLDEN)
            k = first + half - 1
            dst[k] = _element(mode, a[k], b[k], scale if (bits & _LOW32) >= threshold else zero, zero)


@parallel_kernel()
def _scale(a, b, dst, key, threshold, scale):
    _masked(SCALE, a, b, dst, key, threshold, scale)


@parallel_kernel()
def _mask(a, b, dst, key, threshold, scale):
    _masked(MASK, a, b, dst, key, threshold, scale)


@parallel_kernel()
def _relu(a, b, dst, key, threshold, scale):
    _masked(RELU, a, b, dst, key, threshold, scale)


@parallel_kernel()
def _relu_backward(a, b, dst, key, threshold, scale):
    _masked(RELU_BACKWARD, a, b, dst, key, threshold, scale)


# by name, looked up at call time: a forked child rebinds them to their serial twins (threads.py)
_KERNELS = {SCALE: "_scale", MASK: "_mask", RELU: "_relu", RELU_BACKWARD: "_relu_backward"}


def masked(mode, a, b, dst, key, threshold, scale):
    """dst[i] = the ``mode`` rule of (a[i], b[i], multiplier i) (see :func:`_masked`)."""
    globals()[_KERNELS[mode]](a, b, dst, key, threshold, scale)


@parallel_kernel()
def _scale_kept(keep, a, dst, scale):
    n = dst.size
    zero = scale - scale
    block = 2 * PAIRS_PER_BLOCK
    for index in prange((n + block - 1) // block):
        first = index * block
        end = min(first + block, n)
        kept, src, out = keep[first:end], a[first:end], dst[first:end]   # views: the loop vectorizes
        for j in range(end - first):
            out[j] = src[j] * (scale if kept[j] != 0 else zero)


def scale_kept(keep, a, dst, scale):
    """dst[i] = a[i] * (scale if keep[i] else 0), an IEEE product (a NaN stays NaN): torch's
    dropout product from a stored uint8 mask (``unigraph.torch_dropout``), flat arrays of one size."""
    globals()["_scale_kept"](keep, a, dst, scale)
