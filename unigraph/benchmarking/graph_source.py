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
(``max_nodes``) are checked before large allocations; every error names the file and the problem.
"""
from __future__ import annotations

import dataclasses
import pathlib
import pickle
import zipfile

import numpy as np
import torch

from unigraph.graph import Graph

MAX_FILE_BYTES = 64 * 2**30
MAX_EDGES = 2**33
MAX_NODES = 2**31 - 1
GENERATORS = ("rmat", "uniform", "arxiv_like")
DGL_MAGIC = (0xDD2E4FF046B4A13F).to_bytes(8, "little")
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
def _fail(path: pathlib.Path, problem: str) -> GraphSourceError:
    return GraphSourceError(f"{path}: {problem}")


def _edge_index_graph(path, edge_index, num_nodes, max_edges: int, max_nodes: int) -> Graph:
    """A Graph from an edge_index array/tensor, with the checks and bounds every format shares
    (shape and size checked before an array is copied or read in full)."""
    if not isinstance(edge_index, (torch.Tensor, np.ndarray)):
        raise _fail(path, f"edge_index must be a tensor or array, got {type(edge_index).__name__}")
    if len(edge_index.shape) != 2 or edge_index.shape[0] != 2:
        raise _fail(path, f"edge_index must have shape [2, E], got {list(edge_index.shape)}")
    if edge_index.shape[1] > max_edges:
        raise _fail(path, f"{edge_index.shape[1]:,} edges exceed the limit of {max_edges:,} (--max-edges)")
    if isinstance(edge_index, np.ndarray):
        if edge_index.dtype.kind not in "iu":
            raise _fail(path, f"edge_index must hold integers, got dtype {edge_index.dtype}")
        edge_index = torch.from_numpy(np.array(edge_index, dtype=np.int64))  # a copy: memory-mapped input is read-only
    if num_nodes is not None:
        num_nodes = _count(path, num_nodes, max_nodes)
    elif edge_index.numel() and not edge_index.is_floating_point() and int(edge_index.max()) >= max_nodes:
        raise _fail(path, f"node ids up to {int(edge_index.max()):,} imply more than the limit of {max_nodes:,} nodes")
    try:
        return Graph(edge_index, num_nodes=num_nodes)
    except (TypeError, ValueError) as err:
        raise _fail(path, f"not a valid edge_index: {err}") from err


def _count(path, value, max_nodes: int) -> int:
    """A node count stored as a Python int or a one-element tensor/array, within bounds."""
    if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim == 0 and value.dtype not in (torch.bool, np.bool_):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= max_nodes:
        raise _fail(path, f"num_nodes must be an integer in [0, {max_nodes}], got {value!r}")
    return int(value)


def _npy_member(path, archive: zipfile.ZipFile, member: str, max_elements: int) -> np.ndarray:
    """One array of an .npz, its header checked (dtype, shape within bounds) before its data is read."""
    with archive.open(member) as handle:
        try:
            version = np.lib.format.read_magic(handle)
            header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            if version not in header:
                raise ValueError(f"unsupported .npy version {version}")
            shape, _, dtype = header[version](handle)
        except ValueError as err:
            raise _fail(path, f"member {member!r} is not a readable .npy array: {err}") from err
    if dtype.hasobject:
        raise _fail(path, f"member {member!r} holds Python objects (pickle), which are not read")
    if int(np.prod(shape, dtype=np.int64)) > max_elements:
        raise _fail(path, f"member {member!r} has shape {shape}, more than the limit of {max_elements:,} elements")
    with archive.open(member) as handle:
        try:
            return np.lib.format.read_array(handle, allow_pickle=False)
        except (ValueError, EOFError, OSError) as err:
            raise _fail(path, f"member {member!r} is truncated or corrupt: {err}") from err


def _scipy_graph(path, arrays: dict, max_edges: int, max_nodes: int) -> Graph:
    fmt = arrays["format"].item()
    fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
    if fmt not in SCIPY_FORMATS:
        raise _fail(path, f"scipy sparse format {fmt!r} is not supported (use one of {SCIPY_FORMATS})")
    shape = arrays.get("shape")
    if shape is None or shape.shape != (2,) or shape.dtype.kind not in "iu" or (shape < 0).any() \
            or (shape > max_nodes).any():
        raise _fail(path, f"a scipy matrix needs a shape of two integers in [0, {max_nodes}], got {shape!r}")
    rows, cols = int(shape[0]), int(shape[1])
    if fmt == "coo":
        src, dst = arrays.get("row"), arrays.get("col")
        if src is None or dst is None or src.shape != dst.shape or src.ndim != 1:
            raise _fail(path, "a coo matrix needs 1-D 'row' and 'col' arrays of equal length")
    else:
        indptr, indices = arrays.get("indptr"), arrays.get("indices")
        major = rows if fmt == "csr" else cols
        if indptr is None or indices is None or indptr.ndim != 1 or indices.ndim != 1 \
                or indptr.dtype.kind not in "iu" or indices.dtype.kind not in "iu":
            raise _fail(path, f"a {fmt} matrix needs 1-D integer 'indptr' and 'indices' arrays")
        indptr = indptr.astype(np.int64)
        if indptr.shape[0] != major + 1 or indptr[0] != 0 or indptr[-1] != indices.shape[0] \
                or (np.diff(indptr) < 0).any():
            raise _fail(path, f"{fmt} 'indptr' must have {major + 1} non-decreasing entries from 0 to "
                              f"len(indices)={indices.shape[0]}")
        expanded = np.repeat(np.arange(major, dtype=np.int64), np.diff(indptr))
        src, dst = (expanded, indices) if fmt == "csr" else (indices, expanded)
    edge_index = np.stack([np.asarray(src).astype(np.int64), np.asarray(dst).astype(np.int64)])
    if rows == cols:
        return _edge_index_graph(path, edge_index, rows, max_edges, max_nodes)
    if edge_index.shape[1] > max_edges:
        raise _fail(path, f"{edge_index.shape[1]:,} edges exceed the limit of {max_edges:,} (--max-edges)")
    try:
        return Graph(torch.from_numpy(edge_index), num_src_nodes=rows, num_dst_nodes=cols)
    except (TypeError, ValueError) as err:
        raise _fail(path, f"not a valid sparse matrix: {err}") from err


def _read_npz(path, max_edges: int, max_nodes: int) -> Graph:
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as err:
        raise _fail(path, f"not a readable .npz archive: {err}") from err
    with archive:
        members = {name[:-4]: name for name in archive.namelist() if name.endswith(".npy")}
        arrays = {key: _npy_member(path, archive, name, 2 * max_edges + 2) for key, name in members.items()}
    if "format" in arrays:
        return _scipy_graph(path, arrays, max_edges, max_nodes)
    num_nodes = arrays.get("num_nodes")
    if "edge_index" in arrays:
        edge_index = arrays["edge_index"]
    elif "src" in arrays and "dst" in arrays:
        if arrays["src"].shape != arrays["dst"].shape or arrays["src"].ndim != 1:
            raise _fail(path, f"'src' and 'dst' must be 1-D of equal length, got {arrays['src'].shape} and "
                              f"{arrays['dst'].shape}")
        edge_index = np.stack([arrays["src"], arrays["dst"]])
    else:
        raise _fail(path, f"an .npz graph needs 'edge_index' (or 'src' and 'dst'), or a scipy sparse matrix; "
                          f"found arrays {sorted(arrays)}")
    return _edge_index_graph(path, edge_index, num_nodes, max_edges, max_nodes)


def _pyg_safe_globals() -> list:
    """PyG's classes a saved ``Data`` consists of (constructed from tensors and plain values)."""
    import importlib.util
    if importlib.util.find_spec("torch_geometric") is None:
        return []
    from torch_geometric.data import Data
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage
    return [Data, DataEdgeAttr, DataTensorAttr, GlobalStorage]


