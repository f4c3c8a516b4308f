"""A DGL graph file (``dgl.save_graphs``) nobody vouches for, read in a child process.

DGL's binary format has **no checksum**, and its C++ reader trusts the sizes it reads: of 30
byte-mutated files, 22 loaded (some as different graphs, silently) and 2 aborted the reading
process (``std::bad_alloc`` -> SIGABRT). So :func:`read_dgl_graph`

1. checks the file in Python first: a regular file, DGL's magic number, its size within the
   caller's limit;
2. runs ``dgl.load_graphs`` in a **child process** (``python -m unigraph.data.dgl_file``) whose
   address space is capped at what it had after importing DGL plus 1 GiB plus
   :func:`unigraph.data.limits.allowance` of the file (so a size field of 2**40 fails there, not on
   this machine's memory), with a timeout;
3. in the child, checks what can be checked: exactly one graph, homogeneous, ``num_nodes`` within
   the allowance, source and destination ids in ``0..num_nodes-1``; the child writes the edges as
   two stored ``.npy`` arrays, which this process reads back with their sizes checked.

A crash of the child (a signal), its refusal, a timeout or output that does not add up becomes a
:class:`~unigraph.data.errors.DataFileError` naming the file. What cannot be checked: a mutation
that still decodes to a valid graph (other ids, other edges) loads as that graph, since nothing in
the format could show it; node and edge feature tensors the file carries are read by DGL in the
child (within its memory cap) and dropped: only the structure comes back.
"""
from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import types

import numpy as np

from unigraph.data import limits
from unigraph.data.errors import DataFileError

DGL_MAGIC = (0xDD2E4FF046B4A13F).to_bytes(8, "little")
CHILD_HEADROOM = 1 << 30   # address space the child may add beyond its imports, before the file's allowance
TIMEOUT_SECONDS = 600.0


def _graphbolt_stubbed() -> bool:
    """True when this process imported DGL with graphbolt stubbed (as benchmarks/peers.py does):
    the child then imports it the same way."""
    module = sys.modules.get("dgl.graphbolt")
    return isinstance(module, types.ModuleType) and getattr(module, "__file__", None) is None


def read_dgl_graph(path, *, max_nodes: int, max_edges: int, max_load_bytes: int | None = None,
                   timeout: float = TIMEOUT_SECONDS) -> tuple[np.ndarray, np.ndarray, int]:
    """``(src, dst, num_nodes)`` of the one homogeneous graph in the DGL file ``path`` (see the
    module docstring); ``src``/``dst`` are int64 arrays with ids in ``0..num_nodes-1``."""
    file_bytes = limits.regular_size(path)
    with limits.open_regular(path) as handle:
        if handle.read(8) != DGL_MAGIC:
            raise DataFileError(path, "is not a DGL graph file (no DGL magic number)")
    allowance = limits.allowance(file_bytes, max_load_bytes)
    with tempfile.TemporaryDirectory(prefix="unigraph-dgl-") as out:
        command = [sys.executable, "-m", "unigraph.data.dgl_file", os.fspath(path), out, str(allowance),
                   str(max_nodes), str(max_edges), "stub" if _graphbolt_stubbed() else "plain"]
        try:
            child = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                   env={**os.environ, "OMP_NUM_THREADS": "1"})
        except subprocess.TimeoutExpired:
            raise DataFileError(path, f"DGL's reader did not finish within {timeout:.0f} s (a damaged file?)") from None
        report = _report(child.stdout)
        if child.returncode < 0:
            name = signal.Signals(-child.returncode).name if -child.returncode in signal.valid_signals() else "?"
            tail = [line for line in child.stderr.strip().splitlines() if line.strip()][-1:]
            raise DataFileError(path, f"DGL's reader crashed on this file (signal {-child.returncode}, {name}"
                                      f"{': ' + tail[0][:200] if tail else ''}); DGL's format has no checksum and the "
                                      "file is probably damaged")
        if report is None or child.returncode != 0 or "error" in report:
            problem = report.get("error") if report else (child.stderr.strip().splitlines() or ["no output"])[-1][:300]
            raise DataFileError(path, problem if report and "error" in report else
                                f"could not be read by DGL (exit code {child.returncode}): {problem}")
        num_nodes, num_edges = report.get("num_nodes"), report.get("num_edges")
        arrays = []
        for name in ("src", "dst"):
            array = np.load(pathlib.Path(out) / f"{name}.npy", allow_pickle=False)
            if array.dtype != np.int64 or array.shape != (num_edges,):
                raise DataFileError(path, f"DGL's reader returned {name} of {array.dtype} {array.shape}, expected "
                                          f"{num_edges} int64 ids")
            arrays.append(array)
    return arrays[0], arrays[1], int(num_nodes)


