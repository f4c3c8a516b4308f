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


def tensors_of(arrays: dict[str, np.ndarray]) -> dict:
    """torch tensors over numpy arrays (no copy), read-only ones included."""
    import torch  # noqa: PLC0415 - a process that only maps arrays needs no torch
    with warnings.catch_warnings():  # read-only blocks: torch warns that writes would fail (they do: SIGSEGV)
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return {name: torch.from_numpy(array) for name, array in arrays.items()}
