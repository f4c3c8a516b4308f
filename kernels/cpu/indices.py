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

# (id(tensor), what) -> (guard, value, weak reference to the tensor); an entry is dropped when its tensor is freed
_CACHE: dict[tuple[int, str], tuple] = {}


def index_dtype(bound: int) -> np.dtype:
    """The dtype of an index array whose values lie in ``[0, bound)`` (or are -1)."""
    if bound < 0:
        raise ValueError(f"an index bound is a count (>= 0), got {bound}")
    return np.dtype(np.int32) if bound - 1 <= INT32_LIMIT else np.dtype(np.int64)


def _guard(t: torch.Tensor) -> tuple:
    return (t.data_ptr(), tuple(t.shape), t.stride(), t._version)


def _cached(owner: torch.Tensor, what: str, guard: tuple, make):
    """The value ``make()`` built from ``owner`` (``what`` names which one) under ``guard``, made
    again when the guard changed; the entry goes when ``owner`` is freed (a weak reference's
    callback: it runs as the tensor's Python object is freed, before its id can be reused)."""
    key = (id(owner), what)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == guard:
        return hit[1]
    made = make()
    ref = hit[2] if hit is not None else weakref.ref(owner, lambda _, key=key: _CACHE.pop(key, None))
    _CACHE[key] = (guard, made, ref)
    return made


def compact(t: torch.Tensor, bound: int) -> np.ndarray:
    """The int64 index tensor ``t`` (values in ``[0, bound)``) as the numpy array the kernels
    take: an int32 copy (cached, see module docstring) where :func:`index_dtype` allows it,
    else a zero-copy view of ``t``."""
    if _kept_int64(t, bound):
        return t.detach().contiguous().numpy()
    return _cached(t, "int32", _guard(t), lambda: _int32_copy(t))


def _kept_int64(t: torch.Tensor, bound: int) -> bool:
    """Whether the kernels read ``t`` as it is (a view) rather than as an int32 copy."""
    if t.dtype != torch.int64:
        raise TypeError(f"index tensors are int64, got {t.dtype}")
    return index_dtype(bound) == np.int64 or t.requires_grad


def _uncached(t: torch.Tensor, bound: int) -> np.ndarray:
    """:func:`compact`'s array, made now (for a caller that keeps it itself)."""
    return t.detach().contiguous().numpy() if _kept_int64(t, bound) else _int32_copy(t)


def _int32_copy(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().numpy().astype(np.int32)


def csr_plan(ptr: torch.Tensor, cols: torch.Tensor, eid: torch.Tensor, num_cols: int, threads: int) -> tuple:
    """``(blocks, ptr, cols, eid)``: one CSR as the node-parallel kernels take it: work-balanced
    row blocks for ``threads`` threads (:func:`unigraph.kernels.cpu.schedule.row_blocks`), the
    pointer as numpy, and the column indices and edge ids as :func:`compact` gives them. Made
    once per CSR and thread count and kept like :func:`compact`'s copies, guarded by all three
    tensors (identity, address, shape, strides, version): a layer's calls on one graph, forward
    and backward, then look it up once instead of converting and blocking four arrays each."""
    guard = (_guard(ptr), _guard(cols), _guard(eid), id(cols), id(eid), num_cols)

    def make() -> tuple:
        from unigraph.kernels.cpu.schedule import row_blocks  # imports numba: on first use only
        pointer = ptr.detach().contiguous().numpy()
        return row_blocks(pointer, threads), pointer, _uncached(cols, num_cols), _uncached(eid, eid.numel())
    return _cached(ptr, f"plan{threads}", guard, make)


def in_slots(out_eid: torch.Tensor, in_eid: torch.Tensor) -> np.ndarray:
    """For every out-CSR slot, the in-CSR slot holding the same edge: ``pos[out_eid]`` with
    ``pos[in_eid[q]] = q``. A kernel pass over destinations can then keep per-edge values in
    in-CSR order (written sequentially) and a pass over sources read them through this map.
    Cached like :func:`compact` (guarded by both tensors), int32 where the slots fit."""
    num_edges = in_eid.numel()
    if out_eid.numel() != num_edges:
        raise ValueError(f"out_eid has {out_eid.numel()} edges, in_eid {num_edges}")

    def make() -> np.ndarray:
        pos = np.empty(num_edges, dtype=index_dtype(num_edges))
        pos[in_eid.detach().contiguous().numpy()] = np.arange(num_edges, dtype=pos.dtype)
        return pos[out_eid.detach().contiguous().numpy()]
    return _cached(out_eid, "in_slots", (_guard(out_eid), _guard(in_eid), id(in_eid)), make)
