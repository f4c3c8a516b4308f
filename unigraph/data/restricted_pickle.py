"""A pickle loader that admits only the few types a Planetoid file is made of.

The Planetoid files (``ind.<name>.x`` ...) are Python 2 pickles of numpy arrays, scipy CSR
matrices and a ``defaultdict`` of lists. ``pickle.load`` on such a file would run whatever
callable the file names, so it must never see a file from an untrusted source. This loader
resolves a global only if it is on :data:`ALLOWED_GLOBALS`; anything else (``os.system``,
``builtins.eval``, any other class) raises :class:`UnsafePickleError` naming it, before it is
called.

scipy is not needed: the scipy CSR class is mapped onto :class:`PickledCSR`, a small record of the
pickled state (``data``, ``indices``, ``indptr``, ``shape``) that can turn itself into a dense
numpy array. Object arrays (``dtype=object``) are refused after loading: their elements could
smuggle in nothing callable (every global still passes through the allow-list), but the format
never uses them, so their presence means the file is not what it claims to be.
"""
from __future__ import annotations

import collections
import io
import pickle
from typing import Any, BinaryIO

import numpy as np


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle referred to a global that the restricted loader does not admit."""


class PickledCSR:
    """The state of a pickled ``scipy.sparse.csr_matrix``, without scipy.

    A scipy pickle creates the object with ``cls.__new__(cls)`` and then hands it its ``__dict__``
    (``data``, ``indices``, ``indptr``, ``_shape`` and bookkeeping fields); we keep the four we need.
    """

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]

    def __setstate__(self, state: dict) -> None:
        if not isinstance(state, dict):
            raise UnsafePickleError(f"a pickled csr_matrix must carry a dict state, got {type(state).__name__}")
        missing = {"data", "indices", "indptr"} - state.keys()
        shape = state.get("_shape", state.get("shape"))
        if missing or shape is None:
            raise UnsafePickleError(f"a pickled csr_matrix lacks {sorted(missing) or ['_shape']}")
        for key in ("data", "indices", "indptr"):
            if not isinstance(state[key], np.ndarray):
                raise UnsafePickleError(f"csr_matrix.{key} must be a numpy array, got {type(state[key]).__name__}")
        self.data, self.indices, self.indptr = state["data"], state["indices"], state["indptr"]
        self.shape = (int(shape[0]), int(shape[1]))

    def todense(self) -> np.ndarray:
        """The dense matrix (duplicate entries summed, as scipy does)."""
        rows, cols = self.shape
        indptr = self.indptr.astype(np.int64)
        indices = self.indices.astype(np.int64)
        if (indptr.shape != (rows + 1,) or indptr[0] != 0 or indptr[-1] != indices.size
                or indices.size != self.data.size or np.any(np.diff(indptr) < 0)):
            raise ValueError(f"corrupt csr_matrix of shape {self.shape}: indptr has {indptr.size} entries "
                             f"(ends at {indptr[-1] if indptr.size else None}), indices {indices.size}, data {self.data.size}")
        if indices.size and (indices.min() < 0 or indices.max() >= cols):
            raise ValueError(f"corrupt csr_matrix: column indices must lie in 0..{cols - 1}, "
                             f"found {indices.min()}..{indices.max()}")
        dense = np.zeros(self.shape, dtype=self.data.dtype)
        row_of_entry = np.repeat(np.arange(rows), np.diff(indptr))
        np.add.at(dense, (row_of_entry, indices), self.data)
        return dense


def _numpy_reconstruct():
    # numpy 2 moved numpy.core to numpy._core; the ndarray's own reducer names the live function.
    return np.ndarray((0,)).__reduce__()[0]


def _latin1_encode(text: str, encoding: str = "latin1") -> bytes:
    """How protocol-2 pickles written by Python 3 spell a bytes object; only latin1 of a str."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError(f"_codecs.encode is admitted only as encode(str, 'latin1'), got "
                                f"encode({type(text).__name__}, {encoding!r})")
    return text.encode("latin1")


#: (module, name) as written in the pickle -> the object it resolves to.
ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): _numpy_reconstruct(),
    ("numpy._core.multiarray", "_reconstruct"): _numpy_reconstruct(),
    ("scipy.sparse.csr", "csr_matrix"): PickledCSR,
    ("scipy.sparse._csr", "csr_matrix"): PickledCSR,
    ("collections", "defaultdict"): collections.defaultdict,
    ("__builtin__", "list"): list,
    ("builtins", "list"): list,
    ("_codecs", "encode"): _latin1_encode,
}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            allowed = ", ".join(f"{m}.{n}" for m, n in ALLOWED_GLOBALS)
            raise UnsafePickleError(
                f"refusing to load {module}.{name}: this loader admits only {allowed}. "
                "The file is not a Planetoid data file (or has been tampered with)") from None


def _check_no_object_arrays(obj: Any, where: str) -> None:
    if isinstance(obj, np.ndarray) and obj.dtype.hasobject:
        raise UnsafePickleError(f"{where}: refusing a numpy array of dtype {obj.dtype} (the format has none)")
    if isinstance(obj, PickledCSR):
        for key in ("data", "indices", "indptr"):
            _check_no_object_arrays(getattr(obj, key), f"{where}.{key}")


def restricted_load(file: BinaryIO | bytes, *, where: str = "pickle") -> Any:
    """Unpickle ``file`` (a binary file object or bytes), admitting only :data:`ALLOWED_GLOBALS`.

    Python 2 pickles are read with ``encoding="latin1"``, which numpy needs for its raw buffers.
    Raises :class:`UnsafePickleError` for any other global or for object arrays.
    """
    if isinstance(file, (bytes, bytearray)):
        file = io.BytesIO(file)
    obj = _RestrictedUnpickler(file, encoding="latin1").load()
    _check_no_object_arrays(obj, where)
    return obj
