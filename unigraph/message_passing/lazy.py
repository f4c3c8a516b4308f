r"""Running a traced message on a graph without materializing the messages where the algebra allows.

Every value of the traced program lives in one of three row spaces:

* :class:`Rows` ``(u, t)``: ``t`` has one row per *source node*; the message sees ``t[src]``.
* :class:`Rows` ``(v, t)``: one row per *destination node*; the message sees ``t[dst]``.
* :class:`Rows` ``(e, t)``: one row per edge, exactly what the message sees.
* :class:`Pending` ``(op, a, b)``: ``a op b`` per edge for operands in different row spaces,
  not computed yet: whoever consumes it decides how (a g-SpMM, a g-SDDMM, algebra).

Rules, call by call (see :func:`Interpreter.call`):

1. A row-wise call (:mod:`~unigraph.message_passing.rowwise`) on operands of one node space runs on
   the node rows: ``lin(x_j)`` costs N rows, not E (``view(E, ...)`` becomes ``view(N, ...)``).
   Picking from a result (``.values`` of ``max``, ``[0]`` of ``chunk``) computes nothing.
2. ``a op b`` (op in + - * /) across spaces becomes :class:`Pending`.
3. ``(a * b).sum(-1)`` with ``a * b`` pending is one g-SDDMM ``dot``: one value per edge.
4. Anything else gathers its operands per edge (a pending one by g-SDDMM) and runs as written,
   as the eager path would: a result with one row per edge is an edge value, any other (a
   transpose, a mean over the edges) a plain value from then on.

A program whose result is not one row per edge raises :class:`Unfusable`; the caller then runs
the message eagerly (which raises the user's error where it is one). So does an instruction that
stands for a write in place (recorded out of place by the tracer, see
:mod:`~unigraph.message_passing.mutation`) whose result would not keep its target's per-edge
shape and dtype, as the in-place op would have.

At the root the reduction picks the cheapest exact form (:func:`Interpreter.reduce`):

* ``x_j`` -> g-SpMM ``copy_u``; an edge tensor -> ``copy_e``; ``x_j op e`` -> ``u_op_e`` (and
  ``e - x_j`` as ``-(x_j - e)`` with max and min swapped);
* sum and mean are linear: :math:`\sum (a \pm b) = \sum a \pm \sum b`, :math:`\sum a\,y_i = y_i \sum a`;
  a destination term :math:`y_i` summed over the :math:`d_i` in-edges is :math:`d_i\,y_i`;
* max and min commute with a destination shift: :math:`\max_j (a_j - y_i) = \max_j a_j - y_i`
  (exact in floating point, since rounding is monotone) — the max-relative conv of Vision GNN;
* a destination without in-edges gets 0, as every reduce in unigraph;
* otherwise the message is materialized (by g-SDDMM when it is ``a op b``) and reduced by ``copy_e``.

What ran is recorded in a :class:`Record` so :class:`MessagePlan` can explain it.
"""
from __future__ import annotations

import dataclasses
import math
import operator
from typing import Any

import torch
from torch import Tensor

from unigraph import ops
from unigraph.message_passing.rowwise import is_rowwise, on_node_rows
from unigraph.message_passing.tracing import (
    CONST, DOMAIN_NAMES, E, U, V, Instruction, Ref, Traced, leaves, map_structure)
from unigraph.ops.broadcast import broadcast_feature_shape

_FLIPPED = {"sum": "sum", "mean": "mean", "max": "min", "min": "max"}  # reduce of the negation
_BINARY = {operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "div",
           torch.add: "add", torch.sub: "sub", torch.mul: "mul", torch.div: "div",
           "add": "add", "sub": "sub", "mul": "mul", "div": "div",
           "__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div"}
_SHAPE_ATTRIBUTES = ("shape", "ndim", "dtype", "device", "requires_grad", "is_cuda", "layout")


class Unfusable(Exception):
    """The program cannot be run exactly here; the caller runs the message eagerly instead (and
    says why in its plan)."""


@dataclasses.dataclass
class Rows:
    """A tensor with one row per element of ``domain`` (U, V or E); see the module docstring."""

    domain: str
    tensor: Tensor


