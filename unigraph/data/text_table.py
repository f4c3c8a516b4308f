"""Numeric tables from comma-separated text files (plain or gzip), read strictly and size-bounded.

The one reader behind the TU format (:mod:`unigraph.data.tu`) and OGB's raw csv.gz files
(:mod:`unigraph.data.ogb`): every line must have the same number of fields; values must be numbers
(integers where asked; finite unless NaN is allowed, as OGB's unlabelled rows need); the file (and,
for gzip, its decompressed text) may not exceed ``max_bytes``. Errors name the file and the line.
"""
from __future__ import annotations

import gzip
import pathlib
import warnings
import zlib

import numpy as np

DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB of text per file


class DataFormatError(ValueError):
    """A data file is missing, too large or malformed (the message names the file and line)."""


def _read_text(path: pathlib.Path, max_bytes: int) -> str:
    if not path.is_file():
        raise DataFormatError(f"file {path.name} not found in {path.parent}")
    size = path.stat().st_size
    if size > max_bytes:
        raise DataFormatError(f"{path.name} is {size} bytes, over the limit of {max_bytes} (raise max_bytes to read it)")
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            with gzip.open(path, "rb") as file:
                data = file.read(max_bytes + 1)  # never inflate more than the bound (a gzip bomb stops here)
        except (OSError, EOFError, zlib.error) as err:
            raise DataFormatError(f"{path.name}: not a readable gzip file ({err})") from None
        if len(data) > max_bytes:
            raise DataFormatError(f"{path.name} decompresses to more than {max_bytes} bytes (raise max_bytes to read it)")
    try:
        return data.decode("ascii")
    except UnicodeDecodeError as err:
        raise DataFormatError(f"{path.name}: not a text file of numbers (byte {err.start} is not ASCII)") from None


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
    """A ``[rows, cols]`` array (int64 when ``integer``, else float64) from ``path``."""
    path = pathlib.Path(path)
    lines = _read_text(path, max_bytes).splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise DataFormatError(f"{path.name} is empty")
    fields = np.fromiter((line.count(",") for line in lines), dtype=np.int64, count=len(lines))
    if bool((fields != fields[0]).any()):
        at = int(np.nonzero(fields != fields[0])[0][0])
        raise DataFormatError(f"{path.name}: line {at + 1} has {fields[at] + 1} fields but line 1 has {fields[0] + 1}")
    cols = int(fields[0]) + 1
    with warnings.catch_warnings():  # numpy either warns and stops at bad input or raises: both caught below
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            flat = np.fromstring(",".join(lines), dtype=np.float64, sep=",")
        except ValueError:
            flat = np.empty(0)
    ok = flat.size == len(lines) * cols
    if ok:
        finite = np.isfinite(flat)
        ok = bool(finite.all()) or (allow_nan and not integer and bool((finite | np.isnan(flat)).all()))
    if ok and integer:
        ok = bool((flat == np.round(flat)).all()) and bool((np.abs(flat) < 2 ** 53).all())
    if not ok:  # find and name the first bad line
        for number, line in enumerate(lines, start=1):
            _check_line(path, number, line, integer, allow_nan)
        raise DataFormatError(f"{path.name}: could not be parsed as {cols} numbers per line")
    table = flat.reshape(len(lines), cols)
    return table.astype(np.int64) if integer else table
