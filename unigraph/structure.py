"""Graph structure formats shared by the Graph and every backend.

A backend never sees a :class:`~unigraph.Graph`; it receives a :class:`GraphTensors`, the plain
tensors of three formats of the same edge set:

* COO in the user's edge order: ``src[k] -> dst[k]`` for edge id ``k``.
* CSR by destination ("in-CSR"): the in-edges of destination ``v`` are the positions
  ``in_ptr[v]:in_ptr[v+1]``; ``in_src`` holds their sources and ``in_eid`` their edge ids.
  Node-parallel kernels (g-SpMM) walk this.
* CSR by source ("out-CSR"): the same for out-edges (``out_ptr``, ``out_dst``, ``out_eid``).
  It is the in-CSR of the reverse graph, which is what backward passes run on.

Edges keep their user order inside each CSR row (stable sort), so "the first edge" of a row is
well defined and identical on every backend.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor


class GraphTensors(NamedTuple):
    """The tensors of one graph in COO, in-CSR and out-CSR form (see module docstring)."""

    src: Tensor
    dst: Tensor
    in_ptr: Tensor
    in_src: Tensor
    in_eid: Tensor
    out_ptr: Tensor
    out_dst: Tensor
    out_eid: Tensor
    num_src: int
    num_dst: int

    @property
    def num_edges(self) -> int:
        return self.src.numel()

    @property
    def device(self) -> torch.device:
        return self.src.device

    def reverse(self) -> "GraphTensors":
        """The reverse graph (every edge flipped), sharing all tensors: no work is done."""
        return GraphTensors(
            self.dst, self.src,
            self.out_ptr, self.out_dst, self.out_eid,
            self.in_ptr, self.in_src, self.in_eid,
            self.num_dst, self.num_src,
        )

    def tensor_list(self) -> list[Tensor]:
        """The eight tensors in field order, as custom operators take them."""
        return list(self[:8])

    @staticmethod
    def from_list(tensors: list[Tensor], num_src: int, num_dst: int) -> "GraphTensors":
        return GraphTensors(*tensors, num_src, num_dst)

    def in_degrees(self) -> Tensor:
        return self.in_ptr[1:] - self.in_ptr[:-1]


@dataclasses.dataclass(frozen=True)
class DegreeStats:
    """The graph statistics the backend selector reads (plain Python numbers).

    ``cv_in_degree`` is the coefficient of variation of the in-degree over destination nodes
    (standard deviation / mean; 0 for a graph without edges): about 0 for regular graphs,
    about 1 for Erdos-Renyi graphs at low degree, well above 1 for power-law graphs.
    """

    num_src_nodes: int
    num_dst_nodes: int
    num_edges: int
    mean_in_degree: float
    max_in_degree: int
    cv_in_degree: float
    max_out_degree: int


def stats_from_moments(num_src: int, num_dst: int, num_edges: int, max_in: int, max_out: int,
                       squares_in: int) -> DegreeStats:
    """:class:`DegreeStats` from the figures the counting CSR build returns (the largest in- and
    out-degree, the sum of squared in-degrees): no pass over the degrees."""
    mean = num_edges / max(num_dst, 1)
    variance = squares_in / num_dst - mean * mean if num_dst else 0.0
    std = max(variance, 0.0) ** 0.5
    return DegreeStats(num_src_nodes=num_src, num_dst_nodes=num_dst, num_edges=num_edges, mean_in_degree=mean,
                       max_in_degree=max_in, cv_in_degree=std / mean if mean > 0 else 0.0, max_out_degree=max_out)


def degree_stats(in_ptr: Tensor, out_ptr: Tensor) -> DegreeStats:
    """:class:`DegreeStats` of the graph whose in-CSR and out-CSR row pointers these are (reads
    the data: ``Graph.stats`` keeps the result, and a compiled program's backend choice computes
    it once while tracing, see ``unigraph.backends.selector``)."""
    return stats_from_degrees(in_ptr[1:] - in_ptr[:-1], out_ptr[1:] - out_ptr[:-1], int(in_ptr[-1]))


def stats_from_degrees(deg_in: Tensor, deg_out: Tensor, num_edges: int) -> DegreeStats:
    """:class:`DegreeStats` from the in- and out-degree of every node (CSR row lengths, or
    counts of the COO indices where no CSR is built)."""
    num_src, num_dst = deg_out.numel(), deg_in.numel()
    mean = num_edges / max(num_dst, 1)
    std = max_in = max_out = 0
    figures = []   # read back together: on a GPU each read makes the host wait for the device
    if num_dst:
        deg_in = deg_in.to(torch.float64)
        figures += [deg_in.std(unbiased=False), deg_in.max()]
    if num_src:
        figures.append(deg_out.max().to(torch.float64))   # (degrees are exact in float64 below 2**53)
    values = torch.stack(figures).tolist() if figures else []
    if num_dst:
        std, max_in = values[0], int(values[1])
    if num_src:
        max_out = int(values[-1])
    return DegreeStats(
        num_src_nodes=num_src, num_dst_nodes=num_dst, num_edges=num_edges, mean_in_degree=mean,
        max_in_degree=max_in, cv_in_degree=std / mean if mean > 0 else 0.0, max_out_degree=max_out,
    )


def owned_index(index: Tensor) -> Tensor:
    """A contiguous int64 copy the graph alone holds (a normal tensor even under inference mode,
    so that in-place changes bump its version counter)."""
    with torch.inference_mode(False):
        return index.to(torch.int64, memory_format=torch.contiguous_format, copy=True)


def checked_copies(edge_index: Tensor, num_src: int, num_dst: int, bipartite: bool) -> tuple[Tensor, Tensor]:
    """Owned copies of ``edge_index``'s two rows, each checked against its node count."""
    src, dst = owned_index(edge_index[0]), owned_index(edge_index[1])
    src_name, dst_name = ("num_src_nodes", "num_dst_nodes") if bipartite else ("num_nodes", "num_nodes")
    check_index_range(src, num_src, "0", src_name)
    check_index_range(dst, num_dst, "1", dst_name)
    return src, dst


