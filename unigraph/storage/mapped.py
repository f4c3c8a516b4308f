"""Raw little-endian arrays mapped from disk, and what a process's memory holds of them.

:func:`map_array` maps a raw array file (no header: its dtype and shape come from a manifest) with
a **private, copy-on-write** mapping (``mmap.ACCESS_COPY``, ``MAP_PRIVATE``): reads come from the
kernel's page cache, shared with every other process reading the file and given back under memory
pressure (never swapped: the file is their backing store); a write to the array would copy the
touched page into the process (anonymous memory) and never reach the file. So a tensor over a
mapped array is as safe to hand to code that might write in place as any tensor, and a graph
whose files exceed RAM is read through the page cache, not into private copies.

Memory of a process (:func:`memory_status`, Linux ``/proc/self/status``): ``RssAnon`` is private
memory (what the process allocated: it cannot be given back without swap), ``RssFile`` the
mapped file pages resident now (page cache the kernel can reclaim), ``VmHWM`` the peak of their
sum. :class:`PeakMemory` samples them in a thread, so a run reports its peak private memory
(the bound that matters when the data is mapped) beside the peak resident set.
"""
from __future__ import annotations

import mmap
import os
import pathlib
import threading

import numpy as np

from unigraph.data import limits
from unigraph.data.errors import DataFileError

PAGE = mmap.PAGESIZE


class MappedArray:
    """A raw array file mapped read-mostly (see the module docstring).

    ``array``: the numpy view (``shape`` rows of ``dtype``); ``mapping``: the ``mmap`` object
    (``None`` for an empty file, which cannot be mapped); ``row_bytes``: bytes per row.
    """

    def __init__(self, path: pathlib.Path, array: np.ndarray, mapping: mmap.mmap | None):
        self.path = path
        self.array = array
        self.mapping = mapping
        self.row_bytes = int(array.itemsize * (int(np.prod(array.shape[1:])) if array.ndim > 1 else 1))

    def advise_rows(self, rows: np.ndarray, *, max_ranges: int = 1 << 16) -> int:
        """Ask the kernel to read the pages of ``rows`` ahead (``madvise(MADV_WILLNEED)``): the
        reads are queued together instead of faulted in one at a time by the gather that follows.
        Rows are sorted and their pages merged into ranges; more than ``max_ranges`` ranges are
        not advised (returns 0: the advice would cost more system calls than it saves). Returns
        the number of ranges advised. Advice only: nothing is read into this process."""
        if self.mapping is None or rows.size == 0 or not hasattr(self.mapping, "madvise"):
            return 0
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        first = (rows * self.row_bytes) // PAGE
        last = ((rows + 1) * self.row_bytes - 1) // PAGE
        # merge runs of touching pages: a new range starts where a row's first page is past the previous last + 1
        starts = np.flatnonzero(np.concatenate([[True], first[1:] > last[:-1] + 1]))
        if starts.size > max_ranges:
            return 0
        ends = np.concatenate([starts[1:], [rows.size]]) - 1
        size = len(self.mapping)
        for begin_page, end_page in zip(first[starts].tolist(), last[ends].tolist()):
            begin = begin_page * PAGE
            self.mapping.madvise(mmap.MADV_WILLNEED, begin, min(size, (end_page + 1) * PAGE) - begin)
        return int(starts.size)

    def advise_random(self) -> bool:
        """Tell the kernel this mapping is read at random (``madvise(MADV_RANDOM)``): a page fault
        then reads its page, not the device's read-ahead window around it. Feature rows and
        neighbour lists are read a few hundred bytes at a time in no order; with read-around, a
        graph bigger than the page cache read about 4 MB from disk per fault (``read_ahead_kb``
        was 8192 here: 600-780 MB/s of reads for ~190 faults/s) and evicted the pages other
        batches needed. Explicit advice (:meth:`advise_rows`) still reads exactly its ranges.
        Returns whether the advice was given (not for an empty file or without ``madvise``)."""
        if self.mapping is None or not hasattr(mmap, "MADV_RANDOM"):
            return False
        self.mapping.madvise(mmap.MADV_RANDOM)
        return True

    def close(self) -> None:
        """Drop the mapping (the array must not be used afterwards; views keep it alive)."""
        self.array = None
        self.mapping = None


def map_array(path: str | os.PathLike, dtype: np.dtype, shape: tuple[int, ...]) -> MappedArray:
    """Map the raw array file ``path`` as ``shape`` rows of ``dtype`` (little-endian), copy-on-write.

    The file must be a regular file of exactly ``prod(shape) * itemsize`` bytes (checked before
    mapping: reading past the end of a shorter mapped file would kill the process with SIGBUS).
    Raises :class:`~unigraph.data.errors.DataFileError` naming the file otherwise."""
    path = pathlib.Path(path)
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise DataFileError(path, f"dtype {dtype} holds Python objects; raw arrays hold numbers only")
    expected = limits.elements_bytes(shape, dtype.itemsize)
    size = limits.regular_size(path)
    if size != expected:
        raise DataFileError(path, f"holds {size:,} bytes, but {list(shape)} values of {dtype} need {expected:,} "
                                  "(truncated, or written for another shape)")
    if expected == 0:
        return MappedArray(path, np.zeros(shape, dtype=dtype), None)
    with limits.open_regular(path) as handle:
        mapping = mmap.mmap(handle.fileno(), expected, access=mmap.ACCESS_COPY)
    array = np.frombuffer(mapping, dtype=dtype, count=expected // dtype.itemsize).reshape(shape)
    return MappedArray(path, array, mapping)


# ---------------------------------------------------------------------------------------------- memory of a process
STATUS_FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")


def memory_status(pid: int | str = "self") -> dict[str, int]:
    """``VmRSS``, ``VmHWM``, ``RssAnon``, ``RssFile``, ``RssShmem`` of a process in bytes (Linux;
    an empty dict where ``/proc`` does not have them)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                name, _, value = line.partition(":")
                if name in STATUS_FIELDS:
                    out[name] = int(value.split()[0]) * 1024
    except OSError:
        return {}
    return out


class PeakMemory:
    """The peaks of :func:`memory_status` fields, sampled every ``interval`` seconds in a daemon
    thread while the block runs (``with PeakMemory() as peak: ...; peak.peaks["RssAnon"]``).
    ``VmHWM`` is the kernel's own exact peak; the other peaks are sampled (a spike shorter than
    ``interval`` can be missed)."""

    def __init__(self, interval: float = 0.05, pid: int | str = "self"):
        self.interval = interval
        self.pid = pid
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        for name, value in memory_status(self.pid).items():
            self.peaks[name] = max(self.peaks.get(name, 0), value)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> "PeakMemory":
        self.sample()
        self._thread = threading.Thread(target=self._run, name="unigraph-peak-memory", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
