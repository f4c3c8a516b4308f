"""Streaming partitioning of a chunked graph: every node's part with memory bounded by a block of nodes.

The nodes are read in id order with their in-neighbours (the in-CSR, mapped from disk), and each
node goes to a part as it arrives, from the parts of its neighbours seen so far:

* ``"ldg"`` - linear deterministic greedy (Stanton and Kliot, KDD 2012): the part ``p`` maximizing
  ``|N(v) in p| (1 - |p| / C)``, ``C`` a part's capacity (``(1 + imbalance) N / P``).
* ``"fennel"`` - Fennel (Tsourakakis et al., WSDM 2014): the part maximizing
  ``|N(v) in p| - alpha gamma |p|^(gamma - 1)``, ``gamma = 1.5``, ``alpha = sqrt(P) E / N^1.5``.

Both keep **hard caps** on every balanced quantity (``balance``: ``"nodes"``, ``"edges"``, the
in-edges a part stores, and ``"train"``, its training nodes; a part is eligible only if adding
``v`` keeps each within ``(1 + imbalance)`` times its mean, or the part holds none yet; when no
part is eligible the least overfull takes ``v``). Ties go to the smaller part, then the lower
index. ``passes > 1`` restreams (Nishimura and Ugander, KDD 2013): later passes see every
neighbour's part from the pass before and move nodes accordingly.

**Processes.** With ``workers = W > 1`` the stream is cut into rounds of ``W`` blocks of
``block_nodes`` nodes; in a round, worker ``w`` assigns block ``w`` seeing every part as it was
when the round began (the nodes other workers assign in that round read as their previous pass's
part) and may fill at most ``1 / W`` of each part's free capacity (so together they keep the
caps), and the loads are summed after the round. The result depends on ``W`` and ``block_nodes``
but not on timing: it is deterministic. ``W = 1`` is the plain sequential algorithm.
``pool="thread"`` runs the same rounds in threads of this process (the numba kernel releases the
GIL; the Python one does not, so threads then only take turns).

Memory: a block of rows and its in-edges in the process; the in-CSR is mapped (page cache), and
the assignment (4 bytes a node, twice: this pass and the last) lives in files mapped from
``work_dir``. The inner loop is :mod:`unigraph.kernels.streaming_partition` (numba when installed).
"""
from __future__ import annotations

import concurrent.futures
import math
import multiprocessing
import os
import pathlib

import numpy as np

from unigraph.kernels import streaming_partition as kernels
from unigraph.storage.chunked import ChunkedGraph

METHODS = ("ldg", "fennel")
BALANCE = ("nodes", "edges", "train")


