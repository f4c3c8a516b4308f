"""The contract every backend fulfils, and torch helpers several backends share.

A backend computes the forward primitives on a :class:`~unigraph.structure.GraphTensors`:

* ``gspmm(g, op, reduce, u, e)``: ``out[v] = reduce_{(s, v) in E} op(u[s], e[edge])`` with
  ``reduce`` in sum / max / min (the front door turns mean into sum / in-degree). A sum comes
  back in the accumulation dtype (:func:`statistics_dtype`: float32 for float16/bfloat16
  features), not rounded: the front door divides a mean in it and rounds once (a float16 hub
  sum overflows at 65,504 where its mean does not; ``unigraph.ops.custom`` refuses another
  dtype). For max and
  min it also returns, per output element, the source node and edge id of the extreme edge
  (``-1`` where ``v`` has no in-edges), which is all the backward pass needs; an id of an
  operand the op does not read (the edge id of copy_u, the source of copy_e) may be None.
* ``gsddmm(g, op, lhs, rhs, lhs_target, rhs_target)``: ``out[edge] = op(lhs[t_l(edge)], rhs[t_r(edge)])``
  with targets u (source), v (destination) or e (the edge itself).
* ``edge_softmax(g, scores)``: softmax of edge scores over the in-edges of each destination.
  The default here composes it from gspmm/gsddmm; a backend may fuse it.
* ``gat_attention(g, h, el, er, ...)``: GAT's scores, edge softmax and weighted sum. The
  default composes it; a backend may fuse it (and its backward, ``gat_attention_backward``,
  declared in its contract's ``fused_backward``).

Semantics every backend keeps (the property tests check them): a destination without in-edges
gets 0 for every reduce; max/min are the true extreme of the messages, so a row whose messages
are all -inf (max) or +inf (min) gives -inf/+inf, and a NaN message makes the result NaN (as
``torch.amax`` does), whatever the edge order; the arg outputs name the first extreme edge of
the row in edge-id order (for a NaN result, the first NaN edge), which is where the gradient goes.

What a backend can run is *declared* in its :class:`Contract` (ops, dtypes, devices, whether
``auto`` may pick it), validated when it is registered (:mod:`unigraph.backends`); rules finer
than the contract (e.g. "max/min need float32 atomics") go in ``unsupported_reason``.

Backward passes are written once, in :mod:`unigraph.ops.gradients`, in terms of these same
primitives on the graph or its reverse, so a backend only writes forward kernels.

Inputs arrive checked (see :mod:`unigraph.ops.spec`): features have equal rank (at least one
feature dimension; :mod:`unigraph.ops.broadcast`), equal dtype and device, broadcastable feature
shapes, in-range indices. A backend must never return a view of an input (PyTorch custom
operators forbid aliasing).
"""
from __future__ import annotations

import dataclasses
import math

import torch
from torch import Tensor

from unigraph.kernels import accumulator_dtype
from unigraph.ops.broadcast import broadcast_feature_shape, broadcast_offsets
from unigraph.ops.spec import FLOAT_DTYPES
from unigraph.structure import GraphTensors

OP_KINDS = ("gspmm", "gsddmm", "edge_softmax", "gat_attention")


@dataclasses.dataclass(frozen=True)
class Request:
    """One operator call as the selector sees it."""

    kind: str              # "gspmm", "gsddmm", "edge_softmax" or "gat_attention"
    op: str                # e.g. "copy_u", "dot"; "softmax" for edge_softmax
    reduce: str | None     # gspmm only
    feature_width: int     # elements per output row (for dot: per row before the sum, what it multiplies)
    dtype: torch.dtype
    device: torch.device
    # whether the call will be differentiated (grad mode on and an operand requires grad): the
    # CPU cost model then ranks backends by forward + backward time, which orders them differently
    grad: bool = False
    # the intra-op threads the call's kernels get (``torch.get_num_threads()`` when the ops front
    # door builds it; every CPU kernel runs with that many); 0: not known, read as the count the
    # CPU cost tables were measured with. Part of the key of every decision kept on a graph.
    threads: int = 0


def differentiated(*operands) -> bool:
    """Whether autograd will record a call on these operands (``Request.grad``): grad mode is on
    and one of them requires grad (None entries are absent operands)."""
    if not torch.is_grad_enabled():
        return False
    for t in operands:   # (a loop, not a generator: every op call reads it)
        if t is not None and t.requires_grad:
            return True
    return False


@dataclasses.dataclass(frozen=True)
class Availability:
    ok: bool
    detail: str  # what it runs on when ok, why not otherwise


