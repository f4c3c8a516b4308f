r"""GAT's attention aggregation fused into one kernel, and its backward in two.

Forward, per destination ``v`` and head ``h`` (one program per row, head block and feature block):

.. math::
    z_e = el_{u} + er_{v} \,(+\, ee_e), \quad s_e = \mathrm{LeakyReLU}(z_e), \quad
    a_e = \frac{\exp(s_e - M_v)}{L_v}, \quad out_v = \sum_{e=(u,v)} a_e\, m_e\, h_u

computed in one pass over the in-edges with the online softmax of FlashAttention: a running
maximum ``M``, a running normalizer ``L`` and a running weighted sum ``acc`` are rescaled by
``exp(M_old - M_new)`` whenever the maximum grows, and ``out = acc / L`` at the end. Scores live
only in registers, a ``[BLOCK_E, BLOCK_H]`` tile at a time: no E x H score tensor and no E x H x F
message tensor is ever written. ``M`` and ``L`` are returned (``row_max``, ``row_sum``; 0 for
rows without in-edges) so the backward pass can recompute every ``a_e`` exactly. ``m`` is the
optional dropout mask; the softmax normalizer ``L`` sums the unmasked weights, as in the
composite ``edge_softmax`` then multiply. ``M`` and ``L`` are kept and returned in the
accumulation dtype (float32 for half precision): a hub's ``L`` overflows float16, and ``M`` rounded
to float16 would shift every recomputed weight of the row.

Backward (the formulas of :func:`unigraph.ops.gradients.gat_attention_backward`):

* :func:`gat_backward_scores_kernel`, node-parallel over the in-CSR: recomputes ``a_e``, forms
  ``da_e = m_e <h_u, go_v>`` and ``ds_e = a_e (da_e - <out_v, go_v>)`` (the softmax backward
  needs no second pass because ``sum_e a_e da_e = <out_v, go_v>``), ``dz_e = ds_e lrelu'(z_e)``;
  writes ``dz`` (E x H: the gradient of ``edge_scores``) and sums it per row into ``d_er``.
* :func:`gat_backward_h_kernel`, node-parallel over the out-CSR (the reverse graph): recomputes
  ``a_e`` of each out-edge and sums ``a_e m_e go_v`` into ``dh_u``.
* ``d_el`` is ``dz`` summed over out-edges: the node-parallel g-SpMM ``copy_e`` on the reverse graph.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from unigraph.kernels.triton.messages import csr_row
from unigraph.kernels.triton.runtime import (
    INTERPRETER_BLOCK_E, accumulator, accumulator_torch, check_launchable, checked_grid, degree_bucket, feature_block,
    needs_int64, pointer_or, tuning)
from unigraph.kernels.triton.spmm_node import spmm_node

# Heads per program: GAT uses 1-16; more are split over the grid.
MAX_BLOCK_H = 16

CONFIGS = [
    triton.Config({"BLOCK_E": 8}, num_warps=2),
    triton.Config({"BLOCK_E": 16}, num_warps=4),
    triton.Config({"BLOCK_E": 32}, num_warps=4),
]
# A program holds a [BLOCK_E, BLOCK_H, BLOCK_F] tile of gathered h rows: beyond ~8K elements it
# spills registers, so larger tiles are not tried.
MAX_TILE = 8192


def _fitting_configs(configs, named_args, **meta):
    fitting = [c for c in configs if c.kwargs["BLOCK_E"] * meta["BLOCK_H"] * meta["BLOCK_F"] <= MAX_TILE]
    return fitting or [min(configs, key=lambda c: c.kwargs["BLOCK_E"])]


PRUNE = {"early_config_prune": _fitting_configs}
# What changes the best edge chunk: the tile's shape, the row lengths, and which optional terms it loads.
KEY = ["heads", "feats", "degree_bucket", "HAS_EDGE_SCORES", "HAS_MASK", "INDEX_64"]


@triton.jit
def _leaky_relu(z, negative_slope):
    return tl.where(z > 0, z, z * negative_slope)


@triton.jit
def _leaky_relu_grad(z, grad, negative_slope):
    return tl.where(z > 0, grad, grad * negative_slope)


@triton.jit
def _attention_logits(edge_side_ptr, edge_side_rows, row_term, ee_ptr, eid, heads, hs, pair_mask,
                      negative_slope, HAS_EDGE_SCORES: tl.constexpr, ACC: tl.constexpr):
    """``(z, lrelu(z))`` for a ``[BLOCK_E, BLOCK_H]`` tile of edges and heads: ``row_term`` is
    the program's own node's score (``er_v`` walking in-edges, ``el_u`` walking out-edges),
    ``edge_side_rows`` the other endpoint of each edge."""
    z = tl.load(edge_side_ptr + edge_side_rows[:, None] * heads + hs[None, :], mask=pair_mask, other=0).to(ACC)
    z += row_term[None, :]
    if HAS_EDGE_SCORES:
        z += tl.load(ee_ptr + eid[:, None] * heads + hs[None, :], mask=pair_mask, other=0).to(ACC)
    return z, _leaky_relu(z, negative_slope)


@triton.autotune(configs=tuning(CONFIGS, BLOCK_E=INTERPRETER_BLOCK_E), key=KEY,
                 prune_configs_by=PRUNE)
@triton.jit
def gat_forward_kernel(
    # pointers
    ptr_ptr, src_ptr, eid_ptr, h_ptr, el_ptr, er_ptr, ee_ptr, mask_ptr, out_ptr, max_ptr, sum_ptr,
    # sizes
    heads, feats, degree_bucket, negative_slope,
    # meta-parameters
    HAS_EDGE_SCORES: tl.constexpr, HAS_MASK: tl.constexpr, ACC: tl.constexpr, INDEX_64: tl.constexpr,
    BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_F: tl.constexpr,
):
    row, start, end = csr_row(ptr_ptr, INDEX_64)
    hs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_mask = hs < heads
    fs = tl.program_id(2) * BLOCK_F + tl.arange(0, BLOCK_F)
    f_mask = fs < feats

    er_v = tl.load(er_ptr + row * heads + hs, mask=h_mask, other=0).to(ACC)
    run_max = tl.full([BLOCK_H], -float("inf"), dtype=ACC)
    run_sum = tl.zeros([BLOCK_H], dtype=ACC)
    acc = tl.zeros([BLOCK_H, BLOCK_F], dtype=ACC)
    for first in range(start, end, BLOCK_E):
        pos = first + tl.arange(0, BLOCK_E)
        pos_mask = pos < end
        pair_mask = pos_mask[:, None] & h_mask[None, :]
        src = tl.load(src_ptr + pos, mask=pos_mask, other=0)
        eid = tl.load(eid_ptr + pos, mask=pos_mask, other=0)
        if not INDEX_64:
            src = src.to(tl.int32)
            eid = eid.to(tl.int32)
        _z, s = _attention_logits(el_ptr, src, er_v, ee_ptr, eid, heads, hs, pair_mask, negative_slope,
                                  HAS_EDGE_SCORES, ACC)
        s = tl.where(pos_mask[:, None], s, -float("inf"))
        new_max = tl.maximum(run_max, tl.max(s, axis=0))
        rescale = tl.exp(run_max - new_max)  # 0 on the first chunk (run_max = -inf)
        p = tl.exp(s - new_max[None, :])
        run_sum = run_sum * rescale + tl.sum(p, axis=0)
        if HAS_MASK:
            p *= tl.load(mask_ptr + eid[:, None] * heads + hs[None, :], mask=pair_mask, other=0).to(ACC)
        rows = src[:, None, None] * (heads * feats) + hs[None, :, None] * feats + fs[None, None, :]
        hv = tl.load(h_ptr + rows, mask=pair_mask[:, :, None] & f_mask[None, None, :], other=0).to(ACC)
        acc = acc * rescale[:, None] + tl.sum(p[:, :, None] * hv, axis=0)
        run_max = new_max

    has_edges = run_sum > 0
    out = acc / tl.where(has_edges, run_sum, 1.0)[:, None]
    out_at = row * (heads * feats) + hs[:, None] * feats + fs[None, :]
    tl.store(out_ptr + out_at, out.to(out_ptr.dtype.element_ty), mask=h_mask[:, None] & f_mask[None, :])
    if tl.program_id(2) == 0:  # one feature block writes the row statistics
        tl.store(max_ptr + row * heads + hs, tl.where(has_edges, run_max, 0.0).to(max_ptr.dtype.element_ty),
                 mask=h_mask)
        tl.store(sum_ptr + row * heads + hs, run_sum.to(sum_ptr.dtype.element_ty), mask=h_mask)


@triton.autotune(configs=tuning(CONFIGS, BLOCK_E=INTERPRETER_BLOCK_E), key=KEY,
                 prune_configs_by=PRUNE)
@triton.jit
def gat_backward_scores_kernel(
    # pointers
    ptr_ptr, src_ptr, eid_ptr, h_ptr, el_ptr, er_ptr, ee_ptr, mask_ptr, out_ptr, max_ptr, sum_ptr, go_ptr,
    dz_ptr, d_er_ptr,
    # sizes
    heads, feats, degree_bucket, negative_slope,
    # meta-parameters
    HAS_EDGE_SCORES: tl.constexpr, HAS_MASK: tl.constexpr, ACC: tl.constexpr, INDEX_64: tl.constexpr,
    BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_F: tl.constexpr,
):
    row, start, end = csr_row(ptr_ptr, INDEX_64)
    hs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_mask = hs < heads
    row_at = row * (heads * feats) + hs[:, None] * feats  # [BLOCK_H, 1]: this row's features

    centre = tl.zeros([BLOCK_H], dtype=ACC)  # <out_v, go_v> per head
    for f0 in range(0, feats, BLOCK_F):
        fs = f0 + tl.arange(0, BLOCK_F)
        hf_mask = h_mask[:, None] & (fs < feats)[None, :]
        o = tl.load(out_ptr + row_at + fs[None, :], mask=hf_mask, other=0).to(ACC)
        g = tl.load(go_ptr + row_at + fs[None, :], mask=hf_mask, other=0).to(ACC)
        centre += tl.sum(o * g, axis=1)
    row_max = tl.load(max_ptr + row * heads + hs, mask=h_mask, other=0).to(ACC)
    row_sum = tl.load(sum_ptr + row * heads + hs, mask=h_mask, other=1).to(ACC)
    er_v = tl.load(er_ptr + row * heads + hs, mask=h_mask, other=0).to(ACC)

    d_er = tl.zeros([BLOCK_H], dtype=ACC)
    for first in range(start, end, BLOCK_E):
        pos = first + tl.arange(0, BLOCK_E)
        pos_mask = pos < end
        pair_mask = pos_mask[:, None] & h_mask[None, :]
        src = tl.load(src_ptr + pos, mask=pos_mask, other=0)
        eid = tl.load(eid_ptr + pos, mask=pos_mask, other=0)
        if not INDEX_64:
            src = src.to(tl.int32)
            eid = eid.to(tl.int32)
        z, s = _attention_logits(el_ptr, src, er_v, ee_ptr, eid, heads, hs, pair_mask, negative_slope,
                                 HAS_EDGE_SCORES, ACC)
        a = tl.exp(s - row_max[None, :]) / row_sum[None, :]
        d_a = tl.zeros([BLOCK_E, BLOCK_H], dtype=ACC)  # <h_u, go_v> per edge and head
        for f0 in range(0, feats, BLOCK_F):
            fs = f0 + tl.arange(0, BLOCK_F)
            f_mask = fs < feats
            hv = tl.load(h_ptr + src[:, None, None] * (heads * feats) + hs[None, :, None] * feats + fs[None, None, :],
                         mask=pair_mask[:, :, None] & f_mask[None, None, :], other=0).to(ACC)
            g = tl.load(go_ptr + row_at + fs[None, :], mask=h_mask[:, None] & f_mask[None, :], other=0).to(ACC)
            d_a += tl.sum(hv * g[None, :, :], axis=2)
        if HAS_MASK:
            d_a *= tl.load(mask_ptr + eid[:, None] * heads + hs[None, :], mask=pair_mask, other=0).to(ACC)
        d_s = a * (d_a - centre[None, :])
        dz = tl.where(pair_mask, _leaky_relu_grad(z, d_s, negative_slope), 0.0)
        tl.store(dz_ptr + eid[:, None] * heads + hs[None, :], dz.to(dz_ptr.dtype.element_ty), mask=pair_mask)
        d_er += tl.sum(dz, axis=0)
    tl.store(d_er_ptr + row * heads + hs, d_er.to(d_er_ptr.dtype.element_ty), mask=h_mask)


@triton.autotune(configs=tuning(CONFIGS, BLOCK_E=INTERPRETER_BLOCK_E), key=KEY,
                 prune_configs_by=PRUNE)
@triton.jit
def gat_backward_h_kernel(
    # pointers
    ptr_ptr, dst_ptr, eid_ptr, el_ptr, er_ptr, ee_ptr, mask_ptr, max_ptr, sum_ptr, go_ptr, dh_ptr,
    # sizes
    heads, feats, degree_bucket, negative_slope,
    # meta-parameters
    HAS_EDGE_SCORES: tl.constexpr, HAS_MASK: tl.constexpr, ACC: tl.constexpr, INDEX_64: tl.constexpr,
    BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_F: tl.constexpr,
):
    row, start, end = csr_row(ptr_ptr, INDEX_64)  # a source node: this kernel walks the out-CSR
    hs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_mask = hs < heads
    fs = tl.program_id(2) * BLOCK_F + tl.arange(0, BLOCK_F)
    f_mask = fs < feats

    el_u = tl.load(el_ptr + row * heads + hs, mask=h_mask, other=0).to(ACC)
    acc = tl.zeros([BLOCK_H, BLOCK_F], dtype=ACC)
    for first in range(start, end, BLOCK_E):
        pos = first + tl.arange(0, BLOCK_E)
        pos_mask = pos < end
        pair_mask = pos_mask[:, None] & h_mask[None, :]
        dst = tl.load(dst_ptr + pos, mask=pos_mask, other=0)
        eid = tl.load(eid_ptr + pos, mask=pos_mask, other=0)
        if not INDEX_64:
            dst = dst.to(tl.int32)
            eid = eid.to(tl.int32)
        _z, s = _attention_logits(er_ptr, dst, el_u, ee_ptr, eid, heads, hs, pair_mask, negative_slope,
                                  HAS_EDGE_SCORES, ACC)
        stats_at = dst[:, None] * heads + hs[None, :]
        row_max = tl.load(max_ptr + stats_at, mask=pair_mask, other=0).to(ACC)
        row_sum = tl.load(sum_ptr + stats_at, mask=pair_mask, other=1).to(ACC)
        a = tl.where(pair_mask, tl.exp(s - row_max) / row_sum, 0.0)
        if HAS_MASK:
            a *= tl.load(mask_ptr + eid[:, None] * heads + hs[None, :], mask=pair_mask, other=0).to(ACC)
        g = tl.load(go_ptr + dst[:, None, None] * (heads * feats) + hs[None, :, None] * feats + fs[None, None, :],
                    mask=pair_mask[:, :, None] & f_mask[None, None, :], other=0).to(ACC)
        acc += tl.sum(a[:, :, None] * g, axis=0)
    dh_at = row * (heads * feats) + hs[:, None] * feats + fs[None, :]
    tl.store(dh_ptr + dh_at, acc.to(dh_ptr.dtype.element_ty), mask=h_mask[:, None] & f_mask[None, :])


# ---------------------------------------------------------------------- launchers
def _blocks(heads: int, feats: int) -> tuple[int, int]:
    """(BLOCK_H, BLOCK_F) with at most MAX_TILE / 8 elements per edge, so that the smallest edge
    chunk fits (MAX_TILE)."""
    block_h = min(triton.next_power_of_2(max(heads, 1)), MAX_BLOCK_H)
    return block_h, min(feature_block(feats), max(1, MAX_TILE // 8 // block_h))


def _contiguous(*tensors: Tensor | None) -> list[Tensor | None]:
    return [t.contiguous() if t is not None else None for t in tensors]


def gat_forward(in_ptr: Tensor, in_src: Tensor, in_eid: Tensor, num_dst: int, h: Tensor, el: Tensor, er: Tensor,
                edge_scores: Tensor | None, negative_slope: float,
                edge_mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Fused GAT aggregation over the in-CSR; shapes as in :func:`unigraph.ops.gat_attention`.

    Returns ``(out [num_dst, H, F], row_max [num_dst, H], row_sum [num_dst, H])``.
    """
    check_launchable(in_ptr, h)
    h, el, er, edge_scores, edge_mask = _contiguous(h, el, er, edge_scores, edge_mask)
    heads, feats = h.shape[1], h.shape[2]
    out = torch.empty((num_dst, heads, feats), dtype=h.dtype, device=h.device)
    # the statistics stay in the accumulation dtype: a hub's row sum overflows float16
    row_max = torch.zeros((num_dst, heads), dtype=accumulator_torch(h.dtype), device=h.device)
    row_sum = torch.zeros((num_dst, heads), dtype=accumulator_torch(h.dtype), device=h.device)
    if num_dst == 0 or heads == 0:
        return out, row_max, row_sum
    block_h, block_f = _blocks(heads, feats)
    num_edges = in_src.numel()
    grid = checked_grid(num_dst, triton.cdiv(heads, block_h), max(triton.cdiv(feats, block_f), 1))
    gat_forward_kernel[grid](
        in_ptr, in_src, in_eid, h, el, er, pointer_or(edge_scores, el), pointer_or(edge_mask, el), out, row_max,
        row_sum, heads, feats, degree_bucket(num_edges, num_dst), float(negative_slope),
        HAS_EDGE_SCORES=edge_scores is not None, HAS_MASK=edge_mask is not None, ACC=accumulator(h.dtype),
        INDEX_64=needs_int64(h.numel(), out.numel(), num_edges * heads), BLOCK_H=block_h, BLOCK_F=block_f)
    return out, row_max, row_sum


