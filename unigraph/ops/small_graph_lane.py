r"""The native lane's small-graph path: a ``copy_u`` or ``u_mul_e`` (one weight per edge) sum or
mean that ``auto`` sends here by the small-graph rule (``backends/small_graph.py``), run by numba's
COO kernels (``unigraph.kernels.cpu.coo``: threads own ranges of destination rows) on the graph's
own edge list.

.. math::
    out_v = \sum_{k:\, dst_k = v} w_k \, u_{src_k} \quad (w_k = 1 \text{ for copy\_u}),
    \qquad \text{mean: } out_v / \max(\deg_{in}(v), 1)

Gradients: :math:`\partial u_s = \sum_{k:\, src_k = s} w_k \, \partial out_{dst_k}` (the same sum
with the roles swapped, through this same Function, so twice differentiable) and
:math:`\partial w_k = \langle \partial out_{dst_k}, u_{src_k} \rangle` (only when the weights
require grad: numba's per-edge dot, ``kernels/cpu/sddmm.py``, with no ``[E, F]`` temporaries; torch's
index ops where that gradient must itself be differentiable). A mean divides each row of the sum by
``max(in_degree, 1)`` in the same Function (``coo.divide_rows``: torch's bits for ``sum / counts.clamp(min=1).to(dtype)``,
the division the lane ran as a torch op after the sum), and its backward divides ``grad_out`` the same way
before the reverse sum (torch's division where a double backward records it): no divisor tensor,
no division node (~10 us of a SAGEConv call on a PyG batch of 32 small graphs, 1 thread).

A ``copy_u`` max or min (:func:`extreme`) runs numba's COO max/min kernel, which also records
each output element's winning source: the first edge in edge-id order on ties, the first NaN of a
NaN row (``unigraph.kernels.cpu.coo``), the winner every backend's max/min records
(``docs/ops.md``). Its gradient is the scatter of ``grad_out`` at the winners
(``grad_u[arg[v, j], j] += grad_out[v, j]``, -1 skipped): the numba backend's kernel for it, torch's
differentiable form where a double backward records it.

GINEConv's message summed, :math:`out_v = \sum_{k:\, dst_k = v} \mathrm{relu}(u_{src_k} + e_k)`
(:func:`add_relu`, ``e`` one row per edge), runs in one COO pass with no ``[E, F]`` message;
its gradients are torch's relu rule (``threshold_backward``: the gradient passes where the term
is not ``<= 0``, NaN included, and is 0 elsewhere, a select) gathered per edge for ``e`` and
summed per source for ``u`` (``kernels/cpu/coo.py``), torch's index ops where a double backward
records them.

The same function as every backend: each row's sum runs in edge order, whatever the thread count
(the scatter backend's order; the CSR kernels add the same terms in the same order per row, four
at a time), in the operand's dtype. The graph's index tensors are the ones it checked when it was
built, read after its intactness check (``Graph._coo``); saved for the backward, their version
counters guard them.
"""
from __future__ import annotations

import importlib

import torch
from torch import Tensor

from unigraph import backends as registry
from unigraph.kernels.cpu import alloc
from unigraph.kernels.cpu.threads import current_threads, threads_for
from unigraph.ops.gradients import scatter_at_winners


def aggregate(src: Tensor, dst: Tensor, u: Tensor, w: Tensor | None, num_dst: int, grad: bool,
              counts: Tensor | None = None) -> Tensor:
    """``sum_{k: dst[k] = v} w[k] u[src[k]]`` per ``v`` in ``0..num_dst-1`` (``w`` [E] or None),
    divided by ``max(counts[v], 1)`` where ``counts`` (the in-degrees, int64 [num_dst]) is given: a
    mean; ``grad``: whether autograd records it (``differentiated(u, w)``)."""
    if grad:
        return CooSum.apply(u, w, src, dst, num_dst, counts)
    return _sum(src, dst, u, w, num_dst, counts)


def _sum(src: Tensor, dst: Tensor, u: Tensor, w: Tensor | None, num_dst: int, counts: Tensor | None = None) -> Tensor:
    out = alloc.empty((num_dst, u.shape[1]), u.dtype)   # the kernel zeroes every row
    coo = _kernels("coo")
    x = u.detach().contiguous().numpy()
    weights = x.reshape(-1)[:0] if w is None else w.detach().contiguous().numpy()   # (not read without weights)
    rows = out.numpy()
    with threads_for(src.shape[0] * u.shape[1]):   # torch's count at the call (1 below SERIAL_WORK)
        coo.scatter_sum(coo.row_ranges(num_dst, current_threads()), src.numpy(), dst.numpy(), weights,
                        w is not None, x, rows)
        if counts is not None:
            coo.divide_rows(rows, counts.numpy(), rows)
    return out


