"""``dgl.ops`` on unigraph: DGL's operator names and signatures over unigraph's kernels.

* :func:`gspmm` ``(g, op, reduce_op, lhs_data, rhs_data)`` with DGL's op names: ``add``, ``sub``,
  ``mul``, ``div`` (source feature ``op`` edge feature), ``copy_lhs`` (the source feature; the
  edge operand, which DGL code passes anyway, is not read), ``copy_rhs`` (the edge feature);
  reducers ``sum``, ``mean``, ``max``, ``min``. Runs as :func:`unigraph.ops.gspmm` (``u_add_e``,
  ..., ``copy_u``, ``copy_e``): 0 for a destination without in-edges, for every reducer.
* :func:`gsddmm` ``(g, op, lhs_data, rhs_data, lhs_target='u', rhs_target='v')``:
  :func:`unigraph.ops.gsddmm`, whose signature is DGL's.
* the shorthands, every one spelled out below: ``{u_op_e, copy_u, copy_e}_{reduce}`` (g-SpMM)
  and ``{lhs}_{op}_{rhs}`` for two different targets among u, v, e and op in add, sub, mul, div,
  dot (g-SDDMM), ``copy_u``, ``copy_v``, ``copy_e``.
* :func:`segment_reduce`, :func:`segment_softmax` (a g-SpMM / edge softmax on the graph whose
  edges join each row to its segment), :func:`segment_mm`, :func:`gather_mm` (unigraph's grouped
  matrix product, :func:`unigraph.hetero.segment_matmul`), :func:`edge_softmax` with ``eids=``,
  ``norm_by=`` and the heterograph dict form.

Operands of different rank are aligned as DGL aligns them: 1s right after the row dimension
(:mod:`unigraph.ops.broadcast`). DGL's heterograph forms of ``gspmm``/``gsddmm`` (tuples of
per-type operands) are not offered: call them on ``hg[etype]``.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import Tensor

from unigraph import ops as _ops
from unigraph.dgl.base import DGLError, is_all
from unigraph.dgl.heterograph import DGLHeteroGraph, one_relation
from unigraph.graph import Graph as CoreGraph
from unigraph.hetero.grouped import segment_matmul

SPMM_OPS = {"add": "u_add_e", "sub": "u_sub_e", "mul": "u_mul_e", "div": "u_div_e", "copy_lhs": "copy_u",
            "copy_rhs": "copy_e"}
REDUCE_OPS = ("sum", "mean", "max", "min")


_graph = one_relation


def gspmm(g: Any, op: str, reduce_op: str, lhs_data: Tensor | None, rhs_data: Tensor | None) -> Tensor:
    """``out[v] = reduce_op over in-edges (u, e) of v of op(lhs_data[u], rhs_data[e])``."""
    g = _graph(g, "gspmm")
    if op not in SPMM_OPS:
        raise DGLError(f"gspmm op must be one of {list(SPMM_OPS)}, got {op!r}")
    if reduce_op not in REDUCE_OPS:
        raise DGLError(f"gspmm reduce_op must be one of {list(REDUCE_OPS)}, got {reduce_op!r}")
    if op == "copy_lhs":
        rhs_data = None
    elif op == "copy_rhs":
        lhs_data = None
    return _ops.gspmm(g, SPMM_OPS[op], reduce_op, lhs_data, rhs_data)


def gsddmm(g: Any, op: str, lhs_data: Tensor | None, rhs_data: Tensor | None, lhs_target: str = "u",
           rhs_target: str = "v") -> Tensor:
    """``out[e] = op(lhs_data[lhs_target(e)], rhs_data[rhs_target(e)])`` for every edge ``e``."""
    return _ops.gsddmm(_graph(g, "gsddmm"), op, lhs_data, rhs_data, lhs_target, rhs_target)


# ---------------------------------------------------------------------- g-SpMM shorthands
def u_add_e_sum(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "add", "sum", x, y)


def u_add_e_max(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "add", "max", x, y)


def u_add_e_min(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "add", "min", x, y)


def u_add_e_mean(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "add", "mean", x, y)


def u_sub_e_sum(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "sub", "sum", x, y)


def u_sub_e_max(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "sub", "max", x, y)


def u_sub_e_min(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "sub", "min", x, y)


def u_sub_e_mean(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "sub", "mean", x, y)


def u_mul_e_sum(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "mul", "sum", x, y)


def u_mul_e_max(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "mul", "max", x, y)


def u_mul_e_min(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "mul", "min", x, y)


def u_mul_e_mean(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "mul", "mean", x, y)


def u_div_e_sum(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "div", "sum", x, y)


def u_div_e_max(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "div", "max", x, y)


def u_div_e_min(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "div", "min", x, y)


def u_div_e_mean(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gspmm(g, "div", "mean", x, y)


def copy_u_sum(g: Any, x: Tensor) -> Tensor:
    return gspmm(g, "copy_lhs", "sum", x, None)


def copy_u_max(g: Any, x: Tensor) -> Tensor:
    return gspmm(g, "copy_lhs", "max", x, None)


def copy_u_min(g: Any, x: Tensor) -> Tensor:
    return gspmm(g, "copy_lhs", "min", x, None)


def copy_u_mean(g: Any, x: Tensor) -> Tensor:
    return gspmm(g, "copy_lhs", "mean", x, None)


def copy_e_sum(g: Any, x: Tensor) -> Tensor:
    return gspmm(g, "copy_rhs", "sum", None, x)


def copy_e_max(g: Any, x: Tensor) -> Tensor:
    return gspmm(g, "copy_rhs", "max", None, x)


def copy_e_min(g: Any, x: Tensor) -> Tensor:
    return gspmm(g, "copy_rhs", "min", None, x)


def copy_e_mean(g: Any, x: Tensor) -> Tensor:
    return gspmm(g, "copy_rhs", "mean", None, x)


# ---------------------------------------------------------------------- g-SDDMM shorthands
def u_add_v(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "add", x, y, "u", "v")


def u_sub_v(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "sub", x, y, "u", "v")


def u_mul_v(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "mul", x, y, "u", "v")


def u_div_v(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "div", x, y, "u", "v")


def u_dot_v(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "dot", x, y, "u", "v")


def u_add_e(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "add", x, y, "u", "e")


def u_sub_e(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "sub", x, y, "u", "e")


def u_mul_e(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "mul", x, y, "u", "e")


def u_div_e(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "div", x, y, "u", "e")


def u_dot_e(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "dot", x, y, "u", "e")


def v_add_u(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "add", x, y, "v", "u")


def v_sub_u(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "sub", x, y, "v", "u")


def v_mul_u(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "mul", x, y, "v", "u")


def v_div_u(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "div", x, y, "v", "u")


def v_dot_u(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "dot", x, y, "v", "u")


def v_add_e(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "add", x, y, "v", "e")


def v_sub_e(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "sub", x, y, "v", "e")


def v_mul_e(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "mul", x, y, "v", "e")


def v_div_e(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "div", x, y, "v", "e")


def v_dot_e(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "dot", x, y, "v", "e")


def e_add_u(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "add", x, y, "e", "u")


def e_sub_u(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "sub", x, y, "e", "u")


def e_mul_u(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "mul", x, y, "e", "u")


def e_div_u(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "div", x, y, "e", "u")


def e_dot_u(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "dot", x, y, "e", "u")


def e_add_v(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "add", x, y, "e", "v")


def e_sub_v(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "sub", x, y, "e", "v")


def e_mul_v(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "mul", x, y, "e", "v")


def e_div_v(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "div", x, y, "e", "v")


def e_dot_v(g: Any, x: Tensor, y: Tensor) -> Tensor:
    return gsddmm(g, "dot", x, y, "e", "v")


def copy_u(g: Any, x: Tensor) -> Tensor:
    """Each edge's source feature."""
    return gsddmm(g, "copy_lhs", x, None, "u", "v")


