"""Feature-shape broadcasting of the graph operators: DGL's rule, written once for the project.

An operand has one row per node or edge, then its *feature shape*. Two operands of different
feature rank are aligned as in DGL (``dgl.ops``): the shorter feature shape is padded with 1s
right after the row dimension, i.e. feature shapes align from the right, numpy-style; then
they broadcast numpy-style. For ``u`` of shape ``[N, 4, 4]`` and ``e`` of shape ``[E, 4]``, ``e``
is read as ``[E, 1, 4]``; ``u [N, 3, 4] * e [E, 3]`` does not broadcast (``e`` would be
``[E, 1, 3]``); ``u [N, 4] * e [E, 3, 4]`` gives ``[*, 3, 4]``. A per-head weight for ``[N, H, F]``
features is therefore ``[E, H, 1]``, never ``[E, H]``. ``dot`` needs equal last dimensions and
keeps that dimension as size 1 in its result.

The ops front door (:mod:`unigraph.ops`) views both operands at equal rank with
:func:`with_rank` before any backend sees them, so backends and kernels only meet operands of
equal rank, where this rule and torch's own broadcasting agree. Every other place that needs a
broadcast shape (the backward passes, the lazy message interpreter, the per-slice plans of the
backends) asks :func:`broadcast_feature_shape`.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor


def padded(shape: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    """``shape`` (a feature shape) with 1s in front up to ``ndim`` dims (DGL's alignment)."""
    shape = tuple(shape)
    return (1,) * (ndim - len(shape)) + shape


def broadcast_feature_shape(op: str, lhs: tuple[int, ...], rhs: tuple[int, ...]) -> tuple[int, ...]:
    """The feature shape of ``op(lhs, rhs)`` for feature shapes ``lhs``, ``rhs`` (without the
    row dimension); raises ValueError naming both shapes when they do not broadcast."""
    lhs, rhs = tuple(lhs), tuple(rhs)
    ndim = max(len(lhs), len(rhs))
    a, b = padded(lhs, ndim), padded(rhs, ndim)
    if op == "dot" and (ndim == 0 or a[-1] != b[-1]):
        raise ValueError(f"dot needs equal last feature dimensions, got feature shapes {lhs} and {rhs}")
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise ValueError(
                f"feature shapes {lhs} and {rhs} do not broadcast: DGL's rule aligns them from the right "
                f"(pads 1s right after the row dimension: {a} vs {b}). For a per-head weight of "
                "[rows, H, F] features pass [rows, H, 1].")
        out.append(y if x == 1 else x)
    if op == "dot":
        out[-1] = 1
    return tuple(out)


def with_rank(t: Tensor | None, ndim: int) -> Tensor | None:
    """``t`` viewed with ``ndim`` dims in all (row dim included), 1s inserted after the row dim."""
    if t is None or t.dim() == ndim:
        return t
    return t.reshape((t.shape[0],) + padded(tuple(t.shape[1:]), ndim - 1))


def broadcast_offsets(feature_shape: tuple[int, ...], out_shape: tuple[int, ...], device=None) -> Tensor:
    """For each element of ``out_shape`` (row-major), its flat offset inside one row of
    ``feature_shape``, which broadcasts to ``out_shape``. Kernels that read broadcast operands
    use it to find their element; backward passes use it to scatter gradients back."""
    numel = math.prod(feature_shape)
    grid = torch.arange(numel, device=device).view(padded(tuple(feature_shape), len(out_shape)))
    return grid.expand(tuple(out_shape)).reshape(math.prod(out_shape))


def reduce_to_shape(grad: Tensor, feature_shape: tuple[int, ...]) -> Tensor:
    """Sum ``grad`` (rows x broadcast feature shape) over the dimensions ``feature_shape`` was
    broadcast along: the adjoint of broadcasting."""
    target = padded(tuple(feature_shape), grad.dim() - 1)
    dims = [i + 1 for i, (t, g) in enumerate(zip(target, grad.shape[1:])) if t == 1 and g != 1]
    if dims:
        grad = grad.sum(dim=dims, keepdim=True)
    return grad.reshape((grad.shape[0],) + tuple(feature_shape))