class IndexRangeError(ValueError, IndexError):
    """An edge index outside its node range: a ``ValueError`` (unigraph's contract for bad input)
    and an ``IndexError`` (what PyG raises for an index out of bounds), so either ``except`` works."""


def check_index_range(index: Tensor, size: int, row_name: str, size_name: str) -> None:
    """:class:`IndexRangeError` unless every entry of ``index`` (row ``row_name`` of an edge_index)
    lies in ``0..size-1``; the message names the first offending edge and ``size_name``."""
    if index.numel() == 0:
        return
    low, high = (int(v) for v in torch.aminmax(index))   # one pass (a mini-batch builds a graph every step)
    if low < 0:
        at = int((index < 0).nonzero()[0])
        valid = f"valid indices are 0..{size - 1}" if size > 0 else f"{size_name}=0"
        raise IndexRangeError(f"edge_index[{row_name}] holds the negative index {low} (first at edge {at}); "
                              f"indices must be >= 0 ({valid})")
    if high >= size:
        at = int((index >= size).nonzero()[0])
        raise IndexRangeError(
            f"edge_index[{row_name}] holds index {high} (first out-of-range at edge {at}) but {size_name}={size}; "
            f"valid indices are 0..{size - 1}" if size > 0 else
            f"edge_index[{row_name}] holds index {high} but {size_name}=0: a graph without nodes cannot have edges")


