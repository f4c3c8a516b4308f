"""The partition book: which partition owns a node, and the node's row there.

A partition set numbers nodes *partition-major* (as DistDGL does): partition ``p`` owns the
contiguous range of global ids ``offsets[p] .. offsets[p+1]-1``, and a node's local row is
``global id - offsets[p]``. The whole book is therefore ``num_parts + 1`` integers on every rank,
whatever the graph's size (a per-node table would cost 8-16 bytes per node on every machine). The
graph's original node ids are kept in each partition (``orig_ids``) to map results back.
"""
from __future__ import annotations

import torch
from torch import Tensor


class PartitionBook:
    """``offsets`` (``num_parts + 1`` non-decreasing ints from 0 to ``num_nodes``) as a book."""

    def __init__(self, offsets):
        offsets = torch.as_tensor(offsets, dtype=torch.int64).cpu()
        if offsets.dim() != 1 or offsets.numel() < 2 or int(offsets[0]) != 0 or bool((offsets[1:] < offsets[:-1]).any()):
            raise ValueError(f"partition offsets must be a non-decreasing list starting at 0 with at least 2 entries, "
                             f"got {offsets.tolist()}")
        self.offsets = offsets
        self._ends = offsets[1:].contiguous()

    @property
    def num_parts(self) -> int:
        return self.offsets.numel() - 1

    @property
    def num_nodes(self) -> int:
        return int(self.offsets[-1])

    def __repr__(self) -> str:
        return f"PartitionBook(num_parts={self.num_parts}, num_nodes={self.num_nodes})"

    def node_range(self, part: int) -> tuple[int, int]:
        """``(first, end)``: the global ids ``first .. end-1`` that ``part`` owns."""
        return int(self.offsets[part]), int(self.offsets[part + 1])

    def num_owned(self, part: int) -> int:
        first, end = self.node_range(part)
        return end - first

    def check_ids(self, name: str, ids: Tensor) -> None:
        """Raise ``ValueError`` unless every id is in ``0..num_nodes-1`` (``ids``: an int64 tensor)."""
        if ids.numel():
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= self.num_nodes:
                raise ValueError(f"{name} holds node id {low if low < 0 else high}, outside the partitioned "
                                 f"graph's 0..{self.num_nodes - 1}")

    def owner(self, ids: Tensor) -> Tensor:
        """The partition of every id (ids must be valid: see :meth:`check_ids`)."""
        return torch.searchsorted(self._ends, ids, right=True)

    def local(self, ids: Tensor, part: int) -> Tensor:
        """Local rows in ``part`` of ids that ``part`` owns."""
        return ids - self.offsets[part]
