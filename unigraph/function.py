"""Built-in message and reduce functions for :meth:`Graph.update_all` and :meth:`Graph.apply_edges`,
in the spirit of DGL's ``dgl.function``.

A message function names where its operands live and which feature field they read: ``u`` is the
source node (``g.srcdata``), ``v`` the destination node (``g.dstdata``), ``e`` the edge
(``g.edata``). ``u_mul_e("h", "w", "m")`` is the message ``m = srcdata["h"] * edata["w"]`` on every
edge; ``sum("m", "h")`` sums the messages ``m`` into ``dstdata["h"]``. Built-ins compile to one
g-SpMM (``copy_u``/``copy_e``/``u_op_e`` with any reducer), or a g-SDDMM (edge output) plus what
the reduction allows (see :mod:`unigraph.message_passing.lazy`); no E x F message tensor is built
where the algebra allows it.

Every combination DGL has is spelled out below (no generated names), so each is greppable:
``copy_u``, ``copy_e`` and ``{lhs}_{op}_{rhs}`` for op in add, sub, mul, div, dot and ordered pairs
of distinct targets among u, v, e.
"""
from __future__ import annotations

import dataclasses

TARGETS = ("u", "v", "e")
BINARY_OPS = ("add", "sub", "mul", "div", "dot")
REDUCERS = ("sum", "mean", "max", "min")


@dataclasses.dataclass(frozen=True)
class MessageFunction:
    """A built-in message: ``out = op(lhs_target[lhs_field], rhs_target[rhs_field])`` per edge, or a
    copy of one operand (``op == "copy"``, no rhs)."""

    op: str
    lhs_target: str
    lhs_field: str
    rhs_target: str | None
    rhs_field: str | None
    out_field: str

    @property
    def name(self) -> str:
        if self.op == "copy":
            return f"copy_{self.lhs_target}"
        return f"{self.lhs_target}_{self.op}_{self.rhs_target}"

    def __repr__(self) -> str:
        if self.op == "copy":
            return f"{self.name}({self.lhs_field!r}, {self.out_field!r})"
        return f"{self.name}({self.lhs_field!r}, {self.rhs_field!r}, {self.out_field!r})"


@dataclasses.dataclass(frozen=True)
class ReduceFunction:
    """A built-in reducer: ``out_field[v] = reduce over in-edges of v of msg_field``."""

    reduce: str
    msg_field: str
    out_field: str

    def __repr__(self) -> str:
        return f"{self.reduce}({self.msg_field!r}, {self.out_field!r})"


