"""The parts of a partition set in the chunked layout: each part a chunked graph directory, mapped when loaded.

A set written with ``layout="chunked"`` (``partitions.json`` says so; see
:mod:`unigraph.distributed.format`) keeps part ``p`` in the directory ``part-<p>/``, a chunked
graph (:mod:`unigraph.storage.chunked`) whose arrays are the part's (the same arrays as a
``part-<p>.npz``, the structure under the chunked names ``in_indptr``, ``in_indices``,
``in_eids``), whose id spaces are the whole set's nodes and edges, and whose ``meta`` holds the
set id and part number. ``partitions.json`` keeps the SHA-256 of each part's manifest, which keeps
the SHA-256 of every chunk: one chain of checksums from the set's metadata to every byte.

Loading (:func:`read_part`) maps the arrays instead of reading them (a part larger than this
machine's memory trains through the page cache, and :class:`~unigraph.distributed.local.LocalPartition`
takes the mapped arrays as they are), after checking the manifest's checksum against the
metadata, the part's identity and counts, and each array's chunks as it is first used.
"""
from __future__ import annotations

import pathlib

import numpy as np

from unigraph.data import limits
from unigraph.data.checked_file import sha256_file
from unigraph.data.errors import DataFileError
from unigraph.storage.chunked import DEFAULT_CHUNK_BYTES, MANIFEST, ChunkedGraph, ChunkedWriter, read_manifest

# the partition format's array names -> the chunked format's
CHUNKED_NAMES = {"indptr": "in_indptr", "indices": "in_indices", "eids": "in_eids"}
PART_ARRAYS = ("orig_ids", "indptr", "indices", "eids", "x", "y", "train_mask", "val_mask", "test_mask", "out_degree",
               "halo_ids", "halo_out_degree", "halo_indptr", "halo_indices", "halo_eids")


def part_directory(directory: pathlib.Path, part: int) -> pathlib.Path:
    return directory / f"part-{part}"


class PartWriter:
    """Writes one part a block at a time (:meth:`append` by the partition format's names), then
    :meth:`finish` returns its entry for ``partitions.json``."""

    def __init__(self, directory: pathlib.Path, set_id: str, part: int, *, num_owned: int, num_nodes: int,
                 num_edges: int, num_features: int, feature_dtype, num_classes: int, eids: bool,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES):
        self.path = part_directory(directory, part)
        self.num_classes = num_classes
        ids = np.int32 if num_nodes < 2 ** 31 else np.int64
        self.writer = ChunkedWriter(self.path, name=f"part {part}", num_nodes=num_owned, chunk_bytes=chunk_bytes,
                                    id_space=num_nodes, eid_space=num_edges, meta={"set_id": set_id, "part": part})
        shapes = {"orig_ids": (np.int64, (num_owned,)), "indptr": (np.int64, (num_owned + 1,)),
                  "indices": (ids, (None,)), "eids": (np.int64, (None,)), "x": (feature_dtype, (num_owned, num_features)),
                  "y": (np.int64, (num_owned,)), "out_degree": (np.int64, (num_owned,)),
                  "halo_ids": (np.int64, (None,)), "halo_out_degree": (np.int64, (None,)),
                  "halo_indptr": (np.int64, (None,)), "halo_indices": (ids, (None,)), "halo_eids": (np.int64, (None,)),
                  **{m: (np.bool_, (num_owned,)) for m in ("train_mask", "val_mask", "test_mask")}}
        if not eids:
            shapes.pop("eids")
            shapes.pop("halo_eids")
        self.arrays = {name: self.writer.array(CHUNKED_NAMES.get(name, name), *spec) for name, spec in shapes.items()}
        self.arrays["indptr"].append(np.zeros(1, dtype=np.int64))
        self.arrays["halo_indptr"].append(np.zeros(1, dtype=np.int64))
        self.edges = 0
        self.halo_edges = 0

    def append(self, **blocks: np.ndarray) -> None:
        """Append rows; ``indptr`` and ``halo_indptr`` are given as the rows' in-degrees
        (``degrees``, ``halo_degrees``: their pointers follow)."""
        for name, block in blocks.items():
            if name in ("degrees", "halo_degrees"):
                pointers, count = ("indptr", "edges") if name == "degrees" else ("halo_indptr", "halo_edges")
                ends = getattr(self, count) + np.cumsum(block, dtype=np.int64)
                self.arrays[pointers].append(ends)
                setattr(self, count, int(ends[-1]) if len(ends) else getattr(self, count))
            else:
                self.arrays[name].append(block)

    def finish(self) -> dict:
        with self.writer:
            self.writer.finish(num_edges=self.edges, num_classes=self.num_classes)
        manifest = self.path / MANIFEST
        stored = sum(limits.regular_size(self.path / entry["file"]) for entry in self.writer.entries.values())
        return {"file": self.path.name, "sha256": sha256_file(manifest), "bytes": stored}

    def abort(self) -> None:
        self.writer.abort()


