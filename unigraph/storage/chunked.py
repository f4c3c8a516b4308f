"""The chunked on-disk graph format: raw little-endian arrays in fixed-size chunks, a checked JSON manifest.

A graph too large for memory is written and read a chunk at a time (bounded memory) and trained
from its files mapped into memory (:mod:`unigraph.storage.mapped`). No pickle anywhere: every
array is one raw file that ``numpy.memmap(path, dtype, shape=...)`` reads directly, described by
the manifest. Layout of a directory::

    graph.json        the manifest: a checked file (:mod:`unigraph.data.checked_file`: a header
                      with the SHA-256 of the JSON after it), written last
    x.bin, y.bin ...  one raw array per file, little-endian, C order, no header

The manifest holds the format tag and version, ``name``, ``num_nodes``, ``num_edges``,
``num_classes``, the id spaces (``id_space``: the range of node ids that index arrays hold, the
graph's own nodes unless it is one part of a partitioned graph; ``eid_space`` likewise for edge
ids), free-form ``meta`` (generator settings, the source a conversion read, a partition's report)
and per array: ``file``, ``dtype`` (numpy's little-endian string, ``"<f4"``), ``shape``,
``chunk_rows`` and ``chunks``, the SHA-256 of every chunk: rows ``k * chunk_rows`` up to
``(k + 1) * chunk_rows`` of the array (the last chunk may be shorter). The chunk is the unit of
writing, checksumming, verifying and streaming; ``chunk_rows`` is chosen per array so that a chunk
is about ``chunk_bytes`` (default 64 MiB).

Arrays with a meaning (:data:`ARRAY_RULES`; others are allowed and checked for their bytes only)::

    x           float [N, F]    node features          y           int [N]   labels in 0..num_classes-1
    train_mask, val_mask, test_mask  bool [N]          out_degree  int64 [N] out-degree of every node
    src, dst    int [E]         the edge list (COO), in edge-id order
    in_indptr   int64 [N + 1]   the in-CSR (edges grouped by destination; inside a row, in edge-id
    in_indices  int64 [E]       order, as Graph.in_csr()): sources of each row's in-edges
    in_eids     int64 [E]       the edge id of each CSR position (absent: the CSR order is the edge
                                order, CSR position k is edge k)
    orig_ids    int64 [N]       (a partition's part) the original id of each owned node
    halo_ids, halo_out_degree   (a partition's part) see unigraph.distributed.format

**Writing** (:class:`ChunkedWriter`): arrays are appended a block at a time, each written to a
temporary file and renamed when complete (:func:`unigraph.data.checked_file.atomic_write`),
checksummed chunk by chunk as it is written; an old manifest is removed first and the new one
written last, so an interrupted write leaves a directory that is refused (no manifest).

**Reading** (:class:`ChunkedGraph`) follows the reader rule of :mod:`unigraph.data.limits`: the
manifest is checked whole before any array is touched (types, every shape against the counts,
counts against the files' real sizes, ``num_classes`` against the nodes), each file's size must
be exactly its shape's bytes before it is mapped (a short mapped file would kill the process with
SIGBUS), and an array's values are checked the first time it is used, streamed a chunk at a time:
its chunks' SHA-256 (``verify=True``, the default), and, always, the ranges that keep readers in
bounds (indices within their id space, the in-CSR's row pointers rising from 0 to ``E``, labels
within ``num_classes``, masks 0 or 1) and finite features (with ``verify``). Errors are
:class:`ChunkedFormatError` (a :class:`~unigraph.data.errors.DataFileError`) naming the file.
``verify=False`` skips the checksums and the finiteness of features (for a directory checked
once with ``unigraph chunk verify``): bytes changed after that check are then not seen, except
where a range check catches them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import pathlib
from typing import Iterator

import numpy as np
import torch

from unigraph.data import limits
from unigraph.data.checked_file import atomic_write, read_checked, write_checked
from unigraph.data.errors import DataFileError
from unigraph.storage.mapped import MappedArray, map_array

FORMAT = "unigraph.chunked"
VERSION = 1
MANIFEST = "graph.json"
DEFAULT_CHUNK_BYTES = 64 << 20
MAX_MANIFEST_BYTES = 64 << 20   # a manifest lists one checksum per chunk: 64 MiB holds ~800k chunks
DTYPES = ("|b1", "|u1", "|i1", "<i2", "<i4", "<i8", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8")
_READ_BYTES = 8 << 20           # a chunk is read (and checked) in pieces of at most this much


class ChunkedFormatError(DataFileError):
    """A chunked graph directory is incomplete, damaged, or contradicts its manifest."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """What an array with a known name must be: ``rows`` ("nodes", "nodes+1", "edges" or None:
    any), the dtype kinds allowed, its dimensions, and the values it may hold: ``"ids"`` (node ids
    in ``0..id_space-1``), ``"eids"`` (edge ids in ``0..eid_space-1``), ``"classes"``,
    ``"indptr"`` (rising from 0 to ``num_edges``), ``"bool"``, ``"finite"``, ``"count"``
    (``0..eid_space``) or None."""

    rows: str | None
    kinds: str
    ndim: int
    values: str | None


ARRAY_RULES = {
    "x": Rule("nodes", "f", 2, "finite"),
    "y": Rule("nodes", "iu", 1, "classes"),
    "train_mask": Rule("nodes", "b", 1, "bool"),
    "val_mask": Rule("nodes", "b", 1, "bool"),
    "test_mask": Rule("nodes", "b", 1, "bool"),
    "out_degree": Rule("nodes", "iu", 1, "count"),
    "orig_ids": Rule("nodes", "iu", 1, "ids"),
    "src": Rule("edges", "iu", 1, "ids"),
    "dst": Rule("edges", "iu", 1, "ids"),
    "in_indptr": Rule("nodes+1", "i", 1, "indptr"),
    "in_indices": Rule("edges", "i", 1, "ids"),
    "in_eids": Rule("edges", "i", 1, "eids"),
    "halo_ids": Rule(None, "i", 1, "ids"),
    "halo_out_degree": Rule(None, "i", 1, "count"),
}
# index arrays that samplers read without bounds checks (numba): the ones whose ranges are always checked
SAFETY_VALUES = ("ids", "eids", "indptr", "classes", "bool", "count")


def chunk_rows_for(row_bytes: int, chunk_bytes: int) -> int:
    """Rows per chunk so that a chunk is about ``chunk_bytes`` (at least one row)."""
    return max(1, chunk_bytes // max(row_bytes, 1))


# ---------------------------------------------------------------------------------------------- writing
class ArrayWriter:
    """Appends rows to one array file (see :meth:`ChunkedWriter.array`), hashing each chunk."""

    def __init__(self, path: pathlib.Path, name: str, dtype: np.dtype, shape: tuple[int | None, ...],
                 chunk_bytes: int):
        self.name, self.dtype = name, dtype
        self.total = shape[0]                 # None: as many rows as are appended
        self.row_shape = tuple(shape[1:])
        row_bytes = dtype.itemsize * int(np.prod(self.row_shape, dtype=np.int64))
        self.chunk_rows = chunk_rows_for(row_bytes, chunk_bytes)
        self.rows = 0
        self.chunks: list[str] = []
        self._hasher = hashlib.sha256()
        self._in_chunk = 0
        self._stack = contextlib.ExitStack()
        self._file = self._stack.enter_context(atomic_write(path))

    def append(self, block) -> None:
        """Append ``block`` (``[rows, *shape[1:]]``; any dtype that converts to this array's
        without loss)."""
        block = np.asarray(block)
        if block.shape[1:] != self.row_shape:
            raise ValueError(f"array {self.name!r} has rows of shape {list(self.row_shape)}, got a block of shape "
                             f"{list(block.shape)}")
        if block.dtype != self.dtype:
            fits = block.dtype.kind in "iub" and self.dtype.kind in "iu" and (block.size == 0 or (
                np.iinfo(self.dtype).min <= int(block.min()) and int(block.max()) <= np.iinfo(self.dtype).max))
            if not (np.can_cast(block.dtype, self.dtype, "safe") or fits):
                raise TypeError(f"array {self.name!r} is {self.dtype}; a block of {block.dtype} does not convert to it "
                                "without loss")
            block = block.astype(self.dtype)
        if self.total is not None and self.rows + block.shape[0] > self.total:
            raise ValueError(f"array {self.name!r} has {self.total} rows; {self.rows + block.shape[0]} were written")
        block = np.ascontiguousarray(block)
        at = 0
        while at < block.shape[0]:
            take = min(self.chunk_rows - self._in_chunk, block.shape[0] - at)
            data = memoryview(block[at:at + take].reshape(-1).view(np.uint8))
            self._hasher.update(data)
            self._file.write(data)
            self._in_chunk += take
            at += take
            if self._in_chunk == self.chunk_rows:
                self._end_chunk()
        self.rows += block.shape[0]

    def _end_chunk(self) -> None:
        self.chunks.append(self._hasher.hexdigest())
        self._hasher = hashlib.sha256()
        self._in_chunk = 0

    def close(self) -> dict:
        """Finish the file (renamed into place) and return its manifest entry."""
        if self.total is not None and self.rows != self.total:
            raise ValueError(f"array {self.name!r} has {self.total} rows; only {self.rows} were written")
        if self._in_chunk:
            self._end_chunk()
        self._stack.close()
        return {"file": f"{self.name}.bin", "dtype": self.dtype.str, "shape": [self.rows, *self.row_shape],
                "chunk_rows": self.chunk_rows, "chunks": self.chunks}

    def abort(self) -> None:
        self._stack.__exit__(RuntimeError, RuntimeError("aborted"), None)  # removes the temporary file


class ChunkedWriter:
    """Writes a chunked graph directory (see the module docstring).

    ``with ChunkedWriter(dir, name=...) as writer:`` then ``writer.array(name, dtype, shape)``
    (an :class:`ArrayWriter` to ``append`` blocks to; ``shape[0]`` may be ``None`` when the rows
    are known only at the end) or ``writer.add(name, array)``; :meth:`finish` checks every array
    against the counts (given here or to ``finish``) and writes the manifest. Leaving the block
    with an error removes the temporary files and writes no manifest. :meth:`extend` adds arrays
    to an existing directory: its manifest stays valid (no file it lists is touched) until the new
    one, listing the old arrays and the new, replaces it.
    """

    def __init__(self, directory: str | os.PathLike, *, name: str, num_nodes: int | None = None,
                 num_edges: int | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES, id_space: int | None = None,
                 eid_space: int | None = None, meta: dict | None = None, num_classes: int = 0,
                 _keep_manifest: bool = False):
        for label, value, low in (("num_nodes", num_nodes, 0), ("num_edges", num_edges, 0),
                                  ("chunk_bytes", chunk_bytes, 1)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low):
                raise ValueError(f"{label} must be an int >= {low}, got {value!r}")
        self.directory = pathlib.Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise ChunkedFormatError(self.directory, "is a file, not a directory: a chunked graph is written into a "
                                                     "directory")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ChunkedFormatError(self.directory, f"cannot be created ({err.strerror or err})") from None
        if not _keep_manifest:
            (self.directory / MANIFEST).unlink(missing_ok=True)
        self.name, self.num_nodes, self.num_edges = name, num_nodes, num_edges
        self.chunk_bytes = int(chunk_bytes)
        self.id_space, self.eid_space = id_space, eid_space
        self.meta, self.num_classes = dict(meta or {}), num_classes
        self.entries: dict[str, dict] = {}
        self._open: dict[str, ArrayWriter] = {}

    @classmethod
    def extend(cls, graph: "ChunkedGraph") -> "ChunkedWriter":
        """A writer that keeps ``graph``'s arrays and adds more (same counts, meta and chunk size)."""
        m = graph.manifest
        writer = cls(graph.directory, name=m["name"], num_nodes=m["num_nodes"], num_edges=m["num_edges"],
                     chunk_bytes=m["chunk_bytes"], id_space=m["id_space"], eid_space=m["eid_space"], meta=m["meta"],
                     num_classes=m["num_classes"], _keep_manifest=True)
        writer.entries = dict(m["arrays"])
        return writer

    def array(self, name: str, dtype, shape) -> ArrayWriter:
        if not name.isidentifier() or name in self.entries or name in self._open:
            raise ValueError(f"array name {name!r} must be a new identifier")
        dtype = np.dtype(np.dtype(dtype).str.replace(">", "<"))  # raw files are little-endian
        if dtype.str not in DTYPES:
            raise TypeError(f"array {name!r}: dtype {dtype} is not one of the raw dtypes {', '.join(DTYPES)}")
        shape = (None if shape[0] is None else int(shape[0]),) + tuple(int(n) for n in shape[1:])
        writer = ArrayWriter(self.directory / f"{name}.bin", name, dtype, shape, self.chunk_bytes)
        self._open[name] = writer
        return writer

    def add(self, name: str, array) -> None:
        """Write a whole (small) array at once."""
        array = np.asarray(array)
        writer = self.array(name, array.dtype, array.shape)
        writer.append(array)
        self.close_array(name)

    def close_array(self, name: str) -> None:
        self.entries[name] = self._open.pop(name).close()

    def finish(self, *, num_nodes: int | None = None, num_edges: int | None = None, num_classes: int | None = None,
               meta: dict | None = None) -> pathlib.Path:
        """Close every array still open, check every array against the counts and write the manifest (last)."""
        for name in list(self._open):
            self.close_array(name)
        n = num_nodes if num_nodes is not None else self.num_nodes
        e = num_edges if num_edges is not None else self.num_edges
        if n is None or e is None:
            raise ValueError("finish needs num_nodes and num_edges (given to the writer or to finish)")
        path = self.directory / MANIFEST
        for name, entry in self.entries.items():
            problem = shape_problem(name, tuple(entry["shape"]), np.dtype(entry["dtype"]), n, e)
            if problem:
                raise ValueError(f"{self.directory}: {problem}")
        manifest = {"format": FORMAT, "version": VERSION, "name": self.name, "num_nodes": int(n), "num_edges": int(e),
                    "num_classes": int(num_classes if num_classes is not None else self.num_classes),
                    "id_space": int(self.id_space if self.id_space is not None else n),
                    "eid_space": int(self.eid_space if self.eid_space is not None else e),
                    "chunk_bytes": self.chunk_bytes, "meta": {**self.meta, **(meta or {})}, "arrays": self.entries}
        return write_checked(path, FORMAT, json.dumps(manifest, indent=1).encode("utf-8"))

    def abort(self) -> None:
        for writer in self._open.values():
            writer.abort()
        self._open.clear()

    def __enter__(self) -> "ChunkedWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()


