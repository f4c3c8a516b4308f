r"""torch's own CPU dropout in one pass, the same values and gradients: a kernel for
``aten::dropout`` under autograd, installed with :mod:`unigraph.torch_bernoulli` when ``unigraph``
is imported.

.. math::
    \mathrm{dropout}(x)_i = x_i \cdot n_i, \qquad n_i = \frac{b_i}{1 - p}, \quad b_i \sim \mathrm{Bernoulli}(1 - p)

Why: torch's CPU ``F.dropout`` (``nn.Dropout``) is ``noise = empty_like(x).bernoulli_(1 - p);
noise.div_(1 - p); x * noise``: three passes and two fresh tensors, and glibc maps every block
above 32 MiB in anew, so an arxiv-sized 169k x 256 layer faults ~350 MB in each step (the noise,
kept for the backward, and the output). With the draws made faster (:mod:`unigraph.torch_bernoulli`)
those passes and faults were most of a user's dropout.

What: for a contiguous float32/float64 CPU tensor of at least :data:`MIN_ELEMENTS` (1M) elements, ``0 < p <
1`` and ``train``, one pass (``unigraph.kernels.cpu.mt19937.dropout``) draws torch's very
Bernoulli numbers from the default generator (its state advanced as torch's draws leave it),
writes ``x * n`` (``n`` is ``1 / (1 - p)`` as torch's ``div_`` rounds it, or 0: an IEEE product,
so a dropped NaN or inf gives NaN as torch's does) into unigraph's pooled memory, and keeps a
1-byte mask for the backward instead of torch's noise tensor. The backward is ``grad * n``, itself
differentiable, and forward-mode AD gives ``tangent * n``: torch's own derivatives of ``x * noise``.
Every other call (other dtypes, layouts, names, tensor subclasses, dispatch modes, functorch
transforms, small tensors, another thread that might draw, ``enabled(False)`` of
:mod:`unigraph.torch_bernoulli`) runs torch's own kernel, kept with ``torch.library.get_kernel``
(``torch.jit.trace`` records torch's ``aten::dropout``, which replays through this kernel).

Guard: before its first use the kernel is compared with torch's (values, gradients, the generator's
state after) for several ``p``, both dtypes and lengths across the twist's blocks; on any
difference it stays off and warns once.
"""
from __future__ import annotations

import functools

import torch
import torch.autograd.forward_ad as _forward_ad

from unigraph import torch_bernoulli

# Below it torch's three passes cost no more: their tensors come back from glibc's heap without
# faults, and the one pass saves only two cheap parallel passes against ~0.1 ms of Python a call
# (fwd + bwd measured, 2 threads: 0.64x at 43k elements, 1.07x at 1M, 1.36x at 2M, 2.9x at 10M).
MIN_ELEMENTS = 1 << 20
_KEY = "AutogradCPU"      # above autograd: the mask is kept, not torch's noise tensor
_library = None
_original = None          # torch's own (CompositeImplicitAutograd) kernel, as computed for the key
_checked: bool | None = None


def install() -> bool:
    """Install the faster ``bernoulli_`` (:func:`unigraph.torch_bernoulli.install`) and, where that
    installed, this kernel. Returns whether this one is installed (the same switch:
    ``UNIGRAPH_TORCH_BERNOULLI=0`` registers neither)."""
    global _library, _original
    if _library is not None:
        return True
    if not torch_bernoulli.install():
        return False
    _library, _original = torch_bernoulli.override("dropout", _kernel, _KEY)
    return True


def uninstall() -> None:
    """Give ``aten::dropout`` back to torch's kernel (tests; ``install`` registers it again)."""
    global _library
    if _library is not None:
        _library._destroy()
        _library = None


def installed() -> bool:
    return _library is not None


def _kernel(keyset, input, p, train):
    if _takes(input, p, train) and torch_bernoulli.fast_draws_allowed() and _agrees_with_torch():
        if input.requires_grad or getattr(_forward_ad, "_current_level", 0) >= 0:   # a node, or a tangent, to keep
            return _Dropout.apply(input, p)
        return _values(input, p)[0]
    return _original.call_boxed(keyset, input, p, train)


def _takes(x, p, train) -> bool:
    return (x.numel() >= MIN_ELEMENTS and train and 0.0 < p < 1.0   # the common refusal first: small
            and type(x) in (torch.Tensor, torch.nn.Parameter)
            and x.dtype in torch_bernoulli._DTYPES and x.layout == torch.strided and x.is_contiguous() and not x.is_neg()
            and torch._C._len_torch_dispatch_stack() == 0
            and not torch._C._are_functorch_transforms_active() and torch._C._get_tracing_state() is None
            and not any(getattr(x, "names", ()) or ()))   # named tensors (torch < 2.13): torch's kernel names the output


