"""CPU kernels compiled with numba: node-parallel over CSR rows, no E x F message tensor.

Why our own kernels: torch's CPU paths either materialize E x F messages (scatter-gather) or,
for sparse products, have slow backward passes and no fused attention. Node-parallel loops over
the in-CSR (one destination row per iteration, threads over rows) write every output row from
one thread, so they need no atomics and are deterministic; backward passes run the same loops
over the out-CSR (the reverse graph), which unigraph caches.

Every kernel takes numpy views of contiguous torch tensors (zero-copy) and writes into
preallocated outputs. ``numba`` is optional (the ``cpu`` extra): :func:`numba_status` says whether
it can be used, and ``unigraph.backends.numba`` reports that through ``unigraph.info()``.
Kernels are compiled on first use (about a second each) and cached on disk by numba.
"""
from __future__ import annotations

import contextlib
import importlib.util
from typing import Iterator

# Fast-math flags without 'nnan'/'ninf': max/min kernels start from -inf/+inf and must see them.
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}


# Below this many element operations a kernel runs on one thread: waking numba's thread team
# costs ~10 us (measured on the 2-core development machine; ~1 ms when the cores are busy with
# other processes), more than the work itself (~1 ns per element).
SERIAL_WORK = 65_536


_pool_started = False


def start_numba_threads() -> None:
    """Start numba's thread pool (once per process) without touching torch's thread count.

    numba starts its pool on first use (the first parallel kernel, or any ``numba.get_num_threads``
    / ``set_num_threads``), and its OpenMP layer then sets the calling thread's OpenMP thread count
    to ``NUMBA_NUM_THREADS``. That count is torch's intra-op thread count too: a user who set
    ``torch.set_num_threads(1)`` found 2 after the first sampled batch (and a 5x slower loop).
    Every path into numba kernels calls this first; it puts torch's count back."""
    global _pool_started
    if _pool_started:
        return
    import numba
    import torch
    before = torch.get_num_threads()
    numba.get_num_threads()   # starts the pool
    if torch.get_num_threads() != before:
        torch.set_num_threads(before)
    _pool_started = True


@contextlib.contextmanager
def threads_for(work: int) -> Iterator[None]:
    """Run the enclosed kernel calls single-threaded when ``work`` is small."""
    start_numba_threads()
    if work >= SERIAL_WORK:
        yield
        return
    import numba
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(before)


def numba_status() -> tuple[bool, str]:
    """(usable, detail) without importing numba's compiler when it is absent."""
    if importlib.util.find_spec("numba") is None:
        return False, "numba is not installed (pip install numba, or the 'cpu' extra)"
    import numba
    return True, f"numba {numba.__version__}"
