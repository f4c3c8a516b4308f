"""Conventions shared by every Triton kernel launcher: compiled or interpreted, index width,
accumulation dtype and block sizes.

Compiled or interpreted
    ``triton.jit`` reads ``TRITON_INTERPRET`` when a kernel is *defined* (module import) and
    returns an interpreted function under it; :data:`INTERPRETED` records that same reading, so
    it tells how the kernels of this package were built, whatever the environment says later.
    The interpreter has no GPU timer, so autotuning keeps one configuration there, with small
    blocks: the tests' small graphs and narrow features then cross block boundaries (several
    edge chunks per row, several feature blocks per row), which is what masks must survive.
    ``UNIGRAPH_TRITON_TUNING=off`` (read at import, like ``TRITON_INTERPRET``) keeps each
    kernel's first configuration on a GPU too: the GPU run's property tests launch hundreds of
    small distinct shapes, and the autotuner would compile and time every configuration for each.

Index width
    Graph indices arrive as int64. Address arithmetic (``row * width + column``) runs in int32
    when every flat offset a kernel can form is below 2**31, else in int64
    (:func:`needs_int64`); int32 halves the registers and is faster on GPUs.
"""
from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl
from torch import Tensor

from unigraph.kernels import accumulator_dtype

INTERPRETED: bool = bool(triton.knobs.runtime.interpret)
TUNING_OFF: bool = os.environ.get("UNIGRAPH_TRITON_TUNING", "").strip().lower() == "off"

# Widest feature block one program handles: a [BLOCK_E, 128] float32 tile of gathered rows is
# 16 KB at BLOCK_E = 32, within a GPU's registers. Under the interpreter 8 (see the module docstring).
MAX_BLOCK_F = 8 if INTERPRETED else 128
INTERPRETER_BLOCK_E = 4
INT32_LIMIT = 2**31


def tuning(configs: list[triton.Config], **interpreted_meta) -> list[triton.Config]:
    """The autotune configurations: all of them when compiled (the first alone under
    ``UNIGRAPH_TRITON_TUNING=off``), one small one when interpreted."""
    if INTERPRETED:
        return [triton.Config(interpreted_meta, num_warps=1)]
    return configs[:1] if TUNING_OFF else configs


def needs_int64(*extents: int) -> bool:
    """Whether some flat offset (rows x width of an operand, an edge count) reaches 2**31."""
    return max(extents, default=0) >= INT32_LIMIT


def accumulator(dtype: torch.dtype):
    """The dtype kernels accumulate in: float64 for float64 input, float32 otherwise (half
    precision sums lose digits after a few hundred terms)."""
    return tl.float64 if dtype == torch.float64 else tl.float32


def accumulator_torch(dtype: torch.dtype) -> torch.dtype:
    return accumulator_dtype(dtype)


def feature_block(width: int) -> int:
    """Feature elements per program: the width rounded up to a power of two, capped."""
    return min(triton.next_power_of_2(max(width, 1)), MAX_BLOCK_F)


def degree_bucket(num_edges: int, num_rows: int) -> int:
    """log2 of the mean degree, an autotune key: rows of 2 and 200 edges want different
    edge-chunk sizes, but retuning for every graph size would be wasteful."""
    return int(math.log2(max(num_edges, 1) / max(num_rows, 1)) + 0.5) if num_edges else 0


GRID_LIMITS = (2**31 - 1, 65535, 65535)  # programs per CUDA grid axis


def checked_grid(*grid: int) -> tuple[int, ...]:
    """``grid`` after checking it against CUDA's limits per axis (a larger one would fail to
    launch, or on some drivers silently run part of the work). Edge-parallel kernels put all
    their programs on axis 0; node-parallel ones put rows there and feature blocks on the others."""
    for axis, (size, limit) in enumerate(zip(grid, GRID_LIMITS)):
        if size > limit:
            raise ValueError(f"a Triton launch needs {size} programs on grid axis {axis}, more than CUDA's limit of "
                             f"{limit} (grid {grid}): the graph or the feature width is too large for these kernels")
    return grid


def check_launchable(*tensors: Tensor | None) -> None:
    """Compiled kernels read GPU memory only; say how to run them on CPU tensors instead."""
    if INTERPRETED:
        return
    for t in tensors:
        if t is not None and not t.is_cuda:
            raise RuntimeError(
                f"the Triton kernels were compiled for a GPU (TRITON_INTERPRET was not set when "
                f"unigraph.kernels.triton was imported) but got a tensor on {t.device}. Set "
                "TRITON_INTERPRET=1 before the first Triton kernel runs to use Triton's CPU interpreter.")


def flat(x: Tensor | None, rows: int) -> Tensor | None:
    """``x`` as a contiguous ``[rows, width]`` matrix (a copy only when it is not contiguous)."""
    if x is None:
        return None
    return x.contiguous().reshape(rows, math.prod(x.shape[1:]))


def pointer_or(tensor: Tensor | None, placeholder: Tensor) -> Tensor:
    """A pointer argument for an operand the kernel does not read (its constexpr flags say so)."""
    return placeholder if tensor is None else tensor
