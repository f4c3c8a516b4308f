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
``torch.compile``; otherwise (GPU, half precision, no numba, compiling, or inside
:func:`counter_based` ``(False)``) the mask is ``rand >= p`` from torch's generator. Both are
inverted dropout with keep probability ``1 - p`` (the counter path's is ``1 - t / 2^32`` with
``t = round(p * 2^32)``, within ``2^-33`` of it); the two paths draw different masks for the same
seed. Dropped NaN or inf elements give NaN, as in ``F.dropout`` (``x * 0``).
"""
from __future__ import annotations

import contextlib
import functools

import torch
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
        key, threshold, scale = _draw_rule(p)
        return _CounterDropout.apply(x, key, threshold, scale)
    return x * _torch_mask(tuple(x.shape), p, x)


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
        from unigraph.kernels.cpu import alloc, threads_for
        from unigraph.kernels.cpu.dropout import mask_values
        key, threshold, scale = _draw_rule(p)
        out = alloc.empty(shape, like.dtype)
        if out.numel():
            with threads_for(out.numel()):
                mask_values(out.view(-1).numpy(), key, threshold, out.numpy().dtype.type(scale))
        return out
    return _torch_mask(shape, p, like)


# ---------------------------------------------------------------------- internals
def _torch_mask(shape: tuple, p: float, like: Tensor) -> Tensor:
    # rand >= p: on CPU about twice as fast as bernoulli_ (0.9 vs 2.2 ms for 173k values)
    return (torch.rand(shape, dtype=like.dtype, device=like.device) >= p).to(like.dtype).mul_(1.0 / (1.0 - p))


@functools.lru_cache(maxsize=1)
def _numba_usable() -> bool:
    from unigraph.kernels.cpu import numba_status
    return numba_status()[0]


def _uses_counter(x: Tensor) -> bool:
    return (_enabled and x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64)
            and x.layout == torch.strided and not torch.compiler.is_compiling() and _numba_usable())


def _draw_rule(p: float) -> tuple:
    """(key, threshold, scale) of one dropout call: the key is one draw of torch's generator."""
    import numpy as np
    key = int(torch.randint(-(1 << 63), (1 << 63) - 1, (), dtype=torch.int64)) & ((1 << 64) - 1)
    threshold = min(round(p * 2.0 ** 32), 1 << 32)
    return np.uint64(key), np.uint64(threshold), 1.0 / (1.0 - p)


def _masked_scale(x: Tensor, key, threshold, scale: float) -> Tensor:
    from unigraph.kernels.cpu import alloc, threads_for
    from unigraph.kernels.cpu.dropout import masked_scale
    src = x.detach().contiguous()
    out = alloc.empty(src.shape, src.dtype)
    if out.numel():
        with threads_for(out.numel()):
            masked_scale(src.view(-1).numpy(), out.view(-1).numpy(), key, threshold, src.numpy().dtype.type(scale))
    return out


class _CounterDropout(torch.autograd.Function):
    """y = x * m / (1 - p), m recomputed from the key: the backward is the same map on the gradient
    (a diagonal, self-adjoint linear map), so it is itself differentiable."""

    @staticmethod
    def forward(ctx, x: Tensor, key, threshold, scale: float) -> Tensor:
        ctx.rule = (key, threshold, scale)
        return _masked_scale(x, key, threshold, scale)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _CounterDropout.apply(grad, *ctx.rule), None, None, None
