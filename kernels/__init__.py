"""unigraph's kernels: numba CPU kernels (:mod:`~unigraph.kernels.cpu`, and the sampling kernels),
Triton kernels (:mod:`~unigraph.kernels.triton`) and their launchers.

Arrows point down: a kernel receives plain tensors (or numpy views) and a small description of
the work (an op name, an output feature shape, broadcast offset tables), and imports nothing
from the layers above it (``unigraph.ops``, ``unigraph.backends``, ``unigraph.sampling``);
``tests/ops/test_registry.py`` checks this. The rules kernels and the layers above share live
here, below both.
"""
from __future__ import annotations

import torch


def accumulator_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype sums, softmax statistics and other accumulators are kept in for features of
    ``dtype``: float64 for float64, float32 otherwise (a float16 row sum overflows at 65504 and
    stops growing by 1 at 2048)."""
    return torch.float64 if dtype == torch.float64 else torch.float32
