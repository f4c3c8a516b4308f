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

import zipfile

import numpy as np

from unigraph.data import limits
from unigraph.data.errors import DataFileError

_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _header(path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, max_elements: int | None) -> tuple[tuple, np.dtype]:
    """Shape and dtype of one ``.npy`` member, checked against ``max_elements`` and the member's length."""
    with archive.open(info) as handle:
        try:
            version = np.lib.format.read_magic(handle)
            if version not in _HEADERS:
                raise ValueError(f"unsupported .npy version {version}")
            shape, _, dtype = _HEADERS[version](handle)
            header_bytes = handle.tell()
        except (ValueError, EOFError, OSError, SyntaxError, TypeError, zipfile.BadZipFile) as err:
            raise DataFileError(path, f"member {info.filename!r} is not a readable .npy array: {err}") from None
    if dtype.hasobject:
        raise DataFileError(path, f"member {info.filename!r} holds Python objects (pickle), which are not read")
    if max_elements is not None and limits.elements_bytes(shape, 1) > max_elements:
        raise DataFileError(path, f"member {info.filename!r} has shape {shape}, more than the limit of "
                                  f"{max_elements:,} elements")
    data_bytes = limits.elements_bytes(shape, dtype.itemsize)
    if header_bytes + data_bytes != info.file_size:
        raise DataFileError(path, f"member {info.filename!r} is truncated or corrupt: its header declares shape {shape} "
                                  f"of {dtype} ({data_bytes:,} bytes), the member holds "
                                  f"{info.file_size - header_bytes:,}")
    return shape, dtype


def read_npz(path, *, file_bytes: int, compressed: bool, names=None, max_elements: int | None = None,
             max_load_bytes: int | None = None, flag: str | None = None) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` at ``path`` (those in ``names``, default all), read as the
    module docstring says; ``max_elements`` bounds each array's element count."""
    with limits.open_regular(path) as handle:
        try:
            archive = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
            raise DataFileError(path, f"is not a readable .npz archive (truncated or corrupt?): {err}") from None
        with archive:
            limits.check_zip(path, archive, file_bytes, compressed=compressed, override=max_load_bytes, flag=flag)
            members = {info.filename[:-4]: info for info in archive.infolist() if info.filename.endswith(".npy")}
            wanted = members if names is None else {n: members[n] for n in names if n in members}
            arrays = {}
            for name, info in wanted.items():
                _header(path, archive, info, max_elements)
                with archive.open(info) as member:
                    try:
                        arrays[name] = np.lib.format.read_array(member, allow_pickle=False)
                    except (ValueError, EOFError, OSError, zipfile.BadZipFile) as err:
                        raise DataFileError(path, f"member {info.filename!r} is truncated or corrupt: {err}") from None
    return arrays


def member_names(path) -> list[str]:
    """The array names of the ``.npz`` at ``path`` (refusing what is not a readable zip)."""
    with limits.open_regular(path) as handle:
        try:
            with zipfile.ZipFile(handle) as archive:
                return [name[:-4] for name in archive.namelist() if name.endswith(".npy")]
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
            raise DataFileError(path, f"is not a readable .npz archive (truncated or corrupt?): {err}") from None