@dataclasses.dataclass(frozen=True)
class Contract:
    """What a backend declares it runs; checked before any of its code is asked.

    Attributes:
        ops: the op kinds it runs (of :data:`OP_KINDS`).
        dtypes: the feature dtypes it accepts.
        devices: the device types it runs on (``"cpu"``, ``"cuda"``, ...); None: any device torch has.
        auto: whether ``auto`` may pick it (where its estimate is finite).
        fused: op kinds it runs with a kernel of its own rather than the composed default.
        fused_backward: op kinds whose first-order backward it fuses (``gat_attention_backward``).
        interpreted_on_cpu: on the CPU its kernels run in an interpreter (tests only: slow).
    """

    ops: tuple[str, ...] = OP_KINDS
    dtypes: tuple[torch.dtype, ...] = FLOAT_DTYPES
    devices: tuple[str, ...] | None = None
    auto: bool = True
    fused: tuple[str, ...] = ()
    fused_backward: tuple[str, ...] = ()
    interpreted_on_cpu: bool = False

    def __post_init__(self):
        def subset(field: str, values, allowed) -> None:
            bad = [v for v in values if v not in allowed]
            if bad:
                raise ValueError(f"Contract.{field} holds {bad}; allowed: {list(allowed)}")
        subset("ops", self.ops, OP_KINDS)
        subset("dtypes", self.dtypes, FLOAT_DTYPES)
        subset("fused", self.fused, self.ops)
        subset("fused_backward", self.fused_backward, self.fused)
        if self.devices is not None and not all(isinstance(d, str) and d for d in self.devices):
            raise ValueError(f"Contract.devices must be device type names such as 'cpu', got {self.devices!r}")

    def refusal(self, request: Request) -> str | None:
        """Why a backend with this contract cannot run ``request`` (None if it can)."""
        if request.kind not in self.ops:
            return f"it does not implement {request.kind}"
        if self.devices is not None and request.device.type not in self.devices:
            return f"it runs on {' and '.join(self.devices)}, not on {request.device.type}"
        if request.dtype not in self.dtypes:
            names = ", ".join(str(d).replace("torch.", "") for d in self.dtypes)
            return f"it supports {names}, not {str(request.dtype).replace('torch.', '')}"
        return None


@dataclasses.dataclass(frozen=True)
class Family:
    """Several backends under one name; each call runs on the variant the cost model prefers."""

    name: str
    variants: tuple[str, ...]
    summary: str = ""


