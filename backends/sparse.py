"""``sparse``: DGL-style generalized sparse-dense products over the in-CSR.

* g-SpMM, node-parallel over destination rows. ``copy_u`` and ``u_mul_e`` with an edge weight per
  head (``e`` varying only along leading feature dims, as GAT's ``[E, H, 1]``) are true SpMMs:
  ``torch.sparse.mm`` on a CSR matrix for sum (the fastest sum kernel in torch on CPU),
  torch-sparse's ``spmm_max``/``spmm_min`` for max/min (they return the arg-extreme CSR slot).
  Other ops build messages in CSR order and reduce contiguous segments (``torch.segment_reduce``).
* g-SDDMM, edge-parallel: gather both operands per edge, one broadcast op (see ``gsddmm``).

torch-sparse's ``spmm_max``/``spmm_min`` skip NaN and start from the lowest finite value, so a
row whose messages are all -inf comes back as -3.4e38: they run only on finite operands, and a
result at that sentinel (an overflowing product) is recomputed by the segment reduce, which
keeps the semantics of :mod:`unigraph.backends.base`. Half-precision sums accumulate in float32
and come back in it (the front door rounds once).

Backward passes come from :mod:`unigraph.ops.gradients`: g-SpMM/g-SDDMM on the reverse graph,
whose in-CSR is this graph's cached out-CSR, as in the DGL paper.
"""
from __future__ import annotations

import functools
import importlib.util
import warnings

import torch
from torch import Tensor

from unigraph.backends.base import (
    Availability, Backend, Request, apply_binary, arg_extreme_edges, gsddmm_by_gather, per_slice_plan,
    statistics_dtype, take_or_minus_one)
from unigraph.finite import all_finite
from unigraph.structure import GraphTensors

# Above this many per-head weight slices one SpMM per slice costs more than a segment reduce.
MAX_SPMM_SLICES = 16
# Dtypes torch's CPU sparse kernels implement; half precision takes the segment path there.
SPARSE_KERNEL_DTYPES = (torch.float32, torch.float64)


@functools.lru_cache(maxsize=1)
def _torch_sparse():
    """The torch_sparse module, or None. Asked on every call (estimates, kernels) and kept: where
    it is not installed, each ``find_spec`` searched ``sys.path`` again (~150 us a call on the
    H200 machine's host, a third of a mini-batch layer's aggregation there)."""
    if importlib.util.find_spec("torch_sparse") is None:
        return None
    import torch_sparse
    return torch_sparse


