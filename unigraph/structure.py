"""Graph structure formats shared by the Graph and every backend.

A backend never sees a :class:`~unigraph.Graph`; it receives a :class:`GraphTensors`, the plain
tensors of three formats of the same edge set:

* COO in the user's edge order: ``src[k] -> dst[k]`` for edge id ``k``.
* CSR by destination ("in-CSR"): the in-edges of destination ``v`` are the positions
  ``in_ptr[v]:in_ptr[v+1]``; ``in_src`` holds their sources and ``in_eid`` their edge ids.
  Node-parallel kernels (g-SpMM) walk this.
* CSR by source ("out-CSR"): the same for out-edges (``out_ptr``, ``out_dst``, ``out_eid``).
  It is the in-CSR of the reverse graph, which is what backward passes run on.

Edges keep their user order inside each CSR row (stable sort), so "the first edge" of a row is
well defined and identical on every backend.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class GraphTensors(NamedTuple):
    """The tensors of one graph in COO, in-CSR and out-CSR form (see module docstring)."""

    src: Tensor
    dst: Tensor
    in_ptr: Tensor
    in_src: Tensor
    in_eid: Tensor
    out_ptr: Tensor
    out_dst: Tensor
    out_eid: Tensor
    num_src: int
    num_dst: int

    @property
    def num_edges(self) -> int:
        return self.src.numel()

    @property
    def device(self) -> torch.device:
        return self.src.device

    def reverse(self) -> "GraphTensors":
        """The reverse graph (every edge flipped), sharing all tensors: no work is done."""
        return GraphTensors(
            self.dst, self.src,
            self.out_ptr, self.out_dst, self.out_eid,
            self.in_ptr, self.in_src, self.in_eid,
            self.num_dst, self.num_src,
        )

    def tensor_list(self) -> list[Tensor]:
        """The eight tensors in field order, as custom operators take them."""
        return list(self[:8])

    @staticmethod
    def from_list(tensors: list[Tensor], num_src: int, num_dst: int) -> "GraphTensors":
        return GraphTensors(*tensors, num_src, num_dst)

    def in_degrees(self) -> Tensor:
        return self.in_ptr[1:] - self.in_ptr[:-1]


def build_csr(rows: Tensor, cols: Tensor, num_rows: int) -> tuple[Tensor, Tensor, Tensor]:
    """Compressed rows of the edge list ``rows[k] -> cols[k]``.

    Returns ``(ptr, cols_sorted, perm)`` with ``perm`` the edge ids in row order. The sort is
    stable so that edges keep their input order inside a row.
    """
    perm = torch.sort(rows, stable=True).indices
    counts = torch.bincount(rows, minlength=num_rows)
    ptr = torch.zeros(num_rows + 1, dtype=torch.int64, device=rows.device)
    torch.cumsum(counts, 0, out=ptr[1:])
    return ptr, cols[perm], perm
