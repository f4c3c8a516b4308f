"""Arrays in shared memory that other processes of the machine map without copying: :class:`SharedArrays`.

One block is one anonymous memory file (``os.memfd_create``) holding several arrays at 64-byte
aligned offsets. The process that creates it (the machine's graph server) keeps the file open;
another process of the same machine maps it by opening ``/proc/<creator pid>/fd/<fd>``
(:meth:`SharedArrays.attach`, from the small :meth:`SharedArrays.describe` dictionary it
received over RPC), so every process maps the same physical pages: the machine holds one copy
however many trainers and samplers read it. (A shared page counts fully in each process's RSS;
``/proc/PID/smaps_rollup``'s PSS divides it among them: :mod:`unigraph.distributed.memory`.)

Why a memory file and not a named file in ``/dev/shm``: it has no name, so nothing can be left
behind. Its pages are freed when the last process that maps it or holds it open ends, however it
ends (a SIGKILL included); a named file outlives a killed creator. Requires Linux (``memfd_create``
and ``/proc``); processes attach only to blocks of their own machine (and PID namespace).

Mappings are read-only unless ``writable=True`` (the creator's, and the layer-wise inference
tables the trainers fill): a stray write into a read-only block is refused (numpy: a read-only
array; through a torch tensor, the process ends with SIGSEGV) instead of changing what every other
process reads.
"""
from __future__ import annotations

import mmap
import os
import warnings

import numpy as np

ALIGN = 64
TAKE_MAPPED_BYTES = 8 << 20  # SharedArrays.take: the most of a block a read keeps mapped at a time
# A read fault on a shared file page maps the cached pages around it too, up to this aligned window
# (Linux's fault_around_bytes, 64 KiB by default): a random row's read costs a window of RSS
FAULT_AROUND = 64 << 10


def _align(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN


def layout_of(specs: dict[str, tuple[np.dtype, tuple[int, ...]]]) -> tuple[list[tuple], int]:
    """``([(name, dtype, shape, offset)], total bytes)`` of arrays packed at aligned offsets."""
    layout, offset = [], 0
    for name, (dtype, shape) in specs.items():
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"array {name!r} has a negative dimension: {shape}")
        offset = _align(offset)
        layout.append((name, dtype.str, shape, offset))
        offset += dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    return layout, offset


