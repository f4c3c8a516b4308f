r"""``x W^T + b`` on the CPU with its large outputs on recycled memory: every layer's dense projection.

.. math::
    y = x W^\top + b, \qquad \frac{\partial L}{\partial x} = g W, \qquad
    \frac{\partial L}{\partial W} = g^\top x, \qquad \frac{\partial L}{\partial b} = \textstyle\sum_i g_i

Why: on an ogbn-arxiv-sized graph a projection's output (169k x 256 float32, 173 MB) and its
input gradient are blocks glibc maps afresh and unmaps on every free, so each training step
faults them in again, 4 KiB at a time (a third of a GraphSAGE epoch was page faults,
``benchmarks/results/allocator_cpu.md``). Here the forward writes ``y`` and the backward writes
``g W`` into memory from the CPU kernels' output pool (``unigraph.kernels.cpu.alloc``), which
recycles the block once torch frees the tensor. The products are the same BLAS calls as
``F.linear`` (``addmm``/``mm`` with ``out=``), so the values are those of ``F.linear``.

:func:`linear` takes this path only for 2-D float32/float64 CPU inputs whose output or input
gradient is large enough to be pooled, outside autocast and ``torch.compile``, and when the pool
is on; everything else is ``F.linear``. A backward under ``create_graph=True`` uses plain
differentiable products, so double backward works; forward-mode AD has its ``jvp``.

**Gradients that are zero past a prefix of rows.** PyG's ``NeighborLoader`` numbers a batch's
nodes seeds first, then each hop, and its users' loss reads ``out[:batch_size]``: the output's
gradient is zero from some row ``R`` on, often four fifths of the rows (the last hop's nodes
reach no seed), and that zero reaches the layers below through relu and dropout. Where the
gradient's last row and its second half are zero (:func:`live_rows`: about one pass over it
where they are; a row or a 64th of it in a full-batch step), ``g W`` and ``g^T x`` run over the
first ``R`` rows and ``g W``'s other rows are zeros: the same sums without their zero terms
(``0 * w = 0`` where ``w`` is finite, so ``W`` and ``x``'s rows from ``R`` on must be: one
:func:`unigraph.finite.all_finite` pass each, else the full product, whose NaN they would make).
Equal values: bit for bit in every case measured (the zero rows add nothing and the BLAS blocks
start at row 0), though BLAS does not promise it; a skipped row's zero is ``+0``. A NeighborLoader
GraphSAGE step (``benchmarks/ports.py --ports pyg_sage_neighbor``): the three largest products of
its backward over a fifth of the rows: with the finite gate, the step 289 -> 217 ms at one thread,
183 -> 151 at two (docs/performance.md, "Neighbour-sampled mini-batches").
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.finite import all_finite
from unigraph.kernels.cpu import alloc

# Below this many rows the checks cost about what the skipped rows would
MIN_LIVE_ROWS_CHECK = 4096


def _pooled(shape: tuple, dtype: torch.dtype) -> Tensor:
    return alloc.empty(shape, dtype)


class _PooledLinear(torch.autograd.Function):

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.save_for_forward(x, weight)
        ctx.has_bias = bias is not None
        out = _pooled((x.shape[0], weight.shape[0]), x.dtype)
        if bias is None:
            return torch.mm(x, weight.t(), out=out)
        return torch.addmm(bias, x, weight.t(), out=out)

    @staticmethod
    def jvp(ctx, dx: Tensor | None, dw: Tensor | None, db: Tensor | None) -> Tensor:
        """Forward-mode: dy = dx W^T + x dW^T + db (plain products; tangents may be absent)."""
        x, weight = ctx.saved_tensors
        terms = [t for t in (dx @ weight.t() if dx is not None else None,
                             x @ dw.t() if dw is not None else None, db) if t is not None]
        out = terms[0]
        for t in terms[1:]:
            out = out + t
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        grad_b = grad.sum(0) if need_b and ctx.has_bias else None
        if torch.is_grad_enabled():  # create_graph: differentiable products, no out=
            return (grad @ weight if need_x else None), (grad.t() @ x if need_w else None), grad_b
        rows = live_rows(grad) if need_x or need_w else None
        grad_x = grad_w = None
        if need_x:
            grad_x = _pooled(tuple(x.shape), x.dtype)
            if rows is not None and all_finite(weight):
                torch.mm(grad[:rows], weight, out=grad_x[:rows])
                grad_x[rows:].zero_()
            else:
                torch.mm(grad, weight, out=grad_x)
        if need_w:
            grad_w = grad.t() @ x if rows is None else transposed_product_over_rows(grad, x, rows, zero="a")
        return grad_x, grad_w, grad_b


def transposed_product_over_rows(a: Tensor, b: Tensor, rows: int, zero: str) -> Tensor:
    """``a^T b`` where one factor's rows from ``rows`` on are zero (``zero``: ``"a"`` or ``"b"``):
    over the first ``rows`` rows when the other factor's rows from there are finite (each skipped
    term is ``0 * v``, zero only for a finite ``v``), else the full product, NaN where it makes one."""
    other = b if zero == "a" else a
    if all_finite(other[rows:]):
        return a[:rows].t() @ b[:rows]
    return a.t() @ b


def live_rows(grad: Tensor) -> int | None:
    """``R`` where ``grad``'s rows from ``R`` on are zero and ``R`` is at most half its rows (worth
    the products over ``R`` rows, module docstring); else None. Reads the last row, the last 64th,
    the second half, then the first half's rows: a full-batch gradient costs a row or a 64th."""
    n = grad.shape[0]
    if n < MIN_LIVE_ROWS_CHECK or grad.dim() != 2 or grad.shape[1] == 0 or grad.layout != torch.strided:
        return None
    half = n // 2
    # (NaN counts as non-zero) a gradient live in scattered rows (a full-batch loss on a mask) is
    # caught by its last row or last 64th before the second half is read
    if bool(grad[-1].any()) or bool(grad[n - n // 64:].any()) or bool(grad[half:].any()):
        return None
    live = grad[:half].any(1).nonzero()
    return int(live[-1]) + 1 if live.numel() else 0


def _worth_pooling(x: Tensor, weight: Tensor, bias: Tensor | None) -> bool:
    if x.dim() != 2 or weight.dim() != 2 or x.shape[0] * max(x.shape[1], weight.shape[0]) * x.element_size() < alloc.MIN_BYTES:
        return False   # (the size first: most calls are small, and it is the cheapest to read)
    return not (x.device.type != "cpu" or x.layout != torch.strided
                or x.dtype not in (torch.float32, torch.float64) or weight.dtype != x.dtype
                or (bias is not None and (bias.dtype != x.dtype or bias.dim() != 1))
                or alloc.pool().max_bytes == 0 or torch.is_autocast_enabled("cpu")
                or torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active())


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(x, weight, bias)``, on pooled memory where that pays (module docstring)."""
    if not _worth_pooling(x, weight, bias) or x.shape[1] != weight.shape[1]:
        return F.linear(x, weight, bias)  # (a shape mismatch gets F.linear's own error)
    return _PooledLinear.apply(x, weight, bias)
