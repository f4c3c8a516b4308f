"""What the graph operators accept: names and input checks.

Every check here runs in the front door (:mod:`unigraph.ops`), before any backend or kernel
sees the tensors, so a kernel may assume well-formed input: dense strided floating-point
tensors with data (no meta, sparse, nested, quantized or complex tensors), indices in range,
equal dtypes and devices, and feature shapes that broadcast under DGL's rule
(:mod:`unigraph.ops.broadcast`). Every error names the op, the argument, the value received
and what is valid.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from unigraph.ops.broadcast import broadcast_feature_shape
from unigraph.structure import GraphTensors

GSPMM_OPS = ("copy_u", "copy_e", "u_add_e", "u_sub_e", "u_mul_e", "u_div_e")
REDUCES = ("sum", "mean", "max", "min")
GSDDMM_OPS = ("add", "sub", "mul", "div", "dot", "copy_lhs", "copy_rhs")
TARGETS = ("u", "v", "e")

# gspmm's binary ops are gsddmm's ops with lhs on the source and rhs on the edge.
GSPMM_BINARY = {"u_add_e": "add", "u_sub_e": "sub", "u_mul_e": "mul", "u_div_e": "div"}

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def gspmm_features(op: str, u: Tensor | None, e: Tensor | None) -> tuple[int, ...]:
    """The output feature shape of gspmm ``op`` (inputs already checked)."""
    if op == "copy_u":
        return tuple(u.shape[1:])
    if op == "copy_e":
        return tuple(e.shape[1:])
    return broadcast_feature_shape(GSPMM_BINARY[op], tuple(u.shape[1:]), tuple(e.shape[1:]))


def gsddmm_features(op: str, lhs: Tensor | None, rhs: Tensor | None) -> tuple[int, ...]:
    """The output feature shape of gsddmm ``op`` (inputs already checked)."""
    if op == "copy_lhs":
        return tuple(lhs.shape[1:])
    if op == "copy_rhs":
        return tuple(rhs.shape[1:])
    return broadcast_feature_shape(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))


def _check_choice(kind: str, value: str, choices: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{kind} must be one of {', '.join(choices)}; got {value!r}")


def check_tensor_kind(op: str, name: str, tensor, device: torch.device) -> None:
    """A dense floating-point tensor with data on the graph's device (what every kernel reads)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device.type == "meta":
        raise ValueError(f"{op}: {name} is on meta but the graph is on {device}: a meta tensor has a shape but no "
                         "data for a kernel to read")
    if tensor.layout != torch.strided:
        raise TypeError(f"{op}: {name} is a {tensor.layout} tensor; the graph operators take dense tensors "
                        "(convert with .to_dense())")
    if tensor.is_nested:
        raise TypeError(f"{op}: {name} is a nested tensor; the graph operators take one dense tensor with one "
                        "row per node or edge")
    if tensor.is_quantized or tensor.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: {name} must be a floating-point tensor (float16, bfloat16, float32, float64), "
                        f"got {tensor.dtype}")
    if tensor.device != device:
        raise ValueError(f"{op}: {name} is on {tensor.device} but the graph is on {device}; move one with .to()")


def _check_features(op: str, name: str, tensor: Tensor | None, rows: int, rows_are: str,
                    device: torch.device) -> None:
    if tensor is None:
        return
    check_tensor_kind(op, name, tensor, device)
    if tensor.dim() == 0:
        raise ValueError(f"{op}: {name} must have one row per {rows_are[:-1]} ({rows} rows), got a scalar")
    if tensor.shape[0] != rows:
        raise ValueError(f"{op}: {name} has {tensor.shape[0]} rows but the graph has {rows} {rows_are}")


def _check_same_dtype(op: str, a_name: str, a: Tensor | None, b_name: str, b: Tensor | None) -> None:
    if a is not None and b is not None and a.dtype != b.dtype:
        raise TypeError(f"{op}: {a_name} is {a.dtype} but {b_name} is {b.dtype}; cast one so both match")


def target_rows(g: GraphTensors, target: str) -> tuple[int, str]:
    if target == "u":
        return g.num_src, "source nodes"
    if target == "v":
        return g.num_dst, "destination nodes"
    return g.num_edges, "edges"


def _named(kind: str, features, op: str, lhs: Tensor | None, rhs: Tensor | None) -> tuple[int, ...]:
    """``features(op, lhs, rhs)`` with a broadcasting error prefixed by the op's name."""
    try:
        return features(op, lhs, rhs)
    except ValueError as err:
        raise ValueError(f"{kind} {op}: {err}") from None


def check_gspmm(g: GraphTensors, op: str, reduce: str, u: Tensor | None, e: Tensor | None) -> tuple[int, ...]:
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
    device = g.device
    _check_features("gspmm", "u", u, g.num_src, "source nodes", device)
    _check_features("gspmm", "e", e, g.num_edges, "edges", device)
    _check_same_dtype("gspmm", "u", u, "e", e)
    return _named("gspmm", gspmm_features, op, u, e)


def check_gsddmm(g: GraphTensors, op: str, lhs: Tensor | None, rhs: Tensor | None,
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
        rows, rows_are = target_rows(g, target)
        _check_features("gsddmm", f"{name} (target {target!r})", tensor, rows, rows_are, g.device)
    _check_same_dtype("gsddmm", "lhs", lhs, "rhs", rhs)
    return _named("gsddmm", gsddmm_features, op, lhs, rhs)


def check_edge_scores(g: GraphTensors, scores: Tensor) -> None:
    if scores is None:
        raise ValueError("edge_softmax needs scores, one row per edge")
    _check_features("edge_softmax", "scores", scores, g.num_edges, "edges", g.device)


def check_gat_attention(g: GraphTensors, h: Tensor, el: Tensor, er: Tensor, edge_scores: Tensor | None,
                        negative_slope: float, edge_mask: Tensor | None) -> None:
    """Validate a gat_attention call (shapes documented in unigraph.ops.gat_attention)."""
    _check_features("gat_attention", "h", h, g.num_src, "source nodes", g.device)
    if h.dim() != 3:
        raise ValueError(f"gat_attention: h must have shape [num_src_nodes, heads, features], got {list(h.shape)}")
    heads = h.shape[1]
    for name, tensor, rows, rows_are in (("el", el, g.num_src, "source nodes"),
                                         ("er", er, g.num_dst, "destination nodes"),
                                         ("edge_scores", edge_scores, g.num_edges, "edges"),
                                         ("edge_mask", edge_mask, g.num_edges, "edges")):
        if tensor is None:
            if name in ("el", "er"):
                raise ValueError(f"gat_attention needs {name}, one score per {rows_are[:-1]} and head")
            continue
        _check_features("gat_attention", name, tensor, rows, rows_are, g.device)
        if tuple(tensor.shape[1:]) != (heads,):
            raise ValueError(f"gat_attention: {name} must have shape [{rows}, {heads}] (one value per head), "
                             f"got {list(tensor.shape)}")
        _check_same_dtype("gat_attention", "h", h, name, tensor)
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)) \
            or not 0 <= negative_slope < math.inf:
        raise ValueError(f"gat_attention: negative_slope must be a finite number >= 0, got {negative_slope!r}")