def build_csr(rows: Tensor, cols: Tensor, num_rows: int) -> tuple[Tensor, Tensor, Tensor]:
    """Compressed rows of the edge list ``rows[k] -> cols[k]`` (indices already checked).

    Returns ``(ptr, cols_sorted, perm)`` with ``perm`` the edge ids in row order. The sort is
    stable so that edges keep their input order inside a row. On the CPU with numba installed,
    a counting sort (``unigraph.kernels.cpu.csr``: O(E + N), ~40x faster than the stable sort on
    a mini-batch of small graphs); otherwise a stable ``torch.sort``. Both give the same tensors.
    """
    if _counting_runs(rows, cols):
        from unigraph.kernels.cpu.csr import counting_csr
        ptr, cols_sorted, perm = counting_csr(rows.detach().contiguous().numpy(),
                                              cols.detach().contiguous().numpy(), num_rows)
        return torch.from_numpy(ptr), torch.from_numpy(cols_sorted), torch.from_numpy(perm)
    perm = torch.sort(rows, stable=True).indices
    counts = count_index(rows, num_rows)
    ptr = torch.zeros(num_rows + 1, dtype=torch.int64, device=rows.device)
    torch.cumsum(counts, 0, out=ptr[1:])
    return ptr, cols[perm], perm


def count_index(index: Tensor, size: int) -> Tensor:
    """How often each of ``0..size-1`` occurs in ``index`` (int64 counts; entries already checked
    to lie in that range): ``torch.bincount`` on the CPU, an ``index_add_`` of ones on a GPU.

    Why: CUDA's ``bincount`` reads the largest entry back to size its output, so the host waits
    until the device has run everything queued before it; a sampled block's degree counts did
    that up to three times a mini-batch step. Integer sums are exact in any order, so both give
    the same counts. Under ``torch.use_deterministic_algorithms`` (which flags CUDA's
    ``index_add_``) it is ``bincount``."""
    if index.device.type == "cpu" or torch.are_deterministic_algorithms_enabled():
        return torch.bincount(index, minlength=size)
    return _count_by_adding(index, size)


def _count_by_adding(index: Tensor, size: int) -> Tensor:
    """:func:`count_index` without a host wait on any device: ones added into zeros."""
    return torch.zeros(size, dtype=torch.int64, device=index.device).index_add_(0, index, torch.ones_like(index))


def build_both_csr(src: Tensor, dst: Tensor, num_src: int, num_dst: int):
    """``(in_csr, out_csr, (max_in_degree, max_out_degree, sum of squared in-degrees))`` in one
    counting pass each (``unigraph.kernels.cpu.csr.both_csr``), or None where that kernel cannot
    run (no numba, not on the CPU): then build each with :func:`build_csr`. For a graph whose
    formats are all built at once (a new mini-batch every step), one dispatch and no torch
    reductions for the degree statistics (:func:`stats_from_moments`)."""
    if not _counting_runs(src, dst):
        return None
    from unigraph.kernels.cpu.csr import both_csr
    *arrays, max_in, max_out, squares_in = both_csr(src.detach().contiguous().numpy(),
                                                    dst.detach().contiguous().numpy(), num_src, num_dst)
    tensors = [torch.from_numpy(a) for a in arrays]
    return tuple(tensors[:3]), tuple(tensors[3:]), (int(max_in), int(max_out), int(squares_in))


def ingest_edge_index(edge_index: Tensor, num_src: int, num_dst: int, bipartite: bool):
    """``(src, dst, in_csr, out_csr, moments)``: :func:`checked_copies` and :func:`build_both_csr`
    in one pass over the edges (``unigraph.kernels.cpu.csr.ingest``), or None where that kernel
    cannot run (not an int64 CPU tensor, no numba). An index out of range raises the error
    :func:`checked_copies` raises, naming the first offending edge."""
    built = _ingest("ingest", edge_index, num_src, num_dst, bipartite)
    if built is None:
        return None
    src, dst, *formats, max_in, max_out, squares_in = built
    return src, dst, tuple(formats[:3]), tuple(formats[3:]), (int(max_in), int(max_out), int(squares_in))


def ingest_edge_list(edge_index: Tensor, num_src: int, num_dst: int, bipartite: bool):
    """``(src, dst, in_degree)``: :func:`checked_copies` and the in-degree counts in one pass over
    the edges (``unigraph.kernels.cpu.csr.ingest_edges``), or None where that kernel cannot run
    (as :func:`ingest_edge_index`, whose errors it raises)."""
    return _ingest("ingest_edges", edge_index, num_src, num_dst, bipartite)


