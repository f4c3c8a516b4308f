"""OpenMP's wait policy in a unigraph process, and the one libgomp actually runs with.

torch's intra-op pool and numba's omp layer share one libgomp here, which reads
``OMP_WAIT_POLICY`` once, when it loads: when torch is first imported. Importing unigraph sets
``PASSIVE`` unless the variable is set (docs/faults.md, "Threads": the trade-off, measured), which
takes effect only if unigraph is imported before torch. A script that imports torch first runs with
libgomp's default (spin a while, then sleep) whatever the variable says afterwards: benchmark
reports say which (:func:`wait_policy_in_effect`). Imports no torch: it must run before torch loads.
"""
from __future__ import annotations

import os
import sys

VARIABLE = "OMP_WAIT_POLICY"
_TORCH_FIRST: bool | None = None   # whether torch was loaded before unigraph set the default
_AT_LOAD: str | None = None        # the variable's value when libgomp read it (as far as unigraph saw)


def set_default() -> None:
    """``OMP_WAIT_POLICY=PASSIVE`` unless set; remember what torch's libgomp read (called once,
    by ``unigraph/__init__.py``, before it imports torch)."""
    global _TORCH_FIRST, _AT_LOAD
    if _TORCH_FIRST is not None:
        return
    _TORCH_FIRST = "torch" in sys.modules
    before = os.environ.get(VARIABLE)
    os.environ.setdefault(VARIABLE, "PASSIVE")
    # torch loaded already (it read ``before``), or loads right after, reading the variable now
    _AT_LOAD = before if _TORCH_FIRST else os.environ[VARIABLE]


def wait_policy_in_effect() -> str:
    """The policy libgomp runs with, in words: the variable's value when torch loaded, or its
    default; and, where the variable says otherwise now, that it was set too late."""
    policy = _AT_LOAD if _AT_LOAD else "unset: libgomp's default, spin then sleep"
    now = os.environ.get(VARIABLE)
    if _TORCH_FIRST and now != _AT_LOAD:
        policy += f" (the environment says {now!r}, set after torch loaded: not in effect)"
    return policy
