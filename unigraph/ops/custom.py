"""How the graph operators reach a backend: autograd Functions, and the same forward registered
as PyTorch custom operators for ``torch.compile``.

Each op has one autograd Function (``GSpMM``, ``GSDDMM``, ``EdgeSoftmax``, ``GATAttention``)
whose ``forward`` is the whole forward: it calls the backend's kernel on the graph's tensors.
Eagerly the front door calls ``Function.apply`` with the :class:`~unigraph.structure.GraphTensors`
and the :class:`~unigraph.backends.Backend` object the selector returned, so the path from
``ops.gspmm`` to a kernel is ``gspmm -> call_gspmm -> apply -> GSpMM.forward -> backend.gspmm``
(for sum and mean ``GSpMMSum``, the same forward with one output instead of three).

Registering the same forward with ``torch.library`` (``torch.ops.unigraph.gspmm`` etc.: a real
implementation, a shape-only fake one and an autograd rule) is what lets
``torch.compile(model, fullgraph=True)`` trace a unigraph model without graph breaks: the
compiler sees one opaque node per graph operation, knows its output shapes from the fake
implementation and differentiates it through :mod:`unigraph.ops.gradients`. A custom operator
takes only tensors, numbers and strings, so there the graph travels as its eight tensors plus the
two node counts and the backend as its registered name. In eager mode the dispatcher costs about
100 us per call on top of the kernel, so the ``call_*`` functions take the operator only while
compiling or tracing (:func:`traced`). Both paths run the same forward and the same backward.

Backward passes (:mod:`unigraph.ops.gradients`) call these same ``call_*`` functions, so they run
on the forward's backend and are themselves differentiable: double backward
(``create_graph=True``) works on every op and backend. GAT's fused backward kernels build no
autograd graph, so a double backward takes the composite formulas (see
:func:`unigraph.ops.gradients.gat_attention_backward`).

Kernels run with autocast off: the front door has already cast the operands (see
:mod:`unigraph.ops`), and kernels keep float32 statistics and accumulators for half precision.
Inputs were checked by the front door; these functions trust them. Backends never return a
view of an input (custom operators forbid aliasing; ``tests/ops/test_compile_ops.py`` runs
``torch.library.opcheck``).
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Optional

import torch
from torch import Tensor
from torch._functorch.utils import unwrap_dead_wrappers as _unwrap_dead_wrappers

from unigraph import backends as registry
from unigraph.backends.base import Backend, statistics_dtype
from unigraph.ops import gradients
from unigraph.ops.dispatch import traced
from unigraph.ops.spec import gspmm_features, gsddmm_features
from unigraph.structure import GraphTensors

_NUM_GRAPH_TENSORS = 8
_NO_ARG = (0,)  # shape of the placeholder arg tensors of sum/mean (operators must return tensors)


def apply(function: type, *args):
    """``function.apply(*args)``, with less per-call work on the small graphs of mini-batches,
    where it was a third of a layer call:

    * a call autograd will not record (grad mode off, as in every backward pass and evaluation,
      or no operand requiring grad) runs ``function.forward`` itself: ``apply`` would return the
      same tensors and record nothing;
    * otherwise, without the ``inspect.signature`` binding torch does on every call of a Function
      that defines ``setup_context`` (to fill in default arguments, which the forwards here do not
      have: ``tests/ops/test_custom_apply.py`` checks), 20-40 us a call on the 2-core machine.

    With a functorch transform active (vmap, grad) the full ``apply`` runs, as torch's does."""
    if torch._C._are_functorch_transforms_active():
        return function.apply(*args)
    if not (torch.is_grad_enabled() and any(isinstance(a, Tensor) and a.requires_grad for a in args)):
        return function.forward(*args)
    return super(torch.autograd.Function, function).apply(*_unwrap_dead_wrappers(args))


def _no_autocast(device: torch.device):
    """Autocast off inside a kernel: the front door chose the dtypes, the kernels keep them."""
    if torch.is_autocast_enabled(device.type):
        return torch.autocast(device.type, enabled=False)
    return contextlib.nullcontext()


