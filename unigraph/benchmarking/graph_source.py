"""A graph for ``unigraph bench``: read safely from a file, or generated from a spec.

Sources (the format is recognized from the file's first bytes, not its name):

* ``torch.save`` file (``.pt``): an edge_index tensor ``[2, E]``, a dict with ``"edge_index"``
  (and optionally ``"num_nodes"``), or a saved PyG ``Data``. Read with ``torch.load(...,
  weights_only=True)``; for a ``Data`` only PyG's own four storage classes are allowed besides
  tensors and plain values (no arbitrary pickle).
* numpy ``.npz``: ``edge_index`` ``[2, E]`` (or ``src`` and ``dst``), optionally ``num_nodes``; or a
  ``scipy.sparse.save_npz`` matrix (csr, csc or coo; rows are sources). Read without pickle, and
  every array's header (shape, dtype) is checked before its data is read. ``.npy``: one
  edge_index array.
* a DGL graph file (``dgl.save_graphs``; DGL's own binary format, no pickle): needs DGL importable.
* a generator spec: ``rmat:N:DEG``, ``uniform:N:DEG`` or ``arxiv_like:N:DEG`` (N nodes, N x DEG
  edges; ``arxiv_like`` draws N x DEG / 2 undirected pairs), with an optional ``:SEED``.
* a real citation graph: ``planetoid:NAME:ROOT`` (Cora, CiteSeer or PubMed from the folder ROOT of
  Planetoid's raw ``ind.<name>.*`` files, read by :func:`unigraph.data.Planetoid`).

Bounds: the file size (``max_file_bytes``), the edge count (``max_edges``) and node count
(``max_nodes``) are checked before large allocations, and so is everything a file makes the
reader build beyond what it stores (inflated ``.npz`` members, the row pointers ``num_nodes``
implies) against :func:`unigraph.data.limits.allowance` (``max(64 MiB, 64 x the file's size)``;
``max_load_bytes`` / ``--max-load-bytes`` or ``UNIGRAPH_MAX_LOAD_BYTES`` replace it). Tensors must
be data the file holds (no stride-0 or overlapping views), only regular files are read, and a
DGL file is read in a child process (:mod:`unigraph.data.dgl_file`: DGL's reader can abort the
process on a damaged file). Every error names the file and the problem.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import zipfile

import numpy as np
import torch

from unigraph.data import limits
from unigraph.data.dgl_file import DGL_MAGIC, read_dgl_graph
from unigraph.data.errors import DataFileError
from unigraph.data.npz_file import ZIP_ERRORS, member_names, read_npy, read_npz
from unigraph.data.torch_file import load_torch_archive
from unigraph.user_graph import Graph

MAX_FILE_BYTES = 64 * 2**30
MAX_EDGES = 2**33
MAX_NODES = 2**31 - 1
GENERATORS = ("rmat", "uniform", "arxiv_like")
NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
SCIPY_FORMATS = ("csr", "csc", "coo")


class GraphSourceError(ValueError):
    """A file or spec that does not hold a graph ``unigraph bench`` can read (the message names it)."""


@dataclasses.dataclass
class Loaded:
    graph: Graph
    name: str        # a short name for output files
    description: str  # what was read or generated, for the report


# ---------------------------------------------------------------------- specs
def planetoid(spec: str) -> Loaded:
    """``planetoid:NAME:ROOT``: the graph of a Planetoid dataset (both directions of every edge)."""
    parts = spec.split(":", 2)
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise GraphSourceError(f"{spec!r}: a Planetoid spec is planetoid:NAME:ROOT, e.g. "
                               "planetoid:cora:../shared/datasets/planetoid/raw")
    from unigraph.data import Planetoid
    try:
        ds = Planetoid(parts[2], parts[1])
    except (FileNotFoundError, ValueError) as err:  # missing, unknown name, damaged file (DataFileError)
        raise GraphSourceError(f"{spec!r}: {err}") from err
    graph = ds.graph
    return Loaded(graph, parts[1].lower(), f"Planetoid {ds.name} from {parts[2]}: {graph.num_src_nodes:,} nodes, "
                                           f"{graph.num_edges:,} directed edges")



def parse_spec(spec: str, max_edges: int = MAX_EDGES) -> tuple[str, int, int, int]:
    """``(generator, nodes, degree, seed)`` of ``NAME:N:DEG[:SEED]``; GraphSourceError if malformed."""
    parts = spec.split(":")
    usage = f"a generator spec is NAME:N:DEG[:SEED] with NAME one of {', '.join(GENERATORS)}, e.g. rmat:100000:16"
    if parts[0] not in GENERATORS or len(parts) not in (3, 4):
        raise GraphSourceError(f"{spec!r} is neither a file nor a generator spec: {usage}")
    values = []
    for label, text in zip(("N", "DEG", "SEED"), parts[1:]):
        if not text.isdigit():
            raise GraphSourceError(f"bad generator spec {spec!r}: {label} must be a non-negative integer, got {text!r}")
        values.append(int(text))
    nodes, degree = values[0], values[1]
    seed = values[2] if len(values) == 3 else 0
    if not 2 <= nodes <= MAX_NODES:
        raise GraphSourceError(f"bad generator spec {spec!r}: N must be in [2, {MAX_NODES}], got {nodes}")
    if not 1 <= degree or nodes * degree > max_edges:
        raise GraphSourceError(f"bad generator spec {spec!r}: DEG must be >= 1 with N x DEG <= {max_edges:,} edges, "
                               f"got {degree} ({nodes * degree:,} edges)")
    return parts[0], nodes, degree, seed


def generate(spec: str, max_edges: int = MAX_EDGES) -> Loaded:
    name, nodes, degree, seed = parse_spec(spec, max_edges)
    if name == "rmat":
        from unigraph.data import rmat
        graph = rmat(nodes, nodes * degree, seed=seed)
        what = f"R-MAT (Graph500 parameters, nodes permuted), {nodes:,} nodes, {nodes * degree:,} edges, seed {seed}"
    elif name == "uniform":
        gen = torch.Generator().manual_seed(seed)
        graph = Graph(torch.randint(0, nodes, (2, nodes * degree), generator=gen), num_nodes=nodes)
        what = f"uniform random, {nodes:,} nodes, {nodes * degree:,} edges (endpoints uniform), seed {seed}"
    else:
        from unigraph.data.arxiv_like import arxiv_like
        graph = arxiv_like(nodes, max(1, nodes * degree // 2), 1, 2, seed=seed).graph
        what = (f"arxiv_like (power-law degrees, simple, undirected), {nodes:,} nodes, {graph.num_edges:,} "
                f"directed edges, seed {seed}")
    return Loaded(graph, spec.replace(":", "_"), what)


# ---------------------------------------------------------------------- files
@dataclasses.dataclass(frozen=True)
class _Limits:
    """The file being read and the bounds its contents are checked against."""

    path: pathlib.Path
    file_bytes: int
    max_edges: int
    max_nodes: int
    max_load_bytes: int | None

    def fail(self, problem: str) -> GraphSourceError:
        return GraphSourceError(f"{self.path}: {problem}")

    def allocation(self, what: str, needed_bytes: int) -> None:
        """Refuse ``what`` unless its bytes fit the file's allowance (:mod:`unigraph.data.limits`)."""
        try:
            limits.check_allocation(self.path, what, needed_bytes, self.file_bytes, override=self.max_load_bytes,
                                    flag="--max-load-bytes")
        except DataFileError as err:
            raise GraphSourceError(str(err)) from None

    def nodes(self, count: int) -> int:
        """``count`` nodes, within ``max_nodes`` and the allowance (8 bytes of row pointers each)."""
        if count > self.max_nodes:
            raise self.fail(f"{count:,} nodes are more than the limit of {self.max_nodes:,}")
        self.allocation(f"num_nodes = {count:,} (8 bytes of row pointers per node)", 8 * (count + 1))
        return count