@dataclasses.dataclass
class Pending:
    """``lhs op rhs`` per edge across row spaces, not computed yet."""

    op: str
    lhs: "Rows | Pending"
    rhs: "Rows | Pending"

    def feature_shape(self) -> tuple[int, ...]:
        return broadcast_feature_shape(self.op, _feature_shape(self.lhs), _feature_shape(self.rhs))

    def rank(self) -> int:
        return len(self.feature_shape()) + 1

    def dtype(self) -> torch.dtype:
        return torch.result_type(_probe(self.lhs), _probe(self.rhs))

    def domains(self) -> set[str]:
        return _domains(self.lhs) | _domains(self.rhs)


def _feature_shape(value: Rows | Pending) -> tuple[int, ...]:
    return tuple(value.tensor.shape[1:]) if isinstance(value, Rows) else value.feature_shape()


def _probe(value: Rows | Pending) -> Tensor:
    return value.tensor[:0] if isinstance(value, Rows) else torch.empty(0, dtype=value.dtype())


def _domains(value: Rows | Pending) -> set[str]:
    return {value.domain} if isinstance(value, Rows) else value.domains()


def _is_lazy(value: Any) -> bool:
    return isinstance(value, (Rows, Pending))


@dataclasses.dataclass
class Record:
    """What one run did: primitive calls and per-edge tensors built from node data."""

    steps: list[tuple] = dataclasses.field(default_factory=list)
    gathered: list[tuple] = dataclasses.field(default_factory=list)   # (node, domain, shape)
    edge_tensors: list[tuple] = dataclasses.field(default_factory=list)  # (what, shape) built by g-SDDMM
    reasons: list[str] = dataclasses.field(default_factory=list)


