"""int32 copies of a graph's index arrays for the CPU kernels, where every index fits.

The node-parallel kernels read one index per edge (``in_src``, ``in_eid``, ...) and then the row
it names. int64 indices are twice the bytes of int32 ones: on a 500k-node / 8M-edge R-MAT graph
with F = 64 the index stream is 64 MiB instead of 32 MiB per pass, and the software prefetch of
rows a fixed number of slots ahead (``prefetch.py``) covers more edges per cache line of
indices. The rule (:func:`index_dtype`) is one comparison: int32 when the largest value an
array can hold (``bound - 1``, the number of nodes or edges it indexes minus one) is at most
``2**31 - 1``, else int64. The kernels are compiled for both.

The copy is made once per index tensor and kept while the tensor lives, guarded by its
identity, data pointer, shape and version counter (which counts in-place writes), so a tensor
changed in place or replaced is converted again, never read stale. A graph's index tensors are
built once and cached on the graph, so in training the conversion is paid on the first call.
"""
from __future__ import annotations

import weakref

import numpy as np
import torch

INT32_LIMIT = int(np.iinfo(np.int32).max)

# id(tensor) -> (guard, int32 array); an entry is dropped when its tensor is freed
_CACHE: dict[int, tuple[tuple, np.ndarray]] = {}


def index_dtype(bound: int) -> np.dtype:
    """The dtype of an index array whose values lie in ``[0, bound)`` (or are -1)."""
    if bound < 0:
        raise ValueError(f"an index bound is a count (>= 0), got {bound}")
    return np.dtype(np.int32) if bound - 1 <= INT32_LIMIT else np.dtype(np.int64)


def _guard(t: torch.Tensor) -> tuple:
    return (t.data_ptr(), tuple(t.shape), t.stride(), t._version)


def compact(t: torch.Tensor, bound: int) -> np.ndarray:
    """The int64 index tensor ``t`` (values in ``[0, bound)``) as the numpy array the kernels
    take: an int32 copy (cached, see module docstring) where :func:`index_dtype` allows it,
    else a zero-copy view of ``t``."""
    if t.dtype != torch.int64:
        raise TypeError(f"index tensors are int64, got {t.dtype}")
    if index_dtype(bound) == np.int64 or t.requires_grad:
        return t.detach().contiguous().numpy()
    key = id(t)
    hit = _CACHE.get(key)
    guard = _guard(t)
    if hit is not None and hit[0] == guard:
        return hit[1]
    small = t.contiguous().numpy().astype(np.int32)
    if hit is None:
        weakref.finalize(t, _CACHE.pop, key, None)
    _CACHE[key] = (guard, small)
    return small
