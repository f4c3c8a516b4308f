"""Keep freed memory in the process for reuse: the page-fault share of a full-batch epoch.

glibc serves allocations above its mmap threshold (dynamic, at most 32 MiB) with a fresh ``mmap``
and unmaps them on free. A full-batch epoch on an ogbn-arxiv-sized graph allocates and frees
dozens of 87-173 MB activations and gradients, and the kernel maps every one back in 4 KiB at a
time: measured, that was 43% of unigraph's GraphSAGE epoch and 28% of DGL's in the same process
(``benchmarks/results/allocator_cpu.md``, where the settings come from the environment; this
function's, in one process against one without: 734 vs 1152 ms median per epoch, 2.1 vs 0.9 GB
resident). :func:`keep_freed_memory` raises glibc's mmap and trim
thresholds (``mallopt``) so freed blocks stay in the heap and the next epoch reuses them.

A setting of the whole process (every library in it gets it), so unigraph never makes it by
itself: call it at the start of a training script, or start Python with the equivalent
environment (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_TOP_PAD_``). The
price: the process keeps its peak memory instead of returning it between epochs (the benchmark's
process, holding three libraries' models, went from 4.3 to 12.3 GiB peak). Allocations already
made keep their old placement.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3   # malloc.h
MMAP_THRESHOLD = 1 << 30      # blocks up to 1 GiB come from the heap (mallopt takes an int)
TRIM_THRESHOLD = 2**31 - 1    # give the top of the heap back only past 2 GiB free
TOP_PAD = 256 << 20           # grow the heap 256 MiB at a time


@functools.lru_cache(maxsize=1)
def _mallopt():
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return getattr(libc, "mallopt", None) if hasattr(libc, "gnu_get_libc_version") else None  # glibc only


def keep_freed_memory() -> None:
    """Make glibc keep freed blocks for reuse (see the module docstring). RuntimeError where
    the C library is not glibc (musl, macOS, Windows) or glibc refuses a value."""
    mallopt = _mallopt()
    if mallopt is None:
        raise RuntimeError("keep_freed_memory needs glibc's mallopt (Linux with glibc); this process's C library "
                           "has none: use a caching allocator such as jemalloc or tcmalloc via LD_PRELOAD instead")
    for name, option, value in (("M_MMAP_THRESHOLD", M_MMAP_THRESHOLD, MMAP_THRESHOLD),
                                ("M_TRIM_THRESHOLD", M_TRIM_THRESHOLD, TRIM_THRESHOLD),
                                ("M_TOP_PAD", M_TOP_PAD, TOP_PAD)):
        if mallopt(ctypes.c_int(option), ctypes.c_int(value)) != 1:
            raise RuntimeError(f"glibc's mallopt refused {name}={value}")


def output_pool(max_bytes: int | None = None) -> dict:
    """Read, or set, the bound of unigraph's own pool of CPU output memory.

    unigraph's CPU kernels (g-SpMM/g-SDDMM outputs, dropout, the layers' large dense projections
    and their input gradients) take large outputs from a pool that recycles a block once torch
    frees the tensor, so a training loop stops faulting them in every step (``kernels/cpu/alloc.py``).
    It touches only unigraph's tensors, never the process allocator. ``max_bytes`` bounds the free
    memory it keeps (default 2 GiB, or ``UNIGRAPH_OUTPUT_POOL_BYTES``); 0 turns pooling off and
    frees what is kept. Returns the bound, the bytes kept free now and counts of new, reused and
    dropped blocks."""
    from unigraph.kernels.cpu import alloc
    pool = alloc.pool()
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"output_pool(max_bytes={max_bytes!r}): expected a whole number of bytes >= 0 "
                             "(0 turns the pool off)")
        pool.resize(max_bytes)
    pool.harvest()
    return {"max_bytes": pool.max_bytes, "free_bytes": pool.free_bytes, **{k: pool.stats[k] for k in
                                                                           ("new", "reused", "dropped")}}
