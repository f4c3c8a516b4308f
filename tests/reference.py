"""Slow, obviously-correct float64 references for the graph operators.

They share no code with the backends: aggregation is a dense incidence-matrix product (or a
masked dense max), g-SDDMM and edge softmax are Python loops over edges and nodes.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor


def _pad(t: Tensor, ndim: int) -> Tensor:
    return t.reshape(tuple(t.shape) + (1,) * (ndim - t.dim()))


def _binary(op: str, a: Tensor, b: Tensor) -> Tensor:
    if op == "dot":
        return (a * b).sum(-1, keepdim=True)
    return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op](a, b)


def gspmm_ref(graph, op: str, reduce: str, u: Tensor | None, e: Tensor | None) -> Tensor:
    src, dst = graph.src, graph.dst
    num_edges = src.numel()
    ndim = max(t.dim() for t in (u, e) if t is not None)
    u = _pad(u, ndim) if u is not None else None
    e = _pad(e, ndim) if e is not None else None
    if op == "copy_u":
        messages = u[src]
    elif op == "copy_e":
        messages = e
    else:
        messages = _binary(op[2:5], u[src], e)
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
