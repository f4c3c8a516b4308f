"""Slow, obviously-correct float64 references for the graph operators.

They share no code with the backends: aggregation is a dense incidence-matrix product (or a
masked dense max), g-SDDMM and edge softmax are Python loops over edges and nodes.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor


def _pad(t: Tensor, ndim: int) -> Tensor:
    """DGL's alignment: 1s inserted right after the row dimension (feature shapes align from the right)."""
    return t.reshape((t.shape[0],) + (1,) * (ndim - t.dim()) + tuple(t.shape[1:]))


def _binary(op: str, a: Tensor, b: Tensor) -> Tensor:
    if op == "dot":
        return (a * b).sum(-1, keepdim=True)
    return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op](a, b)


def messages_ref(graph, op: str, u: Tensor | None, e: Tensor | None) -> Tensor:
    """The E x F messages of gspmm ``op`` in edge-id order (DGL's broadcasting)."""
    ndim = max(t.dim() for t in (u, e) if t is not None)
    u = _pad(u, ndim) if u is not None else None
    e = _pad(e, ndim) if e is not None else None
    if op == "copy_u":
        return u[graph.src]
    if op == "copy_e":
        return e
    return _binary(op[2:5], u[graph.src], e)


def gspmm_ref(graph, op: str, reduce: str, u: Tensor | None, e: Tensor | None) -> Tensor:
    dst = graph.dst
    num_edges = dst.numel()
    messages = messages_ref(graph, op, u, e)
    features = tuple(messages.shape[1:])
    flat = messages.reshape(num_edges, math.prod(features))
    incidence = torch.zeros(graph.num_dst_nodes, num_edges, dtype=flat.dtype)
    incidence[dst, torch.arange(num_edges)] = 1.0
    degree = incidence.sum(1, keepdim=True)
    if reduce in ("sum", "mean"):
        out = incidence @ flat
        if reduce == "mean":
            out = out / degree.clamp(min=1)
    else:
        if num_edges == 0:
            return flat.new_zeros((graph.num_dst_nodes,) + features)
        fill = float("-inf") if reduce == "max" else float("inf")
        masked = torch.where(incidence.unsqueeze(-1) > 0, flat.unsqueeze(0), torch.tensor(fill, dtype=flat.dtype))
        out = masked.amax(1) if reduce == "max" else masked.amin(1)
        out = torch.where(degree > 0, out, torch.zeros((), dtype=flat.dtype))
    return out.reshape((graph.num_dst_nodes,) + features)


def first_extreme_edges(graph, messages: Tensor, reduce: str) -> Tensor:
    """Per destination and feature element, the edge unigraph's max/min pick, by a plain loop over
    the edges in id order: the first NaN message if there is one, else the first strictly better
    one (so the first of equal values); -1 for rows without in-edges."""
    flat = messages.detach().reshape(messages.shape[0], math.prod(messages.shape[1:]))
    arg = torch.full((graph.num_dst_nodes, flat.shape[1]), -1, dtype=torch.int64)
    for k in range(flat.shape[0]):
        v = int(graph.dst[k])
        for j in range(flat.shape[1]):
            value, best = float(flat[k, j]), arg[v, j]
            if best < 0:
                arg[v, j] = k
                continue
            current = float(flat[best, j])
            if math.isnan(current):
                continue
            if math.isnan(value) or (value > current if reduce == "max" else value < current):
                arg[v, j] = k
    return arg


def gspmm_extreme_ref(graph, op: str, reduce: str, u: Tensor | None, e: Tensor | None) -> Tensor:
    """gspmm max/min as documented: the value of the edge :func:`first_extreme_edges` names (0 for
    rows without in-edges), recomputed from that edge's operands only, so the gradient reaches
    that edge alone (exactly 0 elsewhere, even next to NaN and inf)."""
    messages = messages_ref(graph, op, u, e)
    features = tuple(messages.shape[1:])
    width = math.prod(features)
    arg = first_extreme_edges(graph, messages, reduce)
    if messages.shape[0] == 0:
        return messages.new_zeros((graph.num_dst_nodes,) + features)
    slot = arg.clamp(min=0)
    found = arg >= 0

    def operand_at(x: Tensor, row_of_edge: Tensor) -> Tensor:
        full = _pad(x, len(features) + 1).expand((x.shape[0],) + features).reshape(x.shape[0], width)
        # 1 where no edge was found: a finite stand-in through which no gradient (not even 0 * inf) flows
        return torch.where(found, full.gather(0, row_of_edge[slot]), torch.ones((), dtype=x.dtype))

    edge_ids = torch.arange(messages.shape[0])
    if op == "copy_u":
        picked = operand_at(u, graph.src)
    elif op == "copy_e":
        picked = operand_at(e, edge_ids)
    else:
        picked = _binary(op[2:5], operand_at(u, graph.src), operand_at(e, edge_ids))
    out = torch.where(found, picked, torch.zeros((), dtype=picked.dtype))
    return out.reshape((graph.num_dst_nodes,) + features)


def _row(x: Tensor, target: str, graph, k: int) -> Tensor:
    index = {"u": int(graph.src[k]), "v": int(graph.dst[k]), "e": k}[target]
    return x[index]


def gsddmm_ref(graph, op: str, lhs, rhs, lhs_target: str, rhs_target: str) -> Tensor:
    ndim = max(t.dim() for t in (lhs, rhs) if t is not None)
    lhs = _pad(lhs, ndim) if lhs is not None else None
    rhs = _pad(rhs, ndim) if rhs is not None else None
    def pick(x: Tensor, target: str, k: int | None) -> Tensor:
        if k is None:  # no edges: zero rows keep the broadcast shape
            return x.new_zeros((0,) + tuple(x.shape[1:]))
        return _row(x, target, graph, k).unsqueeze(0)

    rows = []
    for k in list(range(graph.num_edges)) or [None]:
        if op == "copy_lhs":
            rows.append(pick(lhs, lhs_target, k))
        elif op == "copy_rhs":
            rows.append(pick(rhs, rhs_target, k))
        else:
            rows.append(_binary(op, pick(lhs, lhs_target, k), pick(rhs, rhs_target, k)))
    return torch.cat(rows)


def edge_softmax_ref(graph, scores: Tensor) -> Tensor:
    out = torch.zeros_like(scores)
    for v in range(graph.num_dst_nodes):
        edges = (graph.dst == v).nonzero().flatten()
        if edges.numel():
            out = out.index_put((edges,), torch.softmax(scores[edges], dim=0))
    return out


def gat_ref(graph, h, el, er, edge_scores, slope, mask) -> Tensor:
    z = gsddmm_ref(graph, "add", el, er, "u", "v")
    if edge_scores is not None:
        z = z + edge_scores
    weights = edge_softmax_ref(graph, torch.nn.functional.leaky_relu(z, slope))
    if mask is not None:
        weights = weights * mask
    return gspmm_ref(graph, "u_mul_e", "sum", h, weights.unsqueeze(-1))
