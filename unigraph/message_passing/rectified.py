"""Recognizing GINEConv's message, ``(x_j + e).relu()``, in a trace: ``propagate`` then runs it
and its sum in one COO pass where the small-graph rule takes the call
(``unigraph.ops.native_lane.run_add_relu``), instead of running it as written.

Only the exact program is recognized: a source-node input and an edge input added (``+`` or
``.add`` without ``alpha``, either order), then ``.relu()``, returned. It is looked for only in
the cached trace of a message that reads nothing but its arguments (``purity``), which
``torch.relu`` / ``F.relu`` are not (they read a global): those run their ordinary way, as does
any other program (``relu_``, a keyword argument, another call).
"""
from __future__ import annotations

import operator

from unigraph.message_passing.tracing import E, U, Ref, Traced

_ADD_METHODS = ("add", "__add__", "__radd__")


def rectified_input(traced: Traced | str) -> tuple[str, str] | tuple[()]:
    """``(source input, edge input)`` of a trace that is exactly ``(x_j + e).relu()``, or ``()``."""
    if not isinstance(traced, Traced) or not isinstance(traced.output, Ref):
        return ()
    program = traced.program
    calls = [ins for ins in program if ins.op != "placeholder"]
    if len(calls) != 2:
        return ()
    add, relu = calls
    if program[traced.output.index] is not relu or not _adds(add) or not (
            relu.op == "call_method" and relu.target == "relu" and len(relu.args) == 1
            and isinstance(relu.args[0], Ref) and program[relu.args[0].index] is add
            and not relu.kwargs and not relu.in_place):
        return ()
    operands = [program[a.index] for a in add.args]
    if any(ins.op != "placeholder" for ins in operands):
        return ()
    domains = {ins.domain: ins.target for ins in operands}
    return (domains[U], domains[E]) if set(domains) == {U, E} else ()


def _adds(ins) -> bool:
    """``a + b`` of two traced values, nothing else (no ``alpha``, not in place)."""
    if ins.in_place or ins.kwargs or len(ins.args) != 2 or not all(isinstance(a, Ref) for a in ins.args):
        return False
    if ins.op == "call_method":
        return ins.target in _ADD_METHODS
    return ins.op == "call_function" and ins.target is operator.add
