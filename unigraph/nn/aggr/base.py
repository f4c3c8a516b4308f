r"""The aggregation-module contract, PyG's: ``aggr(x, index, ptr=None, dim_size=None, dim=-2)``
reduces the rows of ``x`` along ``dim`` into ``dim_size`` groups, row ``e`` into group
``index[e]`` (or the CSR ranges ``ptr`` instead of ``index``). A group without rows gets 0.

:class:`Aggregation` checks the arguments once, before anything is computed (an index out of
range, of the wrong length or dtype is a ``ValueError``/``TypeError`` naming it), and gives its
subclasses :meth:`Aggregation.reduce` (sum, mean, max, min of each group) and
:meth:`Aggregation.to_dense_batch` (each group's rows in order, padded, for the sequence
aggregations; those need ``index`` sorted, as in PyG).

A layer that takes an aggregation module (``SAGEConv(aggr=...)``, PNA's scalers) calls it on the
per-edge messages with ``index`` the destination of each edge; any module with this call
signature works, PyG's own included.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.group_reduce import group_reduce as rows_into_groups

def group_reduce(x: Tensor, index: Tensor, dim_size: int, reduce: str, dim: int = 0) -> Tensor:
    """``reduce`` of the slices of ``x`` along ``dim`` per group ``index`` (0 for an empty group;
    max/min with exact gradients: :mod:`unigraph.group_reduce`)."""
    return rows_into_groups(x.movedim(dim, 0), index, dim_size, reduce).movedim(0, dim)


def group_softmax(x: Tensor, index: Tensor, dim_size: int, dim: int = 0) -> Tensor:
    """Softmax of ``x`` along ``dim`` within each group (the group's maximum subtracted first; the
    denominator gets 1e-16, as PyG's ``softmax``, so an all-underflow group gives 0, not NaN)."""
    top = group_reduce(x.detach(), index, dim_size, "max", dim)
    out = (x - top.index_select(dim, index)).exp()
    total = group_reduce(out, index, dim_size, "sum", dim) + 1e-16
    return out / total.index_select(dim, index)


def checked_groups(index: Tensor, dim_size: int, who: str) -> Tensor:
    """``index`` as int64, every group in ``[0, dim_size)`` (else ``ValueError`` naming ``who``)."""
    if index.numel():
        low, high = int(index.min()), int(index.max())
        if low < 0:
            raise ValueError(f"{who}: index holds group {low}, outside [0, {dim_size})")
        if high >= dim_size:
            raise ValueError(f"{who}: invalid 'dim_size' ({dim_size}): index holds group {high}, outside [0, {dim_size})")
    return index.to(torch.int64)


@torch.library.custom_op("unigraph::checked_groups", mutates_args=())
def _checked_groups_op(index: Tensor, dim_size: int, who: str) -> Tensor:
    """:func:`checked_groups` as one operator, so a compiled program runs the check without
    reading values while it is traced (as ``unigraph::checked_edges`` does for a graph's indices)."""
    if torch.compiler.is_compiling():  # evaluated on real data while compiling: clamp, the program checks
        return index.to(torch.int64).clamp(0, max(dim_size - 1, 0))
    return checked_groups(index, dim_size, who).clone()  # an operator's output may not alias its input


@_checked_groups_op.register_fake
def _(index, dim_size, who):
    return index.new_empty(index.shape, dtype=torch.int64)


class Aggregation(torch.nn.Module):
    """Base class of the aggregation modules (see the module docstring)."""

    def __call__(self, x: Tensor, index: Tensor | None = None, ptr: Tensor | None = None,
                 dim_size: int | None = None, dim: int = -2, **kwargs: Any) -> Tensor:
        who = type(self).__name__
        if not isinstance(x, Tensor):
            raise TypeError(f"{who} expects a tensor x, got {type(x).__name__}")
        if not -x.dim() <= dim < max(x.dim(), 1):
            raise ValueError(f"{who}: invalid dimension: dim={dim} is out of range for x of shape {list(x.shape)}")
        dim = dim % x.dim()
        rows = x.shape[dim]
        if ptr is not None:
            if index is None:
                index = torch.repeat_interleave(torch.arange(ptr.numel() - 1, device=ptr.device), ptr.diff())
            dim_size = ptr.numel() - 1 if dim_size is None else dim_size
        if index is None:
            index = torch.zeros(rows, dtype=torch.int64, device=x.device)
        if not isinstance(index, Tensor) or index.dim() != 1 or index.is_floating_point() or index.dtype == torch.bool:
            raise TypeError(f"{who}: index must be a 1-D integer tensor (the group of each row), got "
                            f"{getattr(index, 'dtype', type(index).__name__)}")
        if index.numel() != rows:
            raise ValueError(f"{who}: index has {index.numel()} entries but x has {rows} rows along dim {dim}")
        if dim_size is None:  # the groups' count is the data's (a graph break under torch.compile)
            dim_size = int(index.max()) + 1 if index.numel() else 0
        if torch.compiler.is_compiling():  # the same check, run by the compiled program (no graph break)
            index = torch.ops.unigraph.checked_groups(index, dim_size, who)
        else:
            index = checked_groups(index, dim_size, who)
        return super().__call__(x, index, ptr=None, dim_size=dim_size, dim=dim, **kwargs)

    def forward(self, x: Tensor, index: Tensor, ptr: Tensor | None = None, dim_size: int | None = None,
                dim: int = -2) -> Tensor:
        raise NotImplementedError

    def reset_parameters(self) -> None:
        pass

    def reduce(self, x: Tensor, index: Tensor, ptr: Tensor | None = None, dim_size: int | None = None,
               dim: int = -2, reduce: str = "sum") -> Tensor:
        return group_reduce(x, index, dim_size, reduce, dim)

    def to_dense_batch(self, x: Tensor, index: Tensor, ptr: Tensor | None = None, dim_size: int | None = None,
                       dim: int = -2, fill_value: float = 0.0, max_num_elements: int | None = None
                       ) -> tuple[Tensor, Tensor]:
        """``([dim_size, L, F], mask [dim_size, L])``: group ``g``'s rows in index order at
        positions ``0..n_g-1``, then ``fill_value``; ``L`` is the largest group, or
        ``max_num_elements`` (rows past it are dropped). Needs ``index`` sorted."""
        who = type(self).__name__
        if x.dim() != 2 or dim not in (0, -2):
            raise ValueError(f"{who} aggregates 2-D inputs [rows, F] along dim 0, got {list(x.shape)} and dim={dim}")
        if index.numel() > 1 and bool((index[1:] < index[:-1]).any()):
            raise ValueError(f"{who}: the 'index' tensor is not sorted; this aggregation reads each group's rows "
                             "in order, so sort the edges by destination first (e.g. edge_index[:, "
                             "edge_index[1].argsort(stable=True)])")
        counts = torch.bincount(index, minlength=dim_size)
        length = int(counts.max()) if counts.numel() else 0
        if max_num_elements is not None:
            length = max_num_elements
        starts = torch.cumsum(counts, 0) - counts
        position = torch.arange(index.numel(), device=x.device) - starts.index_select(0, index)
        keep = position < length
        out = x.new_full((dim_size, length) + tuple(x.shape[1:]), fill_value)
        out[index[keep], position[keep]] = x[keep]
        mask = torch.zeros(dim_size, length, dtype=torch.bool, device=x.device)
        mask[index[keep], position[keep]] = True
        return out, mask

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
