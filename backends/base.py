"""The contract every backend fulfils, and torch helpers several backends share.

A backend computes three forward primitives on a :class:`~unigraph.structure.GraphTensors`:

* ``gspmm(g, op, reduce, u, e)``: ``out[v] = reduce_{(s, v) in E} op(u[s], e[edge])`` with
  ``reduce`` in sum / max / min (the front door turns mean into sum / in-degree). For max and
  min it also returns, per output element, the source node and edge id of the extreme edge
  (``-1`` where ``v`` has no in-edges), which is all the backward pass needs.
* ``gsddmm(g, op, lhs, rhs, lhs_target, rhs_target)``: ``out[edge] = op(lhs[t_l(edge)], rhs[t_r(edge)])``
  with targets u (source), v (destination) or e (the edge itself).
* ``edge_softmax(g, scores)``: softmax of edge scores over the in-edges of each destination.
  The default here composes it from gspmm/gsddmm; a backend may fuse it.
* ``gat_attention(g, h, el, er, ...)``: GAT's scores, edge softmax and weighted sum. The
  default composes it; a backend may fuse it (and its backward, ``gat_attention_backward``).

Backward passes are written once, in :mod:`unigraph.ops.gradients`, in terms of these same
primitives on the graph or its reverse, so a backend only writes forward kernels.

Inputs arrive checked (see :mod:`unigraph.ops.spec`): features have equal rank (at least one
feature dimension), equal dtype and device, broadcastable feature shapes, in-range indices.
A backend must never return a view of an input (PyTorch custom operators forbid aliasing).
"""
from __future__ import annotations

import dataclasses
import math

import torch
from torch import Tensor

from unigraph.ops.spec import broadcast_feature_shape
from unigraph.structure import GraphTensors


@dataclasses.dataclass(frozen=True)
class Request:
    """One operator call as the selector sees it."""

    kind: str              # "gspmm", "gsddmm", "edge_softmax" or "gat_attention"
    op: str                # e.g. "copy_u", "dot"; "softmax" for edge_softmax
    reduce: str | None     # gspmm only
    feature_width: int     # elements per output row (for dot: per row before the sum, what it multiplies)
    dtype: torch.dtype
    device: torch.device


@dataclasses.dataclass(frozen=True)
class Availability:
    ok: bool
    detail: str  # what it runs on when ok, why not otherwise


