"""How the graph operators reach a backend: PyTorch custom operators and eager autograd Functions.

Registering the operators with ``torch.library`` (``torch.ops.unigraph.gspmm`` etc.: a real
implementation, a shape-only fake one and an autograd rule) is what lets
``torch.compile(model, fullgraph=True)`` trace a unigraph model without graph breaks: the
compiler sees one opaque node per graph operation, knows its output shapes from the fake
implementation and differentiates it through :mod:`unigraph.ops.gradients`.

In eager mode the custom-operator dispatcher costs about 100 us per call on top of the kernel
(measured: 159 us vs 50 us for a 3-edge graph), which adds up across a GNN's dozens of calls per
step. So the ``call_*`` functions below take the custom operator only while compiling or tracing,
and an ``autograd.Function`` otherwise. Both run the same forward (``*_forward``) and the same backward
(``*_backward``); only the dispatch differs.

The graph travels as the eight tensors of :class:`~unigraph.structure.GraphTensors` plus the two
node counts; the backend as its registered name, already resolved by the front door. Inputs
were checked by the front door; these functions trust them. Backends never return a view of an
input (custom operators forbid aliasing; ``tests/test_compile.py`` runs ``torch.library.opcheck``).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from unigraph import backends as registry
from unigraph.ops import gradients
from unigraph.ops.spec import GSPMM_BINARY, broadcast_feature_shape
from unigraph.structure import GraphTensors

_NUM_GRAPH_TENSORS = 8
_NO_ARG = (0,)  # shape of the placeholder arg tensors of sum/mean (operators must return tensors)


def gspmm_features(op: str, u: Optional[Tensor], e: Optional[Tensor]) -> tuple[int, ...]:
    if op == "copy_u":
        return tuple(u.shape[1:])
    if op == "copy_e":
        return tuple(e.shape[1:])
    return broadcast_feature_shape(GSPMM_BINARY[op], tuple(u.shape[1:]), tuple(e.shape[1:]))


def gsddmm_features(op: str, lhs: Optional[Tensor], rhs: Optional[Tensor]) -> tuple[int, ...]:
    if op == "copy_lhs":
        return tuple(lhs.shape[1:])
    if op == "copy_rhs":
        return tuple(rhs.shape[1:])
    return broadcast_feature_shape(op, tuple(lhs.shape[1:]), tuple(rhs.shape[1:]))


_EAGER_TYPES = (torch.Tensor, torch.nn.Parameter)


def _use_operator(*tensors: Optional[Tensor]) -> bool:
    """Whether to dispatch through the custom operator: while compiling, and whenever an input is
    a tracing tensor (fake or functional tensors of AOTAutograd, export or opcheck), whose data a
    kernel cannot read."""
    if torch.compiler.is_compiling():
        return True
    return any(t is not None and t.__class__ not in _EAGER_TYPES for t in tensors)


def _graph_of(saved: tuple, num_src: int, num_dst: int) -> GraphTensors:
    return GraphTensors.from_list(list(saved[:_NUM_GRAPH_TENSORS]), num_src, num_dst)


# ====================================================================== gspmm
def gspmm_forward(graph: list[Tensor], num_src: int, num_dst: int, backend: str, op: str, reduce: str,
                  u: Optional[Tensor], e: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """Returns ``(out, arg_u, arg_e)``; the arg tensors are empty unless reduce is max/min."""
    g = GraphTensors.from_list(graph, num_src, num_dst)
    out, arg_u, arg_e = registry.get(backend).gspmm(g, op, "sum" if reduce == "mean" else reduce, u, e)
    if reduce == "mean":
        out = out / gradients.in_degree_divisor(g, out)
    if arg_u is None:
        arg_u = torch.empty(_NO_ARG, dtype=torch.int64, device=out.device)
        arg_e = torch.empty(_NO_ARG, dtype=torch.int64, device=out.device)
    return out, arg_u, arg_e


def _gspmm_backward(meta: tuple, saved: tuple, grad_out: Tensor, need_u: bool, need_e: bool):
    num_src, num_dst, backend, op, reduce = meta
    u, e, arg_u, arg_e = saved[_NUM_GRAPH_TENSORS:]
    return gradients.gspmm_backward(_graph_of(saved, num_src, num_dst), backend, op, reduce, u, e,
                                    arg_u, arg_e, grad_out.contiguous(), need_u, need_e)


gspmm_op = torch.library.custom_op("unigraph::gspmm", gspmm_forward, mutates_args=())


@gspmm_op.register_fake
def _gspmm_fake(graph, num_src, num_dst, backend, op, reduce, u, e):
    like = u if u is not None else e
    shape = (num_dst,) + gspmm_features(op, u, e)
    arg_shape = shape if reduce in ("max", "min") else _NO_ARG
    return (like.new_empty(shape), like.new_empty(arg_shape, dtype=torch.int64),
            like.new_empty(arg_shape, dtype=torch.int64))


def _gspmm_op_setup(ctx, inputs, output):
    graph, num_src, num_dst, backend, op, reduce, u, e = inputs
    ctx.meta = (num_src, num_dst, backend, op, reduce)
    ctx.save_for_backward(*graph, u, e, output[1], output[2])


def _gspmm_op_backward(ctx, grad_out, _grad_arg_u, _grad_arg_e):
    du, de = _gspmm_backward(ctx.meta, ctx.saved_tensors, grad_out, ctx.needs_input_grad[6], ctx.needs_input_grad[7])
    return [None] * _NUM_GRAPH_TENSORS, None, None, None, None, None, du, de


gspmm_op.register_autograd(_gspmm_op_backward, setup_context=_gspmm_op_setup)


class _GSpMMFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, backend, op, reduce, num_src, num_dst, u, e, *graph):
        out, arg_u, arg_e = gspmm_forward(list(graph), num_src, num_dst, backend, op, reduce, u, e)
        ctx.meta = (num_src, num_dst, backend, op, reduce)
        ctx.save_for_backward(*graph, u, e, arg_u, arg_e)
        ctx.mark_non_differentiable(arg_u, arg_e)
        return out, arg_u, arg_e

    @staticmethod
    def backward(ctx, grad_out, _grad_arg_u, _grad_arg_e):
        du, de = _gspmm_backward(ctx.meta, ctx.saved_tensors, grad_out, ctx.needs_input_grad[5], ctx.needs_input_grad[6])
        return (None,) * 5 + (du, de) + (None,) * _NUM_GRAPH_TENSORS


def call_gspmm(g: GraphTensors, backend: str, op: str, reduce: str, u: Optional[Tensor], e: Optional[Tensor]) -> Tensor:
    if _use_operator(u, e, g.src):
        return torch.ops.unigraph.gspmm(g.tensor_list(), g.num_src, g.num_dst, backend, op, reduce, u, e)[0]
    return _GSpMMFunction.apply(backend, op, reduce, g.num_src, g.num_dst, u, e, *g.tensor_list())[0]


# ====================================================================== gsddmm
def gsddmm_forward(graph: list[Tensor], num_src: int, num_dst: int, backend: str, op: str,
                   lhs: Optional[Tensor], rhs: Optional[Tensor], lhs_target: str, rhs_target: str) -> Tensor:
    g = GraphTensors.from_list(graph, num_src, num_dst)
    return registry.get(backend).gsddmm(g, op, lhs, rhs, lhs_target, rhs_target)


def _gsddmm_backward(meta: tuple, saved: tuple, grad_out: Tensor, need_lhs: bool, need_rhs: bool):
    num_src, num_dst, backend, op, lhs_target, rhs_target = meta
    lhs, rhs = saved[_NUM_GRAPH_TENSORS:]
    return gradients.gsddmm_backward(_graph_of(saved, num_src, num_dst), backend, op, lhs, rhs, lhs_target,
                                     rhs_target, grad_out.contiguous(), need_lhs, need_rhs)


gsddmm_op = torch.library.custom_op("unigraph::gsddmm", gsddmm_forward, mutates_args=())


@gsddmm_op.register_fake
def _gsddmm_fake(graph, num_src, num_dst, backend, op, lhs, rhs, lhs_target, rhs_target):
    like = lhs if lhs is not None else rhs
    return like.new_empty((graph[0].shape[0],) + gsddmm_features(op, lhs, rhs))


def _gsddmm_op_setup(ctx, inputs, output):
    graph, num_src, num_dst, backend, op, lhs, rhs, lhs_target, rhs_target = inputs
    ctx.meta = (num_src, num_dst, backend, op, lhs_target, rhs_target)
    ctx.save_for_backward(*graph, lhs, rhs)


def _gsddmm_op_backward(ctx, grad_out):
    dl, dr = _gsddmm_backward(ctx.meta, ctx.saved_tensors, grad_out, ctx.needs_input_grad[5], ctx.needs_input_grad[6])
    return [None] * _NUM_GRAPH_TENSORS, None, None, None, None, dl, dr, None, None


gsddmm_op.register_autograd(_gsddmm_op_backward, setup_context=_gsddmm_op_setup)


class _GSDDMMFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, backend, op, lhs_target, rhs_target, num_src, num_dst, lhs, rhs, *graph):
        out = gsddmm_forward(list(graph), num_src, num_dst, backend, op, lhs, rhs, lhs_target, rhs_target)
        ctx.meta = (num_src, num_dst, backend, op, lhs_target, rhs_target)
        ctx.save_for_backward(*graph, lhs, rhs)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        dl, dr = _gsddmm_backward(ctx.meta, ctx.saved_tensors, grad_out, ctx.needs_input_grad[6], ctx.needs_input_grad[7])
        return (None,) * 6 + (dl, dr) + (None,) * _NUM_GRAPH_TENSORS


def call_gsddmm(g: GraphTensors, backend: str, op: str, lhs: Optional[Tensor], rhs: Optional[Tensor],
                lhs_target: str, rhs_target: str) -> Tensor:
    if _use_operator(lhs, rhs, g.src):
        return torch.ops.unigraph.gsddmm(g.tensor_list(), g.num_src, g.num_dst, backend, op, lhs, rhs,
                                         lhs_target, rhs_target)
    return _GSDDMMFunction.apply(backend, op, lhs_target, rhs_target, g.num_src, g.num_dst, lhs, rhs,
                                 *g.tensor_list())


# ====================================================================== edge_softmax
def edge_softmax_forward(graph: list[Tensor], num_src: int, num_dst: int, backend: str, scores: Tensor) -> Tensor:
    g = GraphTensors.from_list(graph, num_src, num_dst)
    return registry.get(backend).edge_softmax(g, scores)


def _edge_softmax_backward(meta: tuple, saved: tuple, grad_out: Tensor) -> Tensor:
    num_src, num_dst, backend = meta
    return gradients.edge_softmax_backward(_graph_of(saved, num_src, num_dst), backend,
                                           saved[_NUM_GRAPH_TENSORS], grad_out.contiguous())


edge_softmax_op = torch.library.custom_op("unigraph::edge_softmax", edge_softmax_forward, mutates_args=())


@edge_softmax_op.register_fake
def _edge_softmax_fake(graph, num_src, num_dst, backend, scores):
    return torch.empty_like(scores)


def _edge_softmax_op_setup(ctx, inputs, output):
    graph, num_src, num_dst, backend, _scores = inputs
    ctx.meta = (num_src, num_dst, backend)
    ctx.save_for_backward(*graph, output)


def _edge_softmax_op_backward(ctx, grad_out):
    return [None] * _NUM_GRAPH_TENSORS, None, None, None, _edge_softmax_backward(ctx.meta, ctx.saved_tensors, grad_out)


edge_softmax_op.register_autograd(_edge_softmax_op_backward, setup_context=_edge_softmax_op_setup)


class _EdgeSoftmaxFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, backend, num_src, num_dst, scores, *graph):
        out = edge_softmax_forward(list(graph), num_src, num_dst, backend, scores)
        ctx.meta = (num_src, num_dst, backend)
        ctx.save_for_backward(*graph, out)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        return (None,) * 3 + (_edge_softmax_backward(ctx.meta, ctx.saved_tensors, grad_out),) \
            + (None,) * _NUM_GRAPH_TENSORS


def call_edge_softmax(g: GraphTensors, backend: str, scores: Tensor) -> Tensor:
    if _use_operator(scores, g.src):
        return torch.ops.unigraph.edge_softmax(g.tensor_list(), g.num_src, g.num_dst, backend, scores)
    return _EdgeSoftmaxFunction.apply(backend, g.num_src, g.num_dst, scores, *g.tensor_list())


# ====================================================================== gat_attention
def gat_attention_forward(graph: list[Tensor], num_src: int, num_dst: int, backend: str, h: Tensor, el: Tensor,
                          er: Tensor, edge_scores: Optional[Tensor], negative_slope: float,
                          edge_mask: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """Returns ``(out, row_max, row_sum)``; the softmax statistics serve the backward pass."""
    g = GraphTensors.from_list(graph, num_src, num_dst)
    return registry.get(backend).gat_attention(g, h, el, er, edge_scores, negative_slope, edge_mask)


def _gat_attention_backward(meta: tuple, saved: tuple, grad_out: Tensor, need: tuple):
    num_src, num_dst, backend, negative_slope = meta
    h, el, er, edge_scores, edge_mask, out, row_max, row_sum = saved[_NUM_GRAPH_TENSORS:]
    g = _graph_of(saved, num_src, num_dst)
    fused = registry.get(backend).gat_attention_backward
    # Fused kernels read real data and build no autograd graph: a trace, or a double backward
    # (grad mode on inside backward), takes the composite formulas, which dispatch per primitive.
    if fused is not None and not torch.is_grad_enabled() and not _use_operator(grad_out, h):
        return fused(g, h, el, er, edge_scores, negative_slope, edge_mask, out, row_max, row_sum,
                     grad_out.contiguous(), need)
    return gradients.gat_attention_backward(g, backend, h, el, er, edge_scores, negative_slope, edge_mask,
                                            out, row_max, row_sum, grad_out.contiguous(), need)


gat_attention_op = torch.library.custom_op("unigraph::gat_attention", gat_attention_forward, mutates_args=())


@gat_attention_op.register_fake
def _gat_attention_fake(graph, num_src, num_dst, backend, h, el, er, edge_scores, negative_slope, edge_mask):
    return h.new_empty((num_dst,) + tuple(h.shape[1:])), er.new_empty(er.shape), er.new_empty(er.shape)


def _gat_attention_op_setup(ctx, inputs, output):
    graph, num_src, num_dst, backend, h, el, er, edge_scores, negative_slope, edge_mask = inputs
    ctx.meta = (num_src, num_dst, backend, negative_slope)
    ctx.save_for_backward(*graph, h, el, er, edge_scores, edge_mask, *output)


def _gat_attention_op_backward(ctx, grad_out, _grad_max, _grad_sum):
    need = tuple(ctx.needs_input_grad[i] for i in (4, 5, 6, 7))
    dh, d_el, d_er, d_edge = _gat_attention_backward(ctx.meta, ctx.saved_tensors, grad_out, need)
    return [None] * _NUM_GRAPH_TENSORS, None, None, None, dh, d_el, d_er, d_edge, None, None


gat_attention_op.register_autograd(_gat_attention_op_backward, setup_context=_gat_attention_op_setup)


class _GATAttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, backend, negative_slope, num_src, num_dst, h, el, er, edge_scores, edge_mask, *graph):
        out, row_max, row_sum = gat_attention_forward(list(graph), num_src, num_dst, backend, h, el, er,
                                                      edge_scores, negative_slope, edge_mask)
        ctx.meta = (num_src, num_dst, backend, negative_slope)
        ctx.save_for_backward(*graph, h, el, er, edge_scores, edge_mask, out, row_max, row_sum)
        ctx.mark_non_differentiable(row_max, row_sum)
        return out, row_max, row_sum

    @staticmethod
    def backward(ctx, grad_out, _grad_max, _grad_sum):
        need = tuple(ctx.needs_input_grad[i] for i in (4, 5, 6, 7))
        dh, d_el, d_er, d_edge = _gat_attention_backward(ctx.meta, ctx.saved_tensors, grad_out, need)
        return (None,) * 4 + (dh, d_el, d_er, d_edge, None) + (None,) * _NUM_GRAPH_TENSORS


def call_gat_attention(g: GraphTensors, backend: str, h: Tensor, el: Tensor, er: Tensor,
                       edge_scores: Optional[Tensor], negative_slope: float, edge_mask: Optional[Tensor]) -> Tensor:
    if _use_operator(h, el, er, edge_scores, edge_mask, g.src):
        return torch.ops.unigraph.gat_attention(g.tensor_list(), g.num_src, g.num_dst, backend, h, el, er,
                                                edge_scores, negative_slope, edge_mask)[0]
    return _GATAttentionFunction.apply(backend, negative_slope, g.num_src, g.num_dst, h, el, er, edge_scores,
                                       edge_mask, *g.tensor_list())[0]
