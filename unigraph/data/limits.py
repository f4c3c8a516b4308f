"""The one rule every file reader follows before it allocates what a file describes.

A file may say anything about sizes: a header can promise 10**12 elements, a zip member can
inflate a thousandfold, a tensor can be a stride-0 view of four bytes claiming a billion entries,
a count can name 2**31 nodes that no array of the file holds. So every reader of unigraph
(``unigraph bench FILE``, checked files: datasets and checkpoints, partition sets, OGB folders,
Planetoid files, the auto-tune cache, DGL graph files) checks each size it is about to allocate
or decompress against

* **the file's real size**: what is stored uncompressed must be present byte for byte (a stored
  zip member is exactly as long as its array; a tensor is a non-overlapping view inside the
  storage the file holds), and
* **a stated limit**, :func:`allowance`: ``max(FLOOR_BYTES, EXPANSION x the file's size)``
  bytes, 64 MiB or 64 bytes per byte of file, for everything a file makes a reader build beyond
  what it stores (inflated members, per-node arrays a count implies, decompressed text).

and refuses, before the allocation, with a :class:`FileLimitError` (a
:class:`~unigraph.data.errors.DataFileError`: the message starts with the file's path) that
names the limit and how to raise it: the environment variable ``UNIGRAPH_MAX_LOAD_BYTES=<bytes>``
(or a reader's own flag, such as ``unigraph bench --max-load-bytes``) replaces the allowance by an
absolute limit, for a trusted file that needs more.

Only regular files are read (:func:`regular_size`, :func:`open_regular`): ``/dev/zero``, a fifo, a
socket or a directory is refused by its type, before any read (a fifo is opened without blocking).
"""
from __future__ import annotations

import math
import os
import stat
import zipfile
from typing import BinaryIO, Iterable

import torch

from unigraph.data.errors import DataFileError

ENV_VAR = "UNIGRAPH_MAX_LOAD_BYTES"
FLOOR_BYTES = 64 << 20   # any file may make a reader allocate this much: small files never trip the ratio
EXPANSION = 64           # beyond the floor: bytes allocated per byte of file (deflate of real data stays far below)


class FileLimitError(DataFileError):
    """A file describes more than it may make a reader allocate (see the module docstring)."""


