"""Numeric tables from comma-separated text files (plain or gzip), read strictly and size-bounded.

The one reader behind the TU format (:mod:`unigraph.data.tu`) and OGB's raw csv.gz files
(:mod:`unigraph.data.ogb`): every line must have the same number of fields; values must be numbers
(integers where asked; finite unless NaN is allowed, as OGB's unlabelled rows need); the file (and,
for gzip, its decompressed text) may not exceed ``max_bytes``, and a gzip file may not inflate past
:func:`unigraph.data.limits.allowance` of its size either (``UNIGRAPH_MAX_LOAD_BYTES`` raises it).
Only regular files are read. Errors name the file and the line.
"""
from __future__ import annotations

import gzip
import pathlib
import warnings
import zlib

import numpy as np

from unigraph.data import limits
from unigraph.data.errors import DataFileError

DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB of text per file


class DataFormatError(ValueError):
    """A data file is missing, too large or malformed (the message names the file and line)."""


def _read_bytes(path: pathlib.Path, max_bytes: int) -> bytes:
    """The file's text, at most ``max_bytes`` of it; a gzip file is inflated at most to
    ``min(max_bytes, allowance of its size)`` (:func:`unigraph.data.limits.allowance`), reading one
    byte more than that and stopping: a small gzip bomb never inflates past it."""
    if not path.exists():
        raise DataFormatError(f"file {path.name} not found in {path.parent}")
    try:
        size = limits.regular_size(path)
    except DataFileError as err:
        raise DataFormatError(f"{path.name}: {err.problem}") from None
    if size > max_bytes:
        raise DataFormatError(f"{path.name} is {size} bytes, over the limit of {max_bytes} (raise max_bytes to read it)")
    if path.suffix != ".gz":
        with limits.open_regular(path) as file:
            data = file.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise DataFormatError(f"{path.name} grew past the limit of {max_bytes} bytes while it was read")
        return data
    cap = min(max_bytes, limits.allowance(size))
    try:
        with limits.open_regular(path) as raw, gzip.open(raw, "rb") as file:
            data = file.read(cap + 1)
    except (OSError, EOFError, zlib.error) as err:
        raise DataFormatError(f"{path.name}: not a readable gzip file ({err})") from None
    if len(data) > cap:
        why = (f"the limit of {max_bytes} (raise max_bytes to read it)" if cap == max_bytes else
               f"{limits.describe_allowance(size)}")
        raise DataFormatError(f"{path.name} decompresses to more than {cap} bytes, over {why}")
    return data


def _lines(data: bytes, ends: np.ndarray):
    """``(number, text)`` of each line, one at a time (for naming a bad line without a list of all)."""
    start = 0
    for number, end in enumerate([*ends.tolist(), len(data)], start=1):
        yield number, data[start:end].decode("ascii")
        start = end + 1


def _check_line(path: pathlib.Path, number: int, line: str, integer: bool, allow_nan: bool) -> None:
    for field in line.split(","):
        try:
            value = float(field)
        except ValueError:
            raise DataFormatError(f"{path.name}: line {number}: {field.strip()!r} is not a number") from None
        if np.isnan(value) and allow_nan and not integer:
            continue
        if not np.isfinite(value):
            raise DataFormatError(f"{path.name}: line {number}: {field.strip()!r} is not finite")
        if integer and (value != int(value) or abs(value) >= 2 ** 53):
            raise DataFormatError(f"{path.name}: line {number}: {field.strip()!r} is not an integer")


def read_table(path: str | pathlib.Path, *, integer: bool, allow_nan: bool = False,
               max_bytes: int = DEFAULT_MAX_BYTES) -> np.ndarray:
    """A ``[rows, cols]`` array (int64 when ``integer``, else float64) from ``path``.

    Parsed with numpy over the bytes (no Python object per line or value), so memory stays within
    about ten times the text: the line ends and commas are located as arrays, the values parsed in
    one call; a line is decoded on its own only to name it in an error."""
    path = pathlib.Path(path)
    data = _read_bytes(path, max_bytes)
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
    data = data.rstrip(b" \t\n")
    if not data:
        raise DataFormatError(f"{path.name} is empty")
    raw = np.frombuffer(data, dtype=np.uint8)
    if bool((raw >= 128).any()):
        at = int(np.argmax(raw >= 128))
        raise DataFormatError(f"{path.name}: not a text file of numbers (byte {at} is not ASCII)")
    ends = np.flatnonzero(raw == ord("\n"))
    fields = np.diff(np.searchsorted(np.flatnonzero(raw == ord(",")), np.append(ends, len(raw))), prepend=0)
    if bool((fields != fields[0]).any()):
        at = int(np.argmax(fields != fields[0]))
        raise DataFormatError(f"{path.name}: line {at + 1} has {fields[at] + 1} fields but line 1 has {fields[0] + 1}")
    rows, cols = len(ends) + 1, int(fields[0]) + 1
    del raw, fields
    with warnings.catch_warnings():  # numpy either warns and stops at bad input or raises: both caught below
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            flat = np.fromstring(data.replace(b"\n", b","), dtype=np.float64, sep=",")
        except ValueError:
            flat = np.empty(0)
    ok = flat.size == rows * cols
    if ok:
        finite = np.isfinite(flat)
        ok = bool(finite.all()) or (allow_nan and not integer and bool((finite | np.isnan(flat)).all()))
    if ok and integer:
        ok = bool((flat == np.round(flat)).all()) and bool((np.abs(flat) < 2 ** 53).all())
    if not ok:  # find and name the first bad line
        for number, line in _lines(data, ends):
            _check_line(path, number, line, integer, allow_nan)
        raise DataFormatError(f"{path.name}: could not be parsed as {cols} numbers per line")
    table = flat.reshape(rows, cols)
    return table.astype(np.int64) if integer else table
