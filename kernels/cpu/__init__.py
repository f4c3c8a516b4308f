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

import importlib.util

# The thread rule (torch's count at call time) and the kernels' declaration: threads.py.
from unigraph.kernels.cpu.threads import (  # noqa: F401 - re-exported: the kernels' callers import them from here
    SERIAL_WORK, current_threads, kernel_threads, parallel_kernel, start_numba_threads, threads_for)

# Fast-math flags without 'nnan'/'ninf': max/min kernels start from -inf/+inf and must see them.
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}


def numba_status() -> tuple[bool, str]:
    """(usable, detail) without importing numba's compiler when it is absent."""
    if importlib.util.find_spec("numba") is None:
        return False, "numba is not installed (pip install numba, or the 'cpu' extra)"
    import numba
    return True, f"numba {numba.__version__}"
