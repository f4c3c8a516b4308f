"""A pickle loader that admits only the few types a Planetoid file is made of, and only in the
shapes the format uses them.

The Planetoid files (``ind.<name>.x`` ...) are Python 2 pickles of numpy arrays, scipy CSR
matrices and a ``defaultdict`` of lists. ``pickle.load`` on such a file would run whatever
callable the file names, so it must never see a file from an untrusted source. This loader
resolves a global only if it is on :data:`ALLOWED_GLOBALS`; anything else (``os.system``,
``builtins.eval``, any other class) raises :class:`UnsafePickleError` naming it, before it is
called.

Admitting numpy's own reconstructors would not be enough: ``numpy.dtype.__setstate__`` accepts a
state that hides an object field behind ``flags=0`` (then an array holds attacker-chosen
pointers, and the first ``astype`` dereferences them), and ``numpy.ndarray(shape)`` called
directly returns uninitialised memory of any size. So no numpy constructor is ever handed a
value from the file. Each allowed global resolves to a small stand-in that accepts exactly the
calls and states numpy's and scipy's pickles contain, and builds the real object itself:

* ``numpy.dtype(spec, False, True)`` + its state -> :class:`PickledDtype`: ``spec`` must name a
  plain number type (bool, int, uint, float, complex); the state may only choose the byte order
  (no fields, names or subarray: a state that has them is refused, whatever its flags say).
* ``_reconstruct(ndarray, (0,), b'b')`` + its state -> :class:`PickledArray`: the state's raw
  bytes must be exactly ``prod(shape) * itemsize`` long; the array is a copy of those bytes.
  ``numpy.ndarray`` itself is a placeholder that cannot be called.
* ``scipy.sparse.csr_matrix`` -> :class:`PickledCSR` (no scipy needed), ``defaultdict(list)``
  -> a ``defaultdict`` (``list`` is a placeholder that cannot be called, so no pickle can copy a
  list and multiply its size), ``_codecs.encode(str, 'latin1')`` -> bytes.

Every array that comes out is checked once more on its dtype itself (:func:`check_plain_dtype`).
So everything a loaded object holds was present, byte for byte, in the file: its size is bounded
by the file's size, except for what callers expand (a CSR's dense form, shared lists), which they
must bound themselves (:mod:`unigraph.data.planetoid` does).
"""
from __future__ import annotations

import collections
import io
import math
import pickle
import re
from typing import Any, BinaryIO

import numpy as np

from unigraph.data.errors import DataFileError


class UnsafePickleError(DataFileError, pickle.UnpicklingError):
    """A pickle referred to a global, a call or a state that the restricted loader does not admit."""

    def __init__(self, problem: str, where: str = "pickle"):
        super().__init__(where, problem)


def check_plain_dtype(dtype: np.dtype, where: str = "pickle") -> None:
    """Refuse anything but a plain number dtype, judged on the dtype itself (not on its flags)."""
    if (not isinstance(dtype, np.dtype) or dtype.kind not in "biufc" or dtype.fields is not None
            or dtype.names is not None or dtype.subdtype is not None or dtype.hasobject
            or dtype.metadata is not None):
        raise UnsafePickleError(f"refusing a numpy array of dtype {dtype!r}: the format holds only plain "
                                "bool/int/uint/float/complex arrays (no object, fields or subarrays)", where)