def _values(x: torch.Tensor, p: float) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(``x * n``, the kept mask as uint8, ``n``'s kept value): one pass on pooled memory; torch's
    own three operations where the generator's state is one the kernel declines (set by hand)."""
    from unigraph.kernels.cpu import alloc, mt19937
    x = x.detach()
    scale = _scale(p, x.dtype)
    out = alloc.empty(tuple(x.shape), x.dtype)
    keep = alloc.empty(tuple(x.shape), torch.uint8)
    src, dst, kept = (t.view(-1).numpy() for t in (x, out, keep))
    value, threshold = dst.dtype.type(scale), torch_bernoulli.threshold(1 - p)
    if torch_bernoulli.with_state(torch.default_generator, lambda words, left, next_: mt19937.dropout(
            words, left, next_, threshold, src, dst, kept, value)):
        return out, keep, scale
    noise = torch.empty_like(x).bernoulli_(1 - p)   # torch's composite, step for step
    keep = noise.to(torch.uint8)
    return x * noise.div_(1 - p), keep, scale


@functools.lru_cache(maxsize=64)
def _scale(p: float, dtype: torch.dtype) -> float:
    """``1 / (1 - p)`` as torch's ``noise.div_(1 - p)`` rounds it in ``dtype`` (asked of torch)."""
    return float(torch.ones(64, dtype=dtype).div_(1 - p)[0])


def _times_noise(t: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
    """``t * n`` for the kept mask, element for element torch's product."""
    if (type(t) is not torch.Tensor or t.dtype not in torch_bernoulli._DTYPES or t.layout != torch.strided
            or not t.is_contiguous() or t.is_neg() or t.shape != keep.shape):
        return t * keep.to(t.dtype).mul_(scale)   # n exactly (0 or scale), then torch's own product
    from unigraph.kernels.cpu import alloc, threads_for
    from unigraph.kernels.cpu import dropout as kernels
    out = alloc.empty(tuple(t.shape), t.dtype)
    flat = out.view(-1).numpy()
    with threads_for(flat.size):
        kernels.scale_kept(keep.view(-1).numpy(), t.detach().view(-1).numpy(), flat, flat.dtype.type(scale))
    return out


class _Dropout(torch.autograd.Function):
    """``x * n``: its derivative is ``n`` (torch's for ``x * noise``), kept as a 1-byte mask."""

    @staticmethod
    def forward(ctx, x, p):
        out, keep, ctx.scale = _values(x, p)
        ctx.save_for_backward(keep)
        ctx.save_for_forward(keep)
        return out

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return _TimesNoise.apply(grad, keep, ctx.scale), None

    @staticmethod
    def jvp(ctx, x_tangent, _):
        (keep,) = ctx.saved_tensors
        return _TimesNoise.apply(x_tangent, keep, ctx.scale)


class _TimesNoise(torch.autograd.Function):
    """``g -> g * n``: linear and its own adjoint, so differentiable again (double backward)."""

    @staticmethod
    def forward(ctx, t, keep, scale):
        ctx.save_for_backward(keep)
        ctx.save_for_forward(keep)
        ctx.scale = scale
        return _times_noise(t, keep, scale)

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return _TimesNoise.apply(grad, keep, ctx.scale), None, None

    @staticmethod
    def jvp(ctx, t_tangent, *_):
        (keep,) = ctx.saved_tensors
        return _TimesNoise.apply(t_tangent, keep, ctx.scale)


def _agrees_with_torch() -> bool:
    """Once per process: this kernel's outputs, gradients and the generator's state after equal
    torch's; otherwise torch's kernel is kept and a warning says so."""
    global _checked
    _checked = torch_bernoulli.judged(_checked, _compare, "torch_dropout: the one-pass dropout")
    return _checked


def _compare() -> str | None:
    """None when equal; else what differed. Runs on the CPU's default generator, whose state it
    restores (no other generator is touched)."""
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutogradCPU)
    saved = torch.get_rng_state()
    try:
        for dtype in torch_bernoulli._DTYPES:
            for before, length, p in ((0, 4096, 0.5), (7, 5001, 0.3), (618, 4099, 0.1), (1, 9000, 0.9)):
                results = []
                for ours in (False, True):
                    torch.default_generator.manual_seed(4321 + before)   # not torch.manual_seed: that reseeds
                    torch.rand(before)                                    # the GPUs' generators as well
                    x = torch.linspace(-3, 3, length, dtype=dtype)
                    x[::97] = float("nan")
                    x.requires_grad_()
                    y = _Dropout.apply(x, p) if ours else _original.call_boxed(keys, x, p, True)
                    (grad,) = torch.autograd.grad(y, x, torch.linspace(1, 2, length, dtype=dtype))
                    results.append((y.detach(), grad, torch.get_rng_state(), torch.rand(3)))
                for a, b in zip(*results):
                    if not torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)) or not torch.equal(a.isnan(), b.isnan()):
                        return f"{dtype}, {length} elements after {before} draws, p={p}"
    finally:
        torch.set_rng_state(saved)
    return None
