"""``triton_node``, ``triton_edge`` and the family ``triton``: the fused Triton kernels (``unigraph.kernels.triton``).

Two backends over one kernel set; they differ in how g-SpMM is parallelized:

* ``triton_node``: g-SpMM node-parallel over the in-CSR (one program per destination row, no
  atomics, deterministic); fused edge softmax; GAT attention fused into one forward kernel
  (online softmax, no E x H scores) and a two-kernel fused backward. Best when degrees are
  balanced.
* ``triton_edge``: g-SpMM edge-parallel with atomics (every program the same amount of work);
  edge softmax and GAT composed from the edge-parallel primitives, so no program ever walks a
  whole row. Best when one hub holds a large share of the edges. g-SpMM max/min need
  float32/float64 (Triton has no half-precision atomic max/min); edge softmax and GAT compute
  their statistics in float32 anyway, so they run in half precision too.
* ``triton``: a family name (:data:`FAMILY`), not a backend. Asked for by name, the selector
  resolves it per call to whichever of the two the cost model estimates faster (the largest
  in-degree decides, see :mod:`unigraph.backends.cost_model`) and runs that. ``auto`` compares
  ``triton_node`` and ``triton_edge`` directly.

g-SDDMM is edge-parallel in all three. Backward passes are the shared formulas of
:mod:`unigraph.ops.gradients` (forward kernels on the reverse graph), except GAT's fused
backward on ``triton_node`` (``triton`` included).

Where they run: on CUDA tensors, compiled. On the CPU only in Triton's interpreter, which needs
``TRITON_INTERPRET=1`` in the environment before the kernels are first imported (the tests do
this); it is slow, so the contracts say ``interpreted_on_cpu`` (the core property tests skip
them) and the cost model never lets ``auto`` pick them on the CPU.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys

import torch
from torch import Tensor

from unigraph.backends.base import Availability, Backend, Contract, Family, Request, operand_offsets, take_or_minus_one
from unigraph.backends.cost_model import estimate_triton
from unigraph.ops.spec import GSPMM_BINARY, gspmm_features, gsddmm_features
from unigraph.structure import GraphTensors

EXTREME_ATOMIC_DTYPES = (torch.float32, torch.float64)
MIN_TRITON = (3, 4)  # as pinned in pyproject.toml's triton extra
DEVICES = ("cuda", "cpu")  # cpu: Triton's interpreter only


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def interpreter_requested() -> bool:
    """``TRITON_INTERPRET`` as Triton parses it ("1", "true" or "on", any case)."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "on")


def _kernels(module: str):
    """A kernel module of ``unigraph.kernels.triton``, imported on first use: importing triton
    costs ~0.25 s, and Triton decides compiled vs interpreted at that moment."""
    return importlib.import_module(f"unigraph.kernels.triton.{module}")


def _spmm_work(op: str, u: Tensor | None, e: Tensor | None) -> tuple:
    """What the g-SpMM launchers take besides the operands: the kernel's op (copy_u, copy_e, add,
    sub, mul, div), the output feature shape and each operand's broadcast offset table."""
    features = gspmm_features(op, u, e)
    return GSPMM_BINARY.get(op, op), features, operand_offsets(u, features), operand_offsets(e, features)


class _TritonKernels(Backend):
    """What the Triton backends share: availability, device rules, g-SDDMM."""

    strategy = "node"

    def availability(self) -> Availability:
        if importlib.util.find_spec("triton") is None:
            return Availability(False, "triton is not installed (pip install triton, or the 'triton' extra)")
        version = importlib.metadata.version("triton")
        if _version_tuple(version) < MIN_TRITON:
            return Availability(False, f"triton {version} is older than {'.'.join(map(str, MIN_TRITON))}, which the "
                                       "kernels need (triton.knobs): pip install 'triton>=3.4'")
        if torch.cuda.is_available():
            mode = " (interpreted: TRITON_INTERPRET=1)" if interpreter_requested() else ""
            return Availability(True, f"triton {version} on {torch.cuda.get_device_name(0)}{mode}")
        if interpreter_requested():
            return Availability(True, f"triton {version} in its CPU interpreter (TRITON_INTERPRET=1; slow, for "
                                      "tests)")
        return Availability(False, f"triton {version} is installed but there is no CUDA GPU; TRITON_INTERPRET=1 "
                                   "runs the kernels in Triton's CPU interpreter (slow, for tests)")

    def unsupported_reason(self, request: Request) -> str | None:
        if request.device.type != "cpu":
            return None
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
        full = gsddmm_features("mul" if op == "dot" else op, lhs, rhs)  # dot: the shape before it sums
        return _kernels("sddmm").sddmm(g.src, g.dst, op, lhs, rhs, lhs_target, rhs_target, full,
                                       operand_offsets(lhs, full), operand_offsets(rhs, full))


class TritonNodeBackend(_TritonKernels):
    name = "triton_node"
    summary = "Triton: node-parallel g-SpMM over CSR, fused edge softmax and GAT (forward and backward)"
    contract = Contract(devices=DEVICES, fused=("edge_softmax", "gat_attention"), fused_backward=("gat_attention",),
                        interpreted_on_cpu=True)
    strategy = "node"

    def gspmm(self, g: GraphTensors, op: str, reduce: str, u: Tensor | None, e: Tensor | None):
        kernel_op, features, u_off, e_off = _spmm_work(op, u, e)
        return _kernels("spmm_node").spmm_node(g.in_ptr, g.in_src, g.in_eid, g.num_dst, kernel_op, reduce, u, e,
                                                features, u_off, e_off)

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
    contract = Contract(devices=DEVICES, interpreted_on_cpu=True)
    strategy = "edge"

    def unsupported_reason(self, request: Request) -> str | None:
        reason = super().unsupported_reason(request)
        if reason is not None:
            return reason
        if request.reduce in ("max", "min") and request.dtype not in EXTREME_ATOMIC_DTYPES:
            return (f"edge-parallel {request.reduce} needs float32 or float64: Triton has no {request.dtype} atomic "
                    "max/min; triton_node runs it")
        return None

    def gspmm(self, g: GraphTensors, op: str, reduce: str, u: Tensor | None, e: Tensor | None):
        kernel_op, features, u_off, e_off = _spmm_work(op, u, e)
        out, arg_e = _kernels("spmm_edge").spmm_edge(g.src, g.dst, g.num_dst, kernel_op, reduce, u, e, features,
                                                     u_off, e_off)
        return (out, None, None) if arg_e is None else (out, take_or_minus_one(g.src, arg_e), arg_e)


FAMILY = Family("triton", ("triton_node", "triton_edge"),
                "Triton, node- or edge-parallel per call by the cost model (triton_node / triton_edge)")
