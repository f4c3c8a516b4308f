"""Partitioning a chunked graph with memory bounded by the chunk size: assign, then relabel and shuffle.

:func:`partition_chunked` turns a chunked graph (:mod:`unigraph.storage.chunked`) into a partition
set in the chunked layout (:mod:`unigraph.distributed.chunked_parts`), in two steps:

1. **Assign** every node a part: streaming (``"ldg"``, ``"fennel"``:
   :func:`unigraph.storage.stream_partition.stream_assign`, memory bounded by a block of nodes), or
   for comparison on graphs that fit in memory, the in-memory methods of
   :mod:`unigraph.distributed.partition` (``"metis"``, ``"lp"``, ``"random"``, on the graph read
   into memory).
2. **Relabel and shuffle** (:func:`write_assigned`): the parts' sizes give the partition book;
   each node's new id is its part's offset plus its rank among that part's nodes in id order
   (partition-major, as :mod:`unigraph.distributed.book` wants), computed a block at a time into a
   mapped file. Then one streaming pass over the graph, a block of rows at a time (the in-CSR,
   features, labels, masks, out-degrees, each read and checked chunk by chunk), appends each row to
   its part: its original id, in-degree (the part's row pointers), sources renumbered, edge ids,
   features, labels, masks and out-degree; and marks the part's halo (sources owned elsewhere) in a
   mapped per-node flag file. Each part's halo ids, their out-degrees and their in-edges (read from
   the mapped in-CSR, a block of edges at a time: what lets a graph server sample two hops
   without a request, :mod:`unigraph.distributed.local`) are written last. With
   ``workers = W > 1``, ``W`` processes write the parts, each process its share of them in its own
   pass over the graph.

The report (edge cut, balance of nodes, edges and training nodes, halo sizes) is
:mod:`unigraph.distributed.partition`'s, written into ``partitions.json``, and so the same for
every method: the numbers to compare streaming with METIS by.

Memory: a block of rows (``chunk_bytes`` of features, with its in-edges) per process; the
per-node maps (new ids, original ids, 16 bytes a node), the assignment (4) and the halo flags (1
per part) are files in ``work_dir``, mapped (page cache).
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import pathlib
import shutil
import tempfile
import time

import numpy as np

from unigraph.distributed import format as fmt
from unigraph.distributed.chunked_parts import PartWriter
from unigraph.distributed.partition import _balance, assign_parts
from unigraph.storage.chunked import DEFAULT_CHUNK_BYTES, ArrayStream, ChunkedGraph
from unigraph.storage.convert import to_node_dataset
from unigraph.storage.mapped import PeakMemory
from unigraph.storage.stream_partition import METHODS as STREAMING
from unigraph.storage.stream_partition import stream_assign

METHODS = STREAMING + ("metis", "lp", "random")
NODE_ARRAYS = ("x", "y", "train_mask", "val_mask", "test_mask", "out_degree")


def _mapped(path: pathlib.Path, dtype, n: int, mode: str) -> np.ndarray:
    if n == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode=mode, shape=(n,))


def _new_ids(assignment: np.ndarray, offsets: list[int], work: pathlib.Path, step: int) -> None:
    """``new.i64`` (the new id of every node) and ``orig.i64`` (its inverse), a block at a time."""
    n = len(assignment)
    new = _mapped(work / "new.i64", np.int64, n, "w+")
    orig = _mapped(work / "orig.i64", np.int64, n, "w+")
    placed = np.array(offsets[:-1], dtype=np.int64)
    num_parts = len(offsets) - 1
    for a in range(0, n, step):
        part = np.asarray(assignment[a:a + step], dtype=np.int64)
        order = np.argsort(part, kind="stable")
        counts = np.bincount(part, minlength=num_parts)
        rank = np.arange(len(part)) - np.repeat(np.cumsum(counts) - counts, counts)
        ids = np.empty(len(part), dtype=np.int64)
        ids[order] = np.repeat(placed, counts) + rank
        new[a:a + len(part)] = ids
        orig[ids] = np.arange(a, a + len(part))
        placed += counts
    for array in (new, orig):
        if isinstance(array, np.memmap):
            array.flush()


def _write_parts(directory: str, verify: bool, work: str, out: str, set_id: str, parts: list[int],
                 offsets: list[int], num_classes: int, chunk_bytes: int, with_eids: bool) -> list[dict]:
    """One pass over the graph writing the parts ``parts`` (see the module docstring); their entries."""
    graph = ChunkedGraph(directory, verify=verify)
    work, out = pathlib.Path(work), pathlib.Path(out)
    n, e = graph.num_nodes, graph.num_edges
    assignment = _mapped(work / "assign.i32", np.int32, n, "r")
    new = _mapped(work / "new.i64", np.int64, n, "r")
    orig = _mapped(work / "orig.i64", np.int64, n, "r")
    halo = {p: _mapped(work / f"halo-{p}.bool", np.bool_, n, "w+") for p in parts}
    has_eids = graph.has("in_eids")
    writers = {p: PartWriter(out, set_id, p, num_owned=offsets[p + 1] - offsets[p], num_nodes=n, num_edges=e,
                             num_features=graph.num_features, feature_dtype=graph.dtype("x"), num_classes=num_classes,
                             eids=with_eids, chunk_bytes=chunk_bytes) for p in parts}
    counts = {p: dict.fromkeys(("train", "val", "test", "cut_in_edges"), 0) for p in parts}
    try:
        streams = {name: ArrayStream(graph, name) for name in ("in_indptr", "in_indices", *NODE_ARRAYS)}
        eid_stream = ArrayStream(graph, "in_eids") if has_eids else None
        previous = int(streams["in_indptr"].take(1)[0])
        rows_per_block = max(1, chunk_bytes // max(1, graph.dtype("x").itemsize * graph.num_features))
        for a in range(0, n, rows_per_block):
            rows = min(rows_per_block, n - a)
            ends = streams["in_indptr"].take(rows)
            degree = np.diff(ends, prepend=previous)
            edges = int(ends[-1]) - previous
            sources = new[streams["in_indices"].take(edges)]
            eids = eid_stream.take(edges) if has_eids else np.arange(previous, previous + edges, dtype=np.int64)
            previous = int(ends[-1])
            node = {name: streams[name].take(rows) for name in NODE_ARRAYS}
            part = np.asarray(assignment[a:a + rows])
            row_of_edge = np.repeat(np.arange(rows), degree)
            for p in parts:
                selected = part == p
                if not selected.any():
                    continue
                owned = np.flatnonzero(selected)
                edge = selected[row_of_edge]
                src = sources[edge]
                remote = (src < offsets[p]) | (src >= offsets[p + 1])
                halo[p][src[remote]] = True
                counts[p]["cut_in_edges"] += int(remote.sum())
                for key, mask in (("train", "train_mask"), ("val", "val_mask"), ("test", "test_mask")):
                    counts[p][key] += int(node[mask][owned].sum())
                writers[p].append(orig_ids=a + owned, degrees=degree[owned], indices=src,
                                  **({"eids": eids[edge]} if with_eids else {}),
                                  **{name: node[name][owned] for name in NODE_ARRAYS})
        out_degree = graph.array("out_degree")
        in_csr = {name: graph.array(name) for name in ("in_indptr", "in_indices", *(("in_eids",) if has_eids else ()))}
        step = max(1, chunk_bytes // 8)
        entries = []
        for p in parts:
            size = 0
            for c in range(0, n, step):
                ids = np.flatnonzero(halo[p][c:c + step]) + c
                _append_halo(writers[p], ids, orig, new, out_degree, in_csr, step, with_eids)
                size += len(ids)
            entry = writers[p].finish()
            entry.update(nodes=offsets[p + 1] - offsets[p], edges=writers[p].edges, halo=size,
                         halo_edges=writers[p].halo_edges, **counts[p])
            entries.append(entry)
        return entries
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise


def _append_halo(writer: PartWriter, ids: np.ndarray, orig: np.ndarray, new: np.ndarray, out_degree: np.ndarray,
                 in_csr: dict[str, np.ndarray], step: int, with_eids: bool) -> None:
    """Append the halo nodes ``ids`` (new ids, rising) with their out-degrees and in-edges (sources
    renumbered, original edge order), read from the mapped in-CSR at most ``step`` edges at a time."""
    old = orig[ids]
    starts, ends = in_csr["in_indptr"][old], in_csr["in_indptr"][old + 1]
    degree = ends - starts
    writer.append(halo_ids=ids, halo_out_degree=out_degree[old], halo_degrees=degree)
    last = np.cumsum(degree)
    a = 0
    while a < len(ids):   # a run of rows with at most `step` edges (one row when a row alone has more)
        b = max(a + 1, int(np.searchsorted(last, (last[a - 1] if a else 0) + step, side="right")))
        lengths = degree[a:b]
        positions = np.repeat(starts[a:b] - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
        writer.append(halo_indices=new[in_csr["in_indices"][positions]],
                      **({"halo_eids": in_csr["in_eids"][positions] if "in_eids" in in_csr else positions}
                         if with_eids else {}))
        a = b


def write_assigned(graph: ChunkedGraph, assignment: np.ndarray, num_parts: int, out: str | os.PathLike, *,
                   method: dict, work_dir: str | os.PathLike, workers: int = 1,
                   chunk_bytes: int = DEFAULT_CHUNK_BYTES, eids: bool = True) -> fmt.PartitionSetInfo:
    """Relabel and shuffle ``graph`` into the partition set ``out`` by ``assignment`` (an int32
    array of parts, one per node, in ``work_dir/assign.i32``); see the module docstring.
    ``eids=False`` leaves out the original edge ids (8 bytes an edge; training does not read them)."""
    missing = [name for name in ("in_indptr", "in_indices", *NODE_ARRAYS) if not graph.has(name)]
    if missing:
        raise ValueError(f"{graph.directory}: a partition set needs the arrays {missing} (features, labels, masks, "
                         "out-degrees and the in-CSR)")
    work = pathlib.Path(work_dir)
    n = graph.num_nodes
    sizes = np.zeros(num_parts, dtype=np.int64)
    step = max(1, chunk_bytes // 4)
    for a in range(0, n, step):
        sizes += np.bincount(np.asarray(assignment[a:a + step], dtype=np.int64), minlength=num_parts)
    offsets = [0] + np.cumsum(sizes).tolist()
    _new_ids(assignment, offsets, work, max(1, chunk_bytes // 8))
    set_id = fmt.new_set_id()
    directory = fmt.begin_write(out)
    for p in range(num_parts):   # a part left by an older set would be refused by its checksum anyway
        shutil.rmtree(directory / f"part-{p}", ignore_errors=True)
    shares = [list(range(w, num_parts, workers)) for w in range(min(workers, num_parts))]
    args = (str(graph.directory), graph.verify, str(work), str(directory), set_id)
    tail = (offsets, graph.num_classes, chunk_bytes, eids)
    if len(shares) == 1:
        entries = _write_parts(*args, shares[0], *tail)
    else:
        with concurrent.futures.ProcessPoolExecutor(len(shares), mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_write_parts, *args, share, *tail) for share in shares]
            entries = [entry for future in futures for entry in future.result()]
    parts = sorted(entries, key=lambda entry: int(entry["file"].split("-")[1]))
    cut = sum(entry["cut_in_edges"] for entry in parts)
    e = graph.num_edges
    report = {"edge_cut": cut, "edge_cut_fraction": cut / e if e else 0.0,
              "balance": {what: _balance([entry[what] for entry in parts]) for what in ("nodes", "edges", "train")},
              "halo_fraction": [entry["halo"] / max(entry["nodes"], 1) for entry in parts]}
    info = fmt.PartitionSetInfo(
        directory=directory, set_id=set_id, num_parts=num_parts, num_nodes=n, num_edges=e,
        num_features=graph.num_features, feature_dtype=str(graph.dtype("x")), num_classes=graph.num_classes,
        max_in_degree=_max_degree(graph), offsets=offsets, parts=parts, method=method, report=report,
        dataset=graph.name, layout="chunked")
    fmt.write_metadata(info)
    return info


def _max_degree(graph: ChunkedGraph) -> int:
    largest, previous = 0, None
    for _, block in graph.chunks("in_indptr", check=False):
        if previous is not None:
            block = np.concatenate([[previous], block])
        if len(block) > 1:
            largest = max(largest, int(np.diff(block).max()))
        previous = int(block[-1]) if len(block) else previous
    return largest


def partition_chunked(graph: ChunkedGraph | str | os.PathLike, num_parts: int, out: str | os.PathLike, *,
                      method: str = "ldg", seed: int = 0, passes: int = 1, imbalance: float = 0.05,
                      balance: tuple[str, ...] = ("nodes", "train"), workers: int = 1, block_nodes: int = 1 << 16,
                      chunk_bytes: int = DEFAULT_CHUNK_BYTES, work_dir: str | os.PathLike | None = None,
                      verify: bool = True, eids: bool = True) -> fmt.PartitionSetInfo:
    """Partition a chunked graph into a chunked partition set (see the module docstring); the set's
    ``method`` records the method's settings and the run's time and peak memory."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    if not isinstance(graph, ChunkedGraph):
        graph = ChunkedGraph(graph, verify=verify)
    work = pathlib.Path(tempfile.mkdtemp(prefix=".partition-", dir=work_dir or pathlib.Path(out).parent))
    began = time.perf_counter()
    try:
        with PeakMemory() as peak:
            if method in STREAMING:
                assignment, details = stream_assign(graph, num_parts, work, method=method, passes=passes,
                                                    imbalance=imbalance, balance=balance, block_nodes=block_nodes,
                                                    workers=workers)
            else:   # in memory, for comparison on graphs that fit
                parts, details = assign_parts(to_node_dataset(graph), num_parts, method, seed)
                assignment = _mapped(work / "assign.i32", np.int32, graph.num_nodes, "w+")
                assignment[:] = parts
            assigned = time.perf_counter()
            info = write_assigned(graph, assignment, num_parts, out, method={**details}, work_dir=work,
                                  workers=workers, chunk_bytes=chunk_bytes, eids=eids)
        info.method.update(seconds_assign=round(assigned - began, 3),
                           seconds_write=round(time.perf_counter() - assigned, 3),
                           peak_rss_anon_bytes=peak.peaks.get("RssAnon"), peak_vm_hwm_bytes=peak.peaks.get("VmHWM"))
        fmt.write_metadata(info)
        return info
    finally:
        shutil.rmtree(work, ignore_errors=True)
