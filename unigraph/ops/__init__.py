"""``unigraph.ops``: the graph operators every layer is written in.

* :func:`gspmm` (generalized sparse-dense matrix product): a destination-node tensor,
  ``out[v] = reduce_{(s, v) in E} op(u[s], e[edge])``.
* :func:`gsddmm` (generalized sampled dense-dense matrix product): an edge tensor,
  ``out[edge] = op(lhs[target_l(edge)], rhs[target_r(edge)])``.
* :func:`edge_softmax`: softmax of edge scores over the in-edges of each destination.
* :func:`gat_attention`: GAT's scores + edge softmax + weighted sum, fused where a backend can.

Each call takes the graph's tensors once (``g.tensors()``), checks its input (raising
``ValueError``/``TypeError`` that names the op and the problem, before any kernel runs), views
the operands at equal rank (DGL's broadcasting, :mod:`unigraph.ops.broadcast`), asks the
selector for a backend (see :func:`unigraph.explain`) and calls that backend's autograd
Function (:mod:`unigraph.ops.custom`; registered PyTorch custom operators while compiling), so
every op is differentiable, twice, on every backend and traceable by ``torch.compile``.

Semantics shared by every backend: a destination without in-edges gets 0 for every reduce;
max/min are the true extreme of the messages (-inf for a row whose messages are all -inf, NaN
for a row with a NaN message, as ``torch.amax``), and send their gradient to the arg-extreme
edge: the first in edge-id order among exact ties, the first NaN edge of a NaN row; mean divides
by the in-degree. Under ``torch.autocast`` the operands are cast to the autocast dtype (float64
excepted, as torch does), softmax statistics and accumulators stay float32.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from unigraph.backends import Request, selector
from unigraph.backends.base import differentiated
from unigraph.graph import Graph
from unigraph.ops import native_lane
from unigraph.ops.broadcast import with_rank
from unigraph.ops.custom import (  # importing it registers torch.ops.unigraph.*
    call_edge_softmax, call_gat_attention, call_gsddmm, call_gspmm)
from unigraph.ops.spec import (
    GSDDMM_OPS, GSPMM_OPS, REDUCES, check_edge_scores, check_gat_attention, check_gsddmm, check_gspmm)
from unigraph.structure import GraphTensors

_AUTOCAST_ELIGIBLE = (torch.float16, torch.bfloat16, torch.float32)  # torch's autocast leaves float64 alone


def _tensors(g) -> GraphTensors:
    """The graph's tensors, through the one Graph method every call goes through."""
    if not isinstance(g, Graph):
        raise TypeError(f"expected a unigraph.Graph, got {type(g).__name__}; build one with unigraph.Graph(edge_index)")
    return g.tensors()  # (under torch.compile, a graph given to the compiled program must be prepared)


def _autocast(device: torch.device, *tensors):
    """Under ``torch.autocast`` on ``device``, every floating operand in the autocast dtype (so
    mixed float32/bfloat16 operands agree); outside it, the operands as they are."""
    if not torch.is_autocast_enabled(device.type):
        return tensors
    dtype = torch.get_autocast_dtype(device.type)
    return tuple(t.to(dtype) if isinstance(t, Tensor) and t.dtype in _AUTOCAST_ELIGIBLE else t for t in tensors)


def _aligned(a: Tensor | None, b: Tensor | None) -> tuple[Tensor | None, Tensor | None]:
    """Both operands at equal rank with at least one feature dimension (what kernels expect)."""
    ndim = max(2, a.dim() if a is not None else 0, b.dim() if b is not None else 0)
    return with_rank(a, ndim), with_rank(b, ndim)


def _request(kind: str, op: str, reduce: str | None, features: tuple, like: Tensor, *operands) -> Request:
    """The selector's view of a call; ``operands`` decide whether it is differentiated (the cost
    model then ranks forward + backward time). The thread count is read here, except while dynamo
    traces (it cannot trace ``torch.get_num_threads``): the selector reads it then, eagerly."""
    threads = 0 if torch.compiler.is_compiling() else torch.get_num_threads()
    return Request(kind, op, reduce, max(math.prod(features), 1), like.dtype, like.device, differentiated(*operands),
                   threads)


def gspmm(g: Graph, op: str, reduce: str, u: Tensor | None = None, e: Tensor | None = None, *,
          backend: str | None = None) -> Tensor:
    """Generalized SpMM: ``out[v] = reduce_{(s, v) in E} op(u[s], e[edge])``.

    Args:
        g: the graph; messages flow from source ``s`` to destination ``v``.
        op: one of ``copy_u``, ``copy_e``, ``u_add_e``, ``u_sub_e``, ``u_mul_e``, ``u_div_e``.
        reduce: one of ``sum``, ``mean``, ``max``, ``min``.
        u: source-node features ``[num_src_nodes, *]`` (all ops but copy_e).
        e: edge features ``[num_edges, *]`` (all ops but copy_u), broadcast against ``u`` by
            DGL's rule (feature shapes aligned from the right: ``[E, H, 1]`` weighs ``[N, H, F]``).
        backend: run on this backend instead of the current choice.

    Returns:
        ``[num_dst_nodes, *broadcast feature shape]``; 0 for destinations without in-edges.
    """
    if op in native_lane.OPS:  # the native lane, where it applies (unigraph/ops/native_lane.py)
        out = native_lane.run(g, op, reduce, u, e, backend)
        if out is not None:
            return out
    elif op == "copy_e" and u is None:
        out = native_lane.run_copy_e(g, reduce, e, backend)
        if out is not None:
            return out
    gt = _tensors(g)
    u, e = _autocast(gt.device, u, e)
    features = check_gspmm(gt, op, reduce, u, e)
    u, e = _aligned(u, e)
    request = _request("gspmm", op, reduce, features, u if u is not None else e, u, e)
    chosen = selector.choose(g, request, backend, trial=lambda b, u, e: call_gspmm(gt, b, op, reduce, u, e),
                             operands=(u, e))
    return call_gspmm(gt, chosen, op, reduce, u, e).reshape((gt.num_dst,) + features)


