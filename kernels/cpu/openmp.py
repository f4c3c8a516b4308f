"""numba's OpenMP pool waits passively (torch's wait policy stays the user's: ``unigraph/_openmp.py``).

numba's omp threading layer links the system's libgomp, which loads when numba's pool starts, at
the first unigraph kernel; torch's wheel ships a libgomp of its own, loaded with torch. Each reads
``OMP_WAIT_POLICY`` (and ``GOMP_SPINCOUNT``) once, when it loads. :func:`numba_pool_start` sets
``PASSIVE`` for the load of numba's (unless the user chose a policy or a spin count: theirs wins),
so numba's workers do not spin on the cores torch's next operation needs, and then removes the
variable again, so child processes inherit the user's environment. Where numba's pool runs on a
libgomp loaded before it (one library with torch's), its policy is the one that library read.
"""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

VARIABLE = "OMP_WAIT_POLICY"
SPIN_COUNT = "GOMP_SPINCOUNT"
POOL_POLICY = "PASSIVE"
DEFAULT = "unset: libgomp's default, spin then sleep"

_read: str | None = None   # what numba's pool read, in words (None: not started yet)


@contextlib.contextmanager
def numba_pool_start() -> Iterator[None]:
    """The block in which numba's thread pool starts (:func:`threads.start_numba_threads`):
    ``OMP_WAIT_POLICY=PASSIVE`` for the libgomp that loads in it, unless the user chose a policy
    or a spin count; then the environment as it was."""
    global _read
    chosen = VARIABLE in os.environ or SPIN_COUNT in os.environ
    before = _libgomps()
    if not chosen:
        os.environ[VARIABLE] = POOL_POLICY
    try:
        yield
    finally:
        value = os.environ.get(VARIABLE)
        if not chosen:
            os.environ.pop(VARIABLE, None)
        loaded = _libgomps()
        if before is None or loaded is None:
            _read = f"{value or DEFAULT} (if numba's libgomp loaded with its pool; no /proc/self/maps here to say)"
        elif loaded - before:
            _read = value or DEFAULT
        else:
            _read = "as read by a libgomp loaded before numba's pool (torch's, where one library serves both)"


def pool_policy() -> str | None:
    """What numba's pool read, in words; None before it started."""
    return _read


def _libgomps() -> set[str] | None:
    """The paths of the libgomp copies mapped into this process (None where /proc cannot say)."""
    try:
        with open("/proc/self/maps") as maps:
            return {line.split()[-1] for line in maps if "libgomp" in line.rsplit("/", 1)[-1]}
    except OSError:
        return None
