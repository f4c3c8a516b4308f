"""What the graph operators accept: names, feature-shape broadcasting and input checks.

Every check here runs in the front door, before any backend or kernel sees the tensors, so a
kernel may assume well-formed input: indices in range, equal dtypes and devices, features of
equal rank whose shapes broadcast.

Broadcasting follows DGL: the feature shapes (everything after the first, node/edge dimension)
are first padded with trailing 1s to the same rank, then broadcast numpy-style. So ``u`` of shape
``[N, H, F]`` times ``e`` of shape ``[E, H]`` means ``e`` is read as ``[E, H, 1]``. For ``dot``
the last dimensions must be equal and the result keeps it as size 1.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

GSPMM_OPS = ("copy_u", "copy_e", "u_add_e", "u_sub_e", "u_mul_e", "u_div_e")
REDUCES = ("sum", "mean", "max", "min")
GSDDMM_OPS = ("add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs")
TARGETS = ("u", "v", "e")
TARGET_NAMES = {"u": "source nodes", "v": "destination nodes", "e": "edges"}

# gspmm's binary ops are gsddmm's ops with lhs on the source and rhs on the edge.
GSPMM_BINARY = {"u_add_e": "add", "u_sub_e": "sub", "u_mul_e": "mul", "u_div_e": "div"}

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def pad_trailing(shape: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    return tuple(shape) + (1,) * (ndim - len(shape))


def broadcast_feature_shape(op: str, lhs: tuple[int, ...], rhs: tuple[int, ...]) -> tuple[int, ...]:
    """The feature shape of ``op(lhs, rhs)`` (both without the node/edge dimension)."""
    ndim = max(len(lhs), len(rhs))
    lhs, rhs = pad_trailing(lhs, ndim), pad_trailing(rhs, ndim)
    if op == "dot":
        if ndim == 0 or lhs[-1] != rhs[-1]:
            raise ValueError(f"dot needs equal last feature dimensions, got feature shapes {lhs} and {rhs}")
    out = []
    for a, b in zip(lhs, rhs):
        if a != b and a != 1 and b != 1:
            raise ValueError(f"feature shapes {lhs} and {rhs} do not broadcast (after padding trailing 1s)")
        out.append(max(a, b))
    if op == "dot":
        out[-1] = 1
    return tuple(out)


def broadcast_offsets(feature_shape: tuple[int, ...], out_shape: tuple[int, ...], device=None) -> Tensor:
    """For each element of ``out_shape`` (row-major), its flat offset inside one row of
    ``feature_shape``, which broadcasts to ``out_shape``. Kernels that read broadcast operands
    use it to find their element; backward passes use it to scatter gradients back."""
    numel = math.prod(feature_shape)
    grid = torch.arange(numel, device=device).view(pad_trailing(tuple(feature_shape), len(out_shape)))
    return grid.expand(tuple(out_shape)).reshape(math.prod(out_shape))


def reduce_to_shape(grad: Tensor, feature_shape: tuple[int, ...]) -> Tensor:
    """Sum ``grad`` (rows x broadcast feature shape) over the dimensions ``feature_shape`` was
    broadcast along: the adjoint of broadcasting."""
    target = pad_trailing(feature_shape, grad.dim() - 1)
    dims = [i + 1 for i, (t, g) in enumerate(zip(target, grad.shape[1:])) if t == 1 and g != 1]
    if dims:
        grad = grad.sum(dim=dims, keepdim=True)
    return grad.reshape((grad.shape[0],) + tuple(feature_shape))


def _check_choice(kind: str, value: str, choices: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{kind} must be one of {', '.join(choices)}; got {value!r}")


def _check_features(name: str, tensor: Tensor | None, rows: int, rows_are: str, device: torch.device) -> None:
    if tensor is None:
        return
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be a floating-point tensor (float16, bfloat16, float32, float64), got {tensor.dtype}")
    if tensor.dim() == 0:
        raise ValueError(f"{name} must have one row per {rows_are[:-1]} ({rows} rows), got a scalar")
    if tensor.shape[0] != rows:
        raise ValueError(f"{name} has {tensor.shape[0]} rows but the graph has {rows} {rows_are}")
    if tensor.device != device:
        raise ValueError(f"{name} is on {tensor.device} but the graph is on {device}; move one with .to()")


def _check_same_dtype(a_name: str, a: Tensor | None, b_name: str, b: Tensor | None) -> None:
    if a is not None and b is not None and a.dtype != b.dtype:
        raise TypeError(f"{a_name} is {a.dtype} but {b_name} is {b.dtype}; cast one so both match")


def target_rows(graph, target: str) -> tuple[int, str]:
    if target == "u":
        return graph.num_src_nodes, "source nodes"
    if target == "v":
        return graph.num_dst_nodes, "destination nodes"
    return graph.num_edges, "edges"


def check_gspmm(graph, op: str, reduce: str, u: Tensor | None, e: Tensor | None) -> tuple[int, ...]:
    """Validate a gspmm call; returns the output feature shape."""
    _check_choice("gspmm op", op, GSPMM_OPS)
    _check_choice("reduce", reduce, REDUCES)
    needs_u = op != "copy_e"
    needs_e = op != "copy_u"
    if needs_u and u is None:
        raise ValueError(f"gspmm op {op!r} needs node features u")
    if needs_e and e is None:
        raise ValueError(f"gspmm op {op!r} needs edge features e")
    if not needs_u and u is not None:
        raise ValueError("gspmm op 'copy_e' reads only edge features; got u as well (did you mean 'u_mul_e'?)")
    if not needs_e and e is not None:
        raise ValueError("gspmm op 'copy_u' reads only node features; got e as well (did you mean 'u_mul_e'?)")
    _check_features("u", u, graph.num_src_nodes, "source nodes", graph.device)
    _check_features("e", e, graph.num_edges, "edges", graph.device)
    _check_same_dtype("u", u, "e", e)
    if op == "copy_u":
        return tuple(u.shape[1:])
    if op == "copy_e":
        return tuple(e.shape[1:])
    return broadcast_feature_shape(GSPMM_BINARY[op], tuple(u.shape[1:]), tuple(e.shape[1:]))


def check_gsddmm(graph, op: str, lhs: Tensor | None, rhs: Tensor | None,
                 lhs_target: str, rhs_target: str) -> tuple[int, ...]:
    """Validate a gsddmm call; returns the output feature shape."""
    _check_choice("gsddmm op", op, GSDDMM_OPS)
    _check_choice("lhs_target", lhs_target, TARGETS)
    _check_choice("rhs_target", rhs_target, TARGETS)
    if op != "copy_rhs" and lhs is None:
        raise ValueError(f"gsddmm op {op!r} needs lhs")
    if op != "copy_lhs" and rhs is None:
        raise ValueError(f"gsddmm op {op!r} needs rhs")
    if op == "copy_lhs":
        rhs = None
    if op == "copy_rhs":
        lhs = None
    for name, tensor, target in (("lhs", lhs, lhs_target), ("rhs", rhs, rhs_target)):
        rows, rows_are = target_rows(graph, target)
        _check_features(f"{name} (target {target!r})", tensor, rows, rows_are, graph.device)
    _check_same_dtype("lhs", lhs, "rhs", rhs)
    if op == "copy_lhs":
        return tuple(lhs.shape[1:])
    if op == "copy_rhs":
        return tuple(rhs.shape[1:])
    return broadcast_feature_shape(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))


def check_edge_scores(graph, scores: Tensor) -> None:
    _check_features("scores", scores, graph.num_edges, "edges", graph.device)


def check_gat_attention(graph, h: Tensor, el: Tensor, er: Tensor, edge_scores: Tensor | None,
                        negative_slope: float, edge_mask: Tensor | None) -> None:
    """Validate a gat_attention call (shapes documented in unigraph.ops.gat_attention)."""
    _check_features("h", h, graph.num_src_nodes, "source nodes", graph.device)
    if h.dim() != 3:
        raise ValueError(f"h must have shape [num_src_nodes, heads, features], got {list(h.shape)}")
    heads = h.shape[1]
    for name, tensor, rows, rows_are in (("el", el, graph.num_src_nodes, "source nodes"),
                                         ("er", er, graph.num_dst_nodes, "destination nodes"),
                                         ("edge_scores", edge_scores, graph.num_edges, "edges"),
                                         ("edge_mask", edge_mask, graph.num_edges, "edges")):
        if tensor is None:
            continue
        _check_features(name, tensor, rows, rows_are, graph.device)
        if tuple(tensor.shape[1:]) != (heads,):
            raise ValueError(f"{name} must have shape [{rows}, {heads}] (one value per head), got {list(tensor.shape)}")
        _check_same_dtype("h", h, name, tensor)
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)) or negative_slope < 0:
        raise ValueError(f"negative_slope must be a number >= 0, got {negative_slope!r}")