class Interpreter:
    """Runs a :class:`Traced` message on one graph (see the module docstring for the rules)."""

    def __init__(self, graph, record: Record | None = None):
        self.g = graph
        self.record = record if record is not None else Record()

    # ------------------------------------------------------------------ running the trace
    def run(self, traced: Traced, values: dict[str, Any]) -> Any:
        """Evaluate ``traced`` with ``values`` (input key -> tensor or constant); returns the output
        structure with :class:`Rows`/:class:`Pending` in place of tensors."""
        env: list[Any] = []

        def resolve(a: Any) -> Any:
            return env[a.index] if isinstance(a, Ref) else a

        for ins in traced.program:
            if ins.op == "placeholder":
                value = values[ins.target]
                env.append(Rows(ins.domain, value) if ins.domain != CONST and isinstance(value, Tensor) else value)
            else:
                args = map_structure(ins.args, resolve)
                result = self.call(ins, args, map_structure(ins.kwargs, resolve))
                if ins.in_place and (_layout(args[0]) is None or _layout(args[0]) != _layout(result)):
                    raise Unfusable(f"{ins.name} = {_target_name(ins)}(...) stands for a write in place, which "
                                    "cannot change the value's shape or dtype: the message runs as written")
                env.append(result)
        return map_structure(traced.output, resolve)

    def call(self, node: Instruction, args: tuple, kwargs: dict) -> Any:
        lazy = _lazy_leaves(args, kwargs)
        if not lazy:
            return _execute(node, args, kwargs)
        if _is_structural(node, args):  # `.values` of max's result, `[0]` of chunk's: pick, do not compute
            return _execute(node, args, kwargs, unwrap=False)
        answer = self._shape_query(node, args, kwargs)
        if answer is not NotImplemented:
            return answer
        op = _BINARY.get(node.target)
        if op is not None and len(args) == 2 and not kwargs:
            result = self._binary(op, args[0], args[1])
            if result is not None:
                return result
        if _is_dot(node, args, kwargs):
            return self.dot(args[0], _keepdim(args, kwargs))
        domains = {a.domain for a in lazy if isinstance(a, Rows)}
        if len(domains) == 1 and not any(isinstance(a, Pending) for a in lazy):
            domain = domains.pop()
            if domain == E:  # edge values are what the message sees: run as written
                return self._wrap(_execute(node, args, kwargs), E)
            tensors = [a.tensor for a in lazy]
            first = tensors[0]
            if is_rowwise(node.op, node.target, args, kwargs, tensors, first.dim(),
                          math.prod(first.shape[1:]), self.g.num_edges, _is_lazy):
                rows = first.shape[0]
                node_args, node_kwargs = on_node_rows(node.target, _unwrap(args), _unwrap(kwargs), rows)
                result = _execute(node, node_args, node_kwargs)
                if _has_rows(result, rows):
                    return self._wrap(result, domain)
                # a call the rules took for row-wise returned other rows: run it as written instead
        self.record.reasons.append(f"{node.name} = {_target_name(node)}(...) is not row-wise on "
                                   f"{' and '.join(sorted(DOMAIN_NAMES[d] for d in _all_domains(lazy)))}")
        edge_args = map_structure(args, lambda a: self.materialize(a, node.name) if _is_lazy(a) else a)
        edge_kwargs = map_structure(kwargs, lambda a: self.materialize(a, node.name) if _is_lazy(a) else a)
        return self._wrap(_execute(node, edge_args, edge_kwargs), E)

    def _wrap(self, result: Any, domain: str) -> Any:
        if isinstance(result, Tensor):
            if domain == E and (result.dim() == 0 or result.shape[0] != self.g.num_edges):
                return result  # not one row per edge: a plain constant from here on
            return Rows(domain, result)
        if isinstance(result, (tuple, list)):  # e.g. torch.max(x, dim) -> (values, indices)
            items = [self._wrap(r, domain) for r in result]
            if type(result) in (tuple, list):
                return type(result)(items)
            return result._make(items) if hasattr(result, "_make") else type(result)(items)
        return result

    # ------------------------------------------------------------------ special forms
    def _shape_query(self, node: Instruction, args: tuple, kwargs: dict) -> Any:
        """``x_j.shape``, ``x_j.size(d)``, ``x_j.dim()``: answered for the per-edge view, without
        computing anything."""
        subject = args[0] if args else None
        if not _is_lazy(subject):
            return NotImplemented
        shape = torch.Size((self.g.num_edges,) + _feature_shape(subject))
        if node.op == "call_function" and node.target is getattr and args[1] in _SHAPE_ATTRIBUTES:
            attribute = args[1]
            if attribute == "shape":
                return shape
            if attribute == "ndim":
                return len(shape)
            return getattr(_probe(subject), attribute)
        if node.op == "call_method":
            if node.target == "size":
                dim = args[1] if len(args) > 1 else kwargs.get("dim")
                return shape if dim is None else shape[dim]
            if node.target == "dim":
                return len(shape)
            if node.target == "numel":
                return math.prod(shape)
        return NotImplemented

    def _binary(self, op: str, a: Any, b: Any) -> Any:
        """``a op b`` across row spaces as :class:`Pending`; None when the generic rules apply."""
        if not (_is_lazy(a) and _is_lazy(b)):
            return None
        if isinstance(a, Rows) and isinstance(b, Rows) and a.domain == b.domain:
            return None
        rank_a = a.tensor.dim() if isinstance(a, Rows) else a.rank()
        rank_b = b.tensor.dim() if isinstance(b, Rows) else b.rank()
        dtype_a = a.tensor.dtype if isinstance(a, Rows) else a.dtype()
        dtype_b = b.tensor.dtype if isinstance(b, Rows) else b.dtype()
        if rank_a != rank_b or dtype_a != dtype_b or not dtype_a.is_floating_point:
            return None
        # (x_j * w1) * w2 -> x_j * (w1 * w2): the product of edge weights stays per edge.
        for inner, outer in ((a, b), (b, a)):
            if (op in ("mul", "add") and isinstance(inner, Pending) and inner.op == op
                    and isinstance(outer, Rows) and outer.domain == E):
                for node_side, edge_side in ((inner.lhs, inner.rhs), (inner.rhs, inner.lhs)):
                    if isinstance(node_side, Rows) and isinstance(edge_side, Rows) and edge_side.domain == E \
                            and node_side.domain != E:
                        combined = edge_side.tensor * outer.tensor if op == "mul" else edge_side.tensor + outer.tensor
                        return Pending(op, node_side, Rows(E, combined))
        return Pending(op, a, b)

    def dot(self, product: Pending, keepdim: bool) -> Rows:
        """``(lhs * rhs).sum(-1)`` as one g-SDDMM dot (one value per edge)."""
        lhs, rhs = self._operand(product.lhs), self._operand(product.rhs)
        if lhs.tensor.shape[-1] != rhs.tensor.shape[-1]:  # a broadcast last dim is not a dot
            self.record.reasons.append("sum(-1) of a product whose last dims differ")
            summed = self.materialize(product, "dot").sum(-1, keepdim=keepdim)
            return Rows(E, summed)
        out = ops.gsddmm(self.g, "dot", lhs.tensor, rhs.tensor, lhs.domain, rhs.domain)
        self.record.steps.append(("gsddmm", "dot", lhs.domain, rhs.domain))
        return Rows(E, out if keepdim else out.squeeze(-1))

    def _operand(self, value: Rows | Pending) -> Rows:
        return value if isinstance(value, Rows) else Rows(E, self.materialize(value, "operand"))

    # ------------------------------------------------------------------ materializing per edge
    def edge_values(self, value: Any, why: str) -> Tensor:
        """The per-edge tensor of an output value (a message handed to a user's ``aggregate``, an
        ``apply_edges`` result); raises :class:`Unfusable` when it is not one row per edge."""
        return self.materialize(self.output(value), why)

    def output(self, value: Any) -> "Rows | Pending":
        """A program's result as a per-edge value. A plain tensor with one row per edge (a message
        that transposed, sliced or reshaped across rows on the way) is what the messages are, as
        in the eager path; anything else is left to the eager path to run (and to reject)."""
        if _is_lazy(value):
            return value
        if isinstance(value, Tensor) and value.dim() > 0 and value.shape[0] == self.g.num_edges:
            return Rows(E, value)
        got = f"a tensor of shape {list(value.shape)}" if isinstance(value, Tensor) else type(value).__name__
        raise Unfusable(f"the traced message returned {got}, not one row per edge ({self.g.num_edges})")

    def materialize(self, value: Rows | Pending, why: str) -> Tensor:
        """The per-edge tensor of ``value`` (the gather or g-SDDMM is recorded)."""
        if isinstance(value, Rows):
            if value.domain == E:
                return value.tensor
            index = self.g.src if value.domain == U else self.g.dst
            out = value.tensor.index_select(0, index)
            self.record.gathered.append((why, value.domain, tuple(out.shape)))
            return out
        lhs, rhs = self._operand(value.lhs), self._operand(value.rhs)
        out = ops.gsddmm(self.g, value.op, lhs.tensor, rhs.tensor, lhs.domain, rhs.domain)
        self.record.steps.append(("gsddmm", value.op, lhs.domain, rhs.domain))
        self.record.edge_tensors.append((f"{lhs.domain}_{value.op}_{rhs.domain}", tuple(out.shape)))
        return out

    # ------------------------------------------------------------------ the reduction
    def reduce(self, value: Any, reduce: str) -> Tensor:
        """``out[v] = reduce over in-edges of v of value`` (see the module docstring)."""
        value = self.output(value)
        if isinstance(value, Rows):
            if value.domain == U:
                return self._spmm("copy_u", reduce, value.tensor, None)
            if value.domain == E:
                return self._spmm("copy_e", reduce, None, value.tensor)
            return self._destination_term(value.tensor, reduce)
        fused = self._reduce_pending(value, reduce)
        if fused is not None:
            return fused
        self.record.reasons.append(
            f"{reduce} of a per-edge '{value.op}' of {' and '.join(sorted(DOMAIN_NAMES[d] for d in value.domains()))} "
            "has no g-SpMM form: the messages are computed by g-SDDMM, then reduced")
        return self._spmm("copy_e", reduce, None, self.materialize(value, "reduce"))

    def _reduce_pending(self, p: Pending, reduce: str) -> Tensor | None:
        a, b = p.lhs, p.rhs
        if isinstance(a, Rows) and isinstance(b, Rows) and {a.domain, b.domain} == {U, E}:
            if a.domain == U:
                return self._spmm(f"u_{p.op}_e", reduce, a.tensor, b.tensor)
            if p.op in ("add", "mul"):
                return self._spmm(f"u_{p.op}_e", reduce, b.tensor, a.tensor)
            if p.op == "sub":  # e - u = -(u - e)
                return -self._spmm("u_sub_e", _FLIPPED[reduce], b.tensor, a.tensor)
        if reduce in ("sum", "mean") and p.op in ("add", "sub"):
            left, right = self.reduce(a, reduce), self.reduce(b, reduce)
            return left + right if p.op == "add" else left - right
        y_side = "lhs" if isinstance(a, Rows) and a.domain == V else "rhs" if isinstance(b, Rows) and b.domain == V else None
        if y_side is None:
            return None
        y, other = (a.tensor, b) if y_side == "lhs" else (b.tensor, a)
        if reduce in ("sum", "mean"):
            if p.op == "mul":
                return self._where_has_edges(self.reduce(other, reduce) * y)  # 0 * inf is not 0
            if p.op == "div" and y_side == "rhs":
                return self._where_has_edges(self.reduce(other, reduce) / y)
            return None
        if p.op == "add":
            return self._where_has_edges(self.reduce(other, reduce) + y)
        if p.op == "sub":
            if y_side == "rhs":
                return self._where_has_edges(self.reduce(other, reduce) - y)
            return self._where_has_edges(y - self.reduce(other, _FLIPPED[reduce]))
        return None  # max/min of a product or quotient depends on signs

    def _spmm(self, op: str, reduce: str, u: Tensor | None, e: Tensor | None) -> Tensor:
        self.record.steps.append(("gspmm", op, reduce))
        return ops.gspmm(self.g, op, reduce, u, e)

    def _degree_view(self, like: Tensor) -> Tensor:
        degree = self.g.in_degrees().to(like.dtype)
        return degree.view((-1,) + (1,) * (like.dim() - 1))

    def _destination_term(self, y: Tensor, reduce: str) -> Tensor:
        """The reduce of a value that is the same on every in-edge of a destination."""
        self.record.steps.append(("destination term", reduce))
        if reduce == "sum":
            return self._where_has_edges(y * self._degree_view(y))  # no in-edges: 0, also for y = inf or nan
        return self._where_has_edges(y)

    def _where_has_edges(self, out: Tensor) -> Tensor:
        has_edges = self._degree_view(out) > 0
        return torch.where(has_edges, out, torch.zeros((), dtype=out.dtype, device=out.device))