def _read_torch(path, max_edges: int, max_nodes: int) -> Graph:
    try:
        with torch.serialization.safe_globals(_pyg_safe_globals()):
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        first = next((line for line in lines if "global" in line.lower() and "load" in line.lower() and "weights_only" not in line), lines[-1] if lines else "")[:300]
        raise _fail(path, "holds objects a safe load refuses (only tensors, plain containers and PyG Data are "
                          f"read; no arbitrary pickle): {first}") from err
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile) as err:
        raise _fail(path, f"not a readable torch.save file (truncated or corrupt?): {type(err).__name__}: "
                          f"{str(err).splitlines()[0][:300] if str(err) else ''}") from err
    if isinstance(obj, torch.Tensor):
        return _edge_index_graph(path, obj, None, max_edges, max_nodes)
    if isinstance(obj, dict):
        if "edge_index" not in obj:
            raise _fail(path, f"a dict needs an 'edge_index' entry, found keys {sorted(map(str, obj))[:10]}")
        return _edge_index_graph(path, obj["edge_index"], obj.get("num_nodes"), max_edges, max_nodes)
    if hasattr(obj, "edge_index") and type(obj).__module__.startswith("torch_geometric."):
        return _edge_index_graph(path, obj.edge_index, obj.num_nodes, max_edges, max_nodes)
    raise _fail(path, f"holds a {type(obj).__name__}; expected an edge_index tensor, a dict with 'edge_index', "
                      "or a PyG Data")


