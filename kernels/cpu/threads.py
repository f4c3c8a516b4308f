"""How many threads a numba kernel runs with: the user's, read from torch at the time of the call.

The rule (``docs/performance.md``, "Threads"): every kernel call runs with
``torch.get_num_threads()`` threads, never more; one thread when the call's work is below
:data:`SERIAL_WORK`. torch's count is the user's setting: ``torch.set_num_threads``, one inside a
DataLoader worker (torch sets it there), ``OMP_NUM_THREADS`` in a rank torchrun started. numba's
own count defaults to every core (``NUMBA_NUM_THREADS``, the size of the pool it starts once per
process) and numba reads neither of torch's, so left alone the kernels used both cores of the
development machine under ``torch.set_num_threads(1)`` (CPU time / wall time 1.76-1.97) and
oversubscribed every worker and rank.

numba's count belongs to the calling thread. :func:`threads_for` sets it for the kernels it
encloses and puts it back after, so no call changes what the user set, in any thread; when it
already is right, nothing is set. It reads and sets through the C functions behind
``numba.get_num_threads``/``set_num_threads`` (the public ones take a lock and check on every
call): entering and leaving :func:`threads_for` took 2.0 us (count already right) and 3.4-4.2 us
(set and put back), against 3.5 us and 15 us for the code it replaced, which did not read torch's
count (timeit, the 2-core machine under load from other work).

Forked children. numba's OpenMP layer (the one installed here: no TBB) terminates a forked child
that launches a parallel kernel once the parent has started numba's pool ("fork() called from a
process already using GNU OpenMP"): a torch DataLoader worker, forked after the first training
step, died (SIGTERM) on its first unigraph kernel. So every parallel kernel is declared with
:func:`parallel_kernel`, which also knows how to compile a serial twin (the same source, ``prange``
run as ``range``, cached on disk under its own name); in a child forked after the pool started, the
module attributes of every kernel are rebound to their twins, and every kernel runs on one thread
there. Callers therefore reach kernels through their module (``spmm.gather_sum(...)``), never a
name imported earlier. Elsewhere the parallel build always runs (with one thread where asked): it
is 10-25% faster than the serial twin at one thread on large rows (LLVM vectorizes the outlined
parallel loop body better).
"""
from __future__ import annotations

import os
import sys
import types

import torch

# Below this many element operations a kernel runs on one thread: waking numba's thread team
# costs ~10 us (measured on the 2-core development machine; ~1 ms when the cores are busy with
# other processes), more than the work itself (~1 ns per element).
SERIAL_WORK = 65_536

_pool_started = False
_pool_size = 1
_get_threads = _set_threads = None   # numba's thread-count functions, bound once the pool has started
_forked = False                      # this process was forked after its parent started numba's pool
_KERNELS: list[tuple[str, str, types.FunctionType, dict]] = []   # (module, name, function, options)


def start_numba_threads() -> None:
    """Start numba's thread pool (once per process) without touching torch's thread count.

    numba starts its pool on first use (the first parallel kernel, or any ``numba.get_num_threads``
    / ``set_num_threads``), and its OpenMP layer then sets the calling thread's OpenMP thread count
    to ``NUMBA_NUM_THREADS``. That count is torch's intra-op thread count too: a user who set
    ``torch.set_num_threads(1)`` found 2 after the first sampled batch (and a 5x slower loop).
    Every path into numba kernels calls this first; it puts torch's count back. numba's OpenMP
    waits passively (``openmp.py``: torch's wait policy stays the user's)."""
    global _pool_started, _pool_size, _get_threads, _set_threads
    if _pool_started:
        return
    import numba
    from numba.np.ufunc import parallel
    from unigraph.kernels.cpu.openmp import numba_pool_start
    before = torch.get_num_threads()
    with numba_pool_start():   # its own libgomp waits passively (unless the user chose)
        numba.get_num_threads()   # starts the pool
    if torch.get_num_threads() != before:
        torch.set_num_threads(before)
    # The C functions behind numba.get/set_num_threads (the same per-thread value); every count
    # this module passes is within 1..NUMBA_NUM_THREADS, what the public setter checks.
    _get_threads = getattr(parallel, "_get_num_threads", numba.get_num_threads)
    _set_threads = getattr(parallel, "_set_num_threads", numba.set_num_threads)
    _pool_size = int(numba.config.NUMBA_NUM_THREADS)
    _pool_started = True


