"""OpenMP's wait policy: torch's left as the user has it, numba's pool passive.

Two OpenMP runtimes can live in one unigraph process: torch's wheel ships its own libgomp (loaded
with torch), and numba's omp threading layer links the system's (loaded when numba's pool starts,
at the first unigraph kernel). Each reads ``OMP_WAIT_POLICY`` (and ``GOMP_SPINCOUNT``) once, when
it loads, and each keeps its own thread team.

* **torch's** is the user's: importing unigraph changes nothing in the environment, so torch's
  OpenMP waits as it does without unigraph (libgomp's default: spin a while, then sleep). Setting
  ``PASSIVE`` on import, as unigraph once did, made every torch operation of a script that
  imports unigraph first pay a wake-up per parallel region: PyG's own GIN layers, 2 threads, 2.0
  -> 7.6 ms per evaluation batch (docs/faults.md, "Threads").
* **numba's** pool is unigraph's: :func:`numba_pool_start` starts it with ``PASSIVE`` (unless the
  user set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``: theirs wins), so numba's workers do not spin
  on the cores torch's next operation needs; the variable is removed again right after, so
  child processes inherit the user's environment.

Where both are one library (a torch built against the system's libgomp), numba's pool shares
torch's, and its policy is torch's. :func:`wait_policy_in_effect` says what each read (benchmark
reports print it). Imports no torch.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator

VARIABLE = "OMP_WAIT_POLICY"
SPIN_COUNT = "GOMP_SPINCOUNT"
NUMBA_POOL_POLICY = "PASSIVE"
_DEFAULT = "unset: libgomp's default, spin then sleep"

_torch_first: bool | None = None   # whether torch was loaded before unigraph
_torch_at_load: str | None = None  # OMP_WAIT_POLICY as torch's libgomp read it (as far as unigraph saw)
_numba: str | None = None          # what numba's pool read, in words (None: not started yet)


def note_import() -> None:
    """Remember the variable torch's libgomp reads: its value now, when torch has just loaded or
    loads next (called once, by ``unigraph/__init__.py``, before it imports torch)."""
    global _torch_first, _torch_at_load
    if _torch_first is None:
        _torch_first = "torch" in sys.modules
        _torch_at_load = os.environ.get(VARIABLE)


@contextlib.contextmanager
def numba_pool_start() -> Iterator[None]:
    """The block in which numba's thread pool starts (``kernels.cpu.threads.start_numba_threads``):
    ``OMP_WAIT_POLICY=PASSIVE`` for the libgomp that loads in it, unless the user chose a policy
    or a spin count; then the environment as it was."""
    global _numba
    chosen = VARIABLE in os.environ or SPIN_COUNT in os.environ
    before = _libgomps()
    if not chosen:
        os.environ[VARIABLE] = NUMBA_POOL_POLICY
    try:
        yield
    finally:
        read = os.environ.get(VARIABLE)
        if not chosen:
            os.environ.pop(VARIABLE, None)
        loaded = _libgomps()
        if before is None or loaded is None:
            _numba = f"{read or _DEFAULT} (if numba's libgomp loaded with its pool; no /proc/self/maps here to say)"
        elif loaded - before:
            _numba = read or _DEFAULT
        else:
            _numba = "torch's (numba's pool runs on a libgomp loaded before it)"


def _libgomps() -> set[str] | None:
    """The paths of the libgomp copies mapped into this process (None where /proc cannot say)."""
    try:
        with open("/proc/self/maps") as maps:
            return {line.split()[-1] for line in maps if "libgomp" in line.rsplit("/", 1)[-1]}
    except OSError:
        return None


def wait_policy_in_effect() -> str:
    """What each OpenMP runtime read, in words: torch's (the variable's value when unigraph was
    imported, which torch's libgomp read then or, where torch came first, earlier: a change made
    between torch's import and unigraph's is not seen; libgomp's default where unset; where the
    variable says otherwise now, that it was set too late) and numba's pool's (once started)."""
    torch_policy = _torch_at_load if _torch_at_load else _DEFAULT
    now = os.environ.get(VARIABLE)
    if _torch_first and now != _torch_at_load:
        torch_policy += f" (the environment says {now!r}, set after torch loaded: not in effect)"
    return f"torch: {torch_policy}; numba's pool: {_numba if _numba is not None else 'not started'}"