def gat_backward(in_csr: tuple[Tensor, Tensor, Tensor], out_csr: tuple[Tensor, Tensor, Tensor], num_src: int,
                 num_dst: int, h: Tensor, el: Tensor, er: Tensor, edge_scores: Tensor | None, negative_slope: float,
                 edge_mask: Tensor | None, out: Tensor, row_max: Tensor, row_sum: Tensor, go: Tensor,
                 need: tuple[bool, bool, bool, bool]):
    """Gradients ``(dh, d_el, d_er, d_edge_scores)`` of :func:`gat_forward` (None where not
    ``need``-ed). ``in_csr``/``out_csr`` are ``(ptr, neighbour, eid)`` by destination / by source."""
    check_launchable(h, go)
    h, el, er, edge_scores, edge_mask, out, row_max, row_sum, go = _contiguous(
        h, el, er, edge_scores, edge_mask, out, row_max, row_sum, go)
    heads, feats = h.shape[1], h.shape[2]
    num_edges = in_csr[1].numel()
    block_h, block_f = _blocks(heads, feats)
    meta = dict(HAS_EDGE_SCORES=edge_scores is not None, HAS_MASK=edge_mask is not None, ACC=accumulator(h.dtype),
                INDEX_64=needs_int64(h.numel(), out.numel(), num_edges * heads), BLOCK_H=block_h, BLOCK_F=block_f)
    ee, mask = pointer_or(edge_scores, el), pointer_or(edge_mask, el)
    dh = d_el = d_er = dz = None
    if need[0]:
        dh = torch.empty_like(h)
        if dh.numel():
            gat_backward_h_kernel[checked_grid(num_src, triton.cdiv(heads, block_h), triton.cdiv(feats, block_f))](
                *out_csr, el, er, ee, mask, row_max, row_sum, go, dh,
                heads, feats, degree_bucket(num_edges, num_src), float(negative_slope), **meta)
    if any(need[1:]):
        dz = torch.zeros((num_edges, heads), dtype=el.dtype, device=el.device)
        d_er = torch.zeros_like(er)
        if num_edges and heads:
            gat_backward_scores_kernel[checked_grid(num_dst, triton.cdiv(heads, block_h))](
                *in_csr, h, el, er, ee, mask, out, row_max, row_sum, go, dz, d_er,
                heads, feats, degree_bucket(num_edges, num_dst), float(negative_slope), **meta)
        if need[1]:
            d_el = spmm_node(*out_csr, num_src, "copy_e", "sum", None, dz, (heads,), None, None)[0]
    return dh, d_el, (d_er if need[2] else None), (dz if need[3] else None)