class _Placeholder:
    """A class the format names as an argument (``ndarray`` for ``_reconstruct``, ``list`` for
    ``defaultdict``) but never calls: calling it from a pickle is refused."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsafePickleError(f"refusing to call {self.name}: the format only names it as an argument")

    def __repr__(self) -> str:
        return self.name


NDARRAY = _Placeholder("numpy.ndarray")
LIST = _Placeholder("list")
_PLAIN_SPEC = re.compile(r"[biufc]\d{1,2}")


class _SetOnce:
    """Objects whose state a pickle may set once (a second BUILD could change what was checked)."""

    _built = False

    def _claim_build(self) -> None:
        if self._built:
            raise UnsafePickleError(f"refusing to set the state of a {type(self).__name__} twice")
        self._built = True


class PickledDtype(_SetOnce):
    """``numpy.dtype(spec, align, copy)`` with its state: a plain number type and a byte order."""

    def __init__(self, spec: Any, align: Any = False, copy: Any = True):
        if not isinstance(spec, str) or not _PLAIN_SPEC.fullmatch(spec) or align not in (False, 0):
            raise UnsafePickleError(f"refusing numpy.dtype({spec!r}, align={align!r}): the format holds only "
                                    "plain number types such as 'i4' or 'f8'")
        try:
            self.dtype = np.dtype(spec)
        except TypeError:
            raise UnsafePickleError(f"refusing numpy.dtype({spec!r}): not a number type") from None
        check_plain_dtype(self.dtype)

    def __setstate__(self, state: Any) -> None:
        self._claim_build()
        # numpy's state: (version, byteorder, subarray, names, fields, elsize, alignment, flags[, metadata])
        if not isinstance(state, tuple) or len(state) not in (8, 9) or state[0] not in (3, 4):
            raise UnsafePickleError(f"refusing a numpy dtype state {state!r:.200}")
        byteorder, extras = state[1], state[2:5] + state[8:]
        if byteorder not in ("<", ">", "|", "=") or any(item is not None for item in extras):
            raise UnsafePickleError(f"refusing a numpy dtype state with byte order {byteorder!r}, subarray, names, "
                                    f"fields or metadata {extras!r:.200}: the format's dtypes have none")
        if byteorder != "|":
            self.dtype = self.dtype.newbyteorder(byteorder)
        check_plain_dtype(self.dtype)


class PickledArray(_SetOnce):
    """What ``numpy.core.multiarray._reconstruct(ndarray, (0,), b'b')`` starts; its state supplies
    the shape, dtype and raw bytes, which must match exactly."""

    array: np.ndarray

    def __setstate__(self, state: Any) -> None:
        self._claim_build()
        if isinstance(state, tuple) and len(state) == 5 and state[0] == 1:
            state = state[1:]
        if not isinstance(state, tuple) or len(state) != 4:
            raise UnsafePickleError(f"refusing a numpy array state {state!r:.200}")
        shape, dtype, fortran, raw = state
        if (not isinstance(shape, tuple) or len(shape) > 32
                or not all(type(n) is int and n >= 0 for n in shape)):  # noqa: E721 - bools are not sizes
            raise UnsafePickleError(f"refusing a numpy array of shape {shape!r:.200}")
        if not isinstance(dtype, PickledDtype) or fortran not in (True, False, 0, 1):
            raise UnsafePickleError(f"refusing a numpy array state with dtype {dtype!r:.100} and fortran={fortran!r:.50}")
        if isinstance(raw, str):  # a Python 2 byte string, decoded as latin1 by the unpickler
            try:
                raw = raw.encode("latin1")
            except UnicodeEncodeError:
                raise UnsafePickleError("refusing a numpy array whose data is not a byte string") from None
        if not isinstance(raw, (bytes, bytearray)):
            raise UnsafePickleError(f"refusing a numpy array whose data is a {type(raw).__name__}, not bytes")
        expected = math.prod(shape) * dtype.dtype.itemsize
        if len(raw) != expected:
            raise UnsafePickleError(f"refusing a numpy array of shape {shape} and dtype {dtype.dtype}: it needs "
                                    f"{expected} bytes of data, the file holds {len(raw)}")
        flat = np.frombuffer(raw, dtype=dtype.dtype)
        array = flat.reshape(shape, order="F" if fortran else "C").astype(dtype.dtype.newbyteorder("="))
        self.array = array.view(np.uint8) != 0 if array.dtype.kind == "b" else array


def _reconstruct(cls: Any, shape: Any, typecode: Any) -> PickledArray:
    if cls is not NDARRAY or shape != (0,) or typecode not in (b"b", "b"):
        raise UnsafePickleError(f"refusing _reconstruct({cls!r:.100}, {shape!r:.100}, {typecode!r:.100}): the "
                                "format uses only _reconstruct(numpy.ndarray, (0,), b'b')")
    return PickledArray()


def _array(value: Any, what: str) -> np.ndarray:
    if not isinstance(value, PickledArray) or not hasattr(value, "array"):
        raise UnsafePickleError(f"{what} must be a numpy array, got {type(value).__name__}")
    return value.array


class PickledCSR(_SetOnce):
    """The state of a pickled ``scipy.sparse.csr_matrix``, without scipy.

    A scipy pickle creates the object with ``cls.__new__(cls)`` and then hands it its ``__dict__``
    (``data``, ``indices``, ``indptr``, ``_shape`` and bookkeeping fields); we keep the four we need.
    """

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]

    def __setstate__(self, state: Any) -> None:
        self._claim_build()
        if not isinstance(state, dict):
            raise UnsafePickleError(f"a pickled csr_matrix must carry a dict state, got {type(state).__name__}")
        missing = {"data", "indices", "indptr"} - state.keys()
        shape = state.get("_shape", state.get("shape"))
        if missing or shape is None:
            raise UnsafePickleError(f"a pickled csr_matrix lacks {sorted(missing) or ['_shape']}")
        if (not isinstance(shape, tuple) or len(shape) != 2
                or not all(type(n) is int and n >= 0 for n in shape)):  # noqa: E721
            raise UnsafePickleError(f"a pickled csr_matrix has the shape {shape!r:.100}, not two sizes")
        self.data, self.indices, self.indptr = (_array(state[key], f"csr_matrix.{key}")
                                                for key in ("data", "indices", "indptr"))
        self.shape = shape

    def todense(self, max_elements: int) -> np.ndarray:
        """The dense matrix (duplicate entries summed, as scipy does). Raises ``ValueError`` for
        an inconsistent CSR and for one whose dense form would exceed ``max_elements`` entries."""
        rows, cols = self.shape
        if rows * cols > max_elements:
            raise ValueError(f"a csr_matrix of shape {self.shape} would expand to {rows * cols} dense entries, more "
                             f"than the {max_elements} this file can plausibly describe")
        if self.indptr.dtype.kind not in "iu" or self.indices.dtype.kind not in "iu":
            raise ValueError(f"corrupt csr_matrix: indptr/indices have dtypes {self.indptr.dtype}/{self.indices.dtype}, "
                             "not integers")
        indptr = self.indptr.astype(np.int64)
        indices = self.indices.astype(np.int64)
        if (self.indptr.ndim != 1 or self.indices.ndim != 1 or self.data.ndim != 1
                or indptr.shape != (rows + 1,) or indptr[0] != 0 or indptr[-1] != indices.size
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


def _defaultdict(factory: Any = None) -> collections.defaultdict:
    if factory is not LIST:
        raise UnsafePickleError(f"refusing defaultdict({factory!r:.100}): the format uses only defaultdict(list)")
    return collections.defaultdict(list)


def _latin1_encode(text: str, encoding: str = "latin1") -> bytes:
    """How protocol-2 pickles written by Python 3 spell a bytes object; only latin1 of a str."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError(f"_codecs.encode is admitted only as encode(str, 'latin1'), got "
                                f"encode({type(text).__name__}, {encoding!r})")
    return text.encode("latin1")


