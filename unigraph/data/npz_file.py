"""numpy ``.npz`` archives read without pickle and without trusting a size the archive states.

:func:`read_npz` is the one way unigraph's readers open an ``.npz`` (a graph for ``unigraph
bench``, the parts of a partition set):

* the archive's members are checked first (:func:`unigraph.data.limits.check_zip`): stored
  members exactly as long as they say; compressed ones refused, or (``compressed=True``, for
  ``scipy.sparse.save_npz``'s default) inflated only within the file's allowance;
* each ``.npy`` header is parsed before its data: the dtype must not hold Python objects, and the
  header plus ``prod(shape) * itemsize`` bytes must be exactly the member's length (a header that
  claims 10**12 elements over six bytes of data is refused before numpy allocates anything);
* then the arrays are read with ``allow_pickle=False``.

Errors are :class:`~unigraph.data.errors.DataFileError` naming the file and the member.
"""
from __future__ import annotations

import tokenize
import zipfile
import zlib

import numpy as np

from unigraph.data import limits
from unigraph.data.errors import DataFileError

# what a damaged zip archive raises when it is opened or read (offsets past the end, bad headers,
# unsupported methods, failed CRCs, inflate errors)
ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError, zlib.error)
# what numpy's .npy header parser raises on a damaged header (it evaluates a Python literal)
HEADER_ERRORS = (ValueError, SyntaxError, TypeError, tokenize.TokenError, EOFError, OSError, KeyError,
                 RecursionError, MemoryError, OverflowError)
_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _parse_header(handle) -> tuple[tuple, np.dtype, int]:
    """``(shape, dtype, header bytes)`` of the ``.npy`` data at ``handle``'s position."""
    version = np.lib.format.read_magic(handle)
    if version not in _HEADERS:
        raise ValueError(f"unsupported .npy version {version}")
    shape, _, dtype = _HEADERS[version](handle)
    return shape, dtype, handle.tell()


def _check_header(path, what: str, shape: tuple, dtype: np.dtype, header_bytes: int, length: int,
                  max_elements: int | None) -> None:
    if dtype.hasobject:
        raise DataFileError(path, f"{what} holds Python objects (pickle), which are not read")
    if max_elements is not None and limits.elements_bytes(shape, 1) > max_elements:
        raise DataFileError(path, f"{what} has shape {shape}, more than the limit of {max_elements:,} elements")
    data_bytes = limits.elements_bytes(shape, dtype.itemsize)
    if header_bytes + data_bytes != length:
        raise DataFileError(path, f"{what} is truncated or corrupt: its header declares shape {shape} of {dtype} "
                                  f"({data_bytes:,} bytes), it holds {length - header_bytes:,}")


def _header(path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, max_elements: int | None) -> None:
    """Check one ``.npy`` member's header against ``max_elements`` and the member's length."""
    try:
        with archive.open(info) as handle:
            shape, dtype, header_bytes = _parse_header(handle)
    except (*ZIP_ERRORS, *HEADER_ERRORS) as err:
        raise DataFileError(path, f"member {info.filename!r} is not a readable .npy array: {err}") from None
    _check_header(path, f"member {info.filename!r}", shape, dtype, header_bytes, info.file_size, max_elements)


def open_member(path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, max_elements: int | None = None):
    """``(handle, shape, dtype)``: member ``info`` opened at its data after its header was checked as
    :func:`read_npz` checks it, for a reader that streams the data into memory it owns (so only
    C-ordered arrays: their bytes are the array in order)."""
    try:
        handle = archive.open(info)
    except ZIP_ERRORS as err:
        raise DataFileError(path, f"member {info.filename!r} is not a readable .npy array: {err}") from None
    try:
        try:
            version = np.lib.format.read_magic(handle)
            if version not in _HEADERS:
                raise ValueError(f"unsupported .npy version {version}")
            shape, fortran, dtype = _HEADERS[version](handle)
        except (*ZIP_ERRORS, *HEADER_ERRORS) as err:
            raise DataFileError(path, f"member {info.filename!r} is not a readable .npy array: {err}") from None
        _check_header(path, f"member {info.filename!r}", shape, dtype, handle.tell(), info.file_size, max_elements)
        if fortran and len(shape) > 1:
            raise DataFileError(path, f"member {info.filename!r} is stored in Fortran order (np.savez writes C order)")
    except BaseException:
        handle.close()
        raise
    return handle, shape, dtype


def read_npy(path, *, max_elements: int | None = None) -> np.ndarray:
    """The array of the ``.npy`` file at ``path``, memory-mapped read-only after its header was
    checked against the file's length (so its data is in the file)."""
    size = limits.regular_size(path)
    try:
        with limits.open_regular(path) as handle:
            shape, dtype, header_bytes = _parse_header(handle)
    except HEADER_ERRORS as err:
        raise DataFileError(path, f"is not a readable .npy array: {err}") from None
    _check_header(path, "the array", shape, dtype, header_bytes, size, max_elements)
    try:
        return np.load(path, allow_pickle=False, mmap_mode="r")
    except HEADER_ERRORS as err:
        raise DataFileError(path, f"is not a readable .npy array: {err}") from None


def read_npz(path, *, file_bytes: int, compressed: bool, names=None, max_elements: int | None = None,
             max_load_bytes: int | None = None, flag: str | None = None) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` at ``path`` (those in ``names``, default all), read as the
    module docstring says; ``max_elements`` bounds each array's element count."""
    with limits.open_regular(path) as handle:
        try:
            archive = zipfile.ZipFile(handle)
        except ZIP_ERRORS as err:
            raise DataFileError(path, f"is not a readable .npz archive (truncated or corrupt?): {err}") from None
        with archive:
            limits.check_zip(path, archive, file_bytes, compressed=compressed, override=max_load_bytes, flag=flag)
            members = {info.filename[:-4]: info for info in archive.infolist() if info.filename.endswith(".npy")}
            wanted = members if names is None else {n: members[n] for n in names if n in members}
            arrays = {}
            for name, info in wanted.items():
                _header(path, archive, info, max_elements)
                try:
                    with archive.open(info) as member:
                        arrays[name] = np.lib.format.read_array(member, allow_pickle=False)
                except (*ZIP_ERRORS, *HEADER_ERRORS) as err:
                    raise DataFileError(path, f"member {info.filename!r} is truncated or corrupt: {err}") from None
    return arrays


def member_names(path) -> list[str]:
    """The array names of the ``.npz`` at ``path`` (refusing what is not a readable zip)."""
    with limits.open_regular(path) as handle:
        try:
            with zipfile.ZipFile(handle) as archive:
                return [name[:-4] for name in archive.namelist() if name.endswith(".npy")]
        except ZIP_ERRORS as err:
            raise DataFileError(path, f"is not a readable .npz archive (truncated or corrupt?): {err}") from None