def _check(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return value


def _file_array(path: pathlib.Path, n: int, fill: int | None = None) -> np.ndarray:
    """An int32 array over ``n`` nodes in a file, mapped shared (every process sees its writes)."""
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    array = np.memmap(path, dtype=np.int32, mode="w+" if fill is not None else "r+", shape=(n,))
    if fill is not None:
        step = 1 << 24
        for a in range(0, n, step):
            array[a:a + step] = fill
    return array


class _Stream:
    """What one process needs to assign blocks: the mapped graph and assignment files."""

    def __init__(self, directory: str, work: str, balance: tuple[str, ...], method: int, caps: np.ndarray,
                 alpha: float, gamma: float, verify: bool):
        self.graph = ChunkedGraph(directory, verify=verify)
        self.indptr = self.graph.array("in_indptr")
        self.indices = self.graph.array("in_indices")
        self.train = self.graph.array("train_mask") if "train" in balance else None
        n = self.graph.num_nodes
        self.assign = _file_array(pathlib.Path(work) / "assign.i32", n)
        self.previous = _file_array(pathlib.Path(work) / "previous.i32", n)
        self.balance, self.method, self.caps, self.alpha, self.gamma = balance, method, caps, alpha, gamma
        self.kernel = kernels.kernel()

    def weights(self, first: int, end: int) -> np.ndarray:
        rows = end - first
        out = np.empty((len(self.balance), rows), dtype=np.float64)
        for c, what in enumerate(self.balance):
            if what == "nodes":
                out[c] = 1.0
            elif what == "edges":
                out[c] = np.diff(self.indptr[first:end + 1])
            else:
                out[c] = self.train[first:end]
        return out

    def run(self, first: int, end: int, hide: tuple[int, int], loads: np.ndarray, share: int = 1) -> np.ndarray:
        """Assign nodes ``first .. end - 1`` adding at most ``1 / share`` of each part's free
        capacity; returns the change of the loads."""
        start = int(self.indptr[first])
        indptr = np.asarray(self.indptr[first:end + 1]) - start
        indices = self.indices[start:start + int(indptr[-1])]
        before = loads.copy()
        limits = loads + np.maximum(self.caps[:, None] - loads, 0.0) / share
        self.kernel(first, indptr, indices, self.weights(first, end), self.assign, self.previous, hide[0], hide[1],
                    loads, self.caps, limits, self.method, self.alpha, self.gamma, np.zeros(loads.shape[1]))
        return loads - before


_WORKER: _Stream | None = None


def _start_worker(*args) -> None:
    global _WORKER
    _WORKER = _Stream(*args)


def _worker_run(first: int, end: int, hide: tuple[int, int], loads: np.ndarray, share: int) -> np.ndarray:
    return _WORKER.run(first, end, hide, loads.copy(), share)


def stream_assign(graph: ChunkedGraph, num_parts: int, work_dir: str | os.PathLike, *, method: str = "ldg",
                  passes: int = 1, imbalance: float = 0.05, balance: tuple[str, ...] = ("nodes", "train"),
                  block_nodes: int = 1 << 16, workers: int = 1, pool: str = "process") -> tuple[np.ndarray, dict]:
    """The part of every node of ``graph`` (an int32 array mapped from ``work_dir/assign.i32``)
    and the details of the method (see the module docstring)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    n = graph.num_nodes
    _check("num_parts", num_parts, 1)
    if num_parts > max(n, 1):
        raise ValueError(f"num_parts must be at most the {n} nodes, got {num_parts}")
    _check("passes", passes, 1)
    _check("block_nodes", block_nodes, 1)
    _check("workers", workers, 1)
    if pool not in ("process", "thread"):
        raise ValueError(f"pool must be 'process' or 'thread', got {pool!r}")
    if isinstance(imbalance, bool) or not isinstance(imbalance, (int, float)) or not 0 <= imbalance < 10:
        raise ValueError(f"imbalance must be a number in [0, 10), got {imbalance!r}")
    balance = tuple(dict.fromkeys(("nodes",) + tuple(balance)))
    unknown = [b for b in balance if b not in BALANCE]
    if unknown:
        raise ValueError(f"balance takes {', '.join(BALANCE)}; got {unknown}")
    for name in ("in_indptr", "in_indices") + (("train_mask",) if "train" in balance else ()):
        if not graph.has(name):
            raise ValueError(f"{graph.directory}: streaming partitioning needs the array {name!r}"
                             + (" (build the in-CSR with `unigraph chunk csr`)" if name.startswith("in_") else ""))
    work = pathlib.Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    totals = {"nodes": n, "edges": graph.num_edges,
              "train": sum(int(block.sum()) for _, block in graph.chunks("train_mask")) if "train" in balance else 0}
    caps = np.array([math.ceil(totals[b] / num_parts * (1 + imbalance)) for b in balance], dtype=np.float64)
    gamma = 1.5
    alpha = math.sqrt(num_parts) * graph.num_edges / max(n, 1) ** 1.5
    code = kernels.LDG if method == "ldg" else kernels.FENNEL
    assign = _file_array(work / "assign.i32", n, fill=-1)
    previous = _file_array(work / "previous.i32", n, fill=-1)
    settings = (str(graph.directory), str(work), balance, code, caps, alpha, gamma, graph.verify)
    local = _Stream(*settings)
    executor = None
    if workers > 1 and pool == "process":
        executor = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                          initializer=_start_worker, initargs=settings)
    elif workers > 1:   # the numba kernel releases the GIL; every thread's loads are its own copy
        executor = concurrent.futures.ThreadPoolExecutor(workers)
    run = _worker_run if pool == "process" else (lambda a, b, hide, loads, share: local.run(a, b, hide, loads.copy(),
                                                                                            share))
    try:
        loads = np.zeros((len(balance), num_parts), dtype=np.float64)
        for _ in range(passes):
            for first in range(0, n, block_nodes * workers):
                end = min(n, first + block_nodes * workers)
                blocks = [(a, min(end, a + block_nodes)) for a in range(first, end, block_nodes)]
                if executor is None or len(blocks) == 1:
                    for a, b in blocks:
                        local.run(a, b, (0, 0), loads)
                    continue
                futures = [executor.submit(run, a, b, (first, end), loads, len(blocks)) for a, b in blocks]
                loads = loads + sum(future.result() for future in futures)
            previous[:] = assign
    finally:
        if executor is not None:
            executor.shutdown(cancel_futures=True)
    if n and int(assign.min()) < 0:  # never expected: every node is assigned once per pass
        raise RuntimeError("streaming partitioning left nodes unassigned")
    from unigraph.kernels.cpu import numba_status  # noqa: PLC0415
    details = {"name": method, "package": f"unigraph streaming partitioner ({method.upper()}, "
                                          f"{'numba' if numba_status()[0] else 'python'} kernel)",
               "constraints": list(balance), "passes": passes, "imbalance": imbalance, "block_nodes": block_nodes,
               "workers": workers, "pool": pool, "neighbours": "in-neighbours (the in-CSR)"}
    if method == "fennel":
        details.update(alpha=alpha, gamma=gamma)
    return assign, details
