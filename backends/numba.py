"""``numba``: unigraph's own CPU kernels, node-parallel over the CSR (``unigraph.kernels.cpu``).

DGL-style g-SpMM/g-SDDMM without materializing E x F messages, plus fused edge softmax and
fused GAT attention (forward and backward). One thread owns each output row, so there are no
atomics and results are deterministic. CPU only, float32/float64 (numba has no half
precision); ``auto`` prefers it on the CPU when numba is installed (see ``estimate_us``).
"""
from __future__ import annotations

import functools
import math

import numpy as np
import torch
from torch import Tensor

from unigraph.backends.base import Availability, Backend, Contract, Request, gsddmm_by_gather, per_slice_plan
from unigraph.kernels.cpu import alloc, current_threads, threads_for
from unigraph.kernels.cpu.indices import compact, csr_plan, in_slots, index_dtype
from unigraph.ops.broadcast import broadcast_offsets
from unigraph.ops.spec import gspmm_features, gsddmm_features
from unigraph.structure import GraphTensors

SUPPORTED_DTYPES = (torch.float32, torch.float64)


def _np(t: Tensor) -> np.ndarray:
    """A zero-copy numpy view (the kernels run outside autograd on contiguous CPU tensors); a
    tensor that is both already (no grad, contiguous) converts in one call instead of three (a
    few us each in a mini-batch step, where every layer converts its input and output)."""
    if t.requires_grad or not t.is_contiguous():
        t = t.detach().contiguous()
    return t.numpy()


@functools.lru_cache(maxsize=256)
def _offsets(feature_shape: tuple, out_shape: tuple) -> np.ndarray:
    return broadcast_offsets(feature_shape, out_shape).numpy()


def _slot_like(num_edges: int) -> np.ndarray:
    """The dtype of the max/min kernels' per-row scratch of winning CSR slots: int32 where every
    slot fits (twice the vector lanes of int64)."""
    return _SLOT32 if num_edges <= np.iinfo(np.int32).max else _SLOT64


_SLOT32, _SLOT64 = np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int64)


