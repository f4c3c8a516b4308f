"""Output tensors of the CPU kernels, backed by transparent huge pages where the system allows it.

A fresh large tensor is memory the kernel maps page by page on first touch: with 4 KiB pages a
128 MiB output (500k nodes x 64 float32) takes 32,768 page faults, each zeroing its page, which
cost more than half as much as the g-SpMM that fills it (62 ms vs ~200 ms on one core of the
development machine). Linux's transparent huge pages map 2 MiB at a time (64 faults): the same
allocation and fill took 15 ms. Where the system's setting is ``madvise`` (the common default),
a region gets huge pages only when asked, so :func:`empty` asks (``madvise(MADV_HUGEPAGE)`` on
the 2 MiB-aligned interior of the tensor, before anything touches it). The advice never changes
a value: the tensor is an ordinary ``torch.empty`` tensor, and where huge pages are off, not
available, or the platform is not Linux, :func:`empty` is ``torch.empty``.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

import torch

HUGE_PAGE = 2 << 20
MIN_BYTES = 4 << 20   # below two huge pages the advice covers too little to matter
_MADV_HUGEPAGE = 14   # linux/mman.h
_SETTING = "/sys/kernel/mm/transparent_hugepage/enabled"


@functools.lru_cache(maxsize=None)
def _madvise():
    """libc's ``madvise`` where asking for huge pages helps (the setting is ``madvise``), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        with open(_SETTING, encoding="ascii") as f:
            setting = f.read()
    except OSError:  # no THP support in this kernel (or no /sys): nothing to ask for
        return None
    if "[madvise]" not in setting:  # "always" gives huge pages without asking; "never" refuses them
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    libc.madvise.restype = ctypes.c_int
    return libc.madvise


def advise_huge_pages(t: torch.Tensor) -> None:
    """Ask for huge pages under the 2 MiB-aligned interior of ``t``'s memory (a hint: its
    result is not checked, since a refusal only means 4 KiB pages, as without it)."""
    madvise = _madvise()
    nbytes = t.numel() * t.element_size()
    if madvise is None or nbytes < MIN_BYTES:
        return
    start = (t.data_ptr() + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1)
    end = (t.data_ptr() + nbytes) & ~(HUGE_PAGE - 1)
    if end > start:
        madvise(start, end - start, _MADV_HUGEPAGE)


def empty(shape, dtype: torch.dtype) -> torch.Tensor:
    """``torch.empty(shape, dtype=dtype)`` on the CPU, huge pages advised (see module docstring)."""
    t = torch.empty(shape, dtype=dtype)
    advise_huge_pages(t)
    return t


def zeros(shape, dtype: torch.dtype) -> torch.Tensor:
    """:func:`empty` filled with zeros."""
    return empty(shape, dtype).zero_()