def _report(stdout: str) -> dict | None:
    lines = [line for line in stdout.strip().splitlines() if line.startswith("{")]
    try:
        report = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None
    return report if isinstance(report, dict) else None


# ---------------------------------------------------------------------------------------------- the child
def _cap_address_space(allowance: int) -> None:
    """Limit this process to its current address space + headroom + ``allowance`` (Linux)."""
    try:
        import resource  # noqa: PLC0415 - POSIX only
        with open("/proc/self/status", encoding="ascii") as status:
            size_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    except (ImportError, OSError, StopIteration, ValueError):
        return
    cap = size_kb * 1024 + CHILD_HEADROOM + allowance
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _child(path: str, out: str, allowance: int, max_nodes: int, max_edges: int, graphbolt: str) -> dict:
    if graphbolt == "stub":
        sys.modules.setdefault("dgl.graphbolt", types.ModuleType("dgl.graphbolt"))
    from unigraph._optional import require_dgl  # noqa: PLC0415
    dgl = require_dgl(f"reading the DGL graph file {path}")
    import torch  # noqa: PLC0415
    torch.set_num_threads(1)
    _cap_address_space(allowance)
    try:
        graphs, _ = dgl.load_graphs(path)
    except (dgl.DGLError, RuntimeError, ValueError, MemoryError, OSError, EOFError, TypeError, KeyError) as err:
        return {"error": f"not a readable DGL graph file: {type(err).__name__}: "
                         f"{(str(err).strip().splitlines() or [''])[0][:300]}"}
    if len(graphs) != 1:
        return {"error": f"holds {len(graphs)} graphs; one is read"}
    graph = graphs[0]
    if len(graph.ntypes) != 1 or len(graph.canonical_etypes) != 1:
        return {"error": f"holds a heterogeneous graph ({len(graph.ntypes)} node types, {len(graph.canonical_etypes)} "
                         "edge types); one homogeneous graph is read"}
    num_nodes, num_edges = int(graph.num_nodes()), int(graph.num_edges())
    if num_edges > max_edges or num_nodes > max_nodes:
        return {"error": f"{num_nodes:,} nodes / {num_edges:,} edges exceed the limits ({max_nodes:,} / {max_edges:,})"}
    if 8 * (num_nodes + 1) > allowance:
        return {"error": f"num_nodes = {num_nodes:,} would need {8 * (num_nodes + 1):,} bytes of row pointers, over the "
                         f"limit of {allowance:,} bytes for this file ({limits.ENV_VAR} raises it)"}
    src, dst = (t.to(torch.int64).numpy() for t in graph.edges())
    if src.shape != (num_edges,) or dst.shape != (num_edges,):
        return {"error": f"edges of shape {src.shape}/{dst.shape} for {num_edges} edges"}
    for name, ids in (("source", src), ("destination", dst)):
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
            return {"error": f"{name} ids {int(ids.min())}..{int(ids.max())} lie outside 0..{num_nodes - 1}: the "
                             "file is damaged (DGL's format has no checksum)"}
    np.save(pathlib.Path(out) / "src.npy", np.ascontiguousarray(src))
    np.save(pathlib.Path(out) / "dst.npy", np.ascontiguousarray(dst))
    return {"num_nodes": num_nodes, "num_edges": num_edges}


if __name__ == "__main__":  # python -m unigraph.data.dgl_file FILE OUT ALLOWANCE MAX_NODES MAX_EDGES stub|plain
    file, folder, allowed, nodes, edges, stub = sys.argv[1:7]
    result = _child(file, folder, int(allowed), int(nodes), int(edges), stub)
    print(json.dumps(result), flush=True)
    sys.exit(3 if "error" in result else 0)
