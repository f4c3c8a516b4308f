"""Output tensors of the CPU kernels: recycled from a bounded pool, on transparent huge pages.

Why: a fresh large tensor is memory the OS maps page by page on first touch. glibc serves every
block above its mmap threshold (at most 32 MiB) with a fresh ``mmap`` and unmaps it on free, so a
training loop faults its activations in again every step: a 169k x 256 float32 output is 42,000
4 KiB faults, each zeroing its page, which cost about as much as the kernel that fills it.

The pool: :func:`empty` hands out a tensor on a block of memory the pool owns: an ordinary torch
storage (so the tensor is an ordinary tensor: ``resize_`` grows it as it grows any tensor, the
storage then holding new memory). The pool keeps a reference to each storage it lends. Once the
tensor it handed out is freed, the block is *pending*; a pending block comes back to the pool,
already mapped, when nothing else holds its storage (every view, saved copy and ``detach()``-ed
alias gone: its use count is the pool's one reference), which the pool checks whenever another
pooled tensor is freed or requested and in ``unigraph.memory.output_pool()``; the next request of
about its size reuses it. Blocks are whole huge pages, and a request of ``n`` bytes rounded up so
takes a free block of at most ``n * FIT`` (training loops ask for the same sizes every step;
mini-batches for nearby ones).
At most ``max_bytes`` of free blocks are kept (the oldest are given back to the OS first), so the
pool never holds more than that beyond what is in use. Only blocks of ``MIN_BYTES`` and more are
pooled; smaller ones come from ``torch.empty`` as before (glibc's heap reuses those anyway).

Exactness: a recycled block holds its previous values, exactly like ``torch.empty``'s memory may;
every kernel writes every element of its output. ``tests/ops/test_output_pool.py`` proves it by
poisoning every pooled tensor with NaN (``pool().poison``) and running every op.

Huge pages: where the system's THP setting is ``madvise`` (the common default), a new block is
advised onto 2 MiB pages before anything touches it (64 faults instead of 32,768 for 128 MiB).

Control: ``unigraph.memory.output_pool(max_bytes)`` (0 turns pooling off), or the environment
variable ``UNIGRAPH_OUTPUT_POOL_BYTES``; the default keeps up to ``DEFAULT_MAX_BYTES``.
"""
from __future__ import annotations

import bisect
import collections
import ctypes
import ctypes.util
import functools
import itertools
import math
import os
import sys
import threading
import weakref

import numpy as np
import torch

HUGE_PAGE = 2 << 20
MIN_BYTES = 4 << 20   # below this glibc's heap recycles blocks itself (and huge-page advice covers too little)
FIT = 1.25            # a free block serves a request of at least 1/FIT of its size
DEFAULT_MAX_BYTES = 2 << 30
_MADV_HUGEPAGE = 14   # linux/mman.h
_SETTING = "/sys/kernel/mm/transparent_hugepage/enabled"
_ENV = "UNIGRAPH_OUTPUT_POOL_BYTES"


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


def advise_huge_pages(t) -> None:
    """Ask for huge pages under the 2 MiB-aligned interior of ``t``'s memory (a torch tensor or
    storage, or a numpy array; a hint: its result is not checked, since a refusal only means 4 KiB
    pages)."""
    madvise = _madvise()
    if isinstance(t, np.ndarray):
        ptr, nbytes = t.ctypes.data, t.nbytes
    elif isinstance(t, torch.UntypedStorage):
        ptr, nbytes = t.data_ptr(), t.nbytes()
    else:
        ptr, nbytes = t.data_ptr(), t.numel() * t.element_size()
    if madvise is None or nbytes < MIN_BYTES:
        return
    start = (ptr + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1)
    end = (ptr + nbytes) & ~(HUGE_PAGE - 1)
    if end > start:
        madvise(start, end - start, _MADV_HUGEPAGE)