class SharedArrays:
    """Named numpy arrays in one shared-memory block (see the module docstring).

    ``arrays``: the numpy views; :meth:`tensors` gives torch tensors over the same memory.
    """

    def __init__(self, fd: int, pid: int, layout: list[tuple], size: int, writable: bool, owner: bool, label: str):
        self.fd, self.pid, self.layout, self.size = fd, pid, layout, size
        self.writable, self.owner, self.label = writable, owner, label
        length = max(size, 1)  # mmap refuses an empty mapping
        self._map = mmap.mmap(fd, length, flags=mmap.MAP_SHARED,
                              prot=mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0))
        self.arrays = {}
        self._offsets = {name: offset for name, _, _, offset in layout}
        for name, dtype, shape, offset in layout:
            count = int(np.prod(shape, dtype=np.int64))
            self.arrays[name] = np.frombuffer(self._map, dtype=np.dtype(dtype), count=count, offset=offset).reshape(shape)
        if not owner:
            os.close(fd)  # the mapping keeps the pages; only the creator keeps the file open for others
            self.fd = -1

    @classmethod
    def create(cls, specs: dict[str, tuple], label: str = "unigraph") -> "SharedArrays":
        """A new zero-filled block with the arrays ``specs`` (``name: (dtype, shape)``), mapped writable."""
        if not hasattr(os, "memfd_create"):
            raise OSError("shared graph memory needs Linux (os.memfd_create); this platform has none")
        layout, size = layout_of(specs)
        fd = os.memfd_create(label, os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, max(size, 1))
            return cls(fd, os.getpid(), layout, size, writable=True, owner=True, label=label)
        except BaseException:
            os.close(fd)
            raise

    def describe(self) -> dict:
        """What :meth:`attach` needs (plain values: it travels over RPC)."""
        if not self.owner:
            raise ValueError("only the process that created a shared block can describe it for others")
        stat = os.fstat(self.fd)   # the file's identity: a descriptor number can be reused, an inode cannot
        return {"pid": self.pid, "fd": self.fd, "layout": self.layout, "size": self.size, "label": self.label,
                "inode": [stat.st_dev, stat.st_ino]}

    @classmethod
    def attach(cls, description: dict, *, writable: bool = False) -> "SharedArrays":
        """Map the block another process of this machine created (read-only unless ``writable``)."""
        path = f"/proc/{description['pid']}/fd/{description['fd']}"
        try:
            fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
        except OSError as err:
            raise OSError(f"cannot open the shared block {description['label']!r} of process {description['pid']} "
                          f"({path}: {err.strerror}): a process attaches only to blocks of a server on its own "
                          "machine, which must still be running") from None
        stat = os.fstat(fd)
        if [stat.st_dev, stat.st_ino] != list(description["inode"]) or stat.st_size < description["size"]:
            os.close(fd)   # e.g. the server closed the block and a newer one took its descriptor number
            raise OSError(f"{path} is no longer the shared block {description['label']!r} it should be (another "
                          "file took its descriptor number: the block was closed, or its server has ended)")
        return cls(fd, description["pid"], description["layout"], description["size"], writable, owner=False,
                   label=description["label"])

    def tensors(self) -> dict:
        """torch tensors over the same memory (no copy)."""
        return tensors_of(self.arrays)

    def release_pages(self, start: int = 0, stop: int | None = None) -> None:
        """Unmap this process's pages of the block, keeping the mapping and the data: the pages stay
        in the machine's memory file (written rows included: the mapping is shared) and the next
        access maps them again (a minor fault per page). A process that reads or fills a large block
        a batch at a time (the layer-wise inference tables) calls it after each batch, so that its
        RSS counts one batch's pages of the block, not every page it ever touched; the machine's
        memory is unchanged (its one copy is counted in the machine's PSS). ``start``/``stop``:
        a byte range of the block, by default all of it, widened by a :data:`FAULT_AROUND` window
        on each side (the pages a fault in the range may have mapped: the windows are aligned in
        the address space, which the block's mapping need not be)."""
        stop = self.size if stop is None else min(stop + FAULT_AROUND, self.size)
        start = max(0, start - FAULT_AROUND)
        start -= start % mmap.PAGESIZE
        if stop > start:
            self._map.madvise(mmap.MADV_DONTNEED, start, stop - start)

    def take(self, name: str, rows: np.ndarray, mapped_bytes: int = TAKE_MAPPED_BYTES) -> np.ndarray:
        """A copy of array ``name``'s ``rows`` (first axis) that leaves none of the block's pages
        in this process's RSS, and maps at most ``mapped_bytes`` of them at any time: a random
        row's read maps a window of pages (:data:`FAULT_AROUND`: a 512-byte row costs 64 KiB of
        RSS while mapped), so rows are read in sorted chunks, each chunk's windows unmapped
        (:meth:`release_pages`) once copied."""
        array = self.arrays[name]
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((rows.size,) + array.shape[1:], dtype=array.dtype)
        if rows.size == 0:
            return out
        row_bytes = _row_bytes(array)
        per_chunk = max(1, mapped_bytes // ((row_bytes // FAULT_AROUND + 2) * FAULT_AROUND))  # windows a row may map
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        for start in range(0, rows.size, per_chunk):
            chunk = ordered[start:start + per_chunk]
            out[order[start:start + per_chunk]] = array[chunk]
            self.release_rows(name, int(chunk[0]), int(chunk[-1]) + 1)
        return out

    def release_rows(self, name: str, start: int, stop: int) -> None:
        """:meth:`release_pages` of rows ``start:stop`` (first axis) of array ``name``."""
        row_bytes = _row_bytes(self.arrays[name])
        base = self._offsets[name]
        self.release_pages(base + start * row_bytes, base + stop * row_bytes)

    def close(self) -> None:
        """Drop this process's mapping (views made from it must not be used afterwards) and, for
        the creator, the file (the pages go when the last mapping goes)."""
        self.arrays = {}
        try:
            self._map.close()
        except BufferError:  # views still exported (e.g. tensors alive): the mapping goes with them
            pass
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __repr__(self) -> str:
        return (f"SharedArrays({self.label!r}, {self.size} bytes, {len(self.layout)} arrays, "
                f"{'writable' if self.writable else 'read-only'}, {'created here' if self.owner else 'attached'})")


def _row_bytes(array: np.ndarray) -> int:
    return array.itemsize * int(np.prod(array.shape[1:], dtype=np.int64))


def tensors_of(arrays: dict[str, np.ndarray]) -> dict:
    """torch tensors over numpy arrays (no copy), read-only ones included."""
    import torch  # noqa: PLC0415 - a process that only maps arrays needs no torch
    with warnings.catch_warnings():  # read-only blocks: torch warns that writes would fail (they do: SIGSEGV)
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return {name: torch.from_numpy(array) for name, array in arrays.items()}
