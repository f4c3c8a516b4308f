"""The helpers of DGL's ``dgl.utils`` that user code calls: :func:`is_sorted_srcdst`."""
from __future__ import annotations

from typing import Any

import torch

from unigraph.dgl.base import DGLError


def is_sorted_srcdst(src: Any, dst: Any, num_src: int | None = None, num_dst: int | None = None) -> tuple[bool, bool]:
    """Whether the edges ``src -> dst`` are sorted by source (``row_sorted``) and, within each
    source, by destination too (``col_sorted``): DGL's ``is_sorted_srcdst``, what
    ``dgl.graph(..., row_sorted=, col_sorted=)`` expects. ``num_src`` / ``num_dst`` are DGL's
    hints and change nothing."""
    src, dst = torch.as_tensor(src).reshape(-1), torch.as_tensor(dst).reshape(-1)
    if src.numel() != dst.numel():
        raise DGLError(f"src and dst differ in length ({src.numel()} and {dst.numel()})")
    if src.numel() < 2:
        return True, True
    same_row = src[1:] == src[:-1]
    row_sorted = bool((src[1:] >= src[:-1]).all())
    col_sorted = row_sorted and bool((dst[1:][same_row] >= dst[:-1][same_row]).all())
    return row_sorted, col_sorted