def mean_divisor(counts: Tensor, dtype: torch.dtype) -> Tensor:
    """``max(counts, 1)`` as a ``[n, 1]`` column of ``dtype``: what a mean divides each row's sum by
    (``coo.divide_rows`` divides by the same values inside its kernel)."""
    return counts.clamp(min=1).to(dtype).unsqueeze(1)


def _divided(x: Tensor, counts: Tensor) -> Tensor:
    """``x / max(counts, 1)`` row by row, torch's bits (``coo.divide_rows``), as a new tensor."""
    out = alloc.empty(tuple(x.shape), x.dtype)
    with threads_for(x.numel()):
        _kernels("coo").divide_rows(x.detach().contiguous().numpy(), counts.numpy(), out.numpy())
    return out


def extreme(src: Tensor, dst: Tensor, u: Tensor, num_dst: int, reduce: str, grad: bool) -> Tensor:
    """``max`` or ``min`` (``reduce``) of ``u[src[k]]`` over the edges ``k`` into each ``v`` in
    ``0..num_dst-1`` (0 for a row without in-edges); ``grad``: whether autograd records it."""
    if grad:
        return CooExtreme.apply(u, src, dst, num_dst, reduce)
    return _extreme(src, dst, u, num_dst, reduce)[0]


def _extreme(src: Tensor, dst: Tensor, u: Tensor, num_dst: int, reduce: str) -> tuple[Tensor, Tensor]:
    out = alloc.empty((num_dst, u.shape[1]), u.dtype)   # the kernel writes every element of both
    arg = alloc.empty((num_dst, u.shape[1]), torch.int64)
    coo = _kernels("coo")
    with threads_for(src.shape[0] * u.shape[1]):
        coo.scatter_extreme(coo.row_ranges(num_dst, current_threads()), src.numpy(), dst.numpy(),
                            u.detach().contiguous().numpy(), 1.0 if reduce == "max" else -1.0, out.numpy(), arg.numpy())
    return out, arg


def add_relu(src: Tensor, dst: Tensor, u: Tensor, e: Tensor, num_dst: int, grad: bool) -> Tensor:
    """``sum_{k: dst[k] = v} relu(u[src[k]] + e[k])`` per ``v`` in ``0..num_dst-1`` (``e`` [E, F],
    ``u`` [N, F], one dtype); ``grad``: whether autograd records it (``differentiated(u, e)``)."""
    if grad:
        return CooAddRelu.apply(u, e, src, dst, num_dst)
    return _add_relu(src, dst, u, e, num_dst)


def _add_relu(src: Tensor, dst: Tensor, u: Tensor, e: Tensor, num_dst: int) -> Tensor:
    out = alloc.empty((num_dst, u.shape[1]), u.dtype)   # the kernel zeroes every row
    coo = _kernels("coo")
    with threads_for(src.shape[0] * u.shape[1]):
        out_rows = out.numpy()   # (also the gradient argument, which the forward does not read)
        coo.scatter_add_relu(coo.row_ranges(num_dst, current_threads()), src.numpy(), dst.numpy(),
                             u.detach().contiguous().numpy(), e.detach().contiguous().numpy(), out_rows, False,
                             out_rows)
    return out


def _kernels(name: str):
    """The kernel module ``unigraph.kernels.cpu.<name>``, imported on first use (importing numba
    costs ~0.5 s) and kept: kernels are read from it at each call (a forked child rebinds them to
    their serial twins)."""
    module = _MODULES.get(name)
    if module is None:
        module = _MODULES[name] = importlib.import_module(f"unigraph.kernels.cpu.{name}")
    return module


_MODULES: dict = {}