def copy_v(g: Any, x: Tensor) -> Tensor:
    """Each edge's destination feature."""
    return gsddmm(g, "copy_lhs", x, None, "v", "u")


def copy_e(g: Any, x: Tensor) -> Tensor:
    """The edge feature itself (DGL's ``copy_e``)."""
    return gsddmm(g, "copy_lhs", x, None, "e", "u")


# ---------------------------------------------------------------------- segments
def _segments_graph(seglen: Any, rows: int, device: torch.device) -> CoreGraph:
    """The bipartite graph joining row ``i`` to its segment (rows sorted by segment)."""
    seglen = torch.as_tensor(seglen, device=device)
    if seglen.dim() != 1 or seglen.is_floating_point() or seglen.dtype == torch.bool:
        raise DGLError(f"seglen must be a 1-D integer tensor, got {seglen.dtype} {list(seglen.shape)}")
    seglen = seglen.to(torch.int64)
    if seglen.numel() and int(seglen.min()) < 0:
        raise DGLError("seglen must be >= 0")
    if int(seglen.sum()) != rows:
        raise DGLError(f"seglen sums to {int(seglen.sum())} but the value has {rows} rows")
    segment = torch.repeat_interleave(torch.arange(seglen.numel(), device=device), seglen)
    return CoreGraph._trusted(torch.arange(rows, device=device), segment, rows, seglen.numel(), True)


def segment_reduce(seglen: Any, value: Tensor, reducer: str = "sum") -> Tensor:
    """``out[i] = reducer(value[offset_i : offset_i + seglen[i]])``; 0 for an empty segment."""
    return _ops.gspmm(_segments_graph(seglen, value.shape[0], value.device), "copy_u", reducer, value, None)


