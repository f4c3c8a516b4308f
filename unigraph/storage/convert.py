"""Chunked graphs from the other formats, and back.

* :func:`write_arrays` / :func:`write_dataset`: in-memory arrays, a
  :class:`~unigraph.data.NodeDataset` (the built-in generators, Planetoid, ``unigraph train``'s
  datasets) or a bare :class:`~unigraph.Graph`.
* :func:`from_ogb`: an OGB node dataset folder (:func:`unigraph.data.read_ogb_node`, read whole
  with that reader's limits).
* :func:`from_npz`: a numpy ``.npz`` of ``edge_index`` ``[2, E]`` (or ``src`` and ``dst``) and
  optionally ``num_nodes``, ``x``, ``y``, ``train_mask``/``val_mask``/``test_mask``, read whole
  through :func:`unigraph.data.npz_file.read_npz` (headers against member lengths, inflation within
  the file's allowance, no pickle).
* :func:`from_edge_list`: a text edge list (``u v`` per line; spaces, tabs or commas; ``#`` or
  ``%`` comment lines; optionally gzip), **streamed**: a block of text at a time, so memory does
  not grow with the file.

Every conversion writes the edge list (``src``, ``dst``) and then builds the in-CSR with bounded
memory (:func:`unigraph.storage.csr.build_in_csr`). :func:`to_node_dataset` reads a (small)
chunked graph back into memory: the in-memory twin of a generated graph, and the tests' reference.
"""
from __future__ import annotations

import gzip
import os
import pathlib
import warnings
import zlib

import numpy as np
import torch

from unigraph.data import limits
from unigraph.data.dataset import NodeDataset
from unigraph.data.errors import DataFileError
from unigraph.data.npz_file import read_npz
from unigraph.data.ogb import read_ogb_node
from unigraph.user_graph import Graph
from unigraph.storage.chunked import DEFAULT_CHUNK_BYTES, ChunkedGraph, ChunkedWriter
from unigraph.storage.csr import build_in_csr

MASKS = ("train_mask", "val_mask", "test_mask")


def index_dtype(num_nodes: int) -> np.dtype:
    """The dtype of stored node ids: int32 below 2**31 nodes, else int64."""
    return np.dtype(np.int32) if num_nodes < 2 ** 31 else np.dtype(np.int64)


def write_arrays(directory: str | os.PathLike, *, name: str, num_nodes: int, src, dst, x=None, y=None,
                 masks: dict | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES, meta: dict | None = None,
                 work_dir=None) -> ChunkedGraph:
    """Write a graph held in memory (numpy arrays or tensors) as a chunked graph with its in-CSR."""
    arrays = {"src": src, "dst": dst, "x": x, "y": y, **(masks or {})}
    arrays = {k: (v.numpy() if isinstance(v, torch.Tensor) else np.asarray(v)) for k, v in arrays.items() if v is not None}
    src, dst = arrays.pop("src"), arrays.pop("dst")
    if src.shape != dst.shape or src.ndim != 1 or src.dtype.kind not in "iu" or dst.dtype.kind not in "iu":
        raise ValueError(f"src and dst must be 1-D integer arrays of equal length, got {src.dtype} {list(src.shape)} and "
                         f"{dst.dtype} {list(dst.shape)}")
    if src.size and (min(int(src.min()), int(dst.min())) < 0 or max(int(src.max()), int(dst.max())) >= num_nodes):
        raise ValueError(f"edge endpoints must be node ids in 0..{num_nodes - 1}")
    num_classes = 0
    if "y" in arrays:
        y = arrays["y"]
        if y.dtype.kind not in "iu" or y.shape != (num_nodes,) or (y.size and int(y.min()) < 0):
            raise ValueError(f"y must hold one class >= 0 per node ({num_nodes}), got {y.dtype} {list(y.shape)}")
        arrays["y"] = y.astype(np.int64)
        num_classes = int(y.max()) + 1 if y.size else 0
    with ChunkedWriter(directory, name=name, num_nodes=num_nodes, num_edges=len(src), chunk_bytes=chunk_bytes,
                       meta=meta) as writer:
        ids = index_dtype(num_nodes)
        writer.add("src", src.astype(ids))
        writer.add("dst", dst.astype(ids))
        for key, value in arrays.items():
            writer.add(key, value)
        writer.finish(num_classes=num_classes)
    return build_in_csr(ChunkedGraph(directory), work_dir=work_dir)


