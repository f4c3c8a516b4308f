r"""Backward passes of the graph operators, written once for every backend.

As in the DGL paper, the gradient of a g-SpMM is a g-SpMM on the reverse graph plus a g-SDDMM,
and the gradient of a g-SDDMM is a g-SpMM. With ``G^T`` the reverse graph, ``go`` the gradient
of the output and ``reduce_to(x, shape)`` the sum over broadcast dimensions:

g-SpMM, sum, :math:`out_v = \sum_{(s,v)} u_s \otimes e_{sv}`:

* copy_u:  ``du = gspmm(G^T, copy_u, sum, go)``
* copy_e:  ``de = go[dst]``
* u_add_e: ``du = gspmm(G^T, copy_u, sum, reduce_to(go, u))``, ``de = reduce_to(go, e)[dst]``
  (u_sub_e: the same with ``-de``)
* u_mul_e: ``du = reduce_to(gspmm(G^T, u_mul_e, sum, go, e), u)``,
  ``de = reduce_to(gsddmm(G, mul, u, go), e)``; when ``e`` is a per-head scalar (GAT's
  ``[E, H, 1]``) that is ``gsddmm(G, dot, u, go)``, with no E x H x F tensor
* u_div_e: ``du = reduce_to(gspmm(G^T, u_div_e, sum, go, e), u)``,
  ``de = -reduce_to(gsddmm(G, mul, u, go), e) / e^2``
* mean: the sum rules applied to ``go / max(in_degree, 1)`` (for half precision all in float32,
  each gradient rounded once).

g-SpMM, max/min: only the arg-extreme edge of each output element receives gradient, so the
rules above become scatters at ``arg_u`` (source) and ``arg_e`` (edge) recorded by the forward.

g-SDDMM, :math:`out_e = lhs_{t_l(e)} \otimes rhs_{t_r(e)}`: the edge gradient ``go`` (times the
other operand for mul/dot/div) is summed into the operand's target: kept per edge for ``e``,
summed over in-edges (``gspmm(G, ...)``) for ``v``, over out-edges (``gspmm(G^T, ...)``) for ``u``.

edge_softmax, :math:`a = softmax_v(s)`: ``ds = a * go - a * gspmm(G, copy_e, sum, a * go)[dst]``.

gat_attention, :math:`out_v = \sum_{(u,v)} a_e m_e h_u`, :math:`a = softmax_v(lrelu(z))`,
:math:`z_e = el_u + er_v (+ ee_e)`, with ``m`` the dropout mask (1 without dropout). The weights
are recomputed from the saved softmax statistics, then

* ``dh = gspmm(G^T, u_mul_e, sum, go, a * m)``
* ``da_e = m_e <h_u, go_v>`` (a g-SDDMM dot) and, because ``sum_e a_e da_e = <out_v, go_v>``,
  the softmax backward needs no segment sum: ``ds_e = a_e (da_e - <out_v, go_v>)``
* ``dz = ds * lrelu'(z)``; ``del = gspmm(G^T, copy_e, sum, dz)``, ``der = gspmm(G, copy_e, sum, dz)``,
  ``dee = dz``.

Double backward (``create_graph=True``, e.g. a gradient penalty): gat_attention's weights
recomputed from the saved softmax statistics are right in value but constants to autograd, so
with grad mode on inside backward they are recomputed by a (differentiable) edge softmax; the
rest of its formulas are differentiable primitives already.

Every primitive call below goes through ``calls`` (:class:`unigraph.ops.custom.Primitives`), the
forward's backend reached through the forward's dispatch (the registered custom operators while
compiling), so backward passes are traced by ``torch.compile``, are themselves differentiable
(double backward works on every op and backend), and run on the same backend as the forward.
This module sits below :mod:`unigraph.ops.custom`, whose autograd Functions call it, so it is
handed those calls rather than importing them.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from unigraph.backends.base import scatter_at_rows, statistics_dtype
from unigraph.ops.broadcast import broadcast_offsets, reduce_to_shape
from unigraph.ops.dispatch import traced
from unigraph.structure import GraphTensors


# ---------------------------------------------------------------------- helpers
def in_degree_divisor(g: GraphTensors, like: Tensor) -> Tensor:
    """``max(in_degree, 1)`` shaped to divide a destination-node tensor like ``like``."""
    degree = g.in_degrees().clamp(min=1).to(like.dtype)
    return degree.view(-1, *([1] * (like.dim() - 1)))


# ---------------------------------------------------------------------- g-SpMM
def gspmm_backward(g: GraphTensors, calls, op: str, reduce: str, u: Tensor | None, e: Tensor | None,
                   arg_u: Tensor, arg_e: Tensor, go: Tensor, need_u: bool, need_e: bool):
    if reduce in ("max", "min"):
        return _gspmm_extreme_backward(g, calls, op, u, e, arg_u, arg_e, go, need_u, need_e)
    if reduce == "mean":
        if statistics_dtype(go.dtype) != go.dtype:
            return _half_mean_backward(g, calls, op, u, e, go, need_u, need_e)
        go = go / in_degree_divisor(g, go)
    rev = g.reverse()
    du = de = None
    fu = tuple(u.shape[1:]) if u is not None else None
    fe = tuple(e.shape[1:]) if e is not None else None
    if op == "copy_u":
        du = calls.spmm(rev, "copy_u", "sum", go, None) if need_u else None
    elif op == "copy_e":
        de = calls.sddmm(g, "copy_rhs", None, go, "e", "v") if need_e else None
    elif op in ("u_add_e", "u_sub_e"):
        if need_u:
            du = calls.spmm(rev, "copy_u", "sum", reduce_to_shape(go, fu), None)
        if need_e:
            de = calls.sddmm(g, "copy_rhs", None, reduce_to_shape(go, fe), "e", "v")
            de = -de if op == "u_sub_e" else de
    elif op in ("u_mul_e", "u_div_e"):
        if need_u:
            du = reduce_to_shape(calls.spmm(rev, op, "sum", go, e), fu)
        if need_e:
            de = _edge_grad_of_product(g, calls, u, go, fe)
            de = -de / (e * e) if op == "u_div_e" else de
    return du, de


def _half_mean_backward(g: GraphTensors, calls, op: str, u, e, go: Tensor, need_u: bool, need_e: bool):
    """Mean's backward for half precision: ``go / in_degree`` and the sums after it in float32,
    each gradient rounded once (a float16 in-degree above 65,504 is inf, and ``go / 70000`` is
    subnormal in float16, where summing 1,000 of them loses 0.2%)."""
    wide = statistics_dtype(go.dtype)
    du, de = gspmm_backward(g, calls, op, "mean", u.to(wide) if u is not None else None,
                            e.to(wide) if e is not None else None, None, None, go.to(wide), need_u, need_e)
    return (du.to(u.dtype) if du is not None else None), (de.to(e.dtype) if de is not None else None)


def _edge_grad_of_product(g: GraphTensors, calls, u: Tensor, go: Tensor, fe: tuple) -> Tensor:
    """``reduce_to(u[src] * go[dst], fe)``, as a dot product when the reduction is exactly the
    last feature dimension (GAT's attention gradient), so no E x ... x F tensor is built."""
    out = tuple(go.shape[1:])
    if len(out) >= 1 and out[-1] > 1 and fe[-1] == 1 and u.shape[-1] == out[-1] and fe[:-1] == out[:-1]:
        return calls.sddmm(g, "dot", u, go, "u", "v")
    return reduce_to_shape(calls.sddmm(g, "mul", u, go, "u", "v"), fe)


def _gather_at(x: Tensor, rows: Tensor, out_shape: tuple) -> Tensor:
    """``x[rows[v, k], offset(k)]`` for every output element (0 where rows is -1)."""
    if x.numel() == 0:  # no rows to pick from: every element is unselected
        return torch.zeros(rows.shape, dtype=x.dtype, device=x.device)
    width = math.prod(x.shape[1:])
    offsets = broadcast_offsets(tuple(x.shape[1:]), out_shape, x.device)
    flat = rows.reshape(rows.shape[0], offsets.numel()).clamp(min=0) * width + offsets
    picked = x.reshape(-1)[flat.reshape(-1)].view(rows.shape)
    return torch.where(rows >= 0, picked, torch.zeros((), dtype=x.dtype, device=x.device))


def scatter_at_winners(backend, values: Tensor, rows: Tensor, num_rows: int, feature_shape: tuple) -> Tensor:
    """Sum ``values[v, k]`` into ``result[rows[v, k], offset(k)]`` (skipping rows == -1), how a
    max/min gradient reaches its winners: ``backend``'s kernel for it, or torch's differentiable
    form in a double backward or a trace."""
    if (torch.is_grad_enabled() and values.requires_grad) or traced(values, rows):
        return scatter_at_rows(values, rows, num_rows, feature_shape)
    return backend.scatter_at_rows(values, rows, num_rows, feature_shape)


def _gspmm_extreme_backward(g: GraphTensors, calls, op: str, u, e, arg_u, arg_e, go, need_u, need_e):
    out_shape = tuple(go.shape[1:])
    du = de = None
    if op == "copy_u":
        du = scatter_at_winners(calls.backend, go, arg_u, g.num_src, tuple(u.shape[1:])) if need_u else None
        return du, None
    if op == "copy_e":
        de = scatter_at_winners(calls.backend, go, arg_e, g.num_edges, tuple(e.shape[1:])) if need_e else None
        return None, de
    if op in ("u_add_e", "u_sub_e"):
        du_part, de_part = go, (-go if op == "u_sub_e" else go)
    else:
        e_sel = _gather_at(e, arg_e, out_shape)
        u_sel = _gather_at(u, arg_u, out_shape)
        if op == "u_mul_e":
            du_part, de_part = go * e_sel, go * u_sel
        else:  # u_div_e; unselected elements have e_sel = 0 but are skipped by the scatter
            safe_e = torch.where(arg_e >= 0, e_sel, torch.ones((), dtype=e_sel.dtype, device=e_sel.device))
            du_part, de_part = go / safe_e, -go * u_sel / (safe_e * safe_e)
    if need_u:
        du = scatter_at_winners(calls.backend, du_part, arg_u, g.num_src, tuple(u.shape[1:]))
    if need_e:
        de = scatter_at_winners(calls.backend, de_part, arg_e, g.num_edges, tuple(e.shape[1:]))
    return du, de


# ---------------------------------------------------------------------- g-SDDMM
def _sum_into_target(g: GraphTensors, calls, edge_values: Tensor, target: str) -> Tensor:
    """Sum per-edge values into the rows of ``target``: per edge, per destination, per source."""
    if target == "e":
        return edge_values
    graph = g if target == "v" else g.reverse()
    return calls.spmm(graph, "copy_e", "sum", None, edge_values)


def _sum_weighted_into_target(g: GraphTensors, calls, go: Tensor, weight: Tensor,
                              weight_target: str, target: str) -> Tensor:
    """``sum over edges into target of go[edge] * weight[weight_target(edge)]``, fused where the
    shape allows (a g-SpMM ``u_mul_e`` when the weight sits at the far end of the edge)."""
    if target == "e":
        return calls.sddmm(g, "mul", go, weight, "e", weight_target)
    if weight_target == "e":
        return _sum_into_target(g, calls, go * weight, target)
    if weight_target == target:
        return _sum_into_target(g, calls, go, target) * weight
    graph = g if target == "v" else g.reverse()  # weight on the other endpoint
    return calls.spmm(graph, "u_mul_e", "sum", weight, go)


def gsddmm_backward(g: GraphTensors, calls, op: str, lhs, rhs, lhs_target: str, rhs_target: str,
                    go: Tensor, need_lhs: bool, need_rhs: bool):
    fl = tuple(lhs.shape[1:]) if lhs is not None else None
    fr = tuple(rhs.shape[1:]) if rhs is not None else None
    dl = dr = None
    if op in ("copy_lhs", "add", "sub") and need_lhs:
        dl = _sum_into_target(g, calls, reduce_to_shape(go, fl), lhs_target)
    if op in ("copy_rhs", "add", "sub") and need_rhs:
        dr = _sum_into_target(g, calls, reduce_to_shape(go, fr), rhs_target)
        dr = -dr if op == "sub" else dr
    if op in ("mul", "dot"):
        if need_lhs:
            dl = reduce_to_shape(_sum_weighted_into_target(g, calls, go, rhs, rhs_target, lhs_target), fl)
        if need_rhs:
            dr = reduce_to_shape(_sum_weighted_into_target(g, calls, go, lhs, lhs_target, rhs_target), fr)
    if op == "div":
        if need_lhs:
            dl = reduce_to_shape(_sum_weighted_into_target(g, calls, go, 1.0 / rhs, rhs_target, lhs_target), fl)
        if need_rhs:
            summed = reduce_to_shape(_sum_weighted_into_target(g, calls, go, lhs, lhs_target, rhs_target), fr)
            dr = -summed / (rhs * rhs)
    return dl, dr


# ---------------------------------------------------------------------- edge_softmax
def edge_softmax_backward(g: GraphTensors, calls, out: Tensor, go: Tensor) -> Tensor:
    weighted = out * go
    row_sums = calls.spmm(g, "copy_e", "sum", None, weighted)
    return weighted - calls.sddmm(g, "mul", out, row_sums, "e", "v")


# ---------------------------------------------------------------------- gat_attention
def gat_attention_backward(g: GraphTensors, calls, h: Tensor, el: Tensor, er: Tensor,
                           edge_scores: Tensor | None, negative_slope: float, edge_mask: Tensor | None,
                           out: Tensor, row_max: Tensor, row_sum: Tensor, go: Tensor,
                           need: tuple[bool, bool, bool, bool]):
    """Gradients ``(dh, del, der, dedge_scores)`` of gat_attention (formulas in the module docstring).

    The attention weights are recomputed from the saved softmax statistics; in a double backward
    (grad mode on, an input that requires grad) they are recomputed by a differentiable edge
    softmax instead, since the statistics are constants to autograd. Every other step is a
    differentiable primitive, so the gradients are then differentiable in all their inputs."""
    differentiable = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (h, el, er, edge_scores, go))
    stats = row_max.dtype  # float32 for half precision: weights are recomputed in it
    z = calls.sddmm(g, "add", el.to(stats), er.to(stats), "u", "v")
    if edge_scores is not None:
        z = z + edge_scores.to(stats)
    scores = torch.nn.functional.leaky_relu(z, negative_slope)
    if differentiable:
        weights = calls.softmax(g, scores)
    else:
        weights = torch.exp(scores - row_max.index_select(0, g.dst)) / row_sum.index_select(0, g.dst)
    kept = weights * edge_mask.to(stats) if edge_mask is not None else weights
    dh = calls.spmm(g.reverse(), "u_mul_e", "sum", go, kept.to(go.dtype).unsqueeze(-1)) if need[0] else None
    if not any(need[1:]):
        return dh, None, None, None
    d_weights = calls.sddmm(g, "dot", h, go, "u", "v").squeeze(-1).to(stats)
    if edge_mask is not None:
        d_weights = d_weights * edge_mask.to(stats)
    centre = (out.to(stats) * go.to(stats)).sum(-1)
    d_scores = weights * (d_weights - centre.index_select(0, g.dst))
    dz = torch.where(z > 0, d_scores, d_scores * negative_slope).to(el.dtype)
    d_el = calls.spmm(g.reverse(), "copy_e", "sum", None, dz) if need[1] else None
    d_er = calls.spmm(g, "copy_e", "sum", None, dz) if need[2] else None
    return dh, d_el, d_er, (dz if need[3] else None)
