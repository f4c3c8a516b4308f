r"""Dropout, drawn from counter-based random numbers on the CPU: the same distribution as
``torch.nn.functional.dropout``, at memory speed.

.. math::
    \mathrm{dropout}(x)_i = x_i \cdot \frac{m_i}{1 - p}, \qquad m_i \sim \mathrm{Bernoulli}(1 - p)

Why: torch draws CPU dropout masks from a sequential Mersenne Twister; on a 169k x 256 hidden
layer (ogbn-arxiv sized) ``F.dropout`` took ~730 ms of a ~1.8 s GraphSAGE epoch on the 2-core
development machine, more than the layer's matrix products. Here each element's draw is
``mix64(key + (i // 2) * GOLDEN)`` (splitmix64, half of the 64 bits per element; see
``unigraph.kernels.cpu.dropout``), computed in one parallel pass that also scales the input:
~15 ms for the same tensor. The key is one draw from torch's default generator, so
``torch.manual_seed`` makes runs repeatable; the backward pass recomputes the mask from the key
(nothing stored) and is the same operation on the gradient, so it is differentiable again.

The counter path runs for float32/float64 CPU tensors when numba is installed and outside
``torch.compile``; on a GPU :func:`dropout` and :func:`relu_dropout` are ``F.dropout`` itself (one
fused kernel); otherwise (CPU half precision, no numba, compiling, or inside
:func:`counter_based` ``(False)``) the mask is ``rand >= p`` from torch's generator, as is
:func:`keep_mask`'s off the counter path. All are inverted dropout with keep probability ``1 - p``
(the counter path's is ``1 - t / 2^32`` with ``t = round(p * 2^32)``, within ``2^-33`` of it); the
paths draw different masks for the same seed. Dropped NaN or inf elements give NaN, as in
``F.dropout`` (``x * 0``).
"""
from __future__ import annotations

import contextlib
import functools

import torch
import torch.nn.functional as F
from torch import Tensor

_enabled = True


@contextlib.contextmanager
def counter_based(enabled: bool):
    """Use (``True``, the default) or bypass (``False``: torch's generator, ``rand >= p``) the
    counter-based CPU path inside the block; benchmarks time both."""
    global _enabled
    saved, _enabled = _enabled, bool(enabled)
    try:
        yield
    finally:
        _enabled = saved


def check_p(p: float) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
    return float(p)


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Inverted dropout of a dense tensor, a drop-in for ``F.dropout(x, p, training)``."""
    p = check_p(p)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    if _uses_counter(x):
        return _CounterDropout.apply(x, _draw_rule(p))
    if _torch_kernel(x):
        return F.dropout(x, p, True)
    return x * _torch_mask(tuple(x.shape), p, x)


def relu_dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """``dropout(relu(x), p, training)`` in one pass (the counter path), the same values and
    gradients as the two calls with the same mask; one tensor fewer written and kept."""
    p = check_p(p)
    if not training or p == 0.0:
        return torch.relu(x)
    if p == 1.0:
        return torch.relu(x) * 0.0
    if _uses_counter(x):
        return _CounterReluDropout.apply(x, _draw_rule(p))
    if _torch_kernel(x):
        return F.dropout(torch.relu(x), p, True)
    return torch.relu(x) * _torch_mask(tuple(x.shape), p, x)


def activation_dropout(x: Tensor, activation, p: float, training: bool) -> Tensor:
    """``dropout(activation(x), p, training)``, fused when ``activation`` is ReLU."""
    if activation is F.relu or activation is torch.relu:
        return relu_dropout(x, p, training)
    return dropout(activation(x), p, training)


class Dropout(torch.nn.Module):
    """:func:`dropout` as a module: a drop-in for ``torch.nn.Dropout`` (not in-place)."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        self.p = check_p(p)

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def keep_mask(shape: tuple, p: float, like: Tensor) -> Tensor:
    """Dropout's multipliers, ``bernoulli(1 - p) / (1 - p)``, in the dtype and device of ``like``
    (for callers that apply the mask inside a fused kernel, e.g. GAT's attention dropout)."""
    p = check_p(p)
    if p >= 1.0:
        return torch.zeros(shape, dtype=like.dtype, device=like.device)
    if _uses_counter(like):
        return _run("MASK", None, None, shape, like.dtype, _draw_rule(p))
    return _torch_mask(shape, p, like)


