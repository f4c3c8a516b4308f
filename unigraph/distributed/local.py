"""One partition in memory, and the requests its owner answers about the nodes it owns.

:class:`LocalPartition` holds the arrays of one part of a partition set as torch tensors (sharing
the numpy arrays' memory: nothing is copied after the file is read). Its methods named in
:data:`REQUESTS` are everything another process may ask the owner: they take global ids of owned
nodes, check them, and return tensors. The same methods serve the owner's own (local-first)
work, so a local answer and a remote answer are computed by one piece of code.
"""
from __future__ import annotations

import os

import numpy as np
import torch
from torch import Tensor

from unigraph.distributed import format as fmt
from unigraph.distributed.book import PartitionBook
from unigraph.kernels.cpu import threads_for
from unigraph.sampling import kernel_path, torch_kernels
from unigraph.sampling.counter_rng import GOLDEN, MASK64
from unigraph.sampling.csr_view import csr_ranges

REQUESTS = ("sample", "features", "in_degrees", "out_degrees", "neighbors")


def shifted_key(key: int, first: int) -> int:
    """The pass key that makes draws keyed by *local* row ``r`` equal the draws keyed by global id
    ``first + r`` under ``key``.

    The counter-based generator keys row ``v`` of a pass by ``mix64(v * GOLDEN + key)`` (mod
    2**64, :mod:`unigraph.sampling.counter_rng`), and ``(first + r) * GOLDEN + key = r * GOLDEN +
    (key + first * GOLDEN)``. So an owner that samples its rows by local index with this key draws
    exactly what the single-machine sampler draws for those nodes: no kernel needs a second id.
    """
    return (key + first * GOLDEN) & MASK64


def _numba_sample_layer(ptr, rows, fanout: int, replace: bool, key: int):
    """The numba kernel on one thread: owners answer requests while their trainer computes (the
    reason :class:`~unigraph.sampling.NeighborSampler` defaults to one thread too)."""
    from unigraph.kernels import sampling  # noqa: PLC0415
    with threads_for(None, limit=1):   # numba's count is per calling thread: set for this call only
        return sampling.sample_layer(ptr, rows, fanout, replace, np.uint64(key))


class LocalPartition:
    """Partition ``part`` of a set, in memory.

    Fields (torch tensors over the file's arrays, see :mod:`unigraph.distributed.format`):
    ``indptr``, ``indices`` (global ids of sources), ``eids`` (``None`` unless loaded), ``x``,
    ``y``, ``train_mask``/``val_mask``/``test_mask``, ``orig_ids``, ``out_degree``, ``halo_ids``,
    ``halo_out_degree`` (node fields ``None`` when loaded with ``nodes=False``, as sampler
    processes do: they need the structure only).
    """

    def __init__(self, info: fmt.PartitionSetInfo, part: int, arrays: dict[str, np.ndarray]):
        self.info = info
        self.part = part
        self.book = PartitionBook(info.offsets)
        self.first, self.end = self.book.node_range(part)
        tensors = {name: torch.from_numpy(array) for name, array in arrays.items()}
        self.indptr: Tensor = tensors["indptr"]
        self.indices: Tensor = tensors["indices"]
        self.eids: Tensor | None = tensors.get("eids")
        for name in fmt.NODE_ARRAYS + ("halo_ids", "halo_out_degree"):
            setattr(self, name, tensors.get(name))
        self.path_used, self.path_reason = kernel_path.resolve("auto", torch.device("cpu"))

    @classmethod
    def load(cls, directory: str | os.PathLike, part: int, *, nodes: bool = True, eids: bool = False,
             verify: bool = True) -> "LocalPartition":
        """Read partition ``part`` of the set in ``directory`` (checked: see :func:`fmt.load_part_arrays`).
        ``nodes=False`` reads the graph structure only; ``eids`` also reads the original edge ids."""
        info = fmt.read_metadata(directory)
        names = fmt.GRAPH_ARRAYS + (fmt.NODE_ARRAYS + ("halo_ids", "halo_out_degree") if nodes else ()) + \
            (("eids",) if eids else ())
        return cls(info, part, fmt.load_part_arrays(info, part, names, verify=verify))

    @property
    def num_owned(self) -> int:
        return self.end - self.first

    def __repr__(self) -> str:
        return (f"LocalPartition(part {self.part} of {self.info.num_parts}, nodes {self.first}..{self.end - 1}, "
                f"{self.indices.numel()} in-edges)")

    def rows(self, ids: Tensor) -> Tensor:
        """Local rows of ``ids``; ``ValueError`` if one of them is not owned here."""
        if ids.numel() and (int(ids.min()) < self.first or int(ids.max()) >= self.end):
            bad = ids[(ids < self.first) | (ids >= self.end)][0]
            raise ValueError(f"partition {self.part} owns nodes {self.first}..{self.end - 1}; asked about node "
                             f"{int(bad)}")
        return ids - self.first

    # ------------------------------------------------------------------ requests (REQUESTS)
    def sample(self, ids: Tensor, fanout: int, replace: bool, key: int, with_eids: bool
               ) -> tuple[Tensor, Tensor, Tensor | None]:
        """``(counts, sources, eids)``: ``fanout`` in-edges of every node of ``ids`` drawn as
        :class:`~unigraph.sampling.NeighborSampler` draws them for pass key ``key`` (same kernels,
        same keys by :func:`shifted_key`), sources as global ids, grouped by node in ``ids`` order."""
        rows = self.rows(ids)
        local_key = shifted_key(key, self.first)
        if self.path_used == "numba":
            indptr, positions = _numba_sample_layer(self.indptr.numpy(), rows.numpy(), fanout, replace, local_key)
            counts, positions = torch.from_numpy(np.diff(indptr)), torch.from_numpy(positions)
        else:
            counts, positions = torch_kernels.sample_layer(self.indptr, rows, fanout, replace, local_key)
        eids = None
        if with_eids:
            if self.eids is None:
                raise ValueError(f"partition {self.part} was loaded without edge ids; load it with eids=True")
            eids = self.eids[positions]
        return counts, self.indices[positions].to(torch.int64), eids

    def features(self, ids: Tensor) -> Tensor:
        if self.x is None:
            raise ValueError(f"partition {self.part} was loaded without node data (nodes=False)")
        return self.x[self.rows(ids)]

    def in_degrees(self, ids: Tensor) -> Tensor:
        rows = self.rows(ids)
        return self.indptr[rows + 1] - self.indptr[rows]

    def out_degrees(self, ids: Tensor) -> Tensor:
        if self.out_degree is None:
            raise ValueError(f"partition {self.part} was loaded without node data (nodes=False)")
        return self.out_degree[self.rows(ids)]

    def neighbors(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """``(counts, sources)``: every in-neighbour (global ids) of each node of ``ids``, in order."""
        counts, positions = csr_ranges(self.indptr, self.rows(ids))
        return counts, self.indices[positions].to(torch.int64)

    def answer(self, request: str, ids: Tensor, *args):
        """Run one of :data:`REQUESTS` (what an owner does with a message from another process)."""
        if request not in REQUESTS:
            raise ValueError(f"unknown request {request!r}; an owner answers {', '.join(REQUESTS)}")
        if not isinstance(ids, Tensor) or ids.dtype != torch.int64 or ids.dim() != 1:
            raise TypeError(f"a request carries a 1-D int64 tensor of node ids, got {type(ids).__name__} "
                            f"{getattr(ids, 'dtype', '')}")
        return getattr(self, request)(ids, *args)