def write_part(directory: pathlib.Path, set_id: str, part: int, arrays: dict[str, np.ndarray], *, num_nodes: int,
               num_edges: int, num_classes: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> dict:
    """Write a part held in memory (the arrays :func:`unigraph.distributed.format.write_part` takes)."""
    writer = PartWriter(directory, set_id, part, num_owned=len(arrays["orig_ids"]), num_nodes=num_nodes,
                        num_edges=num_edges, num_features=arrays["x"].shape[1], feature_dtype=arrays["x"].dtype,
                        num_classes=num_classes, eids="eids" in arrays, chunk_bytes=chunk_bytes)
    try:
        blocks = {name: arrays[name] for name in PART_ARRAYS if name in arrays and name not in ("indptr", "halo_indptr")}
        writer.append(degrees=np.diff(arrays["indptr"]), halo_degrees=np.diff(arrays["halo_indptr"]), **blocks)
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


def _identity(directory: pathlib.Path) -> str:
    """'set S, part P' as a part's manifest says, or why it cannot be read (error messages only)."""
    try:
        meta = read_manifest(directory)["meta"]
        return f"set {meta.get('set_id')}, part {meta.get('part')}"
    except (DataFileError, OSError, ValueError) as err:
        return f"unreadable ({type(err).__name__}: {err})"


def open_part(info, part: int, *, verify: bool, error: type[DataFileError]) -> ChunkedGraph:
    """Part ``part`` of the set ``info`` as a :class:`ChunkedGraph`, its manifest checked against
    the metadata (checksum, identity, counts, shapes; its arrays are checked as they are first
    read); refusals are ``error``s naming the file."""
    directory = part_directory(info.directory, part)
    entry = info.parts[part]
    manifest = directory / MANIFEST
    if not directory.is_dir():
        raise FileNotFoundError(f"partition directory {directory} is missing (the set {info.set_id} has "
                                f"{info.num_parts} parts)")
    try:
        if not manifest.is_file():
            raise error(directory, f"holds no {MANIFEST}: its writing was interrupted (partition again)")
        if limits.regular_size(manifest) > 64 << 20 or sha256_file(manifest) != entry["sha256"]:
            raise error(manifest, f"does not match partitions.json (its SHA-256 differs): the part is corrupted or "
                                  f"belongs to another partition set; it identifies itself as {_identity(directory)}, "
                                  f"the metadata expects set {info.set_id}, part {part}")
        graph = ChunkedGraph(directory, verify=verify)
        meta, m = graph.meta, graph.manifest
        if (meta.get("set_id"), meta.get("part")) != (info.set_id, part):
            raise error(manifest, f"belongs to set {meta.get('set_id')}, part {meta.get('part')}; the metadata expects "
                                  f"set {info.set_id}, part {part}")
        expected = {"num_nodes": entry["nodes"], "num_edges": entry["edges"], "id_space": info.num_nodes,
                    "eid_space": info.num_edges, "num_classes": info.num_classes}
        for key, value in expected.items():
            if m[key] != value:
                raise error(manifest, f"has {key}={m[key]:,}; partitions.json implies {value:,}")
        shapes = {"x": ((entry["nodes"], info.num_features), info.feature_dtype), "halo_ids": ((entry["halo"],), None),
                  "halo_out_degree": ((entry["halo"],), None), "halo_indptr": ((entry["halo"] + 1,), None),
                  "halo_indices": ((entry["halo_edges"],), "ids")}
        for name, (shape, dtype) in shapes.items():
            if not graph.has(name):
                raise error(directory, f"has no array {name!r}" + (
                    " (a part written before parts kept their halo's in-edges: partition again)"
                    if name.startswith("halo_") else ""))
            if graph.shape(name) != shape or (dtype not in (None, "ids") and graph.dtype(name) != np.dtype(dtype)):
                raise error(manifest, f"array {name!r} is {graph.dtype(name)} {list(graph.shape(name))}; partitions.json "
                                      f"implies {dtype or 'int64'} {list(shape)}")
        if graph.nbytes() != entry["bytes"]:
            raise error(manifest, f"its arrays hold {graph.nbytes():,} bytes; partitions.json says {entry['bytes']:,}")
        return graph
    except error:
        raise
    except DataFileError as err:  # the chunked reader's refusals, as the partition format's
        raise error(err.path, err.problem) from None


def read_part(info, part: int, names, *, verify: bool, error: type[DataFileError]) -> dict[str, np.ndarray]:
    """The arrays ``names`` (the partition format's names) of part ``part`` of the set ``info``,
    mapped from disk and checked (see the module docstring); refusals are ``error``s naming the file."""
    graph = open_part(info, part, verify=verify, error=error)
    try:
        return {name: _array(graph, info, part, name, error) for name in names if name not in ("set_id", "part_id")}
    except error:
        raise
    except DataFileError as err:
        raise error(err.path, err.problem) from None


def _array(graph: ChunkedGraph, info, part: int, name: str, error) -> np.ndarray:
    chunked = CHUNKED_NAMES.get(name, name)
    if not graph.has(chunked):
        raise error(graph.directory, f"has no array {chunked!r}" + (
            " (the set was written without edge ids)" if name in ("eids", "halo_eids") else ""))
    array = graph.array(chunked)
    if name == "x":   # a server gathers feature rows in no order: no read-around per fault
        graph.mapped(chunked).advise_random()
    if name == "halo_ids":
        _check_halo(graph, info, part, error)
    return array


class MappedPart:
    """A chunked part read as :class:`unigraph.distributed.format.PartFile` reads a ``.npz`` part
    (``header``, ``read``, ``read_into``, ``chunks``, by the partition format's names), from its
    mapped arrays: what lets a graph server load chunked parts into shared memory as it loads
    ``.npz`` ones (:func:`unigraph.distributed.local.load_machine`). The caller checks values
    (:func:`unigraph.distributed.format.check_part_arrays`), as with a ``PartFile``."""

    CHUNK_BYTES = 1 << 24

    def __init__(self, info, part: int, *, verify: bool, error: type[DataFileError]):
        self.info, self.part, self.error = info, part, error
        self.path = part_directory(info.directory, part)
        self.graph = open_part(info, part, verify=verify, error=error)

    def close(self) -> None:
        self.graph = None

    def __enter__(self) -> "MappedPart":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _mapped(self, name: str) -> np.ndarray:
        try:
            return _array(self.graph, self.info, self.part, name, self.error)
        except self.error:
            raise
        except DataFileError as err:
            raise self.error(err.path, err.problem) from None

    def header(self, name: str) -> tuple[np.dtype, tuple[int, ...]]:
        chunked = CHUNKED_NAMES.get(name, name)
        if not self.graph.has(chunked):
            self._mapped(name)   # the refusal naming what is missing
        return self.graph.dtype(chunked), self.graph.shape(chunked)

    def read(self, name: str) -> np.ndarray:
        return np.array(self._mapped(name))

    def read_into(self, name: str, out: np.ndarray) -> None:
        array = self._mapped(name)
        if array.dtype != out.dtype or array.shape != out.shape:
            raise self.error(self.path, f"array {name!r} is {array.dtype} {list(array.shape)}, expected "
                                        f"{out.dtype} {list(out.shape)} (from the metadata)")
        out[...] = array

    def chunks(self, name: str):
        """``(first element, 1-D chunk)`` pairs of the flattened array ``name``, in order."""
        flat = self._mapped(name).reshape(-1)
        step = max(1, self.CHUNK_BYTES // max(flat.dtype.itemsize, 1))
        for first in range(0, flat.size, step):
            yield first, np.array(flat[first:first + step])


def _check_halo(graph: ChunkedGraph, info, part: int, error) -> None:
    """Halo ids must rise strictly and belong to other parts (streamed a chunk at a time)."""
    first, end = info.offsets[part], info.offsets[part + 1]
    last = -1
    for _, block in graph.chunks("halo_ids", check=False):
        if block.size and (int(block[0]) <= last or bool(np.any(block[1:] <= block[:-1]))
                           or bool(np.any((block >= first) & (block < end)))):
            raise error(graph.path("halo_ids"), "halo_ids must be sorted, distinct and owned by other partitions")
        last = int(block[-1]) if block.size else last