def _csr_matrix(g: GraphTensors, values: Tensor) -> Tensor:
    """The in-edges as a CSR matrix, ``num_dst`` rows or more: cuSPARSE refuses a matrix with more
    stored entries than cells (a multigraph on few nodes: 2 edges 0 -> 0), so such a graph gets
    empty rows appended until ``rows x num_src >= num_edges``; the caller keeps the first
    ``num_dst`` rows of the product. Only graphs that small in one dimension pay for it."""
    rows, ptr = g.num_dst, g.in_ptr
    if g.num_edges > rows * g.num_src:
        rows = -(-g.num_edges // g.num_src)
        ptr = torch.cat([ptr, ptr[-1:].expand(rows - g.num_dst)])
    with warnings.catch_warnings():  # "sparse CSR support is in beta" is not news to us
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(ptr, g.in_src, values, size=(rows, g.num_src))


class SparseBackend(Backend):
    name = "sparse"
    summary = "DGL-style g-SpMM over CSR and g-SDDMM (torch.sparse / torch-sparse)"

    def availability(self) -> Availability:
        ts = _torch_sparse()
        detail = "torch.sparse CSR" + (f" + torch-sparse {ts.__version__}" if ts else " (torch-sparse not installed)")
        return Availability(True, detail)

    def estimate_us(self, stats, request: Request) -> float:
        from unigraph.backends.cost_model import estimate_sparse
        return estimate_sparse(stats, request, _torch_sparse() is not None)

    # ------------------------------------------------------------------ g-SpMM
    def gspmm(self, g: GraphTensors, op: str, reduce: str, u: Tensor | None, e: Tensor | None):
        plan = per_slice_plan(op, u, e, MAX_SPMM_SLICES) if u is not None and u.dtype in SPARSE_KERNEL_DTYPES else None
        # torch-sparse divides by the row count of its dense operand (SIGFPE when it is empty):
        # empty graphs and empty features take the segment path, which handles them.
        nonempty = g.num_edges > 0 and plan is not None and plan[0].numel() > 0
        if nonempty and reduce == "sum":
            return self._spmm(g, reduce, *plan)
        if nonempty and _torch_sparse() is not None and all_finite(plan[0], plan[1]):
            result = self._spmm(g, reduce, *plan)
            sentinel = torch.finfo(result[0].dtype).min if reduce == "max" else torch.finfo(result[0].dtype).max
            if not bool((result[0] == sentinel).any()):  # else a row may be all -inf/+inf: recompute
                return result
        return self._segment_reduce(g, op, reduce, u, e)

    def _spmm(self, g: GraphTensors, reduce: str, mat: Tensor, weights: Tensor | None, out_features: tuple):
        num_slices = mat.shape[1]
        csr_weights = weights.index_select(0, g.in_eid) if weights is not None else None
        outs, args = [], []
        for p in range(num_slices):
            dense = mat[:, p].contiguous()
            values = csr_weights[:, p].contiguous() if csr_weights is not None else None
            if reduce == "sum":
                ones = values if values is not None else dense.new_ones(g.num_edges)
                outs.append(torch.sparse.mm(_csr_matrix(g, ones), dense)[: g.num_dst])
            else:
                kernel = torch.ops.torch_sparse.spmm_max if reduce == "max" else torch.ops.torch_sparse.spmm_min
                out, slot = kernel(g.in_ptr, g.in_src, values, dense)  # slot: CSR position, E if none
                outs.append(out)
                args.append(slot)
        out = torch.stack(outs, dim=1) if num_slices > 1 else outs[0].unsqueeze(1)
        out = out.reshape((g.num_dst,) + out_features)
        if reduce == "sum":
            return out, None, None
        slot = torch.stack(args, dim=1).reshape(out.shape)
        slot = torch.where(slot < g.num_edges, slot, -1)  # torch-sparse marks "no edge" with E
        return out, take_or_minus_one(g.in_src, slot), take_or_minus_one(g.in_eid, slot)

    def _segment_reduce(self, g: GraphTensors, op: str, reduce: str, u: Tensor | None, e: Tensor | None):
        """Messages in CSR order (contiguous per destination), then one segment reduce."""
        u_rows = u.index_select(0, g.in_src) if u is not None else None
        e_rows = e.index_select(0, g.in_eid) if e is not None else None
        if op == "copy_u":
            messages = u_rows
        elif op == "copy_e":
            messages = e_rows
        else:
            messages = apply_binary(op[2:5], u_rows, e_rows)
        messages = messages.contiguous()
        if g.num_edges == 0:
            out = messages.new_zeros((g.num_dst,) + tuple(messages.shape[1:]),
                                     dtype=statistics_dtype(messages.dtype) if reduce == "sum" else messages.dtype)
        elif reduce == "sum":  # half precision accumulates in float32, returned unrounded
            wide = messages.to(statistics_dtype(messages.dtype))
            out = torch.segment_reduce(wide, "sum", offsets=g.in_ptr, axis=0)
        else:
            out = torch.segment_reduce(messages, reduce, offsets=g.in_ptr, axis=0)
            # empty segments come back as -inf/+inf; the contract says 0
            empty = (g.in_degrees() == 0).view(-1, *([1] * (out.dim() - 1)))
            out = torch.where(empty, torch.zeros((), dtype=out.dtype, device=out.device), out)
        if reduce == "sum":
            return out, None, None
        csr_rows = g.dst.index_select(0, g.in_eid)
        slot = arg_extreme_edges(messages, csr_rows, out, g.num_dst)
        return out, take_or_minus_one(g.in_src, slot), take_or_minus_one(g.in_eid, slot)

    # ------------------------------------------------------------------ g-SDDMM
    def gsddmm(self, g: GraphTensors, op: str, lhs, rhs, lhs_target: str, rhs_target: str) -> Tensor:
        # torch.sparse.sampled_addmm would compute `dot` at the nonzeros only, but it coalesces
        # repeated column indices (multi-edges) and can resize the index tensors it is given in
        # place, so it is not safe on multigraphs; edge-parallel gathering is.
        return gsddmm_by_gather(g, op, lhs, rhs, lhs_target, rhs_target)
