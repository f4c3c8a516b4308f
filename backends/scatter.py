"""``scatter``: PyG-style gather-then-scatter, parallel over edges.

Materializes the E x F message tensor (``u[src] op e``) in edge order, then reduces it into the
destination rows. Uses torch-scatter when it is installed, else torch's own ``index_add_`` and
``scatter_reduce_`` (what PyG does without torch-scatter). Every op, reduce, dtype and device
works; the price is E x F memory traffic, which hurts on dense graphs and wide features.

torch-scatter's max/min skip NaN and report a row whose messages are all -inf (max) as empty,
so they run only on finite messages (one ``isfinite`` pass decides); torch's ``scatter_reduce_``
keeps the semantics of :mod:`unigraph.backends.base` and takes the rest. Half-precision sums
accumulate in float32 and come back in it (the front door rounds once).
"""
from __future__ import annotations

import functools
import importlib.util

import torch
from torch import Tensor

from unigraph.backends.base import (
    Availability, Backend, Request, arg_extreme_edges, edge_messages, gsddmm_by_gather, statistics_dtype,
    take_or_minus_one)
from unigraph.finite import all_finite
from unigraph.structure import GraphTensors


@functools.lru_cache(maxsize=1)
def _torch_scatter():
    """The torch_scatter module, or None. Imported on first use: it loads a C++ extension (asked on
    every call: kept)."""
    if importlib.util.find_spec("torch_scatter") is None:
        return None
    import torch_scatter
    return torch_scatter


class ScatterBackend(Backend):
    name = "scatter"
    summary = "PyG-style gather-then-scatter over edges (torch-scatter or torch native)"

    def availability(self) -> Availability:
        ts = _torch_scatter()
        if ts is not None:
            return Availability(True, f"torch-scatter {ts.__version__}")
        return Availability(True, "torch native index_add_/scatter_reduce_ (torch-scatter not installed)")

    def estimate_us(self, stats, request: Request) -> float:
        from unigraph.backends.cost_model import estimate_scatter
        return estimate_scatter(stats, request, _torch_scatter() is not None)

    def gspmm(self, g: GraphTensors, op: str, reduce: str, u: Tensor | None, e: Tensor | None):
        messages = edge_messages(g, op, u, e)
        out_shape = (g.num_dst,) + tuple(messages.shape[1:])
        ts = _torch_scatter()
        fast = ts is not None and messages.dtype in (torch.float32, torch.float64)
        if reduce == "sum":
            if fast:
                return ts.scatter(messages, g.dst, dim=0, dim_size=g.num_dst, reduce="sum"), None, None
            acc = messages.new_zeros(out_shape, dtype=statistics_dtype(messages.dtype))
            return acc.index_add_(0, g.dst, messages.to(acc.dtype)), None, None  # rounded by the caller
        if fast and all_finite(messages):
            scatter_extreme = ts.scatter_max if reduce == "max" else ts.scatter_min
            out, arg_e = scatter_extreme(messages, g.dst, dim=0, dim_size=g.num_dst)
            arg_e = torch.where(arg_e >= g.num_edges, -1, arg_e)  # torch-scatter marks "no edge" with E
        else:
            index = g.dst.view(-1, *([1] * (messages.dim() - 1))).expand_as(messages)
            out = messages.new_zeros(out_shape).scatter_reduce_(
                0, index, messages, "amax" if reduce == "max" else "amin", include_self=False)
            arg_e = arg_extreme_edges(messages, g.dst, out, g.num_dst)
        return out, take_or_minus_one(g.src, arg_e), arg_e

    def gsddmm(self, g: GraphTensors, op: str, lhs, rhs, lhs_target: str, rhs_target: str) -> Tensor:
        return gsddmm_by_gather(g, op, lhs, rhs, lhs_target, rhs_target)
