"""Which traced calls write into a value, and when such a write may be recorded as its out-of-place form.

A trace is a program of values: the interpreter (:mod:`unigraph.message_passing.lazy`) computes
each call's result anew, on node rows or per edge, and never hands the user's tensors to a call
that writes. A call that writes into its argument (``y.relu_()``, ``torch.relu_(y)``, ``y += b``,
``F.relu(y, inplace=True)``, ``out=``, ``y[m] = 0``, ``y.data = ...``) or touches autograd state
(``register_hook``, ``retain_grad``, ``backward``) has no such meaning: recorded as is, its write
would be lost (PyTorch tensors see a write through every alias: Python names, views, the tensor a
gathered ``x_j`` came from).

This module names those calls (:func:`mutation`) by PyTorch's conventions, which hold for every
ATen op: an in-place op's name ends in one ``_``; a write into another tensor goes through ``out=``
or ``inplace=``; Python's augmented assignments are ``__iadd__`` and friends. The tracer then
either refuses (the message runs eagerly, with the reason in ``explain()``) or, in the one case
that is exact, records the out-of-place form (:func:`functional_form`): the written value is a
*fresh* tensor (:func:`fresh_result`: made by an elementwise call, a matmul, a concatenation or a reduction,
so it shares memory with nothing) and nothing has taken a view of it. Then the write can only be
seen through the Python references to that value, and the tracer re-points those to the result.
Whether the write keeps the value's shape and dtype (as an in-place op must) is known only on
real data; the interpreter checks it and otherwise runs the message eagerly.
"""
from __future__ import annotations

import dataclasses
import inspect
import operator
from typing import Any

import torch
import torch.nn.functional as F

from unigraph.message_passing.rowwise import ELEMENTWISE_FUNCTIONS, ELEMENTWISE_METHODS, MATMUL_CALLS

# Python's augmented assignments on a tensor write in place (``y += b`` is ``y.add_(b)``).
AUGMENTED = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv, operator.imod: operator.mod,
    operator.ipow: operator.pow, operator.iand: operator.and_, operator.ior: operator.or_,
    operator.ixor: operator.xor, operator.imatmul: None, operator.ilshift: None, operator.irshift: None,
}
AUGMENTED_METHODS = {f"__{fn.__name__}__": fn for fn in AUGMENTED}  # "__iadd__" -> operator.iadd
# calls that change a traced value's autograd state or run autograd on it
AUTOGRAD_METHODS = frozenset({"register_hook", "register_post_accumulate_grad_hook", "retain_grad", "backward"})
AUTOGRAD_FUNCTIONS = frozenset({torch.autograd.grad, torch.autograd.backward})
_WRITE_METHODS = frozenset({"__setitem__", "__delitem__"})

# Calls whose result is a new tensor that shares memory with none of their arguments: elementwise
# calls, matmuls, concatenations and reductions to one tensor. Left out on purpose: conversions
# (``to``, ``float``, ``contiguous``, ``type_as``), which return their input when nothing changes;
# ``detach`` and ``+t`` (the same memory); dropout (its input when not training); views.
_ALIASING_METHODS = frozenset({"float", "double", "half", "bfloat16", "to", "type_as", "contiguous", "detach"})
_REDUCTIONS = ("sum", "mean", "amax", "amin", "prod", "logsumexp", "norm", "std", "var", "cumsum", "cumprod",
               "softmax", "log_softmax")
FRESH_FUNCTIONS = (ELEMENTWISE_FUNCTIONS - {operator.pos}) | MATMUL_CALLS - {"matmul", "mm", "__matmul__"} | {
    F.linear, torch.cat, torch.concat, torch.stack, F.softmax, F.log_softmax, torch.clone} | {
    getattr(torch, name) for name in _REDUCTIONS}
FRESH_METHODS = (ELEMENTWISE_METHODS - _ALIASING_METHODS) | {"matmul", "mm", "__matmul__", "__rmatmul__"} | set(
    _REDUCTIONS)
_OPERATORS = frozenset(fn for fn in FRESH_FUNCTIONS if getattr(fn, "__module__", None) == "_operator")

# In-place methods with an out-of-place twin of the same arguments (``clamp_`` -> ``clamp``).
_FUNCTIONAL_METHODS = frozenset(name for name in ELEMENTWISE_METHODS - _ALIASING_METHODS
                                if not name.startswith("__") and hasattr(torch.Tensor, name + "_"))
NEVER, ALWAYS, WITH_A_TENSOR = 0, 1, 2  # is a call's result fresh


@dataclasses.dataclass(frozen=True)
class _Facts:
    """What a call target says by itself (read once per target: tracing asks for every call)."""

    name: str
    writes: str | None         # the write its name declares (``relu_``, ``__iadd__``, hooks)
    inplace_at: int | None     # the position of its ``inplace`` parameter
    fresh: int                 # NEVER, ALWAYS or WITH_A_TENSOR operand (Python's operators)