# ---------------------------------------------------------------------- helpers
def _lazy_leaves(args: tuple, kwargs: dict) -> list:
    """The Rows/Pending anywhere among the arguments."""
    return [a for a in leaves((args, kwargs)) if isinstance(a, (Rows, Pending))]


def _unwrap(tree: Any) -> Any:
    return map_structure(tree, lambda a: a.tensor if isinstance(a, Rows) else a)


def _all_domains(lazy: list) -> set[str]:
    out: set[str] = set()
    for value in lazy:
        out |= _domains(value)
    return out


def _execute(node: Instruction, args: tuple, kwargs: dict, *, unwrap: bool = True) -> Any:
    if unwrap:
        args, kwargs = _unwrap(args), _unwrap(kwargs)
    if node.op == "call_method":
        return getattr(args[0], node.target)(*args[1:], **kwargs)
    return node.target(*args, **kwargs)


def _is_structural(node: Instruction, args: tuple) -> bool:
    """``getattr``/``[i]`` on a tuple, list or dict of values: picks one, computes nothing."""
    return (node.target in (getattr, operator.getitem, "__getitem__") and len(args) == 2
            and isinstance(args[0], (tuple, list, dict)) and not _is_lazy(args[1]))


def _has_rows(result: Any, rows: int) -> bool:
    """Whether every tensor in ``result`` has ``rows`` rows (a row-wise call's promise)."""
    tensors = [t for t in leaves(result) if isinstance(t, Tensor)]
    return bool(tensors) and all(t.dim() > 0 and t.shape[0] == rows for t in tensors)


