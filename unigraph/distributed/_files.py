"""Atomic, checksummed file writes (a small helper of the partition format).

``atomic_write`` writes to a temporary file in the target's directory, flushes and fsyncs it, then
renames it over the target (``os.replace`` is atomic on POSIX), so a reader sees the old file or the
whole new one, never a torn write; a crash mid-write leaves at most a ``.tmp`` file behind.
``sha256_file`` streams a file through SHA-256 (its memory use does not grow with the file).

(The ``safety`` work adds the same kind of helpers for datasets and checkpoints; the lead will merge
the two into one module.)
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import tempfile
from typing import BinaryIO, Iterator

_CHUNK = 1 << 22


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """``with atomic_write(path) as file: file.write(...)``: ``path`` appears only when the block
    finishes without an error, with every byte on disk."""
    path = pathlib.Path(path)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:  # the rename itself is durable only once the directory is synced
        os.fsync(directory)
    finally:
        os.close(directory)


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