def _graph(tensors: list[Tensor], num_src: int, num_dst: int) -> GraphTensors:
    return GraphTensors.from_list(tensors, num_src, num_dst)


@dataclasses.dataclass(frozen=True)
class Primitives:
    """The graph operators on one backend, reached as the forward reaches them (``call_*`` below:
    the custom operators while tracing, the autograd Functions eagerly): what the backward formulas
    of :mod:`unigraph.ops.gradients` call, so that they run on the forward's backend and are
    themselves differentiable and traceable. gradients.py sits below this module (these Functions
    call it), so it is handed them rather than importing them. The method names differ from a
    :class:`~unigraph.backends.Backend`'s kernel methods, so a bare backend passed by mistake
    fails at the first call instead of running kernels outside autograd."""

    backend: Backend

    def spmm(self, g: GraphTensors, op: str, reduce: str, u: Optional[Tensor], e: Optional[Tensor]) -> Tensor:
        return call_gspmm(g, self.backend, op, reduce, u, e)

    def sddmm(self, g: GraphTensors, op: str, lhs: Optional[Tensor], rhs: Optional[Tensor], lhs_target: str,
              rhs_target: str) -> Tensor:
        return call_gsddmm(g, self.backend, op, lhs, rhs, lhs_target, rhs_target)

    def softmax(self, g: GraphTensors, scores: Tensor) -> Tensor:
        return call_edge_softmax(g, self.backend, scores)


# ====================================================================== gspmm
def _args_used(op: str, reduce: str) -> tuple[bool, bool]:
    """Which arg tensors (arg_u, arg_e) a gspmm keeps: those of the operands a max/min reads."""
    extreme = reduce in ("max", "min")
    return extreme and op != "copy_e", extreme and op != "copy_u"