def _edge_index_graph(b: _Limits, edge_index, num_nodes) -> Graph:
    """A Graph from an edge_index array/tensor, with the checks and bounds every format shares
    (shape and size checked before an array is copied or read in full)."""
    if not isinstance(edge_index, (torch.Tensor, np.ndarray)):
        raise b.fail(f"edge_index must be a tensor or array, got {type(edge_index).__name__}")
    if len(edge_index.shape) != 2 or edge_index.shape[0] != 2:
        raise b.fail(f"edge_index must have shape [2, E], got {list(edge_index.shape)}")
    if edge_index.shape[1] > b.max_edges:
        raise b.fail(f"{edge_index.shape[1]:,} edges exceed the limit of {b.max_edges:,} (--max-edges)")
    b.allocation(f"{edge_index.shape[1]:,} edges (16 bytes each as int64 pairs)", 16 * edge_index.shape[1])
    if isinstance(edge_index, np.ndarray):
        if edge_index.dtype.kind not in "iu":
            raise b.fail(f"edge_index must hold integers, got dtype {edge_index.dtype}")
        edge_index = torch.from_numpy(np.array(edge_index, dtype=np.int64))  # a copy: memory-mapped input is read-only
    if num_nodes is not None:
        num_nodes = b.nodes(_count(b, num_nodes))
    elif edge_index.numel() and not edge_index.is_floating_point() and edge_index.dtype != torch.bool:
        largest = int(edge_index.max())
        if largest >= b.max_nodes:
            raise b.fail(f"node ids up to {largest:,} imply more than the limit of {b.max_nodes:,} nodes")
        b.nodes(largest + 1)
    try:
        return Graph(edge_index, num_nodes=num_nodes)
    except (TypeError, ValueError) as err:
        raise b.fail(f"not a valid edge_index: {err}") from err


