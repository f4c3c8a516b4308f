"""The on-disk format of a partition set: one ``.npz`` file per partition and ``partitions.json``.

No pickle anywhere: arrays are numpy ``.npy`` records in an (uncompressed) zip, read with
``allow_pickle=False``; the metadata is JSON. Layout of a directory::

    partitions.json   a checked file (:mod:`unigraph.data.checked_file`: a header with the SHA-256
                      of the JSON that follows it) holding the format tag and version, set id, sizes,
                      the partition book (node offsets), the method, the report, and per part: file
                      name, SHA-256, byte size and counts (nodes, edges, training/validation/test
                      nodes, halo)
    part-0.npz ...    one per partition (arrays below)

Arrays of part ``p`` (``n`` owned nodes, ``e`` in-edges of them, ``h`` halo nodes; ids are the
set's partition-major global ids, see :mod:`unigraph.distributed.book`)::

    set_id, part_id        which set and part the file belongs to (uint8 text, int64[1])
    orig_ids    int64[n]   the original graph's id of each owned node
    indptr      int64[n+1] the in-CSR of the owned nodes (row i = global id offsets[p] + i) ...
    indices     int[e]     ... holding the sources' global ids (int32 when the graph has < 2**31 nodes)
    eids        int64[e]   the original graph's id of each of those edges
    x           [n, F]     features of the owned nodes;   y int64[n]: labels
    train_mask, val_mask, test_mask   bool[n]
    out_degree  int64[n]   out-degree of each owned node in the whole graph
    halo_ids    int64[h]   sorted global ids of the 1-hop halo: sources of owned nodes' in-edges
                           owned by another partition
    halo_out_degree int64[h]  their out-degrees in the whole graph
    halo_indptr int64[h+1] the in-CSR of the halo nodes (their ``k`` in-edges, as their owners
    halo_indices int[k]    store them: sources' global ids, original edge order) ...
    halo_eids   int64[k]   ... and the original ids of those edges

Inside a row, in-edges keep the original graph's edge order (a stable sort by destination), the
order of ``Graph.in_csr()``: that is what lets the distributed sampler draw the very samples the
single-machine sampler draws (:mod:`unigraph.distributed.sampler`). The halo's in-edges
let a machine sample the hop after the first (the in-edges of its seeds' remote neighbours)
without asking their owners.

Version 2 added the halo's in-edges; a version-1 set is refused with the command that rewrites it.

Writing: every part, then the metadata, each written atomically (``checked_file.atomic_write``;
the parts are streamed to disk, their checksums kept in the checked metadata); an old
``partitions.json`` is removed first, so an interrupted write leaves a directory that is refused
(no metadata), never a mix of two sets that looks whole. Reading (:func:`read_metadata`,
:func:`load_part_arrays`) refuses, with a :class:`PartitionFormatError` (a ``DataFileError``)
naming the file and the problem: a missing file, damaged metadata, counts the parts cannot hold
(nodes, features and edges against the parts' bytes, more classes than nodes), a SHA-256 or size
that does not match (corrupted or truncated bytes, or a file from another set, which the embedded
set id then identifies), compressed members or headers that claim more than their member holds
(:mod:`unigraph.data.npz_file`), arrays whose dtypes, shapes or value ranges contradict the
metadata, and non-finite features. Only regular files are read.
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import uuid
import zipfile

import numpy as np

from unigraph.data import limits
from unigraph.data.checked_file import atomic_write, read_checked, sha256_file, write_checked
from unigraph.data.errors import DataFileError
from unigraph.data.npz_file import ZIP_ERRORS, open_member, read_npz
from unigraph.distributed import chunked_parts
from unigraph.distributed.book import PartitionBook

FORMAT = "unigraph.partitions"
VERSION = 2
METADATA = "partitions.json"
GRAPH_ARRAYS = ("indptr", "indices")
NODE_ARRAYS = ("orig_ids", "x", "y", "train_mask", "val_mask", "test_mask", "out_degree")
HALO_ARRAYS = ("halo_ids", "halo_out_degree", "halo_indptr", "halo_indices")
ALL_ARRAYS = ("set_id", "part_id", "orig_ids", "indptr", "indices", "eids", "x", "y", "train_mask", "val_mask",
              "test_mask", "out_degree", "halo_ids", "halo_out_degree", "halo_indptr", "halo_indices", "halo_eids")
PART_COUNTS = ("nodes", "edges", "train", "val", "test", "halo", "halo_edges")


class PartitionFormatError(DataFileError):
    """A partition set on disk is incomplete, damaged, or does not match its metadata
    (``path``: the file or directory refused, ``problem``: why)."""


LAYOUTS = ("npz", "chunked")   # chunked: each part a chunked graph directory (unigraph.distributed.chunked_parts)


def part_file(part: int, layout: str = "npz") -> str:
    return f"part-{part}.npz" if layout == "npz" else f"part-{part}"


def new_set_id() -> str:
    return uuid.uuid4().hex


@dataclasses.dataclass
class PartitionSetInfo:
    """The parsed ``partitions.json`` (see the module docstring)."""

    directory: pathlib.Path
    set_id: str
    num_parts: int
    num_nodes: int
    num_edges: int
    num_features: int
    feature_dtype: str
    num_classes: int
    max_in_degree: int
    offsets: list[int]
    parts: list[dict]
    method: dict
    report: dict
    dataset: str
    layout: str = "npz"

    @property
    def book(self) -> PartitionBook:
        return PartitionBook(self.offsets)

    def count(self, part: int, what: str) -> int:
        return int(self.parts[part][what])

    def to_json(self) -> dict:
        out = {"format": FORMAT, "version": VERSION}
        out.update({f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "directory"})
        return out


# ---------------------------------------------------------------------------------------------- writing
def begin_write(directory: str | os.PathLike) -> pathlib.Path:
    """Create ``directory`` and remove an old ``partitions.json`` (so a half-written set is refused)."""
    directory = pathlib.Path(directory)
    if directory.exists() and not directory.is_dir():
        raise PartitionFormatError(directory, "is a file, not a directory: a partition set is written into a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PartitionFormatError(directory, f"cannot be created ({err.strerror or err})") from None
    (directory / METADATA).unlink(missing_ok=True)
    return directory


def write_part(directory: pathlib.Path, set_id: str, part: int, arrays: dict[str, np.ndarray]) -> dict:
    """Write ``part-<part>.npz`` atomically; returns its file name, SHA-256 and size."""
    missing = set(ALL_ARRAYS) - {"set_id", "part_id"} - set(arrays)
    if missing:
        raise ValueError(f"partition {part} lacks arrays {sorted(missing)}")
    record = {"set_id": np.frombuffer(set_id.encode("ascii"), dtype=np.uint8),
              "part_id": np.array([part], dtype=np.int64), **arrays}
    path = directory / part_file(part)
    with atomic_write(path) as file:
        np.savez(file, **record)
    return {"file": path.name, "sha256": sha256_file(path), "bytes": path.stat().st_size}


def write_metadata(info: PartitionSetInfo) -> pathlib.Path:
    path = info.directory / METADATA
    return write_checked(path, FORMAT, json.dumps(info.to_json(), indent=1).encode("utf-8"))


# ---------------------------------------------------------------------------------------------- reading
def _require(condition: bool, path, message: str) -> None:
    if not condition:
        raise PartitionFormatError(path, message)


def read_metadata(directory: str | os.PathLike) -> PartitionSetInfo:
    """Read and check ``directory/partitions.json`` (not the parts: see :func:`load_part_arrays`)."""
    directory = pathlib.Path(directory)
    path = directory / METADATA
    if not directory.is_dir():
        raise FileNotFoundError(f"partition directory {directory} does not exist")
    if not path.is_file():
        raise PartitionFormatError(directory, f"holds no {METADATA}: not a partition set, or one whose writing "
                                   "was interrupted (write it again with `unigraph partition`)")
    try:
        raw = json.loads(read_checked(path, FORMAT).decode("utf-8"))
    except DataFileError as err:  # no checksum header, truncated, corrupted bytes
        raise PartitionFormatError(err.path, err.problem) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:  # intact bytes that a writer got wrong
        raise PartitionFormatError(path, f"is not valid JSON ({err})") from None
    _require(isinstance(raw, dict) and raw.get("format") == FORMAT, path, f"no {FORMAT!r} format tag")
    _require(raw.get("version") == VERSION, path,
             f"format version {raw.get('version')!r}; this unigraph reads version {VERSION} (write the set again "
             "with `unigraph partition`)")
    ints = ("num_parts", "num_nodes", "num_edges", "num_features", "num_classes", "max_in_degree")
    for name in ints:
        _require(isinstance(raw.get(name), int) and not isinstance(raw.get(name), bool) and raw[name] >= 0, path,
                 f"{name} must be an int >= 0, got {raw.get(name)!r}")
    for name, kind in (("set_id", str), ("feature_dtype", str), ("dataset", str), ("offsets", list),
                       ("parts", list), ("method", dict), ("report", dict)):
        _require(isinstance(raw.get(name), kind), path, f"{name} must be a {kind.__name__}, got {raw.get(name)!r}")
    num_parts = raw["num_parts"]
    _require(num_parts >= 1 and len(raw["parts"]) == num_parts and len(raw["offsets"]) == num_parts + 1, path,
             f"num_parts={num_parts} but {len(raw['parts'])} part entries and {len(raw['offsets'])} offsets")
    try:
        book = PartitionBook(raw["offsets"])
    except (TypeError, ValueError) as err:
        raise PartitionFormatError(path, f"bad node offsets ({err})") from None
    _require(book.num_nodes == raw["num_nodes"], path, f"offsets end at {book.num_nodes}, num_nodes={raw['num_nodes']}")
    _require(raw["feature_dtype"] in ("float16", "bfloat16", "float32", "float64"), path,
             f"feature_dtype {raw['feature_dtype']!r} is not a float type")
    layout = raw.setdefault("layout", "npz")   # sets written before the chunked layout have no layout field
    _require(layout in LAYOUTS, path, f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    for part, entry in enumerate(raw["parts"]):
        _require(isinstance(entry, dict) and entry.get("file") == part_file(part, layout), path,
                 f"part entry {part} must name {part_file(part, layout)}, got {entry!r}")
        _require(isinstance(entry.get("sha256"), str) and len(entry["sha256"]) == 64, path,
                 f"part entry {part} has no SHA-256")
        for count in PART_COUNTS + ("bytes",):
            _require(isinstance(entry.get(count), int) and entry[count] >= 0, path,
                     f"part entry {part} needs an int {count!r} >= 0, got {entry.get(count)!r}")
        _require(entry["nodes"] == book.num_owned(part), path,
                 f"part {part} lists {entry['nodes']} nodes but the offsets give it {book.num_owned(part)}")
    _require(sum(e["edges"] for e in raw["parts"]) == raw["num_edges"], path, "the parts' edges do not sum to num_edges")
    _check_sizes(path, raw)
    fields = {f.name for f in dataclasses.fields(PartitionSetInfo)} - {"directory"}
    return PartitionSetInfo(directory=directory, **{name: raw[name] for name in fields})


def _check_sizes(path: pathlib.Path, raw: dict) -> None:
    """Counts the metadata states against the bytes its parts hold (each part's size is checked
    against the real file when it is loaded): the arrays are stored uncompressed, so ``num_nodes``
    ids and features and ``num_edges`` source ids must fit in them; and no more classes than nodes
    (a model gets one output per class: ``num_classes = 2**40`` would make a 281 TB layer)."""
    stored = sum(entry["bytes"] for entry in raw["parts"])
    itemsize = 2 if raw["feature_dtype"] in ("float16", "bfloat16") else 4 if raw["feature_dtype"] == "float32" else 8
    needed = raw["num_nodes"] * (8 + raw["num_features"] * itemsize) + raw["num_edges"] * 4
    _require(needed <= stored, path, f"describes {raw['num_nodes']:,} nodes x {raw['num_features']:,} features and "
             f"{raw['num_edges']:,} edges ({needed:,} bytes of arrays), more than its parts hold ({stored:,} bytes)")
    _require(raw["num_classes"] <= max(raw["num_nodes"], 1), path,
             f"num_classes={raw['num_classes']:,} is more than the {raw['num_nodes']:,} nodes (one output per class)")
    _require(raw["max_in_degree"] <= raw["num_edges"], path,
             f"max_in_degree={raw['max_in_degree']:,} is more than the {raw['num_edges']:,} edges")


def _embedded_identity(path: pathlib.Path, size: int) -> str:
    """'set S, part P' as written inside a part file, or why that cannot be read (for error messages only)."""
    try:
        arrays = read_npz(path, file_bytes=size, compressed=False, names=("set_id", "part_id"), max_elements=64)
        return f"set {bytes(arrays['set_id'].astype(np.uint8)).decode('ascii')}, part {int(arrays['part_id'][0])}"
    except (DataFileError, KeyError, UnicodeDecodeError, IndexError, ValueError, TypeError) as err:
        return f"unreadable ({type(err).__name__}: {err})"


def _check_part_number(info: PartitionSetInfo, part: int) -> None:
    if isinstance(part, bool) or not isinstance(part, int) or not 0 <= part < info.num_parts:
        raise ValueError(f"part must be an int in 0..{info.num_parts - 1}, got {part!r}")


def _checked_part_file(info: PartitionSetInfo, part: int, verify: bool) -> tuple[pathlib.Path, int]:
    """``(path, size)`` of part ``part``'s file: present, a regular file of the size the metadata
    gives, and (``verify``) of its SHA-256; what does not match is named."""
    _check_part_number(info, part)
    path = info.directory / part_file(part)
    entry = info.parts[part]
    if not path.is_file():
        raise FileNotFoundError(f"partition file {path} is missing (the set {info.set_id} has {info.num_parts} parts)")
    size = limits.regular_size(path)
    if size != entry["bytes"] or (verify and sha256_file(path) != entry["sha256"]):
        what = (f"it holds {size} bytes, {METADATA} says {entry['bytes']}" if size != entry["bytes"]
                else f"its SHA-256 differs from the one in {METADATA}")
        raise PartitionFormatError(
            path, f"does not match {METADATA} ({what}): "
            f"the file is corrupted or belongs to another partition set; it identifies itself as "
            f"{_embedded_identity(path, size)}, the metadata expects set {info.set_id}, part {part}")
    return path, size


def load_part_arrays(info: PartitionSetInfo, part: int, names=ALL_ARRAYS, *, verify: bool = True) -> dict[str, np.ndarray]:
    """The arrays ``names`` of partition ``part``, checked against the metadata.

    ``verify`` checks the file's SHA-256 first (reads the whole file once). Raises
    ``FileNotFoundError`` for a missing file and :class:`PartitionFormatError` for anything else
    that does not match. Chunked parts are mapped, not read (:mod:`unigraph.distributed.chunked_parts`
    checks the arrays the chunked format knows as they are first used; the halo's in-edges, which
    it does not know, are checked here).
    """
    if info.layout == "chunked":
        _check_part_number(info, part)
        arrays = chunked_parts.read_part(info, part, names, verify=verify, error=PartitionFormatError)
        halo_edges = {name: arrays[name] for name in ("halo_indptr", "halo_indices", "halo_eids") if name in arrays}
        _check_arrays(chunked_parts.part_directory(info.directory, part), info, part, halo_edges)
        return arrays
    path, size = _checked_part_file(info, part, verify)
    wanted = ("set_id", "part_id", *(name for name in names if name not in ("set_id", "part_id")))
    try:  # stored members only, each header against its member's length (np.savez writes them so)
        arrays = read_npz(path, file_bytes=size, compressed=False, names=wanted)
        missing = [name for name in wanted if name not in arrays]
        _require(not missing, path, f"lacks the arrays {missing}")
        identity = bytes(arrays.pop("set_id").astype(np.uint8)).decode("ascii"), int(arrays.pop("part_id")[0])
    except DataFileError as err:
        raise PartitionFormatError(err.path, err.problem) from None
    except (UnicodeDecodeError, IndexError, ValueError, TypeError) as err:
        raise PartitionFormatError(path, f"cannot be read as a partition file ({type(err).__name__}: {err})") from None
    _require(identity == (info.set_id, part), path,
             f"belongs to set {identity[0]}, part {identity[1]}; the metadata expects set {info.set_id}, part {part}")
    _check_arrays(path, info, part, arrays)
    return arrays


CHUNK_BYTES = 1 << 24  # what a streamed read holds beside its destination


def open_part(info: PartitionSetInfo, part: int, *, verify: bool = True):
    """Part ``part`` opened for streamed reads: a :class:`PartFile` (``.npz`` layout) or a
    :class:`~unigraph.distributed.chunked_parts.MappedPart` (chunked layout), the same interface."""
    if info.layout == "chunked":
        _check_part_number(info, part)
        return chunked_parts.MappedPart(info, part, verify=verify, error=PartitionFormatError)
    return PartFile(info, part, verify=verify)


class PartFile:
    """An open part file whose size, checksum and embedded identity were checked, read as
    :func:`load_part_arrays` reads it (a regular file; stored members only, each ``.npy`` header
    checked against its member's length before its data: :mod:`unigraph.data.npz_file`), with
    arrays read into memory (:meth:`read`) or streamed into a destination that already exists, e.g.
    shared memory (:meth:`read_into`, :meth:`chunks`), without a second copy. The caller checks
    values it streamed with :func:`check_part_arrays` (or :func:`check_range` per chunk)."""

    def __init__(self, info: PartitionSetInfo, part: int, *, verify: bool = True):
        self.info, self.part = info, part
        path, size = _checked_part_file(info, part, verify)
        self.path = path
        self._handle = limits.open_regular(path)
        try:
            try:
                self._zip = zipfile.ZipFile(self._handle)
            except ZIP_ERRORS as err:
                raise PartitionFormatError(path, f"is not a readable .npz archive (truncated or corrupt?): {err}") \
                    from None
            try:
                limits.check_zip(path, self._zip, size, compressed=False)
            except DataFileError as err:
                raise PartitionFormatError(err.path, err.problem) from None
            self._members = {i.filename[:-4]: i for i in self._zip.infolist() if i.filename.endswith(".npy")}
            try:
                identity = bytes(self.read("set_id").astype(np.uint8)).decode("ascii"), int(self.read("part_id")[0])
            except (UnicodeDecodeError, IndexError) as err:
                raise PartitionFormatError(path, f"cannot be read as a partition file ({type(err).__name__}: "
                                           f"{err})") from None
            _require(identity == (info.set_id, part), path, f"belongs to set {identity[0]}, part {identity[1]}; the "
                     f"metadata expects set {info.set_id}, part {part}")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if getattr(self, "_zip", None) is not None:
            self._zip.close()
        self._handle.close()

    def __enter__(self) -> "PartFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _open(self, name: str):
        """The member ``name`` positioned at its data (header checked), its dtype and shape."""
        if name not in self._members:
            raise PartitionFormatError(self.path, f"lacks the arrays {[name]}")
        try:
            member, shape, dtype = open_member(self.path, self._zip, self._members[name])
        except DataFileError as err:
            raise PartitionFormatError(err.path, err.problem) from None
        return member, dtype, shape

    def header(self, name: str) -> tuple[np.dtype, tuple[int, ...]]:
        member, dtype, shape = self._open(name)
        member.close()
        return dtype, shape

    def read(self, name: str) -> np.ndarray:
        """The whole array ``name`` (a new array)."""
        member, dtype, shape = self._open(name)
        with member:
            out = np.empty(shape, dtype)
            self._fill(member, out, name)
        return out

    def read_into(self, name: str, out: np.ndarray) -> None:
        """Stream array ``name`` into ``out`` (C-contiguous, the array's dtype and shape)."""
        member, dtype, shape = self._open(name)
        with member:
            if dtype != out.dtype or tuple(shape) != out.shape:
                raise PartitionFormatError(self.path, f"array {name!r} is {dtype} {list(shape)}, expected "
                                           f"{out.dtype} {list(out.shape)} (from the metadata)")
            self._fill(member, out, name)

    def chunks(self, name: str):
        """``(first element, 1-D chunk)`` pairs of the flattened array ``name``, in order."""
        member, dtype, shape = self._open(name)
        with member:
            total = int(np.prod(shape, dtype=np.int64))
            step = max(1, CHUNK_BYTES // max(dtype.itemsize, 1))
            for first in range(0, total, step):
                chunk = np.empty(min(step, total - first), dtype)
                self._fill(member, chunk, name)
                yield first, chunk

    def _fill(self, member, out: np.ndarray, name: str) -> None:
        view = memoryview(out.reshape(-1).view(np.uint8)) if out.size else memoryview(b"")
        done = 0
        while done < len(view):
            try:
                got = member.readinto(view[done:done + CHUNK_BYTES])
            except ZIP_ERRORS as err:
                raise PartitionFormatError(self.path, f"array {name!r} is truncated or corrupt: {err}") from None
            if not got:
                raise PartitionFormatError(self.path, f"array {name!r} ends early (a truncated file)")
            done += got


def check_part_arrays(path, info: PartitionSetInfo, part: int, arrays: dict[str, np.ndarray]) -> None:
    """Dtypes, shapes and value ranges of the arrays given (any subset) against the metadata."""
    _check_arrays(path, info, part, arrays)


def value_ranges(info: PartitionSetInfo) -> dict[str, tuple[int, int]]:
    """``{array: (low, high)}``: the values an integer array of a part may hold (``low <= v < high``)."""
    return {"indices": (0, info.num_nodes), "halo_indices": (0, info.num_nodes), "halo_ids": (0, info.num_nodes),
            "halo_eids": (0, info.num_edges), "y": (0, info.num_classes), "orig_ids": (0, info.num_nodes),
            "eids": (0, info.num_edges), "out_degree": (0, info.num_edges + 1),
            "halo_out_degree": (0, info.num_edges + 1)}


def check_range(path, info: PartitionSetInfo, name: str, values: np.ndarray) -> None:
    """Refuse ``values`` of array ``name`` (all of it, or a chunk) outside its range."""
    if values.size:
        low, high = value_ranges(info)[name]
        a_min, a_max = int(values.min()), int(values.max())
        _require(low <= a_min and a_max < high, path, f"array {name!r} holds values in {a_min}..{a_max}, "
                 f"outside {low}..{high - 1}")


def _check_arrays(path, info: PartitionSetInfo, part: int, arrays: dict[str, np.ndarray]) -> None:
    """Dtypes, shapes and value ranges of the arrays present against the metadata."""
    n, e, h = info.count(part, "nodes"), info.count(part, "edges"), info.count(part, "halo")
    k = info.count(part, "halo_edges")
    first, end = info.book.node_range(part)
    shapes = {"orig_ids": (n,), "indptr": (n + 1,), "indices": (e,), "eids": (e,), "x": (n, info.num_features),
              "y": (n,), "train_mask": (n,), "val_mask": (n,), "test_mask": (n,), "out_degree": (n,),
              "halo_ids": (h,), "halo_out_degree": (h,), "halo_indptr": (h + 1,), "halo_indices": (k,),
              "halo_eids": (k,)}
    kinds = {"x": "f", "train_mask": "b", "val_mask": "b", "test_mask": "b"}
    for name, array in arrays.items():
        _require(array.shape == shapes[name], path, f"array {name!r} has shape {list(array.shape)}, the metadata "
                 f"implies {list(shapes[name])}")
        _require(array.dtype.kind == kinds.get(name, "i"), path, f"array {name!r} has dtype {array.dtype}")
    if "x" in arrays:
        _require(str(arrays["x"].dtype) == info.feature_dtype, path,
                 f"features are {arrays['x'].dtype}, the metadata says {info.feature_dtype}")
        _require(bool(np.isfinite(arrays["x"]).all()), path, "array 'x' holds non-finite features (NaN or infinity): "
                 "training on them ends in a NaN loss")
    for name, total in (("indptr", e), ("halo_indptr", k)):
        if name in arrays:
            indptr = arrays[name]
            _require(int(indptr[0]) == 0 and int(indptr[-1]) == total and bool(np.all(indptr[1:] >= indptr[:-1])),
                     path, f"{name} must rise from 0 to {total} (the part's {'halo ' if 'halo' in name else ''}edges)")
    for name in value_ranges(info):
        if name in arrays:
            check_range(path, info, name, arrays[name])
    if "halo_ids" in arrays and h:
        halo = arrays["halo_ids"]
        _require(bool(np.all(halo[1:] > halo[:-1])) and not bool(np.any((halo >= first) & (halo < end))), path,
                 "halo_ids must be sorted, distinct and owned by other partitions")


def original_ids(info: PartitionSetInfo, *, verify: bool = True) -> np.ndarray:
    """The original graph's id of every global id of the set (``int64[num_nodes]``): what maps a
    partitioned run's node ids back (its inverse, ``argsort``, maps original ids in)."""
    return np.concatenate([load_part_arrays(info, p, ("orig_ids",), verify=verify)["orig_ids"]
                           for p in range(info.num_parts)])