class GSpMM(torch.autograd.Function):
    """``out[v] = reduce_{(s, v) in E} op(u[s], e[edge])``; returns ``(out, arg_u, arg_e)``, the
    arg tensors (extreme edge per element) empty unless reduce is max/min and the op reads that
    operand (copy_u keeps only arg_u, copy_e only arg_e)."""

    @staticmethod
    def forward(g: GraphTensors, backend: Backend, op: str, reduce: str, u: Optional[Tensor],
                e: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        if reduce in ("sum", "mean"):
            out, arg_u, arg_e = GSpMMSum.forward(g, backend, op, reduce, u, e), None, None
        else:
            with _no_autocast((u if u is not None else e).device):
                out, arg_u, arg_e = backend.gspmm(g, op, reduce, u, e)
        # Only the arg of an operand the op reads is kept (copy_u: arg_u, copy_e: arg_e), as its
        # backward needs no other; a backend may skip computing the other one (None).
        used_u, used_e = _args_used(op, reduce)
        if not used_u:
            arg_u = torch.empty(_NO_ARG, dtype=torch.int64, device=out.device)
        if not used_e:
            arg_e = torch.empty(_NO_ARG, dtype=torch.int64, device=out.device)
        return out, arg_u, arg_e

    @staticmethod
    def setup_context(ctx, inputs, output):
        g, backend, op, reduce, u, e = inputs
        ctx.graph, ctx.meta = g, (backend, op, reduce)
        ctx.save_for_backward(u, e, output[1], output[2])
        ctx.mark_non_differentiable(output[1], output[2])

    @staticmethod
    def backward(ctx, grad_out, _grad_arg_u, _grad_arg_e):
        u, e, arg_u, arg_e = ctx.saved_tensors
        backend, op, reduce = ctx.meta
        du, de = gradients.gspmm_backward(ctx.graph, Primitives(backend), op, reduce, u, e, arg_u, arg_e,
                                          grad_out.contiguous(), ctx.needs_input_grad[4], ctx.needs_input_grad[5])
        return None, None, None, None, du, de


class GSpMMSum(torch.autograd.Function):
    """:class:`GSpMM` for sum and mean, with its one real output: the eager path of those reduces
    (``call_gspmm``). The same forward and the same backward formulas, which
    read no winners for these reduces; without the two placeholder winner tensors, their
    allocation and autograd's bookkeeping of three outputs (a few us of a layer call on the small
    graphs of mini-batches)."""

    @staticmethod
    def forward(g: GraphTensors, backend: Backend, op: str, reduce: str, u: Optional[Tensor],
                e: Optional[Tensor]) -> Tensor:
        """The backend's kernel sum (autocast off), rounded once (also :class:`GSpMM`'s forward
        for these reduces, which traced programs run)."""
        like = u if u is not None else e
        with _no_autocast(like.device):
            out = backend.gspmm(g, op, "sum", u, e)[0]
        return _rounded_once(g, backend, reduce, out, like.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        g, backend, op, reduce, u, e = inputs
        ctx.graph, ctx.meta = g, (backend, op, reduce)
        ctx.save_for_backward(u, e)

    @staticmethod
    def backward(ctx, grad_out):
        u, e = ctx.saved_tensors
        backend, op, reduce = ctx.meta
        du, de = gradients.gspmm_backward(ctx.graph, Primitives(backend), op, reduce, u, e, None, None,
                                          grad_out.contiguous(), ctx.needs_input_grad[4], ctx.needs_input_grad[5])
        return None, None, None, None, du, de


def _rounded_once(g: GraphTensors, backend: Backend, reduce: str, out: Tensor, dtype: torch.dtype) -> Tensor:
    """A backend's g-SpMM result in ``dtype``: a sum arrives in the accumulation dtype (float32
    for half precision; :mod:`unigraph.backends.base`), a mean is divided in it, then each is
    rounded once. A float16 hub's sum overflows at 65,504 and its in-degree does too, where its
    mean does not. Another dtype from a backend is refused: it would be silently inexact."""
    if reduce in ("max", "min"):
        return out
    expected = statistics_dtype(dtype)
    if out.dtype != expected:
        raise RuntimeError(f"backend {backend.name!r} returned a {out.dtype} sum for {dtype} features; the backend "
                           f"contract (unigraph.backends.base) asks for the unrounded {expected} accumulator")
    if reduce == "mean":  # in place: every backend returns a fresh output, aliased by nothing
        out = out.div_(gradients.in_degree_divisor(g, out))
    return out.to(dtype)


def _gspmm_impl(graph: list[Tensor], num_src: int, num_dst: int, backend: str, op: str, reduce: str,
                u: Optional[Tensor], e: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    out, arg_u, arg_e = GSpMM.forward(_graph(graph, num_src, num_dst), registry.get(backend), op, reduce, u, e)
    # Traced programs keep int64 winners (a backend may return int32 ones eagerly): inductor's
    # compiled backward crashed (SIGSEGV, tests/test_compile.py) on int32 winners.
    return out, arg_u.to(torch.int64), arg_e.to(torch.int64)


gspmm_op = torch.library.custom_op("unigraph::gspmm", _gspmm_impl, mutates_args=())


@gspmm_op.register_fake
def _gspmm_fake(graph, num_src, num_dst, backend, op, reduce, u, e):
    like = u if u is not None else e
    shape = (num_dst,) + gspmm_features(op, u, e)
    used_u, used_e = _args_used(op, reduce)
    return (like.new_empty(shape), like.new_empty(shape if used_u else _NO_ARG, dtype=torch.int64),
            like.new_empty(shape if used_e else _NO_ARG, dtype=torch.int64))


def _gspmm_op_setup(ctx, inputs, output):
    graph, num_src, num_dst, backend, op, reduce, u, e = inputs
    ctx.meta = (num_src, num_dst, backend, op, reduce)
    ctx.save_for_backward(*graph, u, e, output[1], output[2])


def _gspmm_op_backward(ctx, grad_out, _grad_arg_u, _grad_arg_e):
    num_src, num_dst, backend, op, reduce = ctx.meta
    saved = ctx.saved_tensors
    u, e, arg_u, arg_e = saved[_NUM_GRAPH_TENSORS:]
    du, de = gradients.gspmm_backward(_graph(list(saved[:_NUM_GRAPH_TENSORS]), num_src, num_dst),
                                      Primitives(registry.get(backend)), op, reduce, u, e, arg_u, arg_e,
                                      grad_out.contiguous(),
                                      ctx.needs_input_grad[6], ctx.needs_input_grad[7])
    return [None] * _NUM_GRAPH_TENSORS, None, None, None, None, None, du, de


gspmm_op.register_autograd(_gspmm_op_backward, setup_context=_gspmm_op_setup)


def call_gspmm(g: GraphTensors, backend: Backend, op: str, reduce: str, u: Optional[Tensor],
               e: Optional[Tensor]) -> Tensor:
    if traced(u, e, g.src):
        return torch.ops.unigraph.gspmm(g.tensor_list(), g.num_src, g.num_dst, backend.name, op, reduce, u, e)[0]
    if reduce in ("sum", "mean"):
        return apply(GSpMMSum, g, backend, op, reduce, u, e)
    return apply(GSpMM, g, backend, op, reduce, u, e)[0]


# ====================================================================== gsddmm
class GSDDMM(torch.autograd.Function):
    """``out[edge] = op(lhs[t_l(edge)], rhs[t_r(edge)])``."""

    @staticmethod
    def forward(g: GraphTensors, backend: Backend, op: str, lhs: Optional[Tensor], rhs: Optional[Tensor],
                lhs_target: str, rhs_target: str) -> Tensor:
        like = lhs if lhs is not None else rhs
        with _no_autocast(like.device):
            return backend.gsddmm(g, op, lhs, rhs, lhs_target, rhs_target)

    @staticmethod
    def setup_context(ctx, inputs, output):
        g, backend, op, lhs, rhs, lhs_target, rhs_target = inputs
        ctx.graph, ctx.meta = g, (backend, op)
        ctx.targets = (lhs_target, rhs_target)
        ctx.save_for_backward(lhs, rhs)

    @staticmethod
    def backward(ctx, grad_out):
        lhs, rhs = ctx.saved_tensors
        backend, op = ctx.meta
        dl, dr = gradients.gsddmm_backward(ctx.graph, Primitives(backend), op, lhs, rhs, *ctx.targets,
                                           grad_out.contiguous(), ctx.needs_input_grad[3], ctx.needs_input_grad[4])
        return None, None, None, dl, dr, None, None


def _gsddmm_impl(graph: list[Tensor], num_src: int, num_dst: int, backend: str, op: str, lhs: Optional[Tensor],
                 rhs: Optional[Tensor], lhs_target: str, rhs_target: str) -> Tensor:
    return GSDDMM.forward(_graph(graph, num_src, num_dst), registry.get(backend), op, lhs, rhs, lhs_target, rhs_target)


gsddmm_op = torch.library.custom_op("unigraph::gsddmm", _gsddmm_impl, mutates_args=())


@gsddmm_op.register_fake
def _gsddmm_fake(graph, num_src, num_dst, backend, op, lhs, rhs, lhs_target, rhs_target):
    like = lhs if lhs is not None else rhs
    return like.new_empty((graph[0].shape[0],) + gsddmm_features(op, lhs, rhs))


def _gsddmm_op_setup(ctx, inputs, output):
    graph, num_src, num_dst, backend, op, lhs, rhs, lhs_target, rhs_target = inputs
    ctx.meta = (num_src, num_dst, backend, op, lhs_target, rhs_target)
    ctx.save_for_backward(*graph, lhs, rhs)


def _gsddmm_op_backward(ctx, grad_out):
    num_src, num_dst, backend, op, lhs_target, rhs_target = ctx.meta
    saved = ctx.saved_tensors
    lhs, rhs = saved[_NUM_GRAPH_TENSORS:]
    dl, dr = gradients.gsddmm_backward(_graph(list(saved[:_NUM_GRAPH_TENSORS]), num_src, num_dst),
                                       Primitives(registry.get(backend)), op, lhs, rhs, lhs_target, rhs_target,
                                       grad_out.contiguous(), ctx.needs_input_grad[5], ctx.needs_input_grad[6])
    return [None] * _NUM_GRAPH_TENSORS, None, None, None, None, dl, dr, None, None


gsddmm_op.register_autograd(_gsddmm_op_backward, setup_context=_gsddmm_op_setup)


def call_gsddmm(g: GraphTensors, backend: Backend, op: str, lhs: Optional[Tensor], rhs: Optional[Tensor],
                lhs_target: str, rhs_target: str) -> Tensor:
    if traced(lhs, rhs, g.src):
        return torch.ops.unigraph.gsddmm(g.tensor_list(), g.num_src, g.num_dst, backend.name, op, lhs, rhs,
                                         lhs_target, rhs_target)
    return apply(GSDDMM, g, backend, op, lhs, rhs, lhs_target, rhs_target)


# ====================================================================== edge_softmax
class EdgeSoftmax(torch.autograd.Function):
    """Softmax of edge scores over each destination's in-edges."""

    @staticmethod
    def forward(g: GraphTensors, backend: Backend, scores: Tensor) -> Tensor:
        with _no_autocast(scores.device):
            return backend.edge_softmax(g, scores)

    @staticmethod
    def setup_context(ctx, inputs, output):
        g, backend, _scores = inputs
        ctx.graph, ctx.backend = g, backend
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_out):
        (out,) = ctx.saved_tensors
        return None, None, gradients.edge_softmax_backward(ctx.graph, Primitives(ctx.backend), out,
                                                           grad_out.contiguous())


def _edge_softmax_impl(graph: list[Tensor], num_src: int, num_dst: int, backend: str, scores: Tensor) -> Tensor:
    return EdgeSoftmax.forward(_graph(graph, num_src, num_dst), registry.get(backend), scores)


edge_softmax_op = torch.library.custom_op("unigraph::edge_softmax", _edge_softmax_impl, mutates_args=())


@edge_softmax_op.register_fake
def _edge_softmax_fake(graph, num_src, num_dst, backend, scores):
    return torch.empty_like(scores)


def _edge_softmax_op_setup(ctx, inputs, output):
    graph, num_src, num_dst, backend, _scores = inputs
    ctx.meta = (num_src, num_dst, backend)
    ctx.save_for_backward(*graph, output)


def _edge_softmax_op_backward(ctx, grad_out):
    num_src, num_dst, backend = ctx.meta
    saved = ctx.saved_tensors
    d_scores = gradients.edge_softmax_backward(_graph(list(saved[:_NUM_GRAPH_TENSORS]), num_src, num_dst),
                                               Primitives(registry.get(backend)), saved[_NUM_GRAPH_TENSORS],
                                               grad_out.contiguous())
    return [None] * _NUM_GRAPH_TENSORS, None, None, None, d_scores


edge_softmax_op.register_autograd(_edge_softmax_op_backward, setup_context=_edge_softmax_op_setup)


def call_edge_softmax(g: GraphTensors, backend: Backend, scores: Tensor) -> Tensor:
    if traced(scores, g.src):
        return torch.ops.unigraph.edge_softmax(g.tensor_list(), g.num_src, g.num_dst, backend.name, scores)
    return apply(EdgeSoftmax, g, backend, scores)


# ====================================================================== gat_attention
class GATAttention(torch.autograd.Function):
    """GAT's attention aggregation; returns ``(out, row_max, row_sum)``, the softmax statistics
    (float32 for half precision) serving the backward pass."""

    @staticmethod
    def forward(g: GraphTensors, backend: Backend, h: Tensor, el: Tensor, er: Tensor, edge_scores: Optional[Tensor],
                negative_slope: float, edge_mask: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        with _no_autocast(h.device):
            return backend.gat_attention(g, h, el, er, edge_scores, negative_slope, edge_mask)

    @staticmethod
    def setup_context(ctx, inputs, output):
        g, backend, h, el, er, edge_scores, negative_slope, edge_mask = inputs
        ctx.graph, ctx.meta = g, (backend, negative_slope)
        ctx.save_for_backward(h, el, er, edge_scores, edge_mask, *output)
        ctx.mark_non_differentiable(output[1], output[2])

    @staticmethod
    def backward(ctx, grad_out, _grad_max, _grad_sum):
        need = tuple(ctx.needs_input_grad[i] for i in (2, 3, 4, 5))
        grads = _gat_attention_backward(ctx.graph, *ctx.meta, ctx.saved_tensors, grad_out, need)
        return (None, None) + grads + (None, None)


def _gat_attention_backward(g: GraphTensors, backend: Backend, negative_slope: float, saved: tuple,
                            grad_out: Tensor, need: tuple):
    h, el, er, edge_scores, edge_mask, out, row_max, row_sum = saved
    # Fused kernels read real data and build no autograd graph: a trace, or a double backward
    # (grad mode on inside backward), takes the composite formulas, which dispatch per primitive.
    # So do empty inputs (no edges, or no features per head), which leave a fused kernel nothing to do.
    if "gat_attention" in backend.contract.fused_backward and not torch.is_grad_enabled() \
            and not traced(grad_out, h) and g.num_edges and h.shape[2]:
        return backend.gat_attention_backward(g, h, el, er, edge_scores, negative_slope, edge_mask, out, row_max,
                                              row_sum, grad_out.contiguous(), need)
    return gradients.gat_attention_backward(g, Primitives(backend), h, el, er, edge_scores, negative_slope,
                                            edge_mask, out, row_max, row_sum, grad_out.contiguous(), need)


def _gat_attention_impl(graph: list[Tensor], num_src: int, num_dst: int, backend: str, h: Tensor, el: Tensor,
                        er: Tensor, edge_scores: Optional[Tensor], negative_slope: float,
                        edge_mask: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    return GATAttention.forward(_graph(graph, num_src, num_dst), registry.get(backend), h, el, er, edge_scores,
                                negative_slope, edge_mask)


gat_attention_op = torch.library.custom_op("unigraph::gat_attention", _gat_attention_impl, mutates_args=())


@gat_attention_op.register_fake
def _gat_attention_fake(graph, num_src, num_dst, backend, h, el, er, edge_scores, negative_slope, edge_mask):
    stats = statistics_dtype(h.dtype)
    return (h.new_empty((num_dst,) + tuple(h.shape[1:])), er.new_empty(er.shape, dtype=stats),
            er.new_empty(er.shape, dtype=stats))


def _gat_attention_op_setup(ctx, inputs, output):
    graph, num_src, num_dst, backend, h, el, er, edge_scores, negative_slope, edge_mask = inputs
    ctx.meta = (num_src, num_dst, backend, negative_slope)
    ctx.save_for_backward(*graph, h, el, er, edge_scores, edge_mask, *output)


def _gat_attention_op_backward(ctx, grad_out, _grad_max, _grad_sum):
    num_src, num_dst, backend, negative_slope = ctx.meta
    saved = ctx.saved_tensors
    need = tuple(ctx.needs_input_grad[i] for i in (4, 5, 6, 7))
    dh, d_el, d_er, d_edge = _gat_attention_backward(
        _graph(list(saved[:_NUM_GRAPH_TENSORS]), num_src, num_dst), registry.get(backend), negative_slope,
        saved[_NUM_GRAPH_TENSORS:], grad_out, need)
    return [None] * _NUM_GRAPH_TENSORS, None, None, None, dh, d_el, d_er, d_edge, None, None


gat_attention_op.register_autograd(_gat_attention_op_backward, setup_context=_gat_attention_op_setup)


def call_gat_attention(g: GraphTensors, backend: Backend, h: Tensor, el: Tensor, er: Tensor,
                       edge_scores: Optional[Tensor], negative_slope: float, edge_mask: Optional[Tensor]) -> Tensor:
    if traced(h, el, er, edge_scores, edge_mask, g.src):
        return torch.ops.unigraph.gat_attention(g.tensor_list(), g.num_src, g.num_dst, backend.name, h, el, er,
                                                edge_scores, negative_slope, edge_mask)[0]
    return apply(GATAttention, g, backend, h, el, er, edge_scores, negative_slope, edge_mask)[0]