def _layout(value: Any) -> tuple | None:
    """What a write in place keeps: per-edge feature shape and dtype (whole shape for a plain
    tensor); None for anything else, which no write in place may produce or change."""
    if isinstance(value, Rows):
        return "rows", tuple(value.tensor.shape[1:]), value.tensor.dtype
    if isinstance(value, Pending):
        return "rows", value.feature_shape(), value.dtype()
    if isinstance(value, Tensor):
        return "tensor", tuple(value.shape), value.dtype
    return None


def _target_name(node: Instruction) -> str:
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))


def _is_dot(node: Instruction, args: tuple, kwargs: dict) -> bool:
    if node.target not in ("sum", torch.sum) or not args or not isinstance(args[0], Pending):
        return False
    product = args[0]
    if product.op != "mul" or set(kwargs) - {"dim", "keepdim", "keepdims"} or len(args) > 3:
        return False
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    if isinstance(dim, (tuple, list)) and len(dim) == 1:
        dim = dim[0]
    rank = product.rank()
    return isinstance(dim, int) and not isinstance(dim, bool) and dim in (-1, rank - 1) and rank >= 2


def _keepdim(args: tuple, kwargs: dict) -> bool:
    # torch.sum takes numpy's spelling ``keepdims`` as well (DGL's test helpers use it)
    return bool(args[2] if len(args) > 2 else kwargs.get("keepdim", kwargs.get("keepdims", False)))