class CooSum(torch.autograd.Function):
    """:func:`aggregate` as an autograd Function (see the module docstring for its gradients)."""

    @staticmethod
    def forward(ctx, u: Tensor, w: Tensor | None, src: Tensor, dst: Tensor, num_dst: int,
                counts: Tensor | None = None) -> Tensor:
        ctx.num_src = u.shape[0]
        ctx.save_for_backward(u if w is not None and ctx.needs_input_grad[1] else None, w, src, dst, counts)
        return _sum(src, dst, u, w, num_dst, counts)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        u, w, src, dst, counts = ctx.saved_tensors
        if counts is not None:   # a mean: the division's gradient first, as autograd's for `sum / divisor`
            if torch.is_grad_enabled() and grad_out.requires_grad:   # a double backward records it
                grad_out = grad_out / mean_divisor(counts, grad_out.dtype)
            else:
                grad_out = _divided(grad_out, counts)
        grad_u = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_u = aggregate(dst, src, grad_out, w, ctx.num_src, torch.is_grad_enabled() and (
                grad_out.requires_grad or (w is not None and w.requires_grad)))
        if ctx.needs_input_grad[1]:
            if torch.is_grad_enabled() and (grad_out.requires_grad or u.requires_grad):
                grad_w = (grad_out.index_select(0, dst) * u.index_select(0, src)).sum(1)   # differentiable
            else:
                grad_w = _edge_dots(dst, src, grad_out, u)
        return grad_u, grad_w, None, None, None, None


def _edge_dots(rows_a: Tensor, rows_b: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """``<a[rows_a[k]], b[rows_b[k]]>`` per edge ``k`` (``[E]``), in one parallel pass over the edges:
    torch's ``(a[rows_a] * b[rows_b]).sum(1)`` writes two ``[E, F]`` temporaries first (10,000 edges
    x 64 features: ~200 us of a backward whose sum took ~85)."""
    edges, width = rows_a.shape[0], a.shape[1]
    if width == 0:
        return a.new_zeros(edges)
    out = alloc.empty((edges, 1), a.dtype)
    with threads_for(edges * width):
        _kernels("sddmm").dot_same_shape(rows_a.numpy(), rows_b.numpy(), a.detach().contiguous().numpy()[:, None, :],
                                         b.detach().contiguous().numpy()[:, None, :], out.numpy())
    return out.view(edges)


class CooExtreme(torch.autograd.Function):
    """:func:`extreme` as an autograd Function: the gradient goes to each element's winning source
    (see the module docstring)."""

    @staticmethod
    def forward(ctx, u: Tensor, src: Tensor, dst: Tensor, num_dst: int, reduce: str) -> Tensor:
        out, arg = _extreme(src, dst, u, num_dst, reduce)
        ctx.num_src, ctx.width = u.shape[0], u.shape[1]
        ctx.save_for_backward(arg)
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        (arg,) = ctx.saved_tensors
        return scatter_at_winners(registry.get("numba"), grad_out.contiguous(), arg, ctx.num_src, (ctx.width,)), \
            None, None, None, None


class CooAddRelu(torch.autograd.Function):
    """:func:`add_relu` as an autograd Function (see the module docstring for its gradients)."""

    @staticmethod
    def forward(ctx, u: Tensor, e: Tensor, src: Tensor, dst: Tensor, num_dst: int) -> Tensor:
        ctx.save_for_backward(u, e, src, dst)   # (their version counters refuse a change before the backward)
        return _add_relu(src, dst, u, e, num_dst)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        u, e, src, dst = ctx.saved_tensors
        need_u, need_e = ctx.needs_input_grad[:2]
        if torch.is_grad_enabled() and (grad_out.requires_grad or u.requires_grad or e.requires_grad):
            # differentiable (a double backward): relu's gradient rule is a select, constant in u and e
            cut = (u.index_select(0, src) + e) <= 0
            grad_messages = grad_out.index_select(0, dst).masked_fill(cut, 0)
            grad_u = grad_out.new_zeros(u.shape).index_add_(0, src, grad_messages) if need_u else None
            return grad_u, grad_messages if need_e else None, None, None, None
        coo = _kernels("coo")
        grad_out = grad_out.detach().contiguous().numpy()
        x, edges = u.detach().contiguous().numpy(), e.detach().contiguous().numpy()
        grad_u = grad_e = None
        with threads_for(src.shape[0] * u.shape[1]):
            if need_e:
                grad_e = alloc.empty(e.shape, e.dtype)
                coo.add_relu_edge_grad(src.numpy(), dst.numpy(), x, edges, grad_out, grad_e.numpy())
            if need_u:
                grad_u = alloc.empty(u.shape, u.dtype)
                coo.scatter_add_relu(coo.row_ranges(u.shape[0], current_threads()), src.numpy(), dst.numpy(),
                                     x, edges, grad_out, True, grad_u.numpy())
        return grad_u, grad_e, None, None, None