def _count(b: _Limits, value) -> int:
    """A node count stored as a Python int or a one-element tensor/array."""
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim == 0 and value.dtype not in (torch.bool, np.bool_):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= b.max_nodes:
        raise b.fail(f"num_nodes must be an integer in [0, {b.max_nodes}], got {value!r}")
    return int(value)


def _scipy_graph(b: _Limits, arrays: dict) -> Graph:
    fmt = arrays["format"].item() if arrays["format"].size == 1 else None
    fmt = fmt.decode(errors="replace") if isinstance(fmt, bytes) else str(fmt)
    if fmt not in SCIPY_FORMATS:
        raise b.fail(f"scipy sparse format {fmt!r} is not supported (use one of {SCIPY_FORMATS})")
    shape = arrays.get("shape")
    if shape is None or shape.shape != (2,) or shape.dtype.kind not in "iu" or (shape < 0).any() \
            or (shape > b.max_nodes).any():
        raise b.fail(f"a scipy matrix needs a shape of two integers in [0, {b.max_nodes}], got {shape!r}")
    rows, cols = b.nodes(int(shape[0])), b.nodes(int(shape[1]))
    if fmt == "coo":
        src, dst = arrays.get("row"), arrays.get("col")
        if src is None or dst is None or src.shape != dst.shape or src.ndim != 1:
            raise b.fail("a coo matrix needs 1-D 'row' and 'col' arrays of equal length")
    else:
        indptr, indices = arrays.get("indptr"), arrays.get("indices")
        major = rows if fmt == "csr" else cols
        if indptr is None or indices is None or indptr.ndim != 1 or indices.ndim != 1 \
                or indptr.dtype.kind not in "iu" or indices.dtype.kind not in "iu":
            raise b.fail(f"a {fmt} matrix needs 1-D integer 'indptr' and 'indices' arrays")
        indptr = indptr.astype(np.int64)
        if indptr.shape[0] != major + 1 or indptr[0] != 0 or indptr[-1] != indices.shape[0] \
                or (np.diff(indptr) < 0).any():
            raise b.fail(f"{fmt} 'indptr' must have {major + 1} non-decreasing entries from 0 to "
                         f"len(indices)={indices.shape[0]}")
        expanded = np.repeat(np.arange(major, dtype=np.int64), np.diff(indptr))
        src, dst = (expanded, indices) if fmt == "csr" else (indices, expanded)
    if src.dtype.kind not in "iu" or dst.dtype.kind not in "iu":
        raise b.fail(f"a {fmt} matrix needs integer indices, got {src.dtype} and {dst.dtype}")
    if src.shape[0] > b.max_edges:
        raise b.fail(f"{src.shape[0]:,} edges exceed the limit of {b.max_edges:,} (--max-edges)")
    edge_index = np.stack([np.asarray(src).astype(np.int64), np.asarray(dst).astype(np.int64)])
    if rows == cols:
        return _edge_index_graph(b, edge_index, rows)
    try:
        return Graph(torch.from_numpy(edge_index), num_src_nodes=rows, num_dst_nodes=cols)
    except (TypeError, ValueError) as err:
        raise b.fail(f"not a valid sparse matrix: {err}") from err


