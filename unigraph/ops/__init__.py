"""``unigraph.ops``: the graph operators every layer is written in.

* :func:`gspmm` (generalized sparse-dense matrix product): a destination-node tensor,
  ``out[v] = reduce_{(s, v) in E} op(u[s], e[edge])``.
* :func:`gsddmm` (generalized sampled dense-dense matrix product): an edge tensor,
  ``out[edge] = op(lhs[target_l(edge)], rhs[target_r(edge)])``.
* :func:`edge_softmax`: softmax of edge scores over the in-edges of each destination.
* :func:`gat_attention`: GAT's scores + edge softmax + weighted sum, fused where a backend can.

Each call checks its input (raising ``ValueError``/``TypeError`` that names the problem), asks
the selector for a backend (see :func:`unigraph.explain`) and runs that backend's kernel through
:mod:`unigraph.ops.custom` (registered PyTorch custom operators), so every op is differentiable
on every backend and traceable by ``torch.compile``.

Semantics shared by every backend: a destination without in-edges gets 0 for every reduce;
max/min send their gradient to the arg-extreme edge (on exact ties, to one of the tied edges);
mean divides by the in-degree. Feature shapes broadcast as in DGL (see
:mod:`unigraph.ops.spec`).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from unigraph.backends import Request
from unigraph.backends import selector
from unigraph.graph import Graph
from unigraph.ops.custom import (  # importing it registers torch.ops.unigraph.*
    call_edge_softmax, call_gat_attention, call_gsddmm, call_gspmm)
from unigraph.ops.spec import (
    GSDDMM_OPS, GSPMM_OPS, REDUCES, check_edge_scores, check_gat_attention, check_gsddmm, check_gspmm)


def _check_graph(g) -> Graph:
    if not isinstance(g, Graph):
        raise TypeError(f"expected a unigraph.Graph, got {type(g).__name__}; build one with unigraph.Graph(edge_index)")
    if torch.compiler.is_compiling() and not g.is_prepared():
        raise RuntimeError("torch.compile needs the graph's formats built before tracing: call g.prepare() "
                           "once (eagerly) before running the compiled model")
    return g


def _with_rank(t: Tensor | None, ndim: int) -> Tensor | None:
    """View ``t`` with trailing singleton dims up to ``ndim`` dims (DGL's broadcasting rule)."""
    if t is None or t.dim() == ndim:
        return t
    return t.reshape(tuple(t.shape) + (1,) * (ndim - t.dim()))


def _aligned(a: Tensor | None, b: Tensor | None) -> tuple[Tensor | None, Tensor | None]:
    """Both operands at equal rank with at least one feature dimension (what kernels expect)."""
    ndim = max(2, a.dim() if a is not None else 0, b.dim() if b is not None else 0)
    return _with_rank(a, ndim), _with_rank(b, ndim)


def _request(kind: str, op: str, reduce: str | None, features: tuple, like: Tensor) -> Request:
    return Request(kind, op, reduce, max(math.prod(features), 1), like.dtype, like.device)


def gspmm(g: Graph, op: str, reduce: str, u: Tensor | None = None, e: Tensor | None = None, *,
          backend: str | None = None) -> Tensor:
    """Generalized SpMM: ``out[v] = reduce_{(s, v) in E} op(u[s], e[edge])``.

    Args:
        g: the graph; messages flow from source ``s`` to destination ``v``.
        op: one of ``copy_u``, ``copy_e``, ``u_add_e``, ``u_sub_e``, ``u_mul_e``, ``u_div_e``.
        reduce: one of ``sum``, ``mean``, ``max``, ``min``.
        u: source-node features ``[num_src_nodes, *]`` (all ops but copy_e).
        e: edge features ``[num_edges, *]`` (all ops but copy_u), broadcast against ``u``.
        backend: run on this backend instead of the current choice.

    Returns:
        ``[num_dst_nodes, *broadcast feature shape]``; 0 for destinations without in-edges.
    """
    _check_graph(g)
    features = check_gspmm(g, op, reduce, u, e)
    u_k, e_k = _aligned(u, e)
    like = u_k if u_k is not None else e_k
    name = selector.choose(g, _request("gspmm", op, reduce, features, like), backend,
                           trial=lambda n: call_gspmm(g.tensors(), n, op, reduce, u_k, e_k))
    out = call_gspmm(g.tensors(), name, op, reduce, u_k, e_k)
    return out.reshape((g.num_dst_nodes,) + features)


def gsddmm(g: Graph, op: str, lhs: Tensor | None, rhs: Tensor | None, lhs_target: str = "u",
           rhs_target: str = "v", *, backend: str | None = None) -> Tensor:
    """Generalized SDDMM: ``out[edge] = op(lhs[t_l(edge)], rhs[t_r(edge)])``.

    Args:
        g: the graph.
        op: one of ``add``, ``sub``, ``mul``, ``div``, ``dot``, ``copy_lhs``, ``copy_rhs``.
        lhs, rhs: operands; each lives on its target's rows (None for the unused side of a copy).
        lhs_target, rhs_target: ``u`` (source nodes), ``v`` (destination nodes) or ``e`` (edges).
        backend: run on this backend instead of the current choice.

    Returns:
        ``[num_edges, *broadcast feature shape]`` (``dot`` keeps its last dimension as size 1).
    """
    _check_graph(g)
    features = check_gsddmm(g, op, lhs, rhs, lhs_target, rhs_target)
    if op == "copy_lhs":
        rhs = None
    elif op == "copy_rhs":
        lhs = None
    lhs_k, rhs_k = _aligned(lhs, rhs)
    like = lhs_k if lhs_k is not None else rhs_k
    # the cost of dot is in the elements it multiplies, not in its one output per slice
    work = features + (max(lhs_k.shape[-1], rhs_k.shape[-1]),) if op == "dot" else features
    name = selector.choose(g, _request("gsddmm", op, None, work, like), backend,
                           trial=lambda n: call_gsddmm(g.tensors(), n, op, lhs_k, rhs_k, lhs_target, rhs_target))
    out = call_gsddmm(g.tensors(), name, op, lhs_k, rhs_k, lhs_target, rhs_target)
    return out.reshape((g.num_edges,) + features)


def edge_softmax(g: Graph, scores: Tensor, *, backend: str | None = None) -> Tensor:
    """Softmax of ``scores`` (``[num_edges, *]``) over the in-edges of each destination node,
    computed as ``exp(s - max) / sum(exp(s - max))`` so large scores cannot overflow."""
    _check_graph(g)
    check_edge_scores(g, scores)
    scores_k, _ = _aligned(scores, None)
    name = selector.choose(g, _request("edge_softmax", "softmax", None, tuple(scores.shape[1:]), scores_k), backend,
                           trial=lambda n: call_edge_softmax(g.tensors(), n, scores_k))
    out = call_edge_softmax(g.tensors(), name, scores_k)
    return out.reshape(scores.shape)


def gat_attention(g: Graph, h: Tensor, el: Tensor, er: Tensor, negative_slope: float = 0.2, *,
                  edge_scores: Tensor | None = None, edge_mask: Tensor | None = None,
                  backend: str | None = None) -> Tensor:
    r"""GAT's attention aggregation in one call (fused on backends that have the kernel).

    .. math::
        z_e = el_u + er_v \;(+\, ee_e), \qquad
        a_e = \operatorname{softmax}_{e \in in(v)}\big(\mathrm{LeakyReLU}(z_e)\big), \qquad
        out_v = \sum_{e=(u,v)} a_e\, m_e\, h_u

    per head. Fused backends never build the E x H x F messages; every backend avoids storing
    the attention weights (backward recomputes them from the per-node softmax statistics).

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
    _check_graph(g)
    check_gat_attention(g, h, el, er, edge_scores, negative_slope, edge_mask)
    request = Request("gat_attention", "gat", None, max(math.prod(h.shape[1:]), 1), h.dtype, h.device)
    name = selector.choose(g, request, backend, trial=lambda n: call_gat_attention(
        g.tensors(), n, h, el, er, edge_scores, float(negative_slope), edge_mask))
    return call_gat_attention(g.tensors(), name, h, el, er, edge_scores, float(negative_slope), edge_mask)


__all__ = ["gspmm", "gsddmm", "edge_softmax", "gat_attention", "GSPMM_OPS", "GSDDMM_OPS", "REDUCES"]
