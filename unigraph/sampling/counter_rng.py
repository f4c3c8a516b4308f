"""A counter-based random number generator: the random draw is a pure function of its position.

Why not ``torch.Generator``: a stream generator gives different samples when work is split
differently (threads, processes, devices). Here draw ``step`` for node ``v`` in a sampling pass
with key ``key`` is ``mix64(mix64(key + v * GOLDEN) + (step + 1) * GOLDEN)``, where ``mix64`` is
the splitmix64 finalizer (Steele, Lea and Flood, OOPSLA 2014). Every draw can be computed in any
order, by any thread, on any device: the numba kernels (``unigraph.kernels.sampling``) and the
torch code here compute bit-identical samples, and results do not depend on the thread count.

Arithmetic is modulo 2**64. Torch has no full uint64 arithmetic, so the torch version works on
int64 (two's complement wraps the same way) and emulates logical right shifts with a mask.
"""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.kernels.counter_rng import GOLDEN, MIX1, MIX2, TWO_POW_MINUS_53  # shared with the numba kernels

MASK64 = (1 << 64) - 1


def _signed(value: int) -> int:
    """The int64 with the same 64 bits as the unsigned ``value``."""
    value &= MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def mix64_int(z: int) -> int:
    """splitmix64's finalizer on a Python int (unsigned 64-bit result)."""
    z &= MASK64
    z = ((z ^ (z >> 30)) * MIX1) & MASK64
    z = ((z ^ (z >> 27)) * MIX2) & MASK64
    return z ^ (z >> 31)


def layer_key(batch_key: int, layer: int) -> int:
    """The key of one sampling pass (layer ``layer`` of the batch with key ``batch_key``)."""
    return mix64_int(batch_key + (layer + 1) * GOLDEN)


def _shift_right(z: Tensor, bits: int) -> Tensor:
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def mix64(z: Tensor) -> Tensor:
    """splitmix64's finalizer on an int64 tensor, elementwise (bits as if uint64)."""
    z = (z ^ _shift_right(z, 30)) * _signed(MIX1)
    z = (z ^ _shift_right(z, 27)) * _signed(MIX2)
    return z ^ _shift_right(z, 31)


def row_keys(key: int, nodes: Tensor) -> Tensor:
    """One key per node for the pass with key ``key`` (int64 tensor)."""
    return mix64(nodes * _signed(GOLDEN) + _signed(key))


def uniform(row_key: Tensor, step: int) -> Tensor:
    """Draw ``step`` of every row: float64 in [0, 1) with 53 random bits."""
    bits = mix64(row_key + _signed((step + 1) * GOLDEN))
    return _shift_right(bits, 11).to(torch.float64) * TWO_POW_MINUS_53


class KeySequence:
    """The keys a sampler uses when a call passes none: ``mix64(seed + n * GOLDEN)`` for the
    ``n``-th such call. A plain counter, so a sampler pickles (to worker processes) as is."""

    def __init__(self, seed: int):
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        self.seed = seed
        self.calls = 0

    def resolve(self, key) -> int:
        """``key`` itself if given (checked), else the next key of the sequence."""
        if key is None:
            self.calls += 1
            return mix64_int(self.seed + self.calls * GOLDEN)
        if isinstance(key, bool) or not isinstance(key, int):
            raise TypeError(f"key must be an int, got {type(key).__name__}")
        return key