_FACTS: dict[tuple[str, Any], _Facts] = {}


def target_name(target: Any) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def mutation(kind: str, target: Any, args: tuple, kwargs: dict) -> str | None:
    """What the call writes into or changes, in words; None when it only reads its arguments."""
    facts = _facts(kind, target)
    if facts.writes is not None:
        return facts.writes
    if kwargs.get("out") is not None:
        return f"{facts.name}(..., out=...) writes into out"
    if _inplace_passed(facts, args, kwargs):
        return f"{facts.name}(..., inplace=True) writes in place into its input"
    return None


def functional_form(kind: str, target: Any, args: tuple, kwargs: dict) -> tuple[str, Any, tuple, dict] | None:
    """The out-of-place call computing what the in-place call leaves in its first argument, or
    None when there is none this module knows to be exact."""
    if kwargs.get("out") is not None or not args:
        return None
    name = target_name(target)
    if kind == "call_method":
        if name in AUGMENTED_METHODS:
            twin = AUGMENTED[AUGMENTED_METHODS[name]]
            return None if twin is None else ("call_function", twin, args, kwargs)
        if name.endswith("_") and name[:-1] in _FUNCTIONAL_METHODS:
            return "call_method", name[:-1], args, kwargs
        return None
    if _is_in(target, AUGMENTED):
        twin = AUGMENTED[target]
        return None if twin is None else ("call_function", twin, args, kwargs)
    if name.endswith("_") and not name.endswith("__"):
        for namespace in (torch, F):
            twin = getattr(namespace, name[:-1], None)
            if twin is not None and _is_in(twin, ELEMENTWISE_FUNCTIONS):
                return "call_function", twin, args, kwargs
        return None
    facts = _facts(kind, target)
    if _is_in(target, ELEMENTWISE_FUNCTIONS) and _inplace_passed(facts, args, kwargs):
        bound = inspect.signature(target).bind(*args, **kwargs)
        bound.arguments["inplace"] = False
        return "call_function", target, bound.args, bound.kwargs
    return None


def fresh_result(kind: str, target: Any, args: tuple, is_tensor) -> bool:
    """Whether the call's result is a new tensor sharing memory with nothing else. Python's
    operators (and dunder methods: ``n.__add__(1)`` may be an int's) are fresh only when an
    operand is a tensor; ``is_tensor`` says whether an argument is known to be one."""
    fresh = _facts(kind, target).fresh
    return fresh == ALWAYS or (fresh == WITH_A_TENSOR and any(is_tensor(a) for a in args))


def _facts(kind: str, target: Any) -> _Facts:
    try:
        found = _FACTS.get((kind, target))
    except TypeError:  # an unhashable callable
        return _read_facts(kind, target)
    if found is None:
        found = _FACTS[(kind, target)] = _read_facts(kind, target)
    return found


def _read_facts(kind: str, target: Any) -> _Facts:
    name = target_name(target)
    if kind == "call_method":
        fresh = (WITH_A_TENSOR if name.startswith("__") else ALWAYS) if name in FRESH_METHODS else NEVER
    elif kind == "call_function" and _is_in(target, FRESH_FUNCTIONS):
        fresh = WITH_A_TENSOR if target in _OPERATORS else ALWAYS
    else:
        fresh = NEVER
    return _Facts(name, _declared_write(kind, target, name), _inplace_position(target), fresh)


def _declared_write(kind: str, target: Any, name: str) -> str | None:
    if (kind == "call_method" and name in AUTOGRAD_METHODS) or _is_in(target, AUTOGRAD_FUNCTIONS):
        return f"{name}() changes the autograd state of a traced value"
    if kind == "call_method" and name in AUGMENTED_METHODS:
        return f"{name}() writes into its first argument"
    if _is_in(target, AUGMENTED):
        return f"an augmented assignment ({name}) writes into its target"
    if name in _WRITE_METHODS:
        return f"{name}() writes into its first argument"
    if name.endswith("_") and not name.endswith("__"):
        return f"{name}() writes in place into its first argument"
    return None


def _inplace_position(target: Any) -> int | None:
    if isinstance(target, str) or not callable(target):
        return None
    try:
        parameters = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):  # builtins without a signature have no `inplace` either
        return None
    return parameters.index("inplace") if "inplace" in parameters else None


def _inplace_passed(facts: _Facts, args: tuple, kwargs: dict) -> bool:
    """Whether ``inplace`` is passed true, by keyword or position (``F.relu(y, True)``)."""
    if "inplace" in kwargs:
        return bool(kwargs["inplace"])
    return facts.inplace_at is not None and len(args) > facts.inplace_at and bool(args[facts.inplace_at])


def _is_in(target: Any, collection) -> bool:
    try:
        return target in collection
    except TypeError:  # an unhashable callable
        return False
