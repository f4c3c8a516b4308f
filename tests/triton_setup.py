"""Where the Triton tests run: compiled on a CUDA GPU when there is one, else in Triton's CPU
interpreter.

Triton decides compiled vs interpreted when a function is *defined*: when ``triton.language``
is first imported (its own helpers such as ``tl.zeros`` are jitted functions too) and when
``unigraph.kernels.triton`` is imported. Anything else in the process that imports Triton first
(``torch.compile`` does) would fix the compiled mode. So, on a machine without CUDA,
:func:`define_interpreted_kernels` (called by ``conftest.py`` at session start) imports both
with ``TRITON_INTERPRET=1`` and then restores the environment: the rest of the suite sees the
same environment as without these tests (the Triton backends stay unavailable on the CPU, and
torch's inductor never sees the variable), while the kernels stay interpreted for the process.

:func:`triton_kernels_here` then makes the Triton backends usable for the duration of the Triton
test modules (``TRITON_INTERPRET=1`` is what their availability checks) and restores the
environment and the registry's cached availability afterwards.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from typing import Iterator

import pytest
import torch

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
TRITON_BACKENDS = ("triton_node", "triton_edge", "triton")
_not_interpretable: str | None = None  # why the interpreter cannot be used in this process


def define_interpreted_kernels() -> None:
    """On a CPU-only machine, define Triton's and unigraph's kernels in interpreter mode now."""
    global _not_interpretable
    if DEVICE.type != "cpu" or importlib.util.find_spec("triton") is None:
        return
    if "triton.language" in sys.modules:
        _not_interpretable = "triton was imported before TRITON_INTERPRET=1 could be set (by a plugin?)"
        return
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton.language  # noqa: F401 - defines tl.zeros & co. as interpreted functions
        from unigraph.kernels.triton import edge_softmax, gat, sddmm, spmm_edge, spmm_node  # noqa: F401
    finally:
        _restore("TRITON_INTERPRET", previous)


def _restore(key: str, previous: str | None) -> None:
    if previous is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = previous


def _forget_availability() -> None:
    from unigraph.backends import _STATUS
    for name in TRITON_BACKENDS:
        _STATUS.pop(name, None)


@contextlib.contextmanager
def triton_kernels_here() -> Iterator[torch.device]:
    """Make the Triton backends usable on :data:`DEVICE` for the duration; yields the device."""
    interpret = DEVICE.type == "cpu"
    if interpret and _not_interpretable:
        pytest.skip(_not_interpretable)
    runtime = sys.modules.get("unigraph.kernels.triton.runtime")
    if runtime is not None and runtime.INTERPRETED != interpret:
        pytest.skip("the Triton kernels were already defined "
                    f"{'interpreted' if runtime.INTERPRETED else 'compiled'} in this process")
    previous = os.environ.get("TRITON_INTERPRET")
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    _forget_availability()
    try:
        yield DEVICE
    finally:
        _restore("TRITON_INTERPRET", previous)
        _forget_availability()
