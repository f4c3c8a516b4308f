"""OpenMP's wait policy: torch's left as the user has it; numba's pool passive (``kernels/cpu/openmp.py``).

Two OpenMP runtimes can live in one unigraph process: torch's wheel ships its own libgomp (loaded
with torch), and numba's omp threading layer links the system's (loaded when numba's pool starts,
at the first unigraph kernel). Each reads ``OMP_WAIT_POLICY`` (and ``GOMP_SPINCOUNT``) once, when
it loads, and each keeps its own thread team.

torch's is the user's: importing unigraph changes nothing in the environment, so torch's OpenMP
waits as it does without unigraph (libgomp's default: spin a while, then sleep). Setting
``PASSIVE`` on import, as unigraph once did, made every torch operation of a script that imports
unigraph first pay a wake-up per parallel region: PyG's own GIN layers, 2 threads, 2.0 -> 7.6 ms
per evaluation batch (docs/faults.md, "Threads"). numba's pool is unigraph's, and waits passively
unless the user chose (``unigraph.kernels.cpu.openmp``). :func:`wait_policy_in_effect` says what
each read (benchmark reports print it). Imports no torch: ``unigraph/__init__.py`` calls
:func:`note_import` before it imports torch.
"""
from __future__ import annotations

import os
import sys

VARIABLE = "OMP_WAIT_POLICY"

_torch_first: bool | None = None   # whether torch was loaded before unigraph
_torch_at_load: str | None = None  # OMP_WAIT_POLICY as torch's libgomp read it (as far as unigraph saw)


def note_import() -> None:
    """Remember the variable torch's libgomp reads: its value now, when torch has just loaded or
    loads next (called once, by ``unigraph/__init__.py``, before it imports torch)."""
    global _torch_first, _torch_at_load
    if _torch_first is None:
        _torch_first = "torch" in sys.modules
        _torch_at_load = os.environ.get(VARIABLE)


def wait_policy_in_effect() -> str:
    """What each OpenMP runtime read, in words: torch's (the variable's value when unigraph was
    imported, which torch's libgomp read then or, where torch came first, earlier: a change made
    between torch's import and unigraph's is not seen; libgomp's default where unset; where the
    variable says otherwise now, that it was set too late) and numba's pool's (once started)."""
    from unigraph.kernels.cpu.openmp import DEFAULT, pool_policy
    torch_policy = _torch_at_load if _torch_at_load else DEFAULT
    now = os.environ.get(VARIABLE)
    if _torch_first and now != _torch_at_load:
        torch_policy += f" (the environment says {now!r}, set after torch loaded: not in effect)"
    numba = pool_policy()
    return f"torch: {torch_policy}; numba's pool: {numba if numba is not None else 'not started'}"