def _max_bytes_from_environment() -> int:
    raw = os.environ.get(_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_MAX_BYTES
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{_ENV}={raw!r}: expected a whole number of bytes (0 turns the output pool off)") from None
    if value < 0:
        raise ValueError(f"{_ENV}={raw!r}: expected a number of bytes >= 0 (0 turns the output pool off)")
    return value


# torch's count of a storage's owners (private, what torch's own code uses): without it a pool
# could not tell when a block is free, so nothing is pooled
_CAN_COUNT_OWNERS = hasattr(torch._C, "_storage_Use_Count")


def _only_ours(storage: torch.UntypedStorage) -> bool:
    """Whether the pool's reference is the last one to ``storage`` (no tensor uses it)."""
    return torch._C._storage_Use_Count(storage._cdata) == 1


class _Pool:
    """Free blocks (torch storages) sorted by size, and the blocks lent out. A lock because torch
    may free a tensor on any thread (the autograd engine's, a DataLoader's); re-entrant because the
    garbage collector may free a pooled tensor, and so call :meth:`returned`, inside a locked
    section."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.lock = threading.RLock()
        self.sizes: list[tuple[int, int]] = []          # (nbytes, serial), sorted
        self.blocks: dict[int, torch.UntypedStorage] = {}   # serial -> free block
        self.age = collections.OrderedDict()            # serial -> None, oldest first
        self.lent: dict[int, torch.UntypedStorage] = {}     # serial -> block handed out
        self.pending: set[int] = set()                  # lent blocks whose tensor is gone, storage still shared
        self.free_bytes = 0
        self.serial = itertools.count()
        self.poison = False
        self.stats = collections.Counter()

    def take(self, nbytes: int) -> torch.UntypedStorage:
        need = _round_up(nbytes)
        with self.lock:
            self.harvest()
            i = bisect.bisect_left(self.sizes, (need, -1))
            if i < len(self.sizes) and self.sizes[i][0] < need * FIT + 1:
                self.stats["reused"] += 1
                return self._remove(self.sizes[i][1])
            self.stats["new"] += 1
        try:
            block = torch.UntypedStorage(need)
        except RuntimeError:  # out of memory: the blocks kept free are the first memory to give up
            self._trim(0)
            block = torch.UntypedStorage(need)
        advise_huge_pages(block)
        return block

    def lend(self, block: torch.UntypedStorage) -> int:
        with self.lock:
            serial = next(self.serial)
            self.lent[serial] = block
            return serial

    def returned(self, serial: int) -> None:
        """The tensor lent on block ``serial`` is going. While its finalizer runs the tensor may
        still hold the block (CPython clears weak references before torch drops the tensor), so
        the block waits among the pending ones, and those nothing holds any more are kept now."""
        with self.lock:
            if serial in self.lent:
                self.pending.add(serial)
            self.harvest()

    def harvest(self) -> None:
        """Keep the pending blocks nothing holds any more."""
        with self.lock:
            for serial in [s for s in self.pending if _only_ours(self.lent[s])]:
                self.pending.discard(serial)
                self._keep(self.lent.pop(serial))

    def _keep(self, block: torch.UntypedStorage) -> None:
        if block.nbytes() > self.max_bytes or block.nbytes() < HUGE_PAGE:
            return  # dropped (too big to keep, or emptied by a resize): freed with the last reference
        serial = next(self.serial)
        bisect.insort(self.sizes, (block.nbytes(), serial))
        self.blocks[serial] = block
        self.age[serial] = None
        self.free_bytes += block.nbytes()
        self._trim(self.max_bytes)

    def resize(self, max_bytes: int) -> None:
        with self.lock:
            self.max_bytes = max_bytes
            self._trim(max_bytes)

    def _remove(self, serial: int) -> torch.UntypedStorage:
        block = self.blocks.pop(serial)
        del self.age[serial]
        self.sizes.remove((block.nbytes(), serial))
        self.free_bytes -= block.nbytes()
        return block

    def _trim(self, limit: int) -> None:
        """Drop the oldest free blocks until at most ``limit`` bytes are kept."""
        with self.lock:
            while self.free_bytes > limit:
                self._remove(next(iter(self.age)))
                self.stats["dropped"] += 1


def _round_up(nbytes: int) -> int:
    """Blocks in whole huge pages: nearby requests share blocks, and advice covers all of one."""
    return -(-nbytes // HUGE_PAGE) * HUGE_PAGE


def _poison(t: torch.Tensor) -> torch.Tensor:
    """NaN in a float tensor, a value far outside any index range in an integer one (a winner
    index the kernel forgot to write then fails loudly instead of reading as -1 or 0)."""
    if t.dtype == torch.bool:
        t.view(torch.uint8).fill_(0x7F)   # neither True (1) nor False (0)
        return t
    return t.fill_(float("nan") if t.is_floating_point() else torch.iinfo(t.dtype).max // 3)


_POOL = _Pool(_max_bytes_from_environment())


def pool() -> _Pool:
    return _POOL


def empty(shape, dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised CPU tensor like ``torch.empty(shape, dtype=dtype)``, on pooled memory when
    it is large (see the module docstring); contiguous, and resizable as any tensor."""
    shape = tuple(map(int, shape))
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES:   # glibc's heap recycles these; no huge page fits (the common case: keep it short)
        return torch.empty(shape, dtype=dtype)
    if _POOL.max_bytes == 0 or not _CAN_COUNT_OWNERS:
        t = torch.empty(shape, dtype=dtype)
        advise_huge_pages(t)
        return t
    block = _POOL.take(nbytes)
    # a tensor of its own on the block (set_, not .view: autograd must not see a view, or an
    # in-place op on a custom Function's output would be refused). Its Python object lives as
    # long as torch holds the tensor (views and saved tensors keep it), so the finalizer runs
    # when it is gone; the pool then checks that nothing else shares the block
    t = torch.empty(0, dtype=dtype).set_(block, 0, shape)
    weakref.finalize(t, _POOL.returned, _POOL.lend(block)).atexit = False
    return _poison(t) if _POOL.poison else t


def zeros(shape, dtype: torch.dtype) -> torch.Tensor:
    """:func:`empty` filled with zeros."""
    return empty(shape, dtype).zero_()