def _column_parts(width: int) -> np.ndarray:
    """Column ranges, one per numba thread (call it inside ``threads_for``), in whole 64-byte
    lines of float32 (16 columns), so that no two threads write the same cache line of a row
    (bounds non-decreasing; a range may be empty when the row is narrow)."""
    threads = current_threads()
    lines = -(-width // 16)
    bounds = [min(width, 16 * (lines * i // threads)) for i in range(threads + 1)]
    bounds[-1] = width
    return np.array(bounds, dtype=np.int64)


def _in_plan(g: GraphTensors) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(blocks, ptr, sources, edge ids)`` of the in-CSR as the node-parallel kernels take it,
    kept per graph direction and thread count (``indices.csr_plan``); call it inside ``threads_for``."""
    return csr_plan(g.in_ptr, g.in_src, g.in_eid, g.num_src, current_threads())


def _rows_of(g: GraphTensors, target: str) -> np.ndarray:
    """The operand row of every edge for a g-SDDMM target, as the kernels index it."""
    if target == "u":
        return compact(g.src, g.num_src)
    if target == "v":
        return compact(g.dst, g.num_dst)
    return np.arange(g.num_edges, dtype=index_dtype(g.num_edges))


def _kernels():
    """The kernel modules, imported on first use (importing numba costs ~0.5 s) and kept: callers
    read each kernel from its module at the call (a forked child rebinds them: ``threads.py``)."""
    global _KERNEL_MODULES
    if _KERNEL_MODULES is None:
        from unigraph.kernels.cpu import gat, messages, sddmm, softmax, spmm
        _KERNEL_MODULES = (spmm, sddmm, softmax, gat, messages)
    return _KERNEL_MODULES


_KERNEL_MODULES = None


class NumbaBackend(Backend):
    name = "numba"
    summary = "unigraph's CPU kernels (numba): node-parallel over CSR, fused softmax and GAT"
    contract = Contract(dtypes=SUPPORTED_DTYPES, devices=("cpu",), fused=("edge_softmax", "gat_attention"),
                        fused_backward=("gat_attention",))

    def availability(self) -> Availability:
        from unigraph.kernels.cpu import numba_status
        ok, detail = numba_status()
        return Availability(ok, detail + (", node-parallel CPU kernels" if ok else ""))

    def estimate_us(self, stats, request: Request) -> float:
        from unigraph.backends.cost_model import estimate_numba
        return estimate_numba(stats, request)

    # ------------------------------------------------------------------ g-SpMM
    def gspmm(self, g: GraphTensors, op: str, reduce: str, u: Tensor | None, e: Tensor | None):
        like = u if u is not None else e
        features = gspmm_features(op, u, e)
        width = math.prod(features)
        extreme = reduce != "sum"
        if g.num_edges == 0 or width == 0:
            out = torch.zeros((g.num_dst,) + features, dtype=like.dtype)
            empty_arg = torch.full(out.shape, -1, dtype=self.arg_dtype(op, g.num_src, g.num_edges))
            return (out, None, None) if not extreme else (out, empty_arg, empty_arg.clone())
        spmm, _, _, _, messages = _kernels()
        # Every kernel writes each output row itself (zeroing it in cache first), so no zero-fill pass.
        out = alloc.empty((g.num_dst,) + features, like.dtype)
        out2 = _np(out.view(g.num_dst, width))
        sign = 1.0 if reduce == "max" else -1.0
        plan = per_slice_plan(op, u, e) if reduce == "sum" and op == "u_mul_e" else None
        with threads_for(g.num_edges * width):
            blocks, ptr, src, eid = _in_plan(g)
            if op in ("copy_u", "copy_e"):  # one operand, read at the source (copy_u) or the edge (copy_e)
                rows, x = (src if op == "copy_u" else eid), _np(like.reshape(like.shape[0], width))
                if not extreme:
                    spmm.gather_sum(blocks, ptr, rows, x, out2)
                    return out, None, None
                # the winner's row of the one operand read: the source (arg_u) or the edge (arg_e),
                # in the dtype of ``rows`` (both follow ``index_dtype`` of the same bound)
                arg = alloc.empty(out.shape, self.arg_dtype(op, g.num_src, g.num_edges))
                spmm.gather_extreme(blocks, ptr, rows, x, sign, _slot_like(g.num_edges), out2,
                                    _np(arg.view(g.num_dst, width)))
                return (out, arg, None) if op == "copy_u" else (out, None, arg)
            if plan is not None:  # a weight per slice: the contiguous kernel
                mat, weights, _ = plan
                spmm.weighted_sum(blocks, ptr, src, eid, _np(mat), _np(weights),
                                  _np(out.view((g.num_dst,) + mat.shape[1:])))
                return out, None, None
            u2 = _np(u.reshape(u.shape[0], math.prod(u.shape[1:])))
            e2 = _np(e.reshape(e.shape[0], math.prod(e.shape[1:])))
            offsets = _offsets(tuple(u.shape[1:]), features), _offsets(tuple(e.shape[1:]), features)
            if not extreme:
                spmm.binary_sum(blocks, ptr, src, eid, u2, e2, *offsets, messages.CODES[op], out2)
                return out, None, None
            arg_u, arg_e = alloc.empty(out.shape, torch.int64), alloc.empty(out.shape, torch.int64)
            spmm.binary_extreme(blocks, ptr, src, eid, u2, e2, *offsets, messages.CODES[op], sign, out2,
                                _np(arg_u.view(g.num_dst, width)), _np(arg_e.view(g.num_dst, width)))
            return out, arg_u, arg_e

    def arg_dtype(self, op: str, num_src: int, num_edges: int) -> torch.dtype:
        """The dtype of the max/min winners :meth:`gspmm` returns: int32 for the copy ops where
        every row of the operand read fits (``indices.index_dtype``), half the bytes the forward
        writes and the backward reads; int64 otherwise (the custom operator that traced programs
        call widens them to int64, see ``unigraph.ops.custom``)."""
        if op not in ("copy_u", "copy_e"):
            return torch.int64
        bound = num_src if op == "copy_u" else num_edges
        return torch.int32 if index_dtype(bound) == np.int32 else torch.int64

    def scatter_at_rows(self, values: Tensor, rows: Tensor, num_rows: int, feature_shape: tuple) -> Tensor:
        """The max/min gradient's scatter, threads over column ranges (``spmm.scatter_columns``),
        when nothing is broadcast (the copy ops; binary ops whose operand has the output's shape)."""
        if tuple(values.shape[1:]) != tuple(feature_shape) or values.dtype not in SUPPORTED_DTYPES:
            return super().scatter_at_rows(values, rows, num_rows, feature_shape)
        spmm = _kernels()[0]
        width = math.prod(feature_shape)
        out = alloc.zeros((num_rows,) + tuple(feature_shape), values.dtype)
        if width and values.shape[0] and num_rows:  # no rows: nothing to add to (and nothing to prefetch)
            with threads_for(values.numel()):
                spmm.scatter_columns(_column_parts(width), _np(rows.reshape(rows.shape[0], width)),
                                     _np(values.reshape(values.shape[0], width)), _np(out.view(num_rows, width)))
        return out

    # ------------------------------------------------------------------ g-SDDMM
    def gsddmm(self, g: GraphTensors, op: str, lhs, rhs, lhs_target: str, rhs_target: str) -> Tensor:
        if op in ("copy_lhs", "copy_rhs") or g.num_edges == 0:
            return gsddmm_by_gather(g, op, lhs, rhs, lhs_target, rhs_target)
        fl, fr = tuple(lhs.shape[1:]), tuple(rhs.shape[1:])
        features = gsddmm_features(op, lhs, rhs)
        out = alloc.empty((g.num_edges,) + features, lhs.dtype)
        if math.prod(features) == 0 or lhs.shape[0] == 0 or rhs.shape[0] == 0:
            return gsddmm_by_gather(g, op, lhs, rhs, lhs_target, rhs_target)
        with threads_for(g.num_edges * math.prod(features) * (fl[-1] if op == "dot" else 1)):
            return self._gsddmm_kernels(g, op, lhs, rhs, lhs_target, rhs_target, fl, fr, features, out)

    def _gsddmm_kernels(self, g, op, lhs, rhs, lhs_target, rhs_target, fl, fr, features, out):
        _, sddmm, _, _, messages = _kernels()
        rows_l, rows_r = _rows_of(g, lhs_target), _rows_of(g, rhs_target)
        if op == "dot":
            width = fl[-1]
            slices = math.prod(features)
            out2 = _np(out.view(g.num_edges, slices))
            if fl == fr:
                sddmm.dot_same_shape(rows_l, rows_r, _np(lhs.reshape(lhs.shape[0], slices, width)),
                                     _np(rhs.reshape(rhs.shape[0], slices, width)), out2)
            else:
                full = features[:-1] + (width,)
                sddmm.dot_broadcast(rows_l, rows_r, _np(lhs.reshape(lhs.shape[0], -1)),
                                    _np(rhs.reshape(rhs.shape[0], -1)), _offsets(fl, full), _offsets(fr, full),
                                    width, out2)
            return out
        width = math.prod(features)
        if fl == fr == features:
            sddmm.binary_same_shape(rows_l, rows_r, _np(lhs.reshape(lhs.shape[0], width)),
                                    _np(rhs.reshape(rhs.shape[0], width)), messages.CODES[op],
                                    _np(out.view(g.num_edges, width)))
            return out
        sddmm.binary(rows_l, rows_r, _np(lhs.reshape(lhs.shape[0], -1)), _np(rhs.reshape(rhs.shape[0], -1)),
                     _offsets(fl, features), _offsets(fr, features), messages.CODES[op],
                     _np(out.view(g.num_edges, width)))
        return out

    # ------------------------------------------------------------------ fused ops
    def edge_softmax(self, g: GraphTensors, scores: Tensor) -> Tensor:
        _, _, softmax, _, _ = _kernels()
        out = alloc.empty(tuple(scores.shape), scores.dtype)
        width = math.prod(scores.shape[1:])
        if g.num_edges and width:
            with threads_for(g.num_edges * width):
                blocks, ptr, _, eid = _in_plan(g)
                softmax.edge_softmax(blocks, ptr, eid,
                                     _np(scores.reshape(g.num_edges, width)),
                                     _np(out.view(g.num_edges, width)))
        return out

    def gat_attention(self, g, h, el, er, edge_scores, negative_slope, edge_mask):
        if h.shape[2] == 0 or g.num_edges == 0:
            return super().gat_attention(g, h, el, er, edge_scores, negative_slope, edge_mask)
        _, _, _, gat, _ = _kernels()
        out = alloc.empty((g.num_dst,) + tuple(h.shape[1:]), h.dtype)  # the kernel writes every row
        row_max = alloc.empty((g.num_dst, h.shape[1]), h.dtype)
        row_sum = alloc.empty((g.num_dst, h.shape[1]), h.dtype)
        dummy = np.zeros((1, 1), dtype=_np(h[:0]).dtype)
        with threads_for(g.num_edges * h[0].numel()):
            gat.forward(*_in_plan(g), _np(h), _np(el), _np(er),
                        _np(edge_scores) if edge_scores is not None else dummy, edge_scores is not None,
                        _np(edge_mask) if edge_mask is not None else dummy, edge_mask is not None,
                        float(negative_slope), _np(out), _np(row_max), _np(row_sum))
        return out, row_max, row_sum

    def gat_attention_backward(self, g, h, el, er, edge_scores, negative_slope, edge_mask, out, row_max,
                               row_sum, grad_out, need):
        """Fused backward in two node-parallel passes (see unigraph.kernels.cpu.gat)."""
        if h.shape[2] == 0 or g.num_edges == 0:  # unigraph.ops.custom sends these to the composite formulas
            raise ValueError(f"the fused gat_attention backward needs edges and features; got {g.num_edges} edges "
                             f"and {h.shape[2]} features per head")
        _, _, _, gat, _ = _kernels()
        heads = h.shape[1]
        dummy = np.zeros((1, 1), dtype=_np(h[:0]).dtype)
        # every row of these is written by the kernels; dz and kept are in in-CSR slot order
        d_er = alloc.empty((g.num_dst, heads), h.dtype)
        dz = alloc.empty((g.num_edges, heads), h.dtype)
        kept = alloc.empty((g.num_edges, heads), h.dtype)
        dh = alloc.empty(tuple(h.shape), h.dtype) if need[0] else None
        d_el = alloc.empty((g.num_src, heads), h.dtype)
        with threads_for(g.num_edges * h[0].numel()):
            gat.backward_by_destination(
                *_in_plan(g), _np(h), _np(el), _np(er),
                _np(edge_scores) if edge_scores is not None else dummy, edge_scores is not None,
                _np(edge_mask) if edge_mask is not None else dummy, edge_mask is not None, float(negative_slope),
                _np(out), _np(row_max), _np(row_sum), _np(grad_out), _np(d_er), _np(dz), _np(kept))
            blocks, ptr, dst, _ = _in_plan(g.reverse())
            gat.backward_by_source(blocks, ptr, dst,
                                   in_slots(g.out_eid, g.in_eid), _np(grad_out), _np(dz), _np(kept), need[0],
                                   _np(dh) if dh is not None else _np(grad_out[:0]), _np(d_el))
        d_edge = None
        if need[3]:  # slot order -> edge order
            d_edge = torch.empty_like(dz).index_copy_(0, g.in_eid, dz)
        return dh, (d_el if need[1] else None), (d_er if need[2] else None), d_edge