def _read_npz(b: _Limits) -> Graph:
    try:  # compressed members are allowed (scipy.sparse.save_npz compresses by default), inflated within the allowance
        arrays = read_npz(b.path, file_bytes=b.file_bytes, compressed=True, max_elements=2 * b.max_edges + 2,
                          max_load_bytes=b.max_load_bytes, flag="--max-load-bytes")
    except DataFileError as err:
        raise GraphSourceError(str(err)) from None
    if "format" in arrays:
        return _scipy_graph(b, arrays)
    num_nodes = arrays.get("num_nodes")
    if "edge_index" in arrays:
        edge_index = arrays["edge_index"]
    elif "src" in arrays and "dst" in arrays:
        if arrays["src"].shape != arrays["dst"].shape or arrays["src"].ndim != 1:
            raise b.fail(f"'src' and 'dst' must be 1-D of equal length, got {arrays['src'].shape} and "
                         f"{arrays['dst'].shape}")
        edge_index = np.stack([arrays["src"], arrays["dst"]])
    else:
        raise b.fail(f"an .npz graph needs 'edge_index' (or 'src' and 'dst'), or a scipy sparse matrix; "
                     f"found arrays {sorted(arrays)}")
    return _edge_index_graph(b, edge_index, num_nodes)


def _pyg_safe_globals() -> list:
    """PyG's classes a saved ``Data`` consists of (constructed from tensors and plain values)."""
    import importlib.util
    if importlib.util.find_spec("torch_geometric") is None:
        return []
    from torch_geometric.data import Data
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage
    return [Data, DataEdgeAttr, DataTensorAttr, GlobalStorage]


def _read_torch(b: _Limits) -> Graph:
    try:
        with limits.open_regular(b.path) as handle:
            obj = load_torch_archive(b.path, handle, b.file_bytes, safe_globals=_pyg_safe_globals(),
                                     override=b.max_load_bytes, flag="--max-load-bytes")
    except DataFileError as err:
        raise GraphSourceError(str(err)) from None
    if isinstance(obj, torch.Tensor):
        return _edge_index_graph(b, obj, None)
    if isinstance(obj, dict):
        if "edge_index" not in obj:
            raise b.fail(f"a dict needs an 'edge_index' entry, found keys {sorted(map(str, obj))[:10]}")
        return _edge_index_graph(b, obj["edge_index"], obj.get("num_nodes"))
    if hasattr(obj, "edge_index") and type(obj).__module__.startswith("torch_geometric."):
        try:
            num_nodes = obj.num_nodes  # PyG's rule: the stored count, else the features' rows, else the ids
        except (TypeError, ValueError, AttributeError, RuntimeError) as err:
            raise b.fail(f"a PyG Data whose num_nodes cannot be read: {type(err).__name__}: {err}") from None
        return _edge_index_graph(b, obj.edge_index, num_nodes)
    raise b.fail(f"holds a {type(obj).__name__}; expected an edge_index tensor, a dict with 'edge_index', "
                 "or a PyG Data")