def _field(name: str, value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a feature name (str), got {type(value).__name__} ({value!r})")
    return value


def _copy(target: str, field: str, out: str) -> MessageFunction:
    return MessageFunction("copy", target, _field("field", field), None, None, _field("out", out))


def _binary(op: str, lhs_target: str, lhs_field: str, rhs_target: str, rhs_field: str, out: str) -> MessageFunction:
    return MessageFunction(op, lhs_target, _field("lhs_field", lhs_field), rhs_target,
                           _field("rhs_field", rhs_field), _field("out", out))


# ---------------------------------------------------------------------- copies
def copy_u(u: str, out: str) -> MessageFunction:
    """Message ``out = srcdata[u]``."""
    return _copy("u", u, out)


def copy_e(e: str, out: str) -> MessageFunction:
    """Message ``out = edata[e]``."""
    return _copy("e", e, out)


def copy_v(v: str, out: str) -> MessageFunction:
    """Message ``out = dstdata[v]`` (useful in apply_edges)."""
    return _copy("v", v, out)


# ---------------------------------------------------------------------- source with destination
def u_add_v(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("add", "u", lhs_field, "v", rhs_field, out)


def u_sub_v(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("sub", "u", lhs_field, "v", rhs_field, out)


def u_mul_v(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("mul", "u", lhs_field, "v", rhs_field, out)


def u_div_v(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("div", "u", lhs_field, "v", rhs_field, out)


def u_dot_v(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("dot", "u", lhs_field, "v", rhs_field, out)


def v_add_u(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("add", "v", lhs_field, "u", rhs_field, out)


def v_sub_u(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("sub", "v", lhs_field, "u", rhs_field, out)


def v_mul_u(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("mul", "v", lhs_field, "u", rhs_field, out)


def v_div_u(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("div", "v", lhs_field, "u", rhs_field, out)


def v_dot_u(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("dot", "v", lhs_field, "u", rhs_field, out)


# ---------------------------------------------------------------------- source with edge
def u_add_e(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("add", "u", lhs_field, "e", rhs_field, out)


def u_sub_e(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("sub", "u", lhs_field, "e", rhs_field, out)


def u_mul_e(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("mul", "u", lhs_field, "e", rhs_field, out)


def u_div_e(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("div", "u", lhs_field, "e", rhs_field, out)


def u_dot_e(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("dot", "u", lhs_field, "e", rhs_field, out)


def e_add_u(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("add", "e", lhs_field, "u", rhs_field, out)


def e_sub_u(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("sub", "e", lhs_field, "u", rhs_field, out)


def e_mul_u(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("mul", "e", lhs_field, "u", rhs_field, out)


def e_div_u(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("div", "e", lhs_field, "u", rhs_field, out)


def e_dot_u(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("dot", "e", lhs_field, "u", rhs_field, out)


# ---------------------------------------------------------------------- destination with edge
def v_add_e(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("add", "v", lhs_field, "e", rhs_field, out)


def v_sub_e(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("sub", "v", lhs_field, "e", rhs_field, out)


def v_mul_e(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("mul", "v", lhs_field, "e", rhs_field, out)


def v_div_e(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("div", "v", lhs_field, "e", rhs_field, out)


def v_dot_e(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("dot", "v", lhs_field, "e", rhs_field, out)


def e_add_v(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("add", "e", lhs_field, "v", rhs_field, out)


def e_sub_v(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("sub", "e", lhs_field, "v", rhs_field, out)


def e_mul_v(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("mul", "e", lhs_field, "v", rhs_field, out)


def e_div_v(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("div", "e", lhs_field, "v", rhs_field, out)


def e_dot_v(lhs_field: str, rhs_field: str, out: str) -> MessageFunction:
    return _binary("dot", "e", lhs_field, "v", rhs_field, out)


# ---------------------------------------------------------------------- reducers
# These shadow Python's sum/max/min inside this module (as dgl.function does); nothing below uses
# the builtins.
def sum(msg: str, out: str) -> ReduceFunction:  # noqa: A001 - DGL's name
    """``out[v] = sum of msg over the in-edges of v`` (0 without in-edges)."""
    return ReduceFunction("sum", _field("msg", msg), _field("out", out))


def mean(msg: str, out: str) -> ReduceFunction:
    """``out[v] = mean of msg over the in-edges of v`` (0 without in-edges)."""
    return ReduceFunction("mean", _field("msg", msg), _field("out", out))


def max(msg: str, out: str) -> ReduceFunction:  # noqa: A001 - DGL's name
    """``out[v] = elementwise max of msg over the in-edges of v`` (0 without in-edges)."""
    return ReduceFunction("max", _field("msg", msg), _field("out", out))


def min(msg: str, out: str) -> ReduceFunction:  # noqa: A001 - DGL's name
    """``out[v] = elementwise min of msg over the in-edges of v`` (0 without in-edges)."""
    return ReduceFunction("min", _field("msg", msg), _field("out", out))


MESSAGE_FUNCTIONS = tuple(
    ["copy_u", "copy_e", "copy_v"]
    + [f"{a}_{op}_{b}" for a in TARGETS for b in TARGETS if a != b for op in BINARY_OPS])

__all__ = list(MESSAGE_FUNCTIONS) + list(REDUCERS) + ["MessageFunction", "ReduceFunction"]