def _read_dgl(path, max_edges: int, max_nodes: int) -> Graph:
    from unigraph._optional import require_dgl
    dgl = require_dgl(f"reading the DGL graph file {path}")
    try:
        graphs, _ = dgl.load_graphs(str(path))
    except dgl.DGLError as err:
        raise _fail(path, f"not a readable DGL graph file: {str(err).strip().splitlines()[0][:300]}") from err
    if len(graphs) != 1:
        raise _fail(path, f"holds {len(graphs)} graphs; unigraph bench reads a file with one")
    graph = graphs[0]
    if graph.num_edges() > max_edges or graph.num_nodes() > max_nodes:
        raise _fail(path, f"{graph.num_nodes():,} nodes / {graph.num_edges():,} edges exceed the limits "
                          f"({max_nodes:,} / {max_edges:,})")
    return Graph.from_dgl(graph)


def load(source: str, *, max_file_bytes: int = MAX_FILE_BYTES, max_edges: int = MAX_EDGES,
         max_nodes: int = MAX_NODES) -> Loaded:
    """The graph at ``source`` (a file, see the module docstring) or generated from a spec."""
    if source.startswith("planetoid:"):
        return planetoid(source)
    path = pathlib.Path(source)
    if not path.exists():
        if ":" in source:
            return generate(source, max_edges)
        raise GraphSourceError(f"{source}: no such file, and not a generator spec (NAME:N:DEG[:SEED], NAME one of "
                               f"{', '.join(GENERATORS)})")
    if not path.is_file():
        raise _fail(path, "is not a regular file")
    size = path.stat().st_size
    if size > max_file_bytes:
        raise _fail(path, f"is {size:,} bytes, over the limit of {max_file_bytes:,} (--max-file-bytes)")
    with open(path, "rb") as handle:
        head = handle.read(8)
    if head.startswith(DGL_MAGIC):
        graph, kind = _read_dgl(path, max_edges, max_nodes), "DGL graph file"
    elif head.startswith(NPY_MAGIC):
        try:
            array = np.load(path, allow_pickle=False, mmap_mode="r")
        except ValueError as err:
            raise _fail(path, f"not a readable .npy array: {err}") from err
        graph, kind = _edge_index_graph(path, np.asarray(array), None, max_edges, max_nodes), "numpy edge_index"
    elif head.startswith(ZIP_MAGIC):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except zipfile.BadZipFile as err:
            raise _fail(path, f"starts like a zip archive but is truncated or corrupt: {err}") from err
        if any(name.endswith("data.pkl") for name in names):
            graph, kind = _read_torch(path, max_edges, max_nodes), "torch.save file"
        elif names and all(name.endswith(".npy") for name in names):
            graph, kind = _read_npz(path, max_edges, max_nodes), "numpy .npz"
        else:
            raise _fail(path, "a zip archive that is neither a torch.save file nor an .npz of arrays")
    elif head[:2] in (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05"):
        graph, kind = _read_torch(path, max_edges, max_nodes), "torch.save file (legacy format)"
    else:
        raise _fail(path, f"unrecognized format (first bytes {head.hex()}); expected a torch.save .pt, a numpy "
                          ".npz/.npy, a scipy .npz or a DGL graph file")
    stats = f"{graph.num_src_nodes:,} nodes, {graph.num_edges:,} edges" if not graph.is_bipartite else \
        f"{graph.num_src_nodes:,} x {graph.num_dst_nodes:,} nodes (bipartite), {graph.num_edges:,} edges"
    return Loaded(graph, path.stem, f"{kind} {path.name}: {stats}")
