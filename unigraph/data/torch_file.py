"""``torch.load`` of a file nobody vouches for: bounded, restricted, and every failure named.

:func:`load_torch_archive` is the one way unigraph's readers open a ``torch.save`` archive (the
payload of a checked file: datasets and checkpoints; a ``.pt`` or PyG ``Data`` given to
``unigraph bench``):

1. it must be the zip format ``torch.save`` has written since torch 1.6; the legacy format is
   refused (its storages are allocated at sizes read from the file before any is checked);
2. its zip members are checked before torch sees them (:func:`unigraph.data.limits.check_zip`):
   stored, as ``torch.save`` writes them, and no longer than the file (a deflated member would
   inflate past any checksum);
3. it is read with ``torch.load(weights_only=True)``: tensors, numbers, strings and plain
   containers, plus the classes the caller allows (``safe_globals``); no arbitrary pickle;
4. every tensor it holds is checked to be data the file holds (no stride-0 or overlapping
   views: :func:`unigraph.data.limits.check_tensors`).

Whatever torch raises on damaged bytes (a flipped bit can give ``UnicodeDecodeError``,
``KeyError``, ``struct.error``, ``RecursionError``, ...) becomes a
:class:`~unigraph.data.errors.DataFileError` naming the file.
"""
from __future__ import annotations

import io
import pickle
import struct
import zipfile
from typing import BinaryIO

import torch

from unigraph.data import limits
from unigraph.data.errors import DataFileError
from unigraph.data.npz_file import ZIP_ERRORS

ZIP_MAGIC = b"PK\x03\x04"
# What torch.load raises on damaged or crafted bytes (its unpickler, its zip reader, the classes it
# rebuilds): each becomes a DataFileError naming the file. The fuzz tests (tests/data/) feed it
# random mutations of real files and find no other kind.
LOAD_ERRORS = (RuntimeError, ValueError, EOFError, OSError, zipfile.BadZipFile, UnicodeDecodeError, KeyError,
               IndexError, TypeError, AttributeError, struct.error, OverflowError, RecursionError, MemoryError,
               ImportError, NotImplementedError, AssertionError, SystemError)


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0][:300]}" if lines else type(err).__name__


def _refusal(err: pickle.UnpicklingError) -> str:
    """The line of a weights_only refusal that names what was refused."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    named = [line for line in lines if "global" in line.lower() and "weights_only" not in line]
    return (named or lines or [""])[0][:300]


def load_torch_archive(path, source: bytes | BinaryIO, file_bytes: int, *, safe_globals: list | tuple = (),
                       override: int | None = None, flag: str | None = None) -> object:
    """The object in the ``torch.save`` archive ``source`` (its bytes, or an open binary file of
    ``file_bytes`` bytes), read as the module docstring says; ``path`` names it in errors."""
    handle = io.BytesIO(source) if isinstance(source, (bytes, bytearray, memoryview)) else source
    head = handle.read(4)
    handle.seek(0)
    if head != ZIP_MAGIC:
        legacy = head[:1] == b"\x80"
        raise DataFileError(path, "is a torch.save file in the legacy (before torch 1.6) format, which is not read: "
                                  "torch allocates its storages at sizes read from the file before anything can check "
                                  "them; save it again with a current torch" if legacy else
                                  "is not a torch.save archive (no zip header)")
    try:
        with zipfile.ZipFile(handle) as archive:
            limits.check_zip(path, archive, file_bytes, compressed=False, override=override, flag=flag)
    except DataFileError:
        raise
    except ZIP_ERRORS as err:
        raise DataFileError(path, f"is not a readable zip archive (truncated or corrupt?): {_first_line(err)}") from None
    handle.seek(0)
    try:
        with torch.serialization.safe_globals(list(safe_globals)):
            obj = torch.load(handle, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise DataFileError(path, "holds objects refused by the safe loader (only tensors and plain data are read, "
                                  f"no arbitrary pickle): {_refusal(err)}") from None
    except LOAD_ERRORS as err:
        raise DataFileError(path, f"holds an unreadable torch.save archive (truncated or corrupt?): "
                                  f"{_first_line(err)}") from None
    limits.check_tensors(path, obj, file_bytes, override=override, flag=flag)
    return obj
