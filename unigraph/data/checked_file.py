"""Files written atomically and read back only if every byte is what was written.

Layout of a checked file (saved datasets, training checkpoints)::

    unigraph checked file 1\\n
    {"kind": "unigraph.NodeDataset", "size": 123456, "sha256": "..."}\\n
    <size bytes of payload: a torch.save archive>

Writing goes to a temporary file ``.<name>.<pid>.<random>.tmp`` in the same directory, which is
flushed, fsynced and renamed over ``<name>`` (then the directory is fsynced): a crash or a
SIGKILL at any moment leaves either the previous file or the new one, never a mix. A writer
killed mid-write leaves its temporary file behind; the next write to the same name removes
every such leftover whose writer process is gone.

Reading checks the header, the length and the SHA-256 of the payload before anything parses
it, so a truncated file or overwritten bytes are refused with the file's name (torch.load does
not check the zip archive's CRCs), and a damaged archive never reaches the unpickler. Only
regular files are read (a fifo or ``/dev/zero`` is refused by its type), and the header's size
must be the file's own. A checksum proves the bytes are what was written, not that the writer
was friendly (anyone can recompute it): the payload is then read as any untrusted archive is
(:func:`unigraph.data.torch_file.load_torch_archive`: stored members only, restricted unpickler,
no stride-0 or overlapping views), and its content is checked by the reader of each kind.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import pathlib
import secrets
from typing import BinaryIO, Iterator

import torch

from unigraph.data import limits
from unigraph.data.errors import DataFileError
from unigraph.data.torch_file import load_torch_archive

MAGIC = b"unigraph checked file 1\n"
MAX_HEADER = 4096
_CHUNK = 1 << 20


def _temporary_name(path: pathlib.Path) -> pathlib.Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def _writer_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale_temporaries(path: str | os.PathLike) -> list[pathlib.Path]:
    """Delete the temporary files that writers of ``path`` left when they were killed (those
    whose process no longer exists); returns what was deleted."""
    path = pathlib.Path(path)
    removed = []
    for candidate in path.parent.glob(f".{path.name}.*.tmp"):
        pid = candidate.name[len(path.name) + 2:-len(".tmp")].split(".")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _writer_alive(int(pid)):
            candidate.unlink(missing_ok=True)
            removed.append(candidate)
    return removed


def _fsync_directory(directory: pathlib.Path) -> None:
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:  # some platforms cannot open a directory; the rename is still atomic
        return
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """``with atomic_write(path) as file: file.write(...)``: ``path`` appears, with every byte on
    disk, only when the block finishes without an error (see the module docstring). For files that
    carry their checksum elsewhere (a partition set's parts are listed with their SHA-256 in its
    checked metadata) and are streamed rather than held in memory whole."""
    path = pathlib.Path(path)
    remove_stale_temporaries(path)
    tmp = _temporary_name(path)
    try:
        with open(tmp, "xb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def sha256_file(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes, streamed (memory does not grow with the file)."""
    hasher = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            hasher.update(chunk)
    return hasher.hexdigest()


def write_checked(path: str | os.PathLike, kind: str, payload: bytes) -> pathlib.Path:
    """Write ``payload`` under a header naming ``kind`` and its checksum, atomically (see module)."""
    header = json.dumps({"kind": kind, "size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()})
    with atomic_write(path) as file:
        file.write(MAGIC + header.encode() + b"\n")
        file.write(payload)
    return pathlib.Path(path)


def read_checked(path: str | os.PathLike, kind: str) -> bytes:
    """The payload of a file written by :func:`write_checked` for ``kind``; raises
    :class:`DataFileError` naming the file unless header, length and checksum all match."""
    path = pathlib.Path(path)
    file_bytes = limits.regular_size(path)
    try:
        with limits.open_regular(path) as file:
            magic = file.read(len(MAGIC))
            if magic != MAGIC:
                raise DataFileError(path, f"is not a unigraph {kind} file (no checksum header; files written by "
                                          "unigraph before checksums were added must be written again)")
            line = file.readline(MAX_HEADER)
            try:
                header = json.loads(line)
                size, digest, found_kind = int(header["size"]), str(header["sha256"]), header["kind"]
            except (ValueError, KeyError, TypeError):
                raise DataFileError(path, "has a damaged header") from None
            if found_kind != kind:
                raise DataFileError(path, f"holds a {found_kind!r:.80}, not a {kind!r}")
            if not 0 <= size <= file_bytes - file.tell():
                raise DataFileError(path, f"is truncated: the header promises {size} bytes of data, the file holds "
                                          f"{file_bytes - file.tell()}")
            hasher, chunks, remaining = hashlib.sha256(), [], size
            while remaining > 0:
                chunk = file.read(min(_CHUNK, remaining))
                if not chunk:
                    break
                hasher.update(chunk)
                chunks.append(chunk)
                remaining -= len(chunk)
            trailing = file.read(1)
    except OSError as err:
        raise DataFileError(path, f"cannot be read ({err.strerror or err})") from None
    if remaining > 0:
        raise DataFileError(path, f"is truncated: the header promises {size} bytes of data, the file holds "
                                  f"{size - remaining}")
    if trailing:
        raise DataFileError(path, f"has bytes after the {size} the header promises")
    if hasher.hexdigest() != digest:
        raise DataFileError(path, "is corrupted: its checksum does not match what was written (sha256 "
                                  f"{hasher.hexdigest()[:16]}..., expected {digest[:16]}...)")
    return b"".join(chunks)


def save_torch(path: str | os.PathLike, kind: str, obj: object) -> pathlib.Path:
    """``torch.save(obj)`` into a checked file (``obj`` should hold plain data and tensors only,
    so that :func:`load_torch` can read it with ``weights_only=True``)."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return write_checked(path, kind, buffer.getvalue())


def load_torch(path: str | os.PathLike, kind: str) -> object:
    """Verify a checked file, then read its payload as an untrusted ``torch.save`` archive on the
    CPU (:func:`unigraph.data.torch_file.load_torch_archive`)."""
    payload = read_checked(path, kind)
    return load_torch_archive(path, payload, len(payload))
