r"""torch's CPU Bernoulli draws, bit for bit, from its own Mersenne Twister state
(``unigraph.torch_bernoulli``), and torch's dropout made from them in the same pass
(``unigraph.torch_dropout``: :func:`dropout`).

torch's CPU ``bernoulli_(p)`` (the mask of ``F.dropout``) takes, element after element in memory
order, one 64-bit number from the generator's MT19937 (two 32-bit outputs ``hi``, ``lo``: ``hi <<
32 | lo``), keeps its low 53 bits ``v`` and writes ``v * 2^-53 < p``. Both sides scaled by ``2^53``
exactly, that is the integer test ``v < ceil(p * 2^53)`` (``threshold``). torch runs this one
element at a time through its generic serial loop (~16 ns an element here); this file makes the
same numbers in blocks: the twist of all 624 state words, their tempering into a buffer, then the
pairs of that buffer read as 64-bit words and compared (~1.1 ns an element in all; every loop
vectorized, which needs each block's arrays sliced into views: indexed with a run-time offset, LLVM
kept them scalar, 3.0 ns). The state is
torch's: 624 words, ``left`` (torch decrements it before each output and twists at 0) and ``next``
(the index of the next word), returned as torch would leave them.

A pair never straddles two twists in the buffer: when the stream's position is odd at a block's
end, the last word of the block moves to the front of the buffer and the next block is tempered
after it. Serial by nature (each twist needs the last), so one thread: never more than torch's.
No fast-math: integer work only.

Only ``import``ed when numba is installed (``unigraph.kernels.cpu.numba_status``).
"""
from __future__ import annotations

import numba
import numpy as np

N, M = 624, 397  # MT19937's state size and middle word
# Constants are written in the functions as np.uint32/np.uint64 values: a module-level numpy
# scalar reaches numba as a plain integer, and uint64 mixed with int64 computes in float64 (3x
# slower here, and inexact above 2^53).


@numba.njit(cache=True, boundscheck=False)
def _twist(s):
    """The next 624 state words, in place (the reference generator's three loops, branch-free)."""
    upper, lower, matrix = np.uint32(0x80000000), np.uint32(0x7FFFFFFF), np.uint32(0x9908B0DF)
    for k in range(N - M):
        y = (s[k] & upper) | (s[k + 1] & lower)
        s[k] = s[k + M] ^ (y >> np.uint32(1)) ^ ((np.uint32(0) - (s[k + 1] & np.uint32(1))) & matrix)
    for k in range(N - M, N - 1):
        y = (s[k] & upper) | (s[k + 1] & lower)
        s[k] = s[k + M - N] ^ (y >> np.uint32(1)) ^ ((np.uint32(0) - (s[k + 1] & np.uint32(1))) & matrix)
    y = (s[N - 1] & upper) | (s[0] & lower)
    s[N - 1] = s[M - 1] ^ (y >> np.uint32(1)) ^ ((np.uint32(0) - (s[0] & np.uint32(1))) & matrix)


@numba.njit(cache=True, boundscheck=False)
def _temper(s, buf):
    """buf[k] = the generator's output for state word k (``buf`` a view: with an offset added to
    its index, LLVM could not show the stores miss ``s`` and kept the loop scalar)."""
    for k in range(N):
        y = s[k]
        y ^= y >> np.uint32(11)
        y ^= (y << np.uint32(7)) & np.uint32(0x9D2C5680)
        y ^= (y << np.uint32(15)) & np.uint32(0xEFC60000)
        y ^= y >> np.uint32(18)
        buf[k] = y


BERNOULLI, DROPOUT = 0, 1  # what a draw writes (``_compare_pairs``)


@numba.njit(cache=True, boundscheck=False, inline="always")
def _compare_pairs(mode, words64, threshold, src, out, keep, scale):
    """Pair ``j``'s 53-bit number below ``threshold`` (a pair ``hi``, ``lo`` read as one
    little-endian 64-bit word is ``lo | hi << 32``: rotated by 32) is a kept element: ``BERNOULLI``
    writes ``out[j]`` 1 or 0; ``DROPOUT`` writes ``out[j] = src[j] * m`` with ``m`` ``scale`` or 0
    (an IEEE product: a dropped NaN or inf gives NaN, as torch's ``input * noise``) and
    ``keep[j]``. Every array a view of this block's elements (vectorizes; see ``_temper``)."""
    low53, half = np.uint64((1 << 53) - 1), np.uint64(32)
    zero = scale - scale
    for j in range(out.size):
        x = words64[j]
        v = ((x << half) | (x >> half)) & low53
        if mode == BERNOULLI:
            out[j] = scale if v < threshold else zero  # a select, not a branch
        else:
            out[j] = src[j] * (scale if v < threshold else zero)
            keep[j] = np.uint8(1) if v < threshold else np.uint8(0)


@numba.njit(cache=True, boundscheck=False, inline="always")
def _draws(mode, state, left, next_, threshold, src, out, keep, scale):
    """The element after element draws of torch's ``bernoulli_`` from the state (``state``: 624
    uint32 words, updated in place; ``left``/``next_``: torch's counters), written by ``mode``
    (``_compare_pairs``) into flat arrays. Returns torch's ``(left, next)`` after the draws."""
    n = out.size
    buf = np.empty(N + 2, np.uint32)  # a carried odd word, then one tempered block (+1: even length)
    words64 = buf.view(np.uint64)
    done = 0
    remaining = left - 1  # words of the current block not yet used: next_ .. N - 1
    used = next_
    if remaining > 0:
        tempered = np.empty(N, np.uint32)
        _temper(state, tempered)
        for k in range(remaining):
            buf[k] = tempered[next_ + k]
    carry = remaining
    pairs = min(carry // 2, n)
    _compare_pairs(mode, words64[:pairs], threshold, src[:pairs], out[:pairs], keep[:pairs], scale)
    done += pairs
    used += 2 * pairs
    if done < n and carry % 2 == 1:
        buf[0] = buf[carry - 1]
        carry = 1
    else:
        carry = 0
    while done < n:
        _twist(state)
        _temper(state, buf[carry:carry + N])
        total = N + carry
        pairs = min(total // 2, n - done)
        end = done + pairs
        _compare_pairs(mode, words64[:pairs], threshold, src[done:end], out[done:end], keep[done:end], scale)
        done = end
        used = 2 * pairs - carry  # words of this block consumed
        if total % 2 == 1 and done < n:
            buf[0] = buf[N]
            carry = 1
        else:
            carry = 0
    return N - used + 1, used


@numba.njit(cache=True, boundscheck=False)
def bernoulli(state, left, next_, threshold, out):
    """Fill the flat array ``out`` with torch's Bernoulli draws (1 or 0) from the state, as
    :func:`_draws`. Returns torch's ``(left, next)`` after the draws."""
    return _draws(BERNOULLI, state, left, next_, threshold, out, out, np.empty(0, np.uint8), 1.0)


@numba.njit(cache=True, boundscheck=False)
def dropout(state, left, next_, threshold, src, out, keep, scale):
    """torch's CPU ``F.dropout`` in one pass: the draws of ``bernoulli_(1 - p)`` (``threshold``
    from ``1 - p``) from the state, ``out = src * (scale if kept else 0)`` and ``keep`` (uint8)
    the mask; flat arrays of one size. Returns torch's ``(left, next)`` after the draws."""
    return _draws(DROPOUT, state, left, next_, threshold, src, out, keep, scale)