class Backend:
    """Base class; subclasses set ``name`` and ``summary`` and implement the kernels."""

    name: str = ""
    summary: str = ""

    def availability(self) -> Availability:
        return Availability(True, "torch")

    def unsupported_reason(self, request: Request) -> str | None:
        """Why this backend cannot run ``request`` (None if it can)."""
        return None

    def estimate_us(self, stats, request: Request) -> float:
        """Estimated run time in microseconds; see :mod:`unigraph.backends.selector`."""
        raise NotImplementedError

    def gspmm(self, g: GraphTensors, op: str, reduce: str, u: Tensor | None,
              e: Tensor | None) -> tuple[Tensor, Tensor | None, Tensor | None]:
        raise NotImplementedError

    def gsddmm(self, g: GraphTensors, op: str, lhs: Tensor | None, rhs: Tensor | None,
               lhs_target: str, rhs_target: str) -> Tensor:
        raise NotImplementedError

    def edge_softmax(self, g: GraphTensors, scores: Tensor) -> Tensor:
        """``exp(s - max_v) / sum_v exp(s - max_v)`` over each destination's in-edges, from four
        primitive calls (max, subtract, sum, divide). Subtracting the maximum keeps exp finite."""
        row_max, _, _ = self.gspmm(g, "copy_e", "max", None, scores)
        shifted = torch.exp(self.gsddmm(g, "sub", scores, row_max, "e", "v"))
        row_sum, _, _ = self.gspmm(g, "copy_e", "sum", None, shifted)
        return self.gsddmm(g, "div", shifted, row_sum, "e", "v")

    def gat_attention(self, g: GraphTensors, h: Tensor, el: Tensor, er: Tensor, edge_scores: Tensor | None,
                      negative_slope: float, edge_mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """GAT's attention aggregation (see :func:`unigraph.ops.gat_attention`).

        Returns ``(out [Nd, H, F], row_max [Nd, H], row_sum [Nd, H])``: the softmax statistics
        let the backward pass recompute the attention weights instead of storing them. This
        default composes the primitives (it materializes E x H scores, never E x H x F); fused
        backends override it with one kernel.
        """
        scores = self.gsddmm(g, "add", el, er, "u", "v")
        if edge_scores is not None:
            scores = scores + edge_scores
        scores = torch.nn.functional.leaky_relu(scores, negative_slope)
        row_max, _, _ = self.gspmm(g, "copy_e", "max", None, scores)
        shifted = torch.exp(self.gsddmm(g, "sub", scores, row_max, "e", "v"))
        row_sum, _, _ = self.gspmm(g, "copy_e", "sum", None, shifted)
        weights = self.gsddmm(g, "div", shifted, row_sum, "e", "v")
        if edge_mask is not None:
            weights = weights * edge_mask
        out, _, _ = self.gspmm(g, "u_mul_e", "sum", h, weights.unsqueeze(-1))
        return out, row_max, row_sum

    # A backend with a fused backward sets this to a method with the signature of
    # unigraph.ops.gradients.gat_attention_backward (minus the backend name).
    gat_attention_backward = None

    def __repr__(self) -> str:
        return f"<unigraph backend {self.name!r}>"


# ---------------------------------------------------------------------- shared torch helpers
def gather_target(g: GraphTensors, x: Tensor, target: str) -> Tensor:
    """Rows of ``x`` for every edge: its source's (u), its destination's (v) or its own (e)."""
    if target == "u":
        return x.index_select(0, g.src)
    if target == "v":
        return x.index_select(0, g.dst)
    return x


def apply_binary(op: str, lhs: Tensor, rhs: Tensor) -> Tensor:
    """``op`` applied with torch broadcasting (lhs, rhs have equal rank)."""
    if op == "add":
        return lhs + rhs
    if op == "sub":
        return lhs - rhs
    if op == "mul":
        return lhs * rhs
    if op == "div":
        return lhs / rhs
    if op == "dot":
        return (lhs * rhs).sum(dim=-1, keepdim=True)
    raise ValueError(f"unknown binary op {op!r}")


def gsddmm_by_gather(g: GraphTensors, op: str, lhs: Tensor | None, rhs: Tensor | None,
                     lhs_target: str, rhs_target: str) -> Tensor:
    """Edge-parallel g-SDDMM: gather both operands per edge, then one broadcast torch op."""
    if op == "copy_lhs":
        return gather_target(g, lhs, lhs_target).clone() if lhs_target == "e" else gather_target(g, lhs, lhs_target)
    if op == "copy_rhs":
        return gather_target(g, rhs, rhs_target).clone() if rhs_target == "e" else gather_target(g, rhs, rhs_target)
    return apply_binary(op, gather_target(g, lhs, lhs_target), gather_target(g, rhs, rhs_target))


def edge_messages(g: GraphTensors, op: str, u: Tensor | None, e: Tensor | None) -> Tensor:
    """The E x F message tensor of a gspmm op, in edge-id order (what scatter-gather builds)."""
    if op == "copy_u":
        return u.index_select(0, g.src)
    if op == "copy_e":
        return e
    return apply_binary(op[2:5], u.index_select(0, g.src), e)


def arg_extreme_edges(messages: Tensor, rows: Tensor, out: Tensor, num_rows: int) -> Tensor:
    """For each output element, the first (lowest id) edge whose message equals the reduced
    value, or -1 for rows without edges. ``messages`` are E x F in edge order."""
    num_edges = messages.shape[0]
    expanded = messages.expand(num_edges, *out.shape[1:]) if messages.shape[1:] != out.shape[1:] else messages
    hit = expanded == out.index_select(0, rows)
    edge_ids = torch.arange(num_edges, device=messages.device).view(-1, *([1] * (out.dim() - 1)))
    candidates = torch.where(hit, edge_ids, num_edges)
    index = rows.view(-1, *([1] * (out.dim() - 1))).expand_as(candidates)
    first = torch.full(out.shape, num_edges, dtype=torch.int64, device=out.device)
    first.scatter_reduce_(0, index, candidates, "amin", include_self=True)
    return torch.where(first == num_edges, -1, first)


def take_or_minus_one(table: Tensor, index: Tensor) -> Tensor:
    """``table[index]`` where ``index >= 0`` and -1 elsewhere (also safe for an empty table)."""
    if table.numel() == 0:
        return torch.full_like(index, -1)
    return torch.where(index >= 0, table[index.clamp(min=0)], -1)


def per_slice_plan(op: str, u: Tensor, e: Tensor | None, max_slices: int | None = None):
    """Read the op as P products with one edge weight per slice: ``u`` as ``[N, P, Q]`` and
    weights ``[E, P]`` (None for copy_u), plus the output feature shape.

    ``copy_u`` is P = 1 without weights; ``u_mul_e`` qualifies when ``e`` varies only along
    leading feature dims (GAT's ``[E, H, 1]``, a scalar edge weight ``[E, 1]``) and ``u`` is
    not itself broadcast. Returns None for other ops or when P exceeds ``max_slices``.
    """
    if op == "copy_u":
        return u.reshape(u.shape[0], 1, math.prod(u.shape[1:])), None, tuple(u.shape[1:])
    if op != "u_mul_e":
        return None
    fu, fe = tuple(u.shape[1:]), tuple(e.shape[1:])
    out = broadcast_feature_shape("mul", fu, fe)
    if fu != out:
        return None  # u itself is broadcast: not a plain product with a weight per slice
    lead = len(fe)
    while lead > 0 and fe[lead - 1] == 1:
        lead -= 1
    slices = math.prod(out[:lead])
    if max_slices is not None and slices > max_slices:
        return None
    weights = e.expand((e.shape[0],) + out[:lead] + fe[lead:]).reshape(e.shape[0], slices)
    return u.reshape(u.shape[0], slices, math.prod(out) // slices), weights, out
