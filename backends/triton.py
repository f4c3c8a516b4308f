"""``triton_node``, ``triton_edge`` and ``triton``: the fused Triton kernels (``unigraph.kernels.triton``).

Three registered names over one kernel set; they differ in how g-SpMM is parallelized:

* ``triton_node``: g-SpMM node-parallel over the in-CSR (one program per destination row, no
  atomics, deterministic); fused edge softmax; GAT attention fused into one forward kernel
  (online softmax, no E x H scores) and a two-kernel fused backward. Best when degrees are
  balanced.
* ``triton_edge``: g-SpMM edge-parallel with atomics (every program the same amount of work);
  edge softmax and GAT composed from the edge-parallel primitives, so no program ever walks a
  whole row. Best when one hub holds a large share of the edges. Max/min need float32/float64
  (Triton has no half-precision atomic max/min).
* ``triton``: the family. Asked for by name, the selector resolves it per call to whichever of
  the two the cost model estimates faster (the largest in-degree decides, see
  :mod:`unigraph.backends.cost_model`) and runs that. ``auto`` compares ``triton_node`` and
  ``triton_edge`` directly, so it skips this name.

g-SDDMM is edge-parallel in all three. Backward passes are the shared formulas of
:mod:`unigraph.ops.gradients` (forward kernels on the reverse graph), except GAT's fused
backward on ``triton_node`` (``triton`` included).

Where they run: on CUDA tensors, compiled. On the CPU only in Triton's interpreter, which needs
``TRITON_INTERPRET=1`` in the environment before the kernels are first imported (the tests do
this); it is slow, so ``slow_on_cpu`` keeps the core property tests off it and the cost model
never lets ``auto`` pick it on the CPU.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys

import torch
from torch import Tensor

from unigraph.backends.base import Availability, Backend, Request
from unigraph.backends.cost_model import estimate_triton
from unigraph.structure import GraphTensors

EXTREME_ATOMIC_DTYPES = (torch.float32, torch.float64)


def interpreter_requested() -> bool:
    """``TRITON_INTERPRET`` as Triton parses it ("1", "true" or "on", any case)."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "on")


def _kernels(module: str):
    """A kernel module of ``unigraph.kernels.triton``, imported on first use: importing triton
    costs ~0.25 s, and Triton decides compiled vs interpreted at that moment."""
    return importlib.import_module(f"unigraph.kernels.triton.{module}")


class _TritonKernels(Backend):
    """What the Triton backends share: availability, device rules, g-SDDMM."""

    slow_on_cpu = True  # on the CPU the kernels run in Triton's interpreter
    strategy = "node"

    def availability(self) -> Availability:
        if importlib.util.find_spec("triton") is None:
            return Availability(False, "triton is not installed (pip install triton, or the 'triton' extra)")
        version = importlib.metadata.version("triton")
        if torch.cuda.is_available():
            mode = " (interpreted: TRITON_INTERPRET=1)" if interpreter_requested() else ""
            return Availability(True, f"triton {version} on {torch.cuda.get_device_name(0)}{mode}")
        if interpreter_requested():
            return Availability(True, f"triton {version} in its CPU interpreter (TRITON_INTERPRET=1; slow, for "
                                      "tests)")
        return Availability(False, f"triton {version} is installed but there is no CUDA GPU; TRITON_INTERPRET=1 "
                                   "runs the kernels in Triton's CPU interpreter (slow, for tests)")

    def unsupported_reason(self, request: Request) -> str | None:
        if request.device.type == "cuda":
            return None
        if request.device.type != "cpu":
            return f"Triton kernels run on CUDA GPUs, not on {request.device.type}"
        if not interpreter_requested():
            return ("on the CPU Triton kernels run only in Triton's interpreter, which needs TRITON_INTERPRET=1 "
                    "(slow: for tests)")
        runtime = sys.modules.get("unigraph.kernels.triton.runtime")
        if runtime is not None and not runtime.INTERPRETED:
            return ("the Triton kernels were already compiled for the GPU in this process (TRITON_INTERPRET was "
                    "set after they were first imported)")
        return None

    def estimate_us(self, stats, request: Request) -> float:
        return estimate_triton(stats, request, self.strategy)

    def gsddmm(self, g: GraphTensors, op: str, lhs, rhs, lhs_target: str, rhs_target: str) -> Tensor:
        return _kernels("sddmm").sddmm(g.src, g.dst, op, lhs, rhs, lhs_target, rhs_target)


class TritonNodeBackend(_TritonKernels):
    name = "triton_node"
    summary = "Triton: node-parallel g-SpMM over CSR, fused edge softmax and GAT (forward and backward)"
    strategy = "node"

    def gspmm(self, g: GraphTensors, op: str, reduce: str, u: Tensor | None, e: Tensor | None):
        return _kernels("spmm_node").spmm_node(g.in_ptr, g.in_src, g.in_eid, g.num_dst, op, reduce, u, e)

    def edge_softmax(self, g: GraphTensors, scores: Tensor) -> Tensor:
        return _kernels("edge_softmax").edge_softmax(g.in_ptr, g.in_eid, g.num_dst, scores)

    def gat_attention(self, g: GraphTensors, h, el, er, edge_scores, negative_slope, edge_mask):
        return _kernels("gat").gat_forward(g.in_ptr, g.in_src, g.in_eid, g.num_dst, h, el, er, edge_scores,
                                           negative_slope, edge_mask)

    def gat_attention_backward(self, g: GraphTensors, h, el, er, edge_scores, negative_slope, edge_mask, out,
                               row_max, row_sum, grad_out, need):
        """The two fused backward kernels of :mod:`unigraph.kernels.triton.gat`."""
        return _kernels("gat").gat_backward(
            (g.in_ptr, g.in_src, g.in_eid), (g.out_ptr, g.out_dst, g.out_eid), g.num_src, g.num_dst, h, el, er,
            edge_scores, negative_slope, edge_mask, out, row_max, row_sum, grad_out, need)


class TritonEdgeBackend(_TritonKernels):
    name = "triton_edge"
    summary = "Triton: edge-parallel g-SpMM with atomics (for skewed degrees); softmax and GAT composed from it"
    strategy = "edge"

    def unsupported_reason(self, request: Request) -> str | None:
        reason = super().unsupported_reason(request)
        if reason is not None:
            return reason
        uses_extremes = request.reduce in ("max", "min") or request.kind in ("edge_softmax", "gat_attention")
        if uses_extremes and request.dtype not in EXTREME_ATOMIC_DTYPES:
            what = f"{request.reduce}" if request.kind == "gspmm" else f"{request.kind} (its row maximum)"
            return (f"edge-parallel {what} needs float32 or float64: Triton has no {request.dtype} atomic max/min; "
                    "triton_node runs it")
        return None

    def gspmm(self, g: GraphTensors, op: str, reduce: str, u: Tensor | None, e: Tensor | None):
        return _kernels("spmm_edge").spmm_edge(g.src, g.dst, g.num_dst, op, reduce, u, e)


class TritonBackend(TritonNodeBackend):
    """The family name: the selector runs each call on the variant the cost model prefers."""

    name = "triton"
    summary = "Triton, node- or edge-parallel per call by the cost model (triton_node / triton_edge)"
    variants = ("triton_node", "triton_edge")
    auto_candidate = False  # auto weighs the variants themselves

    def estimate_us(self, stats, request: Request) -> float:
        return min(estimate_triton(stats, request, "node"), estimate_triton(stats, request, "edge"))
