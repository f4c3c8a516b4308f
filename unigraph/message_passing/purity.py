"""Which message functions read nothing but their arguments, by their bytecode.

A trace bakes in what the function read while it ran (see ``base.py``, "Why every call traces").
A function that reads only its arguments - no ``self``, no globals or builtins, no closures, no
nested functions - can read nothing else: its trace is a function of which arguments are tensors
(where they live) and the values of the others. Such a trace may be cached under exactly that key
and reused without any other guard. GCNConv's ``edge_weight.view(-1, 1) * x_j`` and MRConv's
``x_j - x_i`` are of this kind; ``self.lin(x_j)`` or ``torch.tanh(x_j)`` are not (they read an
attribute, a global) and are traced on every call.

The check is conservative: anything it does not recognize as reading only arguments counts as
reading more.
"""
from __future__ import annotations

import dis
import types
from typing import Callable

# instructions that read or write something other than the function's own arguments and locals
_OUTSIDE = frozenset({
    "LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_CLOSURE", "LOAD_FROM_DICT_OR_DEREF",
    "LOAD_FROM_DICT_OR_GLOBALS", "MAKE_CELL", "COPY_FREE_VARS", "IMPORT_NAME", "IMPORT_FROM", "STORE_GLOBAL",
    "DELETE_GLOBAL", "STORE_DEREF", "DELETE_DEREF", "STORE_NAME", "DELETE_NAME", "STORE_ATTR", "DELETE_ATTR",
    "LOAD_SUPER_ATTR",
})
_LOCAL_ACCESS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "STORE_FAST", "DELETE_FAST",
                           "LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"})
_VERDICTS: dict[types.CodeType, bool] = {}  # by code object: a verdict reads nothing else, and keeps no `self` alive


def reads_only_its_arguments(method: Callable) -> bool:
    """Whether the method (its first parameter is ``self``; plain or bound) reads nothing but its
    other arguments."""
    code = getattr(method, "__code__", None)
    if not isinstance(code, types.CodeType):
        return False
    verdict = _VERDICTS.get(code)
    if verdict is None:
        verdict = _VERDICTS[code] = _check(code)
    return verdict


def _check(code: types.CodeType) -> bool:
    if code.co_freevars or code.co_cellvars or code.co_argcount < 1:
        return False
    if any(isinstance(const, types.CodeType) for const in code.co_consts):  # lambdas, comprehensions
        return False
    owner = code.co_varnames[0]  # self
    for ins in dis.get_instructions(code):
        if ins.opname in _OUTSIDE:
            return False
        if ins.opname in _LOCAL_ACCESS and owner in _names(ins.argval):
            return False
    return True


def _names(argval) -> tuple:
    return argval if isinstance(argval, tuple) else (argval,)