def kernel_threads(work: int | None = None, limit: int | None = None) -> int:
    """The threads a kernel call runs with: ``torch.get_num_threads()`` now, at most the pool numba
    started (``NUMBA_NUM_THREADS``, fixed per process) and ``limit``; 1 when ``work`` (element
    operations) is below :data:`SERIAL_WORK`, and in a forked child (see the module docstring)."""
    if _forked or (work is not None and work < SERIAL_WORK):
        return 1
    threads = torch.get_num_threads()
    if _pool_started:
        threads = min(threads, _pool_size)
    if limit is not None:
        threads = min(threads, limit)
    return max(1, threads)


def current_threads() -> int:
    """numba's thread count of the calling thread (what the next parallel kernel would use)."""
    start_numba_threads()
    return _get_threads()


class _Threads:
    """numba's count for the calling thread set to ``n`` for the enclosed kernels, then put back."""

    __slots__ = ("n", "before")

    def __init__(self, n: int):
        self.n = n
        self.before = n

    def __enter__(self) -> None:
        self.before = _get_threads()
        if self.before != self.n:
            _set_threads(self.n)

    def __exit__(self, *exc) -> None:
        if self.before != self.n:
            _set_threads(self.before)


def threads_for(work: int | None, limit: int | None = None) -> _Threads:
    """A context in which numba kernels run with :func:`kernel_threads` (``work``, ``limit``)
    threads. Every call of a parallel kernel runs inside one (``tests/kernels/cpu/test_kernel_threads.py``
    checks each kernel's thread count at call time). :func:`kernel_threads`'s rule, inlined: this
    runs around every kernel call."""
    if not _pool_started:
        start_numba_threads()
    if _forked or (work is not None and work < SERIAL_WORK):
        return _Threads(1)
    n = torch.get_num_threads()
    if n > _pool_size:
        n = _pool_size
    if limit is not None and n > limit:
        n = limit
    return _Threads(n if n > 1 else 1)


# ---------------------------------------------------------------------- kernels and their serial twins
def parallel_kernel(**options):
    """``numba.njit(parallel=True, cache=True, **options)``, registered so that a forked child can
    rebind the kernel to its serial twin (see the module docstring). Use it for every kernel with
    a ``prange`` loop that Python calls."""
    def declare(function: types.FunctionType):
        _KERNELS.append((function.__module__, function.__name__, function, options))
        if _forked:   # a kernel module imported for the first time in a forked child
            return _serial_twin(function, options)
        import numba
        return numba.njit(parallel=True, cache=True, **options)(function)
    return declare


def _serial_twin(function: types.FunctionType, options: dict):
    """The same source compiled without ``parallel`` (``prange`` runs as ``range``), under its own
    name, so that numba's disk cache (keyed by qualified name and source line, not by flags) keeps
    the two apart."""
    import numba
    twin = types.FunctionType(function.__code__, function.__globals__, function.__name__ + "_serial",
                              function.__defaults__, function.__closure__)
    twin.__qualname__ = function.__qualname__ + "_serial"
    twin.__module__ = function.__module__
    twin.__doc__ = function.__doc__
    return numba.njit(cache=True, **options)(twin)


def _after_fork_in_child() -> None:
    global _forked
    if not _pool_started or _forked:
        return
    _forked = True
    for module, name, function, options in _KERNELS:
        setattr(sys.modules[module], name, _serial_twin(function, options))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