# ---------------------------------------------------------------------- internals
def _torch_mask(shape: tuple, p: float, like: Tensor) -> Tensor:
    # rand >= p: on CPU about twice as fast as bernoulli_ (0.9 vs 2.2 ms for 173k values)
    return (torch.rand(shape, dtype=like.dtype, device=like.device) >= p).to(like.dtype).mul_(1.0 / (1.0 - p))


@functools.lru_cache(maxsize=1)
def _numba_usable() -> bool:
    from unigraph.kernels.cpu import numba_status
    return numba_status()[0]


def _torch_kernel(x: Tensor) -> bool:
    """On a GPU, torch's own dropout: one fused kernel forward and one backward, where the mask path
    launches four (rand, compare, cast, scale) and a product, and autograd keeps the mask (~0.1 ms
    of host time a call on the H200 machine, 2026-11-27: ``benchmarks/results/h200_host_profile``)."""
    return x.device.type == "cuda"


def _uses_counter(x: Tensor) -> bool:
    return (_enabled and x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64)
            and x.layout == torch.strided and not torch.compiler.is_compiling() and _numba_usable())


def _draw_rule(p: float) -> tuple:
    """(key, threshold, scale) of one dropout call: the key is one draw of torch's generator."""
    import numpy as np
    key = int(torch.randint(-(1 << 63), (1 << 63) - 1, (), dtype=torch.int64)) & ((1 << 64) - 1)
    threshold = min(round(p * 2.0 ** 32), 1 << 32)
    return np.uint64(key), np.uint64(threshold), 1.0 / (1.0 - p)


def _run(mode: str, a: Tensor | None, b: Tensor | None, shape: tuple, dtype: torch.dtype, rule: tuple) -> Tensor:
    """A fresh tensor holding the kernel's ``mode`` rule (``unigraph.kernels.cpu.dropout``) of
    ``a`` and ``b`` (row-major positions, so non-contiguous inputs are copied first)."""
    from unigraph.kernels.cpu import alloc, threads_for
    from unigraph.kernels.cpu import dropout as kernels
    out = alloc.empty(shape, dtype)
    if out.numel():
        flat = out.view(-1).numpy()
        a_np, b_np = ((t.detach().contiguous().view(-1).numpy() if t is not None else flat) for t in (a, b))
        key, threshold, scale = rule
        with threads_for(out.numel()):
            kernels.masked(getattr(kernels, mode), a_np, b_np, flat, key, threshold, flat.dtype.type(scale))
    return out


class _CounterDropout(torch.autograd.Function):
    """y = x * m / (1 - p), m recomputed from the key: the backward is the same map on the gradient
    (a diagonal, self-adjoint linear map), so it is itself differentiable."""

    @staticmethod
    def forward(ctx, x: Tensor, rule: tuple) -> Tensor:
        ctx.rule = rule
        return _run("SCALE", x, None, tuple(x.shape), x.dtype, rule)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _CounterDropout.apply(grad, ctx.rule), None


class _CounterReluDropout(torch.autograd.Function):
    """y = relu(x) * m / (1 - p); keeps x (as relu keeps its output) for the backward."""

    @staticmethod
    def forward(ctx, x: Tensor, rule: tuple) -> Tensor:
        ctx.rule = rule
        ctx.save_for_backward(x)
        return _run("RELU", x, None, tuple(x.shape), x.dtype, rule)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (x,) = ctx.saved_tensors
        return _ReluDropoutGrad.apply(grad, x, ctx.rule), None


class _ReluDropoutGrad(torch.autograd.Function):
    """g -> 0 where x <= 0, else g * m / (1 - p) (a NaN x passes g, as torch's relu): linear in g (its own adjoint), piecewise
    constant in x (zero derivative), so twice differentiable like torch's relu."""

    @staticmethod
    def forward(ctx, grad: Tensor, x: Tensor, rule: tuple) -> Tensor:
        ctx.rule = rule
        ctx.save_for_backward(x)
        return _run("RELU_BACKWARD", grad, x, tuple(grad.shape), grad.dtype, rule)

    @staticmethod
    def backward(ctx, gg: Tensor):
        (x,) = ctx.saved_tensors
        return _ReluDropoutGrad.apply(gg, x, ctx.rule), None, None
