"""The in-CSR of a chunked graph's edge list, built with memory bounded by the chunk size.

:func:`build_in_csr` adds ``in_indptr``, ``in_indices`` and ``in_eids`` (and ``out_degree``) to
a chunked graph that has ``src`` and ``dst`` (:mod:`unigraph.storage.chunked`). The result is
exactly ``Graph.in_csr()`` of the same edges: rows by destination, and inside a row the in-edges
in edge-id order (a stable sort by destination). Three streaming passes, an external bucket sort:

1. **Degrees.** Each ``dst`` (``src``) chunk adds its per-node counts into a per-node counter.
2. **Positions.** The counters become each row's first CSR position (their prefix sums, written
   out as ``in_indptr``). Each edge chunk, stably sorted by destination, takes its final position
   ``row start + edges of that row placed so far + rank inside the chunk``, and the records
   ``(position, source, edge id)`` are appended to the bucket file of their position range
   (``bucket_edges`` positions each; since positions rise along the sorted chunk, each bucket's
   records are one contiguous slice).
3. **Buckets.** Each bucket is read (``bucket_edges`` records), its sources and edge ids placed at
   their positions, and appended to ``in_indices`` / ``in_eids``.

Memory: one edge chunk and one bucket (``bucket_edges x 24`` bytes, about ``chunk_bytes`` by
default) in the process, plus the per-node counter (8 bytes a node), which is a file mapped in
``work_dir`` (page cache, not process memory). Temporary disk: 24 bytes per edge for the buckets
and 8 (16) bytes per node for the counters, removed at the end.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from typing import Iterator, Sequence

import numpy as np

from unigraph.storage.chunked import ArrayStream, ChunkedGraph, ChunkedWriter

RECORD = np.dtype([("pos", "<i8"), ("src", "<i8"), ("eid", "<i8")])


def aligned_blocks(graph: ChunkedGraph, names: Sequence[str], rows: int | None = None
                   ) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """``(first row, {name: rows})`` over arrays of equal length, streamed together in blocks of
    at most ``rows`` rows (default: the smallest manifest chunk among them), each read and checked
    through :class:`~unigraph.storage.chunked.ArrayStream` whatever its own chunk size."""
    lengths = {graph.shape(name)[0] for name in names}
    if len(lengths) != 1:
        raise ValueError(f"arrays {list(names)} have different lengths {sorted(lengths)}")
    total = lengths.pop()
    if rows is None:
        rows = min(graph.manifest["arrays"][name]["chunk_rows"] for name in names)
    streams = {name: ArrayStream(graph, name) for name in names}
    for first in range(0, total, rows):
        take = min(rows, total - first)
        yield first, {name: stream.take(take) for name, stream in streams.items()}


def _counter(path: pathlib.Path, n: int) -> np.ndarray:
    """A zero-filled int64 counter over ``n`` nodes, mapped from a file (page cache, not process memory)."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    return np.memmap(path, dtype=np.int64, mode="w+", shape=(n,))


def _count_into(counter: np.ndarray, ids: np.ndarray) -> None:
    nodes, counts = np.unique(ids, return_counts=True)
    counter[nodes] += counts


def build_in_csr(graph: ChunkedGraph, *, work_dir: str | os.PathLike | None = None, bucket_edges: int | None = None,
                 eids: bool = True, out_degree: bool = True) -> ChunkedGraph:
    """Add the in-CSR of ``graph``'s ``src``/``dst`` to its directory (see the module docstring);
    returns the graph reopened. ``eids=False`` leaves out ``in_eids``; ``out_degree`` also writes
    the out-degrees (unless the graph has them)."""
    for name in ("src", "dst"):
        if not graph.has(name):
            raise ValueError(f"{graph.directory}: building the in-CSR needs the edge list arrays 'src' and 'dst'")
    for name in ("in_indptr", "in_indices", "in_eids"):
        if graph.has(name):
            raise ValueError(f"{graph.directory} already has {name!r}")
    n, e = graph.num_nodes, graph.num_edges
    bucket_edges = bucket_edges or max(1, graph.manifest["chunk_bytes"] // RECORD.itemsize)
    out_degree = out_degree and not graph.has("out_degree")
    work = pathlib.Path(tempfile.mkdtemp(prefix=".csr-", dir=work_dir or graph.directory))
    writer = ChunkedWriter.extend(graph)
    try:
        with writer:
            # 1. degrees
            start = _counter(work / "start.i64", n)
            out = _counter(work / "out.i64", n) if out_degree else None
            for _, block in aligned_blocks(graph, ("src", "dst")):
                _count_into(start, block["dst"])
                if out is not None:
                    _count_into(out, block["src"])
            # 2a. row starts (in place) and in_indptr
            indptr = writer.array("in_indptr", np.int64, (n + 1,))
            indptr.append(np.zeros(1, dtype=np.int64))
            carry, step = 0, max(1, graph.manifest["chunk_bytes"] // 8)
            for a in range(0, n, step):
                counts = np.array(start[a:a + step])
                ends = np.cumsum(counts) + carry
                start[a:a + step] = ends - counts
                indptr.append(ends)
                carry = int(ends[-1])
            writer.close_array("in_indptr")
            if out is not None:
                degrees = writer.array("out_degree", np.int64, (n,))
                for a in range(0, n, step):
                    degrees.append(np.array(out[a:a + step]))
                writer.close_array("out_degree")
                del out
            # 2b. every edge's position, into bucket files
            num_buckets = -(-e // bucket_edges)
            files = [open(work / f"bucket-{k}.rec", "wb") for k in range(num_buckets)]
            try:
                for first, block in aligned_blocks(graph, ("src", "dst")):
                    order = np.argsort(block["dst"], kind="stable")
                    dst = block["dst"][order]
                    nodes, at, counts = np.unique(dst, return_index=True, return_counts=True)
                    base = np.array(start[nodes])
                    start[nodes] = base + counts
                    records = np.empty(len(order), dtype=RECORD)
                    records["pos"] = np.repeat(base - at, counts) + np.arange(len(order))
                    records["src"] = block["src"][order]
                    records["eid"] = first + order
                    low, high = int(records["pos"][0]) // bucket_edges, int(records["pos"][-1]) // bucket_edges
                    cuts = np.searchsorted(records["pos"], np.arange(low, high + 2) * bucket_edges)
                    for k in range(low, high + 1):
                        piece = records[cuts[k - low]:cuts[k - low + 1]]
                        piece["pos"] -= k * bucket_edges
                        files[k].write(piece.tobytes())
            finally:
                for file in files:
                    file.close()
            del start
            # 3. each bucket into place
            indices = writer.array("in_indices", np.int64, (e,))
            edge_ids = writer.array("in_eids", np.int64, (e,)) if eids else None
            for k in range(num_buckets):
                size = min(bucket_edges, e - k * bucket_edges)
                records = np.fromfile(work / f"bucket-{k}.rec", dtype=RECORD)
                if len(records) != size:  # never expected: the positions are a permutation of 0..E-1
                    raise RuntimeError(f"bucket {k} holds {len(records)} edges, expected {size}")
                placed = np.empty(size, dtype=np.int64)
                placed[records["pos"]] = records["src"]
                indices.append(placed)
                if edge_ids is not None:
                    placed[records["pos"]] = records["eid"]
                    edge_ids.append(placed)
                os.unlink(work / f"bucket-{k}.rec")
            writer.finish()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ChunkedGraph(graph.directory, verify=graph.verify)