def segment_softmax(seglen: Any, value: Tensor) -> Tensor:
    """Softmax within each segment of rows."""
    return _ops.edge_softmax(_segments_graph(seglen, value.shape[0], value.device), value)


def segment_mm(a: Tensor, b: Tensor, seglen_a: Any) -> Tensor:
    """``out[rows of segment i] = a[rows of segment i] @ b[i]`` (``a`` sorted by segment)."""
    return segment_matmul(a, seglen_a, b)


def gather_mm(a: Tensor, b: Tensor, *, idx_a: Tensor | None = None, idx_b: Tensor | None = None) -> Tensor:
    """``out[i] = a[idx_a[i]] @ b[idx_b[i]]`` (each index defaults to ``i``): rows are grouped by
    ``idx_b`` and multiplied as one grouped product, then put back in order."""
    if idx_a is not None:
        a = a.index_select(0, idx_a.to(torch.int64))
    if idx_b is None:
        if a.shape[0] != b.shape[0]:
            raise DGLError(f"gather_mm without idx_b needs as many rows in a as matrices in b ({a.shape[0]} vs {b.shape[0]})")
        idx_b = torch.arange(a.shape[0], device=a.device)
    idx_b = idx_b.to(device=a.device, dtype=torch.int64)
    if idx_b.numel() != a.shape[0]:
        raise DGLError(f"idx_b has {idx_b.numel()} entries for {a.shape[0]} rows of a")
    if idx_b.numel() and (int(idx_b.min()) < 0 or int(idx_b.max()) >= b.shape[0]):
        raise DGLError(f"idx_b holds values outside 0..{b.shape[0] - 1}")
    order = torch.argsort(idx_b, stable=True)
    counts = torch.bincount(idx_b, minlength=b.shape[0])
    grouped = segment_matmul(a.index_select(0, order), counts, b)
    return torch.empty_like(grouped).index_copy(0, order, grouped)


# ---------------------------------------------------------------------- edge softmax
def edge_softmax(graph: Any, logits: Any, eids: Any = "__ALL__", norm_by: str = "dst") -> Any:
    """Softmax of ``logits`` over the in-edges of each destination (``norm_by='dst'``) or the
    out-edges of each source (``'src'``); with ``eids``, over those edges only (``logits`` has one
    row per listed edge). On a heterograph, ``logits`` is ``{etype: tensor}`` and the softmax runs
    over every relation into (or out of) the same node: the result is keyed by canonical etype."""
    if norm_by not in ("dst", "src"):
        raise DGLError(f"norm_by must be 'dst' or 'src', got {norm_by!r}")
    if isinstance(logits, Mapping):
        return _hetero_edge_softmax(graph, logits, norm_by)
    g = _graph(graph, "edge_softmax")
    if not is_all(eids):
        from unigraph.dgl.views import as_ids
        ids = as_ids(eids, g.num_edges, "eids", g.device)
        src, dst = g.src[ids], g.dst[ids]
        g = CoreGraph._trusted(src, dst, g.num_src_nodes, g.num_dst_nodes, g.is_bipartite)
    if norm_by == "src":
        g = g.reverse()
    return _ops.edge_softmax(g, logits)


def _hetero_edge_softmax(graph: Any, logits: Mapping[Any, Tensor], norm_by: str) -> dict:
    """One edge softmax over every relation's edges at once: the edges are grouped by their
    destination (source) node, numbered over all node types, so one kernel call normalizes across
    relations (and autograd reaches every input, as through DGL's homogeneous form)."""
    relations = graph._relations if isinstance(graph, DGLHeteroGraph) else {graph.canonical_etypes[0]: graph}
    scores = {graph.to_canonical_etype(etype): value for etype, value in logits.items()}
    side = 2 if norm_by == "dst" else 0
    ntypes = sorted({cet[0] for cet in relations} | {cet[2] for cet in relations})
    counts = {t: _type_count(relations, t) for t in ntypes}
    offset, start = {}, 0
    for ntype in ntypes:
        offset[ntype], start = start, start + counts[ntype]
    order = list(scores)
    ends = [(relations[cet].dst if norm_by == "dst" else relations[cet].src) + offset[cet[side]] for cet in order]
    sizes = [e.numel() for e in ends]
    device = ends[0].device if ends else torch.device("cpu")
    total = sum(sizes)
    joined = CoreGraph._trusted(torch.arange(total, device=device), torch.cat(ends), total, start, True)
    soft = _ops.edge_softmax(joined, torch.cat([scores[cet] for cet in order]))
    return dict(zip(order, torch.split(soft, sizes)))


def _type_count(relations: Mapping, ntype: str) -> int:
    for (src_type, _, dst_type), rel in relations.items():
        if src_type == ntype:
            return int(rel.num_src_nodes)
        if dst_type == ntype:
            return int(rel.num_dst_nodes)
    return 0