def _env_override() -> int | None:
    text = os.environ.get(ENV_VAR, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{ENV_VAR} must be a number of bytes, got {text!r}") from None
    if value < 1:
        raise ValueError(f"{ENV_VAR} must be >= 1, got {value}")
    return value


def allowance(file_bytes: int, override: int | None = None) -> int:
    """Bytes a file of ``file_bytes`` may make a reader allocate: ``override``, else
    ``UNIGRAPH_MAX_LOAD_BYTES``, else ``max(FLOOR_BYTES, EXPANSION * file_bytes)``."""
    if override is not None:
        return int(override)
    env = _env_override()
    return env if env is not None else max(FLOOR_BYTES, EXPANSION * int(file_bytes))


def describe_allowance(file_bytes: int, override: int | None = None, flag: str | None = None) -> str:
    """The limit in words, with how to raise it (for error messages)."""
    limit = allowance(file_bytes, override)
    raise_it = f"{ENV_VAR}=<bytes>" + (f" or {flag}" if flag else "")
    if override is not None:
        return f"the limit of {limit:,} bytes given" + (f" by {flag}" if flag else "")
    if _env_override() is not None:
        return f"the limit of {limit:,} bytes set by {ENV_VAR}"
    return (f"the limit of {limit:,} bytes (max({FLOOR_BYTES >> 20} MiB, {EXPANSION} x the file's {file_bytes:,} "
            f"bytes); for a trusted file raise it with {raise_it})")


def check_allocation(path, what: str, needed_bytes: int, file_bytes: int, *, override: int | None = None,
                     flag: str | None = None) -> None:
    """Refuse ``what`` (needing ``needed_bytes``) unless it fits :func:`allowance` of the file."""
    if needed_bytes > allowance(file_bytes, override):
        raise FileLimitError(path, f"{what} would need {needed_bytes:,} bytes, over "
                                   f"{describe_allowance(file_bytes, override, flag)}")


# ---------------------------------------------------------------------------------------------- regular files
def regular_size(path) -> int:
    """The size of ``path``, which must be a regular file (following symlinks). Raises
    ``FileNotFoundError`` when missing and :class:`DataFileError` for a device, fifo, socket or
    directory (``/dev/zero`` would read forever, a fifo would block)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except OSError as err:
        raise DataFileError(path, f"cannot be read ({err.strerror or err})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = ("a directory" if stat.S_ISDIR(info.st_mode) else "a fifo" if stat.S_ISFIFO(info.st_mode)
                else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file")
        raise DataFileError(path, f"is {kind}, not a regular file; only regular files are read")
    return info.st_size


def open_regular(path) -> BinaryIO:
    """``open(path, "rb")`` for a regular file only (checked on the opened descriptor, so a file
    swapped for a fifo between a check and the open is refused too; the open never blocks)."""
    regular_size(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except OSError as err:
        raise DataFileError(path, f"cannot be read ({err.strerror or err})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DataFileError(path, "is not a regular file; only regular files are read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path, max_bytes: int, *, what: str = "the file", flag: str | None = None) -> bytes:
    """The bytes of the regular file ``path``, refused beyond ``max_bytes`` (read at most one byte
    more, so a file that grows while read cannot exceed it either)."""
    size = regular_size(path)
    if size > max_bytes:
        raise FileLimitError(path, f"{what} is {size:,} bytes, over the limit of {max_bytes:,}"
                                   + (f" ({flag})" if flag else f" (raise it with {ENV_VAR}=<bytes>)"))
    with open_regular(path) as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileLimitError(path, f"{what} grew past the limit of {max_bytes:,} bytes while it was read")
    return data


# ---------------------------------------------------------------------------------------------- zip archives
def check_zip(path, archive: zipfile.ZipFile, file_bytes: int, *, compressed: bool, override: int | None = None,
              flag: str | None = None) -> int:
    """Check the members of ``archive`` (a torch.save file, an .npz) before any is read; returns
    their total uncompressed size.

    Stored members must be exactly as long as they say (their bytes are in the file); compressed
    members are refused unless ``compressed`` (then their total inflated size must fit
    :func:`allowance`; Python's zipfile stops inflating a member at its declared size and checks
    its CRC, and numpy reads through it)."""
    total = stored = 0
    for info in archive.infolist():
        if info.compress_type == zipfile.ZIP_STORED:
            if info.file_size != info.compress_size:
                raise DataFileError(path, f"zip member {info.filename!r} is stored uncompressed but declares "
                                          f"{info.file_size:,} bytes in {info.compress_size:,}")
            stored += info.compress_size
        elif not compressed:
            raise DataFileError(path, f"zip member {info.filename!r} is compressed (method {info.compress_type}); "
                                      "this format is written uncompressed, and an inflated member could claim any size")
        total += info.file_size
    if stored > file_bytes:
        raise DataFileError(path, f"its zip members claim {stored:,} stored bytes, more than the file's {file_bytes:,}")
    if total > stored:
        check_allocation(path, "decompressing its zip members", total, file_bytes, override=override, flag=flag)
    return total


# ---------------------------------------------------------------------------------------------- tensors
def _tensors(obj, max_depth: int = 64) -> Iterable[tuple[str, torch.Tensor]]:
    """Every tensor inside ``obj`` (containers, and the attributes of objects such as PyG's
    ``Data``), with a readable location; each container visited once (shared references)."""
    stack, seen = [("", obj, 0)], set()
    while stack:
        where, item, depth = stack.pop()
        if isinstance(item, torch.Tensor):
            yield where or "the object", item
            continue
        if id(item) in seen or isinstance(item, (str, bytes, int, float, complex, bool, type(None))):
            continue
        seen.add(id(item))
        if depth >= max_depth:
            raise ValueError(f"{where or 'the object'} is nested more than {max_depth} levels deep")
        if isinstance(item, dict):
            children = ((f"{where}[{key!r:.60}]" if where else f"field {key!r:.60}", value)
                        for key, value in item.items())
        elif isinstance(item, (list, tuple)):
            children = ((f"{where}[{i}]" if where else f"item {i}", value) for i, value in enumerate(item))
        elif hasattr(item, "__dict__"):
            children = ((f"{where}.{key}" if where else f"attribute {key}", value) for key, value in vars(item).items())
        else:
            continue
        stack.extend(reversed([(w, v, depth + 1) for w, v in children]))  # visited in order


def _span(tensor: torch.Tensor) -> tuple[int, int] | None:
    """``(first, last + 1)`` element offsets a strided tensor touches in its storage, or None if
    some elements overlap (stride 0, or strides that fold the tensor onto itself)."""
    if tensor.numel() == 0:
        return tensor.storage_offset(), tensor.storage_offset()
    dims = sorted((stride, size) for size, stride in zip(tensor.shape, tensor.stride()) if size > 1)
    reach = 1
    for stride, size in dims:
        if stride < reach:
            return None
        reach = stride * (size - 1) + reach
    last = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
    return tensor.storage_offset(), tensor.storage_offset() + last + 1


def check_tensors(path, obj, file_bytes: int, *, override: int | None = None, flag: str | None = None) -> None:
    """Every tensor ``obj`` holds must be data the file holds: a strided, non-overlapping view
    inside its storage (a stride-0 view of a few bytes cannot claim a billion entries), two
    tensors over one storage either the same view (tied weights) or disjoint, and all of them
    together within :func:`allowance` of the file."""
    try:
        found = list(_tensors(obj))
    except ValueError as err:
        raise DataFileError(path, str(err)) from None
    claimed, total = {}, 0
    for where, tensor in found:
        if tensor.layout != torch.strided:
            raise DataFileError(path, f"{where} is a {tensor.layout} tensor; only dense tensors are read")
        if tensor.device.type == "meta":
            raise DataFileError(path, f"{where} is a meta tensor (no data)")
        span = _span(tensor)
        item = tensor.element_size()
        storage = tensor.untyped_storage()
        if span is None:
            raise DataFileError(path, f"{where} is a view of shape {list(tensor.shape)} with strides "
                                      f"{list(tensor.stride())} whose elements overlap (a broadcast or stride-0 view), "
                                      "not saved data")
        if span[1] * item > storage.nbytes():
            raise DataFileError(path, f"{where} is a view of shape {list(tensor.shape)} reaching past its "
                                      f"{storage.nbytes():,}-byte storage")
        key = (storage.data_ptr(), storage.nbytes()) if storage.nbytes() else None
        view = (span[0] * item, span[1] * item, tensor.dtype, tuple(tensor.shape), tuple(tensor.stride()))
        if key is not None and tensor.numel():
            for other_where, other in claimed.get(key, ()):
                if other != view and other[0] < view[1] and view[0] < other[1]:
                    raise DataFileError(path, f"{where} and {other_where} are different views of overlapping bytes "
                                              "of one storage, not saved data")
            claimed.setdefault(key, []).append((where, view))
        total += tensor.numel() * item
    check_allocation(path, f"its {len(found)} tensors", total, file_bytes, override=override, flag=flag)


def elements_bytes(shape: Iterable[int], itemsize: int) -> int:
    """Bytes of an array of ``shape`` (exact integers: no overflow)."""
    return math.prod(int(n) for n in shape) * int(itemsize)