class Backend:
    """Base class; subclasses set ``name``, ``summary`` and ``contract`` and implement the kernels."""

    name: str = ""
    summary: str = ""
    contract: Contract = Contract()

    def availability(self) -> Availability:
        return Availability(True, "torch")

    def unsupported_reason(self, request: Request) -> str | None:
        """Why this backend cannot run ``request`` beyond what its contract says (None if it can)."""
        return None

    def cannot_run(self, request: Request) -> str | None:
        """Why this backend cannot run ``request``: its contract first, then its finer rules."""
        return self.contract.refusal(request) or self.unsupported_reason(request)

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
        primitive calls (max, subtract, sum, divide). Subtracting the maximum keeps exp finite;
        half-precision scores are computed in float32 (a hub's row sum overflows float16)."""
        work = scores.float() if scores.dtype in HALF_DTYPES else scores
        row_max, _, _ = self.gspmm(g, "copy_e", "max", None, work)
        shifted = torch.exp(self.gsddmm(g, "sub", work, row_max, "e", "v"))
        row_sum, _, _ = self.gspmm(g, "copy_e", "sum", None, shifted)
        return self.gsddmm(g, "div", shifted, row_sum, "e", "v").to(scores.dtype)

    def gat_attention(self, g: GraphTensors, h: Tensor, el: Tensor, er: Tensor, edge_scores: Tensor | None,
                      negative_slope: float, edge_mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """GAT's attention aggregation (see :func:`unigraph.ops.gat_attention`).

        Returns ``(out [Nd, H, F], row_max [Nd, H], row_sum [Nd, H])``: the softmax statistics
        (in the accumulation dtype, :func:`statistics_dtype`) let the backward pass recompute
        the attention weights instead of storing them. This default composes the primitives
        (it materializes E x H scores, never E x H x F); fused backends override it with one kernel.
        """
        stats = statistics_dtype(h.dtype)
        scores = self.gsddmm(g, "add", el.to(stats), er.to(stats), "u", "v")
        if edge_scores is not None:
            scores = scores + edge_scores.to(stats)
        scores = torch.nn.functional.leaky_relu(scores, negative_slope)
        row_max, _, _ = self.gspmm(g, "copy_e", "max", None, scores)
        shifted = torch.exp(self.gsddmm(g, "sub", scores, row_max, "e", "v"))
        row_sum, _, _ = self.gspmm(g, "copy_e", "sum", None, shifted)
        weights = self.gsddmm(g, "div", shifted, row_sum, "e", "v")
        if edge_mask is not None:
            weights = weights * edge_mask.to(stats)
        out, _, _ = self.gspmm(g, "u_mul_e", "sum", h, weights.to(h.dtype).unsqueeze(-1))
        return out.to(h.dtype), row_max, row_sum

    def gat_attention_backward(self, g: GraphTensors, h, el, er, edge_scores, negative_slope, edge_mask, out,
                               row_max, row_sum, grad_out, need):
        """A fused first-order backward of gat_attention, for backends that declare
        ``"gat_attention"`` in ``contract.fused_backward`` (signature of
        :func:`unigraph.ops.gradients.gat_attention_backward` minus its ``calls``)."""
        raise NotImplementedError(f"backend {self.name!r} declares no fused gat_attention backward")

    def scatter_at_rows(self, values: Tensor, rows: Tensor, num_rows: int, feature_shape: tuple) -> Tensor:
        """``result[rows[v, k], offset(k)] += values[v, k]`` (rows == -1 skipped), ``result`` of shape
        ``(num_rows,) + feature_shape``: how a max/min gradient reaches the winning edges' operand
        rows. Called outside autograd only (a double backward takes :func:`scatter_at_rows`,
        which is differentiable); a backend may override it with a kernel."""
        return scatter_at_rows(values, rows, num_rows, feature_shape)

    def __repr__(self) -> str:
        return f"<unigraph backend {self.name!r}>"


HALF_DTYPES = (torch.float16, torch.bfloat16)


statistics_dtype = accumulator_dtype  # softmax statistics and accumulators: the kernels' rule


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
    value (is NaN, where the result is NaN), or -1 for rows without edges. ``messages`` are
    E x F in edge order."""
    num_edges = messages.shape[0]
    expanded = messages.expand(num_edges, *out.shape[1:]) if messages.shape[1:] != out.shape[1:] else messages
    picked = out.index_select(0, rows)
    hit = expanded == picked
    if bool(torch.isnan(out).any()):  # NaN equals nothing: a NaN result is hit by the NaN messages
        hit |= torch.isnan(expanded) & torch.isnan(picked)
    edge_ids = torch.arange(num_edges, device=messages.device).view(-1, *([1] * (out.dim() - 1)))
    candidates = torch.where(hit, edge_ids, num_edges)
    index = rows.view(-1, *([1] * (out.dim() - 1))).expand_as(candidates)
    first = torch.full(out.shape, num_edges, dtype=torch.int64, device=out.device)
    first.scatter_reduce_(0, index, candidates, "amin", include_self=True)
    return torch.where(first == num_edges, -1, first)


def scatter_at_rows(values: Tensor, rows: Tensor, num_rows: int, feature_shape: tuple) -> Tensor:
    """:meth:`Backend.scatter_at_rows` in torch (differentiable in ``values``)."""
    width = math.prod(feature_shape)
    offsets = broadcast_offsets(feature_shape, tuple(values.shape[1:]), values.device)
    # rows == -1 go to one spare row past the end, dropped after the sum: no boolean masking
    # (which costs a nonzero pass and two compacting copies)
    rows = rows.to(torch.int64)  # an int32 arg (a backend's narrower winners) would overflow ``* width``
    spare_row = torch.where(rows >= 0, rows, num_rows).reshape(rows.shape[0], offsets.numel())
    flat = (spare_row * width + offsets).reshape(-1)
    # a source that wins many rows sums many gradients: half precision accumulates in float32
    result = values.new_zeros((num_rows + 1) * width, dtype=statistics_dtype(values.dtype))
    result.index_add_(0, flat, values.reshape(-1).to(result.dtype))
    return result[: num_rows * width].view((num_rows,) + tuple(feature_shape)).to(values.dtype)


def operand_offsets(x: Tensor | None, features: tuple[int, ...]) -> Tensor | None:
    """The broadcast offset table of operand ``x`` for output feature shape ``features`` (None
    when ``x`` has that shape itself), as kernels that read broadcast operands take it."""
    if x is None or tuple(x.shape[1:]) == tuple(features):
        return None
    # contiguous: for a size-1 operand the table is an expanded (stride 0) view
    return broadcast_offsets(tuple(x.shape[1:]), tuple(features), x.device).contiguous()


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
