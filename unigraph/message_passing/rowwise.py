"""Which torch calls are *row-wise*: each output row depends only on the same input row.

A message computes on per-edge views: ``x_j`` is ``x[src]``. When a call is row-wise and all its
per-edge operands are views of the same node tensor side, it can run on the node rows instead
(``f(x)[src] == f(x[src])``): N rows of work instead of E, and no E x F gather. This module
answers that question for one fx call, given the rank of its row operands. Unknown calls are not
row-wise; the interpreter then gathers per edge and runs the call exactly as written, which is
always correct.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

import torch
import torch.nn.functional as F

ELEMENTWISE_FUNCTIONS = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
    operator.pow, operator.neg, operator.pos, operator.abs, operator.eq, operator.ne, operator.lt,
    operator.le, operator.gt, operator.ge, operator.and_, operator.or_, operator.xor, operator.invert,
    torch.add, torch.sub, torch.subtract, torch.mul, torch.multiply, torch.div, torch.true_divide,
    torch.neg, torch.exp, torch.expm1, torch.log, torch.log1p, torch.log2, torch.sigmoid, torch.tanh,
    torch.relu, torch.abs, torch.sqrt, torch.rsqrt, torch.square, torch.pow, torch.clamp, torch.clip,
    torch.maximum, torch.minimum, torch.where, torch.sin, torch.cos, torch.sign, torch.reciprocal,
    torch.erf, torch.floor, torch.ceil, torch.round, torch.nan_to_num, torch.masked_fill,
    F.relu, F.leaky_relu, F.elu, F.selu, F.celu, F.gelu, F.silu, F.mish, F.softplus, F.hardtanh,
    F.relu6, F.logsigmoid, F.softsign, F.tanhshrink, F.sigmoid, F.tanh,
})
ELEMENTWISE_METHODS = frozenset({
    "add", "sub", "mul", "div", "true_divide", "neg", "exp", "expm1", "log", "log1p", "sigmoid", "tanh",
    "relu", "abs", "sqrt", "rsqrt", "square", "pow", "clamp", "clamp_min", "clamp_max", "clip", "maximum",
    "minimum", "sin", "cos", "sign", "reciprocal", "erf", "floor", "ceil", "round", "masked_fill",
    "float", "double", "half", "bfloat16", "to", "type_as", "contiguous", "clone", "detach",
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
    "__pow__", "__rpow__", "__neg__",
})

# Calls with a `dim` argument: (position of dim among the args, self included; default dim).
# A default of None means "every dimension", which crosses rows.
_NO_DEFAULT = object()
DIM_CALLS: dict[Any, tuple[int, Any]] = {}
for _name, _spec in {
    "sum": (1, None), "mean": (1, None), "amax": (1, None), "amin": (1, None), "prod": (1, None),
    "logsumexp": (1, _NO_DEFAULT), "softmax": (1, _NO_DEFAULT), "log_softmax": (1, _NO_DEFAULT),
    "cumsum": (1, _NO_DEFAULT), "cumprod": (1, _NO_DEFAULT), "argmax": (1, None), "argmin": (1, None),
    "norm": (2, None), "unbind": (1, 0), "chunk": (2, 0), "split": (2, 0), "std": (1, None), "var": (1, None),
    "topk": (2, -1), "sort": (1, -1), "argsort": (1, -1), "kthvalue": (2, -1), "mode": (1, -1),
    "median": (1, None), "nanmedian": (1, None), "cummax": (1, _NO_DEFAULT), "cummin": (1, _NO_DEFAULT),
    "logcumsumexp": (1, _NO_DEFAULT), "all": (1, None), "any": (1, None),
}.items():
    DIM_CALLS[_name] = _spec
    if hasattr(torch, _name):
        DIM_CALLS[getattr(torch, _name)] = _spec
DIM_CALLS[F.softmax] = (1, _NO_DEFAULT)
DIM_CALLS[F.log_softmax] = (1, _NO_DEFAULT)
DIM_CALLS[F.normalize] = (2, 1)

MATMUL_CALLS = frozenset({operator.matmul, torch.matmul, torch.mm, "matmul", "mm", "__matmul__"})
DROPOUT_CALLS = frozenset({F.dropout, torch.dropout})


def _arg(args: tuple, kwargs: dict, position: int, name: str, default: Any) -> Any:
    if name in kwargs:
        return kwargs[name]
    if len(args) > position:
        return args[position]
    return default


def _normalized(dim: Any, rank: int) -> int | None:
    if isinstance(dim, bool) or not isinstance(dim, int) or not -rank <= dim < rank:
        return None
    return dim % rank


def _keeps_rows(dim: Any, rank: int) -> bool:
    """A dim (or tuple of dims) that does not touch dimension 0."""
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    if not dims:  # dim=() reduces everything in amax/amin
        return False
    normalized = [_normalized(d, rank) for d in dims]
    return all(d is not None and d != 0 for d in normalized)


def _constants_fit(constants: list, rank: int) -> bool:
    """Constant tensors broadcast against the feature dims only (never along the row dim)."""
    for c in constants:
        if isinstance(c, torch.Tensor) and c.dim() > 0:
            if c.dim() > rank or (c.dim() == rank and c.shape[0] != 1):
                return False
    return True


def _view_keeps_rows(shape: Any, rank: int, row_numel: int, logical_rows: int) -> bool:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        shape = tuple(shape[0])
    if not shape or any(isinstance(s, bool) or not isinstance(s, int) for s in shape):
        return False
    if shape[0] not in (-1, logical_rows):
        return False
    if -1 in shape and logical_rows * row_numel == 0:  # -1 is ambiguous for no elements: let it raise
        return False
    rest = shape[1:]
    if -1 in rest:
        return shape[0] == logical_rows and rest.count(-1) == 1
    return math.prod(rest) == row_numel


def _index_keeps_rows(index: Any, rank: int) -> bool:
    entries = index if isinstance(index, tuple) else (index,)
    if not entries:
        return False
    first = entries[0]
    if isinstance(first, slice):
        return first == slice(None)
    if first is Ellipsis:  # `...` spans dim 0 unless the other entries index every dimension
        indexing = [e for e in entries[1:] if e is not None and e is not Ellipsis]
        return Ellipsis not in entries[1:] and len(indexing) < rank and all(
            isinstance(e, (int, slice)) and not isinstance(e, bool) for e in indexing)
    return False


def is_rowwise(kind: str, target: Any, args: tuple, kwargs: dict, row_values: list, rank: int,
               row_numel: int, logical_rows: int, is_row: Callable[[Any], bool]) -> bool:
    """Whether the call ``target(*args, **kwargs)`` is row-wise.

    Args:
        kind: "call_function" or "call_method" (``target`` is then the method name).
        args, kwargs: the call's arguments, with row operands still wrapped (``is_row`` spots them).
        row_values: the row operands' tensors; all have rank ``rank``.
        row_numel: elements per row of the first row operand (for view/reshape).
        logical_rows: the number of rows the message sees (E), which ``x.size(0)`` returned.
    """
    key = target
    constants = [a for a in list(args) + list(kwargs.values()) if not is_row(a)]
    if any(v.dim() != rank for v in row_values) or rank == 0:
        return False

    if key in ELEMENTWISE_FUNCTIONS or (kind == "call_method" and key in ELEMENTWISE_METHODS):
        return _constants_fit(constants, rank)
    if key in DROPOUT_CALLS:  # random per element: row-wise only when it is the identity
        p = _arg(args, kwargs, 1, "p", 0.5)
        training = _arg(args, kwargs, 2, "training" if key is F.dropout else "train", True)
        return (not training or p == 0) and is_row(args[0])
    if not args or not is_row(args[0]):
        return _cat_like(key, args, kwargs, rank, is_row)
    if key in ("max", "min", torch.max, torch.min):  # reduction over a dim, or elementwise with a tensor
        other = _arg(args, kwargs, 1, "dim", None)
        if isinstance(other, int):
            return _keeps_rows(other, rank)
        return other is not None and _constants_fit(constants, rank)
    if key in DIM_CALLS:
        position, default = DIM_CALLS[key]
        dim = _arg(args, kwargs, position, "dim", default)
        if dim is None or dim is _NO_DEFAULT:
            return False
        return _keeps_rows(dim, rank) and _constants_fit([c for c in constants if isinstance(c, torch.Tensor)], rank)
    if key in ("unsqueeze", torch.unsqueeze):
        return _keeps_rows(_arg(args, kwargs, 1, "dim", None), rank + 1)
    if key in ("squeeze", torch.squeeze):
        dim = _arg(args, kwargs, 1, "dim", None)
        return dim is not None and _keeps_rows(dim, rank)
    if key in ("flatten", torch.flatten):
        start = _normalized(_arg(args, kwargs, 1, "start_dim", 0), rank)
        return start is not None and start >= 1
    if key in ("transpose", torch.transpose):
        return _keeps_rows((_arg(args, kwargs, 1, "dim0", None), _arg(args, kwargs, 2, "dim1", None)), rank)
    if key in ("permute", torch.permute):
        dims = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list)) else args[1:]
        return len(dims) == rank and _normalized(dims[0], rank) == 0
    if key in ("view", "reshape", torch.reshape):
        shape = args[1:] if "shape" not in kwargs else (kwargs["shape"],)
        return _view_keeps_rows(tuple(shape), rank, row_numel, logical_rows)
    if key in (operator.getitem, "__getitem__"):
        return _index_keeps_rows(args[1], rank)
    if key in MATMUL_CALLS:
        weight = args[1] if len(args) > 1 else None
        return rank >= 2 and isinstance(weight, torch.Tensor) and weight.dim() in (1, 2)
    if key is F.linear:
        weight, bias = _arg(args, kwargs, 1, "weight", None), _arg(args, kwargs, 2, "bias", None)
        return rank >= 2 and isinstance(weight, torch.Tensor) and (bias is None or isinstance(bias, torch.Tensor))
    return False


def _cat_like(key: Any, args: tuple, kwargs: dict, rank: int, is_row: Callable[[Any], bool]) -> bool:
    """torch.cat / torch.stack of row operands only, along a dim other than 0."""
    if key not in (torch.cat, torch.concat, torch.stack) or not args:
        return False
    parts = args[0]
    if not isinstance(parts, (list, tuple)) or not parts or not all(is_row(p) for p in parts):
        return False
    dim = _arg(args, kwargs, 1, "dim", 0)
    return _keeps_rows(dim, rank + 1 if key is torch.stack else rank)


def on_node_rows(target: Any, args: tuple, kwargs: dict, rows: int) -> tuple[tuple, dict]:
    """The arguments of a row-wise call, rewritten to run on ``rows`` node rows instead of the
    per-edge view: ``x_j.view(E, -1)`` (or ``x_j.view(x_j.size(0), -1)``) names the edge count as
    its first dimension, which becomes the node count."""
    if target not in ("view", "reshape", torch.reshape):
        return args, kwargs
    if "shape" in kwargs:
        return args, dict(kwargs, shape=(rows,) + tuple(kwargs["shape"])[1:])
    shape = args[1:]
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        return (args[0], (rows,) + tuple(shape[0])[1:]), kwargs
    return (args[0], rows) + tuple(shape[1:]), kwargs