def _ingest(kernel: str, edge_index: Tensor, num_src: int, num_dst: int, bipartite: bool) -> list | None:
    """The outputs of ``unigraph.kernels.cpu.csr.<kernel>`` on ``edge_index`` after its ``bad``
    flag (arrays as normal tensors, scalars as they come), or None where it cannot run; an index
    out of range raises :func:`checked_copies`'s error, naming the first offending edge."""
    if edge_index.device.type != "cpu" or edge_index.dtype != torch.int64 or not _numba_csr():
        return None
    if torch.is_inference_mode_enabled():
        with torch.inference_mode(False):   # normal tensors: the graph guards their version counters
            return _ingest(kernel, edge_index, num_src, num_dst, bipartite)
    bad, *outputs = getattr(_csr_kernels(), kernel)(edge_index.detach().contiguous().numpy(), num_src, num_dst)
    if bad >= 0:
        checked_copies(edge_index, num_src, num_dst, bipartite)   # raises, naming the problem
        raise AssertionError(f"edge {bad} is out of range but checked_copies accepted it")
    return [torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in outputs]


@functools.lru_cache(maxsize=1)
def _csr_kernels():
    """``unigraph.kernels.cpu.csr``, imported on first use (importing numba costs ~0.5 s)."""
    from unigraph.kernels.cpu import csr
    return csr


def _counting_runs(rows: Tensor, cols: Tensor) -> bool:
    """Whether the counting kernels can build these indices' CSR: int64 CPU tensors, numba installed."""
    return (rows.device.type == "cpu" and rows.dtype == torch.int64 and cols.dtype == torch.int64
            and _numba_csr())


@functools.lru_cache(maxsize=1)
def _numba_csr() -> bool:
    """Whether the counting sort can run (numba installed; asked once per process)."""
    from unigraph.kernels.cpu import numba_status
    return numba_status()[0]


def self_loop_parts(src: Tensor, dst: Tensor, num_loops: int) -> tuple[Tensor, Tensor]:
    """``(kept, loop_slot)`` for the graph with one self-loop per node ``i < num_loops``: ``kept``
    the ids of the edges that are not self-loops (in order), ``loop_slot[k]`` the node of edge
    ``k`` if it is a self-loop, else ``num_loops`` (a slot past the loops: see
    ``SelfLooped.existing_loop_values``). A loop ``i -> i`` has ``i < num_src`` and ``i < num_dst``,
    so ``i < num_loops``."""
    is_loop = src == dst
    kept = (~is_loop).nonzero().flatten()
    loop_slot = torch.where(is_loop, src, num_loops)
    return kept, loop_slot


def self_looped_edges(src: Tensor, dst: Tensor, num_loops: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(new_src, new_dst, kept, loop_slot)``: the edges of :func:`self_loop_parts`'s ``kept``
    followed by one loop ``i -> i`` per node ``i < num_loops``, in one kernel call where the
    counting kernels run (``unigraph.kernels.cpu.csr.self_looped``), else by torch's ops (the
    same tensors)."""
    if _counting_runs(src, dst):
        from unigraph.kernels.cpu.csr import self_looped
        with torch.inference_mode(False):   # normal tensors: the looped graph guards their version counters
            arrays = self_looped(src.detach().contiguous().numpy(), dst.detach().contiguous().numpy(), int(num_loops))
            return tuple(torch.from_numpy(a) for a in arrays)
    kept, loop_slot = self_loop_parts(src, dst, num_loops)
    return (*loops_appended(src, dst, kept, num_loops), kept, loop_slot)


def loops_appended(src: Tensor, dst: Tensor, kept: Tensor, num_loops: int) -> tuple[Tensor, Tensor]:
    """``(new_src, new_dst)``: the edges ``kept`` (ids, in order), then one loop ``i -> i`` per node
    ``i < num_loops`` (torch's ops: also inside a ``torch.compile`` trace)."""
    loops = torch.arange(num_loops, device=src.device)
    return torch.cat([src[kept], loops]), torch.cat([dst[kept], loops])