def write_dataset(dataset: NodeDataset | Graph, directory: str | os.PathLike, *,
                  chunk_bytes: int = DEFAULT_CHUNK_BYTES, meta: dict | None = None) -> ChunkedGraph:
    """Write a :class:`~unigraph.data.NodeDataset` (or a bare homogeneous graph) as a chunked graph."""
    if isinstance(dataset, Graph):
        if dataset.is_bipartite:
            raise ValueError("a chunked graph is homogeneous; this graph is bipartite")
        return write_arrays(directory, name="graph", num_nodes=dataset.num_nodes, src=dataset.src, dst=dataset.dst,
                            chunk_bytes=chunk_bytes, meta=meta)
    if not isinstance(dataset, NodeDataset):
        raise TypeError(f"write_dataset takes a NodeDataset or a Graph, got {type(dataset).__name__}")
    g = dataset.graph
    return write_arrays(directory, name=dataset.name, num_nodes=g.num_nodes, src=g.src, dst=g.dst,
                        x=dataset.x.contiguous(), y=dataset.y,
                        masks={m: getattr(dataset, m) for m in MASKS}, chunk_bytes=chunk_bytes,
                        meta={"source": f"NodeDataset {dataset.name!r}", **(meta or {})})


def from_ogb(root: str | os.PathLike, name: str, directory: str | os.PathLike, *,
             chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> ChunkedGraph:
    """An OGB node dataset (features and one class per node) as a chunked graph."""
    dataset = read_ogb_node(root, name).to_node_dataset()
    return write_dataset(dataset, directory, chunk_bytes=chunk_bytes, meta={"source": f"OGB {name} in {root}"})


def from_npz(path: str | os.PathLike, directory: str | os.PathLike, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
             name: str | None = None, max_load_bytes: int | None = None) -> ChunkedGraph:
    """A graph from a numpy ``.npz`` (see the module docstring) as a chunked graph."""
    path = pathlib.Path(path)
    size = limits.regular_size(path)
    arrays = read_npz(path, file_bytes=size, compressed=True, max_load_bytes=max_load_bytes, flag="--max-load-bytes")

    def fail(problem: str):
        return DataFileError(path, problem)

    if "edge_index" in arrays:
        edge_index = arrays["edge_index"]
        if edge_index.ndim != 2 or edge_index.shape[0] != 2:
            raise fail(f"'edge_index' must have shape [2, E], got {list(edge_index.shape)}")
        src, dst = edge_index[0], edge_index[1]
    elif "src" in arrays and "dst" in arrays:
        src, dst = arrays["src"], arrays["dst"]
    else:
        raise fail(f"holds no 'edge_index' (or 'src' and 'dst'); found {sorted(arrays)}")
    if src.dtype.kind not in "iu" or dst.dtype.kind not in "iu" or src.shape != dst.shape or src.ndim != 1:
        raise fail(f"edge endpoints must be two 1-D integer arrays of equal length, got {src.dtype} {list(src.shape)} and "
                   f"{dst.dtype} {list(dst.shape)}")
    highest = max(int(src.max()), int(dst.max())) if src.size else -1
    if src.size and min(int(src.min()), int(dst.min())) < 0:
        raise fail("holds negative node ids")
    if "num_nodes" in arrays:
        count = arrays["num_nodes"]
        if count.size != 1 or count.dtype.kind not in "iu" or int(count.reshape(-1)[0]) <= highest:
            raise fail(f"'num_nodes' must be one integer above the largest node id {highest}, got {count.tolist()}")
        num_nodes = int(count.reshape(-1)[0])
    else:
        num_nodes = highest + 1
    x = arrays.get("x")
    if x is not None and (x.ndim != 2 or x.shape[0] != num_nodes or x.dtype.kind != "f"):
        raise fail(f"'x' must be floats of shape [{num_nodes}, F], got {x.dtype} {list(x.shape)}")
    y = arrays.get("y")
    if y is not None and (y.shape != (num_nodes,) or y.dtype.kind not in "iu" or (y.size and int(y.min()) < 0)):
        raise fail(f"'y' must hold one class >= 0 per node ({num_nodes}), got {y.dtype} {list(y.shape)}")
    masks = {}
    for mask in MASKS:
        if mask in arrays:
            if arrays[mask].dtype != np.bool_ or arrays[mask].shape != (num_nodes,):
                raise fail(f"{mask!r} must be bool of shape [{num_nodes}], got {arrays[mask].dtype} "
                           f"{list(arrays[mask].shape)}")
            masks[mask] = arrays[mask]
    return write_arrays(directory, name=name or path.stem, num_nodes=num_nodes, src=src, dst=dst, x=x, y=y,
                        masks=masks, chunk_bytes=chunk_bytes, meta={"source": f"npz {path}"})


# ---------------------------------------------------------------------------------------------- edge lists
def _parse_edges(path, data: bytes, first_line: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``(src, dst)`` of a block of whole lines of an edge list (see :func:`from_edge_list`)."""
    raw = np.frombuffer(data, dtype=np.uint8).copy()
    if bool((raw >= 128).any()):
        raise DataFileError(path, f"is not a text edge list: a non-ASCII byte near line {first_line}")
    raw[(raw == ord(",")) | (raw == ord("\t")) | (raw == ord("\r"))] = ord(" ")
    newline = raw == ord("\n")
    line_of = np.cumsum(newline) - newline                     # the line (0-based in the block) of every byte
    num_lines = int(newline.sum()) + 1
    starts = np.concatenate([[0], np.flatnonzero(newline) + 1])
    starts = starts[starts < len(raw)]
    comment = np.zeros(num_lines, dtype=bool)
    comment[line_of[starts[(raw[starts] == ord("#")) | (raw[starts] == ord("%"))]]] = True
    raw[comment[line_of] & ~newline] = ord(" ")                # comment lines read as blank lines
    space = (raw == ord(" ")) | newline
    token = ~space & np.concatenate([[True], space[:-1]])     # the first byte of every field
    fields = np.bincount(line_of[token], minlength=num_lines)
    bad = np.flatnonzero((fields != 0) & (fields != 2))
    if bad.size:
        line = int(bad[0])
        raise DataFileError(path, f"line {first_line + line}: {int(fields[line])} fields; an edge list line holds "
                                  "two node ids (weights and other columns are not read)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            values = np.fromstring(raw.tobytes(), dtype=np.int64, sep=" ")
        except ValueError:
            values = np.empty(0, dtype=np.int64)
    expected = int(token.sum())
    if values.size != expected:
        for number, line_bytes in enumerate(raw.tobytes().split(b"\n")):
            for field in line_bytes.split():
                if not field.isdigit():
                    raise DataFileError(path, f"line {first_line + number}: {field.decode()!r} is not a node id (an "
                                              "integer >= 0)")
        raise DataFileError(path, f"lines {first_line}..: could not be read as node ids")
    if values.size and int(values.min()) < 0:
        at = int(np.argmax(values < 0))
        line = int(line_of[np.flatnonzero(token)[at]])
        raise DataFileError(path, f"line {first_line + line}: {int(values[at])} is not a node id (an integer >= 0)")
    return values[0::2], values[1::2]


def _open_text(path: pathlib.Path):
    handle = limits.open_regular(path)
    return gzip.open(handle, "rb") if handle.peek(2)[:2] == b"\x1f\x8b" else handle


def from_edge_list(path: str | os.PathLike, directory: str | os.PathLike, *, num_nodes: int | None = None,
                   undirected: bool = False, chunk_bytes: int = DEFAULT_CHUNK_BYTES, name: str | None = None,
                   work_dir=None) -> ChunkedGraph:
    """A text edge list, streamed into a chunked graph (structure only: no features or labels).

    One edge ``u v`` per line (0-based node ids separated by spaces, tabs or a comma); lines
    starting with ``#`` or ``%`` and blank lines are skipped; a gzip file is read through. Nodes:
    ``num_nodes``, or the largest id + 1. ``undirected`` adds every edge's reverse right after it
    (edge ``i`` becomes edges ``2i`` and ``2i + 1``, as OGB orders them). Memory: one block of
    text (``chunk_bytes``) and its ids.
    """
    path = pathlib.Path(path)
    limits.regular_size(path)
    block_bytes = max(1 << 16, chunk_bytes)
    highest, edges, line = -1, 0, 1
    with ChunkedWriter(directory, name=name or path.name.split(".")[0], chunk_bytes=chunk_bytes,
                       meta={"source": f"edge list {path}", "undirected": undirected}) as writer:
        ids = np.int64 if num_nodes is None or num_nodes >= 2 ** 31 else np.int32
        src_out, dst_out = writer.array("src", ids, (None,)), writer.array("dst", ids, (None,))
        carry = b""
        try:
            with _open_text(path) as handle:
                while True:
                    data = handle.read(block_bytes)
                    text = carry + data
                    if not data:
                        cut = len(text)
                    else:
                        cut = text.rfind(b"\n") + 1
                        if cut == 0:
                            if len(text) > block_bytes * 4:
                                raise DataFileError(path, f"line {line} is longer than {block_bytes * 4:,} bytes")
                            carry = text
                            continue
                    src, dst = _parse_edges(path, text[:cut], line)
                    line += text.count(b"\n", 0, cut)
                    carry = text[cut:]
                    if src.size:
                        highest = max(highest, int(src.max()), int(dst.max()))
                        if num_nodes is not None and highest >= num_nodes:
                            raise DataFileError(path, f"near line {line}: node id {highest} is not below num_nodes="
                                                      f"{num_nodes}")
                        if highest >= 2 ** 31 and ids == np.int32:
                            raise DataFileError(path, f"node id {highest} needs 64-bit ids; give num_nodes")
                        if undirected:
                            src, dst = np.stack([src, dst], 1).reshape(-1), np.stack([dst, src], 1).reshape(-1)
                        src_out.append(src)
                        dst_out.append(dst)
                        edges += len(src)
                    if not data:
                        break
        except (OSError, EOFError, zlib.error) as err:
            raise DataFileError(path, f"cannot be read ({err})") from None
        writer.finish(num_nodes=num_nodes if num_nodes is not None else highest + 1, num_edges=edges)
    return build_in_csr(ChunkedGraph(directory), work_dir=work_dir)


# ---------------------------------------------------------------------------------------------- back to memory
def edge_arrays(graph: ChunkedGraph) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` in edge-id order, in memory: the edge list, or from the in-CSR when the graph
    has none (then CSR position k is edge k)."""
    if graph.has("src"):
        return graph.load("src").astype(np.int64), graph.load("dst").astype(np.int64)
    indptr = graph.load("in_indptr")
    return graph.load("in_indices"), np.repeat(np.arange(graph.num_nodes, dtype=np.int64), np.diff(indptr))


def to_node_dataset(graph: ChunkedGraph) -> NodeDataset:
    """A (small) chunked graph with features, labels and masks read into a NodeDataset."""
    missing = [n for n in ("x", "y", *MASKS) if not graph.has(n)]
    if missing:
        raise ValueError(f"{graph.directory}: a NodeDataset needs the arrays {missing}")
    src, dst = edge_arrays(graph)
    g = Graph(torch.from_numpy(np.stack([src, dst])), num_nodes=graph.num_nodes)
    tensors = {n: torch.from_numpy(graph.load(n)) for n in ("x", "y", *MASKS)}
    return NodeDataset(graph.name, g, tensors["x"], tensors["y"].long(), *(tensors[m] for m in MASKS))