#: (module, name) as written in the pickle -> the stand-in it resolves to.
ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy", "ndarray"): NDARRAY,
    ("numpy", "dtype"): PickledDtype,
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("scipy.sparse.csr", "csr_matrix"): PickledCSR,
    ("scipy.sparse._csr", "csr_matrix"): PickledCSR,
    ("collections", "defaultdict"): _defaultdict,
    ("__builtin__", "list"): LIST,
    ("builtins", "list"): LIST,
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

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("refusing a persistent id: the format has none")


def _resolve(obj: Any, where: str) -> Any:
    """Replace the top-level stand-in by the array it built; check every array's dtype."""
    if isinstance(obj, PickledArray):
        obj = _array(obj, "the pickled object")
        check_plain_dtype(obj.dtype, where)
    elif isinstance(obj, PickledCSR):
        if not obj._built:
            raise UnsafePickleError("a pickled csr_matrix without its state")
        for key in ("data", "indices", "indptr"):
            check_plain_dtype(getattr(obj, key).dtype, f"{where}.{key}")
    elif isinstance(obj, PickledDtype):
        raise UnsafePickleError("a bare numpy dtype is not a Planetoid data file")
    return obj


def restricted_load(file: BinaryIO | bytes, *, where: str = "pickle") -> Any:
    """Unpickle ``file`` (a binary file object or bytes), admitting only :data:`ALLOWED_GLOBALS`
    in the calls and states described in the module docstring. Returns a numpy array, a
    :class:`PickledCSR` or the plain containers the pickle built.

    Python 2 pickles are read with ``encoding="latin1"``, which numpy needs for its raw buffers.
    Raises :class:`UnsafePickleError` (a :class:`~unigraph.data.errors.DataFileError` naming
    ``where``) for anything the format does not contain; a damaged pickle can also raise what
    ``pickle`` raises (``EOFError``, ``UnpicklingError``, ...).
    """
    if isinstance(file, (bytes, bytearray)):
        file = io.BytesIO(file)
    try:
        obj = _RestrictedUnpickler(file, encoding="latin1").load()
    except UnsafePickleError as err:  # raised without a file name inside the unpickler
        raise UnsafePickleError(err.problem, where) from None
    return _resolve(obj, where)