def _read_dgl(b: _Limits) -> Graph:
    try:
        src, dst, num_nodes = read_dgl_graph(b.path, max_nodes=b.max_nodes, max_edges=b.max_edges,
                                             max_load_bytes=b.max_load_bytes)
    except DataFileError as err:
        raise GraphSourceError(str(err)) from None
    return _edge_index_graph(b, np.stack([src, dst]), num_nodes)


def load(source: str, *, max_file_bytes: int = MAX_FILE_BYTES, max_edges: int = MAX_EDGES,
         max_nodes: int = MAX_NODES, max_load_bytes: int | None = None) -> Loaded:
    """The graph at ``source`` (a file, see the module docstring) or generated from a spec.
    ``max_load_bytes`` replaces the allowance of :mod:`unigraph.data.limits` (what a file may make
    the reader allocate beyond what it stores)."""
    if source.startswith("planetoid:"):
        return planetoid(source)
    path = pathlib.Path(source)
    if not os.path.lexists(path):
        if ":" in source:
            return generate(source, max_edges)
        raise GraphSourceError(f"{source}: no such file, and not a generator spec (NAME:N:DEG[:SEED], NAME one of "
                               f"{', '.join(GENERATORS)})")
    try:
        size = limits.regular_size(path)
    except (DataFileError, FileNotFoundError) as err:
        raise GraphSourceError(str(err)) from None
    b = _Limits(path, size, max_edges, max_nodes, max_load_bytes)
    if size > max_file_bytes:
        raise b.fail(f"is {size:,} bytes, over the limit of {max_file_bytes:,} (--max-file-bytes)")
    with limits.open_regular(path) as handle:
        head = handle.read(8)
    if head.startswith(DGL_MAGIC):
        graph, kind = _read_dgl(b), "DGL graph file"
    elif head.startswith(NPY_MAGIC):
        try:
            array = read_npy(path, max_elements=2 * max_edges + 2)  # mapped: its data must be in the file
        except DataFileError as err:
            raise GraphSourceError(str(err)) from None
        graph, kind = _edge_index_graph(b, np.asarray(array), None), "numpy edge_index"
    elif head.startswith(ZIP_MAGIC):
        try:
            names = member_names(path)
            with limits.open_regular(path) as handle, zipfile.ZipFile(handle) as archive:
                every = archive.namelist()
        except (DataFileError, *ZIP_ERRORS) as err:
            raise b.fail(f"starts like a zip archive but is truncated or corrupt: {err}") from err
        if any(name.endswith("data.pkl") for name in every):
            graph, kind = _read_torch(b), "torch.save file"
        elif every and len(names) == len(every):
            graph, kind = _read_npz(b), "numpy .npz"
        else:
            raise b.fail("a zip archive that is neither a torch.save file nor an .npz of arrays")
    elif head[:2] in (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05"):
        graph, kind = _read_torch(b), "torch.save file (legacy format)"
    else:
        raise b.fail(f"unrecognized format (first bytes {head.hex()}); expected a torch.save .pt, a numpy "
                     ".npz/.npy, a scipy .npz or a DGL graph file")
    stats = f"{graph.num_src_nodes:,} nodes, {graph.num_edges:,} edges" if not graph.is_bipartite else \
        f"{graph.num_src_nodes:,} x {graph.num_dst_nodes:,} nodes (bipartite), {graph.num_edges:,} edges"
    return Loaded(graph, path.stem, f"{kind} {path.name}: {stats}")