def shape_problem(name: str, shape: tuple, dtype: np.dtype, num_nodes: int, num_edges: int) -> str | None:
    """Why an array of ``shape`` and ``dtype`` cannot be ``name`` of a graph of these counts (None: it can)."""
    rule = ARRAY_RULES.get(name)
    if rule is None:
        return None
    if dtype.kind not in rule.kinds or len(shape) != rule.ndim:
        return f"array {name!r} must be {rule.ndim}-D of kind {rule.kinds!r}, got {dtype} {list(shape)}"
    rows = {"nodes": num_nodes, "nodes+1": num_nodes + 1, "edges": num_edges}.get(rule.rows)
    if rows is not None and shape[0] != rows:
        return f"array {name!r} has {shape[0]:,} rows, the graph's {rule.rows} give {rows:,}"
    return None


# ---------------------------------------------------------------------------------------------- reading
def _require(condition: bool, path, message: str) -> None:
    if not condition:
        raise ChunkedFormatError(path, message)


def _is_int(value, minimum: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def read_manifest(directory: str | os.PathLike) -> dict:
    """The checked manifest of ``directory`` (see the module docstring), every field validated and
    every array file's size compared with its shape (no array data is read)."""
    directory = pathlib.Path(directory)
    path = directory / MANIFEST
    if not directory.is_dir():
        raise FileNotFoundError(f"chunked graph directory {directory} does not exist")
    if not path.is_file():
        raise ChunkedFormatError(directory, f"holds no {MANIFEST}: not a chunked graph, or one whose writing was "
                                            "interrupted (write it again)")
    size = limits.regular_size(path)
    _require(size <= MAX_MANIFEST_BYTES, path, f"is {size:,} bytes, over the limit of {MAX_MANIFEST_BYTES:,} for a "
                                               "manifest")
    try:
        raw = json.loads(read_checked(path, FORMAT).decode("utf-8"))
    except DataFileError as err:
        raise ChunkedFormatError(err.path, err.problem) from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ChunkedFormatError(path, f"is not valid JSON ({err})") from None
    _require(isinstance(raw, dict) and raw.get("format") == FORMAT, path, f"no {FORMAT!r} format tag")
    _require(raw.get("version") == VERSION, path, f"format version {raw.get('version')!r}; this unigraph reads "
                                                  f"version {VERSION}")
    for name in ("num_nodes", "num_edges", "num_classes", "id_space", "eid_space", "chunk_bytes"):
        _require(_is_int(raw.get(name)), path, f"{name} must be an int >= 0, got {raw.get(name)!r}")
    _require(isinstance(raw.get("name"), str) and isinstance(raw.get("meta"), dict)
             and isinstance(raw.get("arrays"), dict), path, "name, meta and arrays must be a string and two objects")
    n, e = raw["num_nodes"], raw["num_edges"]
    _require(raw["num_classes"] <= max(n, 1), path, f"num_classes={raw['num_classes']:,} is more than the {n:,} nodes")
    _require(raw["id_space"] >= n and raw["eid_space"] >= e, path, "id_space/eid_space must cover the graph's own "
                                                                   "nodes and edges")
    for name, entry in raw["arrays"].items():
        _require(isinstance(name, str) and name.isidentifier() and isinstance(entry, dict), path,
                 f"array entry {name!r} is malformed")
        _require(entry.get("file") == f"{name}.bin", path, f"array {name!r} must be stored in {name}.bin")
        _require(entry.get("dtype") in DTYPES, path, f"array {name!r}: dtype {entry.get('dtype')!r} is not a raw dtype")
        shape = entry.get("shape")
        _require(isinstance(shape, list) and 1 <= len(shape) <= 4 and all(_is_int(s) for s in shape), path,
                 f"array {name!r}: shape must be 1 to 4 ints >= 0, got {shape!r}")
        _require(_is_int(entry.get("chunk_rows"), 1), path, f"array {name!r}: chunk_rows must be an int >= 1")
        chunks = entry.get("chunks")
        expected = -(-shape[0] // entry["chunk_rows"])
        _require(isinstance(chunks, list) and len(chunks) == expected and
                 all(isinstance(c, str) and len(c) == 64 for c in chunks), path,
                 f"array {name!r}: {shape[0]:,} rows in chunks of {entry['chunk_rows']:,} need {expected:,} SHA-256 "
                 f"entries, got {len(chunks) if isinstance(chunks, list) else chunks!r}")
        dtype = np.dtype(entry["dtype"])
        problem = shape_problem(name, tuple(shape), dtype, n, e)
        _require(problem is None, path, problem or "")
        nbytes = limits.elements_bytes(shape, dtype.itemsize)
        file = directory / entry["file"]
        if not file.exists():
            raise ChunkedFormatError(file, f"is missing (the manifest lists array {name!r})")
        real = limits.regular_size(file)
        _require(real == nbytes, file, f"holds {real:,} bytes; array {name!r} of {dtype} {shape} needs {nbytes:,} "
                                       "(truncated, or from another graph)")
    raw["directory"] = directory
    return raw


class ChunkedGraph:
    """A chunked graph directory, opened for reading (see the module docstring).

    :meth:`array` maps an array (checked once, on first use); :meth:`tensor` is the same as a
    torch tensor (no copy); :meth:`chunks` streams an array a manifest chunk at a time (checked
    as it goes) for pipelines whose memory must not grow with the graph.
    """

    def __init__(self, directory: str | os.PathLike, *, verify: bool = True):
        self.manifest = read_manifest(directory)
        self.directory = pathlib.Path(directory)
        self.verify = verify
        self._mapped: dict[str, MappedArray] = {}

    # ------------------------------------------------------------------ fields
    name = property(lambda self: self.manifest["name"])
    num_nodes = property(lambda self: self.manifest["num_nodes"])
    num_edges = property(lambda self: self.manifest["num_edges"])
    num_classes = property(lambda self: self.manifest["num_classes"])
    meta = property(lambda self: self.manifest["meta"])

    @property
    def num_features(self) -> int:
        return self.shape("x")[1] if self.has("x") else 0

    def has(self, name: str) -> bool:
        return name in self.manifest["arrays"]

    def names(self) -> list[str]:
        return list(self.manifest["arrays"])

    def path(self, name: str) -> pathlib.Path:
        return self.directory / self._entry(name)["file"]

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._entry(name)["shape"])

    def dtype(self, name: str) -> np.dtype:
        return np.dtype(self._entry(name)["dtype"])

    def nbytes(self, name: str | None = None) -> int:
        names = [name] if name is not None else self.names()
        return sum(limits.elements_bytes(self.shape(n), self.dtype(n).itemsize) for n in names)

    def _entry(self, name: str) -> dict:
        try:
            return self.manifest["arrays"][name]
        except KeyError:
            raise KeyError(f"the chunked graph {self.directory} has no array {name!r} (it has "
                           f"{', '.join(self.names()) or 'none'})") from None

    def __repr__(self) -> str:
        return (f"ChunkedGraph({str(self.directory)!r}, {self.name!r}, {self.num_nodes:,} nodes, {self.num_edges:,} edges, "
                f"arrays {', '.join(self.names())}, {self.nbytes() / 2**30:.2f} GiB)")

    # ------------------------------------------------------------------ reading
    def chunks(self, name: str, *, check: bool = True) -> Iterator[tuple[int, np.ndarray]]:
        """``(first row, rows)`` of every manifest chunk of ``name``, read from the file into a
        new array each (not mapped: the pages go through the page cache, not into this process),
        each chunk checked before it is yielded (``check``: its SHA-256 when ``verify``, and its
        values, see the module docstring)."""
        entry = self._entry(name)
        dtype, shape = np.dtype(entry["dtype"]), tuple(entry["shape"])
        row_shape = shape[1:]
        row_bytes = dtype.itemsize * int(np.prod(row_shape, dtype=np.int64))
        path = self.path(name)
        state = _ValueState()
        with limits.open_regular(path) as handle:
            for k, digest in enumerate(entry["chunks"]):
                first = k * entry["chunk_rows"]
                rows = min(entry["chunk_rows"], shape[0] - first)
                buffer = np.empty((rows,) + row_shape, dtype=dtype)
                view = memoryview(buffer.reshape(-1).view(np.uint8)) if buffer.size else memoryview(b"")
                hasher = hashlib.sha256() if (check and self.verify) else None
                at = 0
                while at < rows * row_bytes:
                    got = handle.readinto(view[at:at + _READ_BYTES])
                    _require(bool(got), path, f"ended at byte {first * row_bytes + at:,}, inside chunk {k} (truncated "
                                              "while it was read)")
                    if hasher is not None:
                        hasher.update(view[at:at + got])
                    at += got
                if hasher is not None:
                    _require(hasher.hexdigest() == digest, path,
                             f"chunk {k} (rows {first:,}..{first + rows - 1:,}) of array {name!r} does not match its "
                             "SHA-256 in the manifest: the file is corrupted or from another graph")
                if check:
                    self._check_values(name, buffer, first, state)
                yield first, buffer
        if check:
            self._check_end(name, state)

    def array(self, name: str) -> np.ndarray:
        """The whole array ``name``, memory-mapped copy-on-write (checked on first use, streamed)."""
        if name not in self._mapped:
            self._check_array(name)
            self._mapped[name] = map_array(self.path(name), self.dtype(name), self.shape(name))
        return self._mapped[name].array

    def mapped(self, name: str) -> MappedArray:
        """The :class:`~unigraph.storage.mapped.MappedArray` of ``name`` (for read-ahead advice)."""
        self.array(name)
        return self._mapped[name]

    def tensor(self, name: str) -> torch.Tensor:
        """:meth:`array` as a torch tensor over the same mapped memory (no copy)."""
        return torch.from_numpy(self.array(name))

    def load(self, name: str) -> np.ndarray:
        """A private in-memory copy of ``name`` (for small arrays and tests), checked as it is read."""
        parts = [block for _, block in self.chunks(name)]
        return np.concatenate(parts) if parts else np.zeros(self.shape(name), dtype=self.dtype(name))

    def _check_array(self, name: str) -> None:
        rule = ARRAY_RULES.get(name)
        needs_values = rule is not None and rule.values in SAFETY_VALUES
        if self.verify or needs_values:
            for _ in self.chunks(name):
                pass

    def verify_all(self) -> None:
        """Stream every array once: checksums and values (``unigraph chunk verify``)."""
        verify, self.verify = self.verify, True
        try:
            for name in self.names():
                for _ in self.chunks(name):
                    pass
        finally:
            self.verify = verify

    # ------------------------------------------------------------------ values
    def _check_values(self, name: str, block: np.ndarray, first: int, state: "_ValueState") -> None:
        rule = ARRAY_RULES.get(name)
        if rule is None or rule.values is None or block.size == 0:
            return
        path, m = self.path(name), self.manifest
        kind = rule.values
        if kind == "finite":
            if self.verify:
                _require(bool(np.isfinite(block).all()), path, f"array {name!r} holds non-finite values (NaN or "
                                                               f"infinity) in rows {first:,}..{first + len(block) - 1:,}")
            return
        low, high = int(block.min()), int(block.max())
        bounds = {"ids": (0, m["id_space"]), "eids": (0, m["eid_space"]), "classes": (0, m["num_classes"]),
                  "bool": (0, 2), "count": (0, m["eid_space"] + 1), "indptr": (0, m["num_edges"] + 1)}[kind]
        if kind == "bool":
            raw = block.view(np.uint8)
            low, high = int(raw.min()), int(raw.max())
        _require(bounds[0] <= low and high < bounds[1], path,
                 f"array {name!r} holds values {low:,}..{high:,} in rows {first:,}..{first + len(block) - 1:,}, outside "
                 f"{bounds[0]:,}..{bounds[1] - 1:,}")
        if kind == "indptr":
            if first == 0:
                _require(int(block[0]) == 0, path, f"array {name!r} must start at 0, starts at {int(block[0]):,}")
            _require(bool(np.all(block[1:] >= block[:-1])) and (state.last is None or int(block[0]) >= state.last),
                     path, f"array {name!r} decreases in rows {first:,}..{first + len(block) - 1:,}: row pointers must "
                           "rise")
            state.last = int(block[-1])

    def _check_end(self, name: str, state: "_ValueState") -> None:
        rule = ARRAY_RULES.get(name)
        if rule is not None and rule.values == "indptr" and state.last is not None:
            _require(state.last == self.num_edges, self.path(name),
                     f"array {name!r} ends at {state.last:,}; the graph has {self.num_edges:,} edges")


@dataclasses.dataclass
class _ValueState:
    last: int | None = None


class ArrayStream:
    """Rows of one array read in order, any number at a time (:meth:`take`), through
    :meth:`ChunkedGraph.chunks` (so every chunk is checked as it is read). Memory: the chunk being
    consumed and what a call asks for."""

    def __init__(self, graph: ChunkedGraph, name: str):
        self.name = name
        self.remaining = graph.shape(name)[0]
        self._chunks = graph.chunks(name)
        self._pending: list[np.ndarray] = []
        self._have = 0
        self._empty = np.zeros((0,) + graph.shape(name)[1:], dtype=graph.dtype(name))

    def take(self, rows: int) -> np.ndarray:
        """The next ``rows`` rows (a new array, or a view of a chunk read for it)."""
        if rows > self.remaining:
            raise ValueError(f"array {self.name!r} has {self.remaining} rows left, {rows} were asked for")
        while self._have < rows:
            _, chunk = next(self._chunks)
            self._pending.append(chunk)
            self._have += len(chunk)
        if rows == 0:
            return self._empty
        joined = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending = [joined[rows:]] if len(joined) > rows else []
        self._have -= rows
        self.remaining -= rows
        if self.remaining == 0:
            for _ in self._chunks:   # run the reader to its end: its last checks happen there
                pass
        return joined[:rows]