def gsddmm(g: Graph, op: str, lhs: Tensor | None, rhs: Tensor | None, lhs_target: str = "u",
           rhs_target: str = "v", *, backend: str | None = None) -> Tensor:
    """Generalized SDDMM: ``out[edge] = op(lhs[t_l(edge)], rhs[t_r(edge)])``.

    Args:
        g: the graph.
        op: one of ``add``, ``sub``, ``mul``, ``div``, ``dot``, ``copy_lhs``, ``copy_rhs``.
        lhs, rhs: operands; each lives on its target's rows (None for the unused side of a copy);
            their feature shapes broadcast by DGL's rule.
        lhs_target, rhs_target: ``u`` (source nodes), ``v`` (destination nodes) or ``e`` (edges).
        backend: run on this backend instead of the current choice.

    Returns:
        ``[num_edges, *broadcast feature shape]`` (``dot`` keeps its last dimension as size 1).
    """
    gt = _tensors(g)
    lhs, rhs = _autocast(gt.device, lhs, rhs)
    features = check_gsddmm(gt, op, lhs, rhs, lhs_target, rhs_target)
    if op == "copy_lhs":
        rhs = None
    elif op == "copy_rhs":
        lhs = None
    lhs, rhs = _aligned(lhs, rhs)
    # the cost of dot is in the elements it multiplies, not in its one output per slice
    work = features + (max(lhs.shape[-1], rhs.shape[-1]),) if op == "dot" else features
    request = _request("gsddmm", op, None, work, lhs if lhs is not None else rhs, lhs, rhs)
    chosen = selector.choose(g, request, backend, operands=(lhs, rhs),
                             trial=lambda b, lhs, rhs: call_gsddmm(gt, b, op, lhs, rhs, lhs_target, rhs_target))
    return call_gsddmm(gt, chosen, op, lhs, rhs, lhs_target, rhs_target).reshape((gt.num_edges,) + features)


def edge_softmax(g: Graph, scores: Tensor, *, backend: str | None = None) -> Tensor:
    """Softmax of ``scores`` (``[num_edges, *]``) over the in-edges of each destination node,
    computed as ``exp(s - max) / sum(exp(s - max))`` so large scores cannot overflow (statistics in
    float32 for half-precision scores). Like ``torch.softmax`` it keeps the scores' dtype under autocast."""
    gt = _tensors(g)
    check_edge_scores(gt, scores)
    shape = scores.shape
    scores, _ = _aligned(scores, None)
    request = _request("edge_softmax", "softmax", None, tuple(shape[1:]), scores, scores)
    chosen = selector.choose(g, request, backend, trial=lambda b, scores: call_edge_softmax(gt, b, scores),
                             operands=(scores,))
    return call_edge_softmax(gt, chosen, scores).reshape(shape)


def gat_attention(g: Graph, h: Tensor, el: Tensor, er: Tensor, negative_slope: float = 0.2, *,
                  edge_scores: Tensor | None = None, edge_mask: Tensor | None = None,
                  backend: str | None = None) -> Tensor:
    r"""GAT's attention aggregation in one call (fused on backends that have the kernel).

    .. math::
        z_e = el_u + er_v \;(+\, ee_e), \qquad
        a_e = \operatorname{softmax}_{e \in in(v)}\big(\mathrm{LeakyReLU}(z_e)\big), \qquad
        out_v = \sum_{e=(u,v)} a_e\, m_e\, h_u

    per head. Fused backends never build the E x H x F messages; every backend avoids storing
    the attention weights (backward recomputes them from the per-node softmax statistics, kept
    in float32 for half precision). Twice differentiable on every backend.

    Args:
        g: the graph.
        h: projected source features ``[num_src_nodes, H, F]``.
        el, er: per-head source and destination scores ``[num_src_nodes, H]``, ``[num_dst_nodes, H]``.
        negative_slope: LeakyReLU slope (0.2 in GAT).
        edge_scores: optional per-edge score term ``[num_edges, H]`` (GAT with edge features).
        edge_mask: optional multiplier per edge and head ``[num_edges, H]``; attention dropout
            passes ``bernoulli(1 - p) / (1 - p)``.
        backend: run on this backend instead of the current choice.

    Returns:
        ``[num_dst_nodes, H, F]``; zeros for destinations without in-edges.
    """
    gt = _tensors(g)
    h, el, er, edge_scores, edge_mask = _autocast(gt.device, h, el, er, edge_scores, edge_mask)
    check_gat_attention(gt, h, el, er, edge_scores, negative_slope, edge_mask)
    slope = float(negative_slope)
    request = _request("gat_attention", "gat", None, tuple(h.shape[1:]), h, h, el, er, edge_scores, edge_mask)
    chosen = selector.choose(g, request, backend, operands=(h, el, er, edge_scores, edge_mask),
                             trial=lambda b, h, el, er, ee, mask: call_gat_attention(gt, b, h, el, er, ee, slope, mask))
    return call_gat_attention(gt, chosen, h, el, er, edge_scores, slope, edge_mask)


__all__ = ["gspmm", "gsddmm", "edge_softmax", "gat_attention", "GSPMM_OPS", "GSDDMM_OPS", "REDUCES"]
