"""What one machine holds of a partition set, and the requests its server answers about it.

:class:`LocalPartition` holds the nodes a machine owns - one or more contiguous parts of the set
(:mod:`unigraph.distributed.layout`), so one contiguous range ``first .. end-1`` of global ids -
and its **halo**: the nodes owned elsewhere that are sources of its nodes' in-edges, with their
own in-edges. The in-CSR has the owned rows first (row ``v - first``), then the halo rows (row
``num_owned + i`` for the ``i``-th halo id in sorted order), both in the original edge order. So
a machine samples the in-edges of its own nodes *and* of their remote neighbours without asking
anyone: with two layers a batch of owned seeds is sampled without any request.

Arrays (numpy, in process memory or in a shared-memory block that several processes map: see
:mod:`unigraph.distributed.server`) are viewed as torch tensors: ``indptr``, ``indices`` (global
ids of sources), ``eids`` (``None`` unless loaded), ``x``, ``y``, ``train_mask``/``val_mask``/
``test_mask``, ``orig_ids``, ``out_degree`` (owned nodes), ``halo_ids``, ``halo_out_degree``.

Its methods named in :data:`REQUESTS` answer what another machine may ask the owner: they take
global ids, check them and return tensors. The same methods serve the machine's own (local-first)
work, so a local answer and a remote answer are computed by one piece of code.
"""
from __future__ import annotations

import contextlib
import os
from typing import Callable

import numpy as np
import torch
from torch import Tensor

from unigraph.distributed import format as fmt
from unigraph.distributed.book import PartitionBook
from unigraph.distributed.layout import JobLayout
from unigraph.distributed.reservation import reserved
from unigraph.distributed.shm import tensors_of
from unigraph.kernels.cpu import threads_for
from unigraph.sampling import kernel_path, torch_kernels
from unigraph.sampling.csr_view import csr_ranges

REQUESTS = ("sample", "features", "in_degrees", "out_degrees", "neighbors")
NODE_FIELDS = fmt.NODE_ARRAYS + ("halo_out_degree",)
Allocate = Callable[[dict], dict]  # {name: (dtype, shape)} -> {name: writable numpy array}


def allocate_in_memory(specs: dict) -> dict[str, np.ndarray]:
    return {name: np.empty(shape, dtype) for name, (dtype, shape) in specs.items()}


def _numba_sample_rows(ptr, rows, key_ids, fanout: int, replace: bool, key: int):
    """The numba kernel on one thread: servers answer requests while trainers compute (the reason
    :class:`~unigraph.sampling.NeighborSampler` defaults to one thread too)."""
    from unigraph.kernels import sampling  # noqa: PLC0415
    with threads_for(None, limit=1):   # numba's count is per calling thread: set for this call only
        return sampling.sample_rows(ptr, rows, key_ids, fanout, replace, np.uint64(key))


class LocalPartition:
    """Machine ``machine``'s nodes (global ids ``first .. end-1``) and halo (see the module docstring).

    ``book`` is the machine book (which machine owns a node); ``parts`` the set's parts held here.
    """

    def __init__(self, info: fmt.PartitionSetInfo, book: PartitionBook, machine: int, parts: list[int],
                 arrays: dict[str, np.ndarray]):
        self.info, self.book, self.machine, self.parts = info, book, machine, list(parts)
        self.first, self.end = book.node_range(machine)
        tensors = tensors_of(arrays)
        self.indptr: Tensor = tensors["indptr"]
        self.indices: Tensor = tensors["indices"]
        self.eids: Tensor | None = tensors.get("eids")
        self.halo_ids: Tensor = tensors["halo_ids"]
        for name in NODE_FIELDS:
            setattr(self, name, tensors.get(name))
        self.num_halo = self.indptr.numel() - 1 - self.num_owned
        self.path_used, self.path_reason = kernel_path.resolve("auto", torch.device("cpu"))

    @classmethod
    def load(cls, directory: str | os.PathLike, part: int, *, nodes: bool = True, eids: bool = False,
             verify: bool = True) -> "LocalPartition":
        """Part ``part`` of the set in ``directory`` alone (one part per machine), in this process's
        memory; ``nodes=False`` reads the graph structure only."""
        info = fmt.read_metadata(directory)
        return load_machine(info, JobLayout(info.num_parts, info.num_parts), part, nodes=nodes, eids=eids,
                            verify=verify)[0]

    @property
    def num_owned(self) -> int:
        return self.end - self.first

    @property
    def part(self) -> int:
        """The machine's index in the book (the part itself when every machine holds one part)."""
        return self.machine

    def __repr__(self) -> str:
        return (f"LocalPartition(machine {self.machine}: parts {self.parts} of {self.info.num_parts}, nodes "
                f"{self.first}..{self.end - 1}, {int(self.indptr[self.num_owned])} in-edges, halo of {self.num_halo} "
                f"nodes with {self.indices.numel() - int(self.indptr[self.num_owned])} in-edges)")

    def rows(self, ids: Tensor) -> Tensor:
        """Local rows of ``ids``; ``ValueError`` if one of them is not owned here."""
        if ids.numel() and (int(ids.min()) < self.first or int(ids.max()) >= self.end):
            bad = ids[(ids < self.first) | (ids >= self.end)][0]
            raise ValueError(f"machine {self.machine} owns nodes {self.first}..{self.end - 1}; asked about node "
                             f"{int(bad)}")
        return ids - self.first

    def halo_rows(self, ids: Tensor) -> Tensor:
        """The CSR row of each id of ``ids`` that has one here (owned or halo), -1 for the others."""
        out = torch.full_like(ids, -1)
        owned = (ids >= self.first) & (ids < self.end)
        out[owned] = ids[owned] - self.first
        if self.num_halo:
            rest = torch.nonzero(~owned).squeeze(1)
            slot = torch.searchsorted(self.halo_ids, ids[rest]).clamp_max(self.num_halo - 1)
            found = self.halo_ids[slot] == ids[rest]
            out[rest[found]] = self.num_owned + slot[found]
        return out

    # ------------------------------------------------------------------ requests (REQUESTS)
    def sample(self, ids: Tensor, fanout: int, replace: bool, key: int, with_eids: bool
               ) -> tuple[Tensor, Tensor, Tensor | None]:
        """``(counts, sources, eids)``: ``fanout`` in-edges of every node of ``ids`` (owned or halo
        nodes) drawn as :class:`~unigraph.sampling.NeighborSampler` draws them for pass key ``key``:
        the same kernels, each row keyed by its global id; sources as global ids, grouped by node
        in ``ids`` order."""
        rows = self.halo_rows(ids)
        if bool((rows < 0).any()):
            bad = int(ids[rows < 0][0])
            raise ValueError(f"machine {self.machine} holds the in-edges of its nodes {self.first}..{self.end - 1} "
                             f"and of its {self.num_halo} halo nodes; asked to sample node {bad}")
        if self.path_used == "numba":
            indptr, positions = _numba_sample_rows(self.indptr.numpy(), rows.numpy(), ids.numpy(), fanout, replace, key)
            counts, positions = torch.from_numpy(np.diff(indptr)), torch.from_numpy(positions)
        else:
            counts, positions = torch_kernels.sample_rows(self.indptr, rows, ids, fanout, replace, key)
        eids = None
        if with_eids:
            if self.eids is None:
                raise ValueError(f"machine {self.machine} was loaded without edge ids; load it with eids=True")
            eids = self.eids[positions]
        return counts, self.indices[positions].to(torch.int64), eids

    def features(self, ids: Tensor) -> Tensor:
        if self.x is None:
            raise ValueError(f"machine {self.machine} was loaded without node data (nodes=False)")
        return self.x[self.rows(ids)]

    def in_degrees(self, ids: Tensor) -> Tensor:
        rows = self.rows(ids)
        return self.indptr[rows + 1] - self.indptr[rows]

    def out_degrees(self, ids: Tensor) -> Tensor:
        if self.out_degree is None:
            raise ValueError(f"machine {self.machine} was loaded without node data (nodes=False)")
        return self.out_degree[self.rows(ids)]

    def neighbors(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """``(counts, sources)``: every in-neighbour (global ids) of each owned node of ``ids``, in order."""
        counts, positions = csr_ranges(self.indptr, self.rows(ids))
        return counts, self.indices[positions].to(torch.int64)

    def answer(self, request: str, ids: Tensor, *args):
        """Run one of :data:`REQUESTS` (what an owner does with a message from another process)."""
        if request not in REQUESTS:
            raise ValueError(f"unknown request {request!r}; an owner answers {', '.join(REQUESTS)}")
        check_request_ids(ids)
        return getattr(self, request)(ids, *args)


def check_request_ids(ids) -> None:
    if not isinstance(ids, Tensor) or ids.dtype != torch.int64 or ids.dim() != 1:
        raise TypeError(f"a request carries a 1-D int64 tensor of node ids, got {type(ids).__name__} "
                        f"{getattr(ids, 'dtype', '')}")


# ---------------------------------------------------------------------------------------------- loading
def load_machine(info: fmt.PartitionSetInfo, layout: JobLayout, machine: int, *, nodes: bool = True,
                 eids: bool = False, verify: bool = True, allocate: Allocate = allocate_in_memory
                 ) -> tuple[LocalPartition, dict[str, np.ndarray]]:
    """Machine ``machine``'s parts of the set, merged into one :class:`LocalPartition`.

    ``allocate`` makes the destination arrays (process memory by default; a graph server passes
    a shared-memory block); the big arrays are streamed from the part files into them, so loading
    holds one copy (plus a 16 MiB chunk). A halo node that several of the machine's parts share is
    kept once; one the machine owns is dropped. Every part is checked (checksum, identity,
    dtypes, shapes, value ranges) as :func:`format.load_part_arrays` checks it. A machine holding
    one part of a chunked set maps its node arrays (:func:`mapped_node_arrays`); the rest, and
    every other set, is copied (chunked parts refused first if this machine's memory cannot
    hold the copy).
    """
    if info.num_parts != layout.num_parts:
        raise ValueError(f"the layout is for {layout.num_parts} partitions, the set has {info.num_parts}")
    parts = layout.machine_parts(machine)
    book = PartitionBook(layout.machine_offsets(info.offsets))
    first, end = book.node_range(machine)
    files = [fmt.open_part(info, p, verify=verify) for p in parts]
    held = contextlib.ExitStack()  # the host-wide memory reservation, until the copy is filled
    try:
        halo = _merged_halo(info, files, first, end)
        n = end - first
        e = sum(info.count(p, "edges") for p in parts)
        h, k = halo["ids"].size, int(halo["indptr"][-1])
        index_dtype = files[0].header("indices")[0]
        specs = {"indptr": (np.int64, (n + h + 1,)), "indices": (index_dtype, (e + k,)), "halo_ids": (np.int64, (h,))}
        if eids:
            specs["eids"] = (np.int64, (e + k,))
        mapped = mapped_node_arrays(info, parts) if nodes else {}
        if nodes:
            specs.update(x=(np.dtype(info.feature_dtype), (n, info.num_features)), y=(np.int64, (n,)),
                         train_mask=(np.bool_, (n,)), val_mask=(np.bool_, (n,)), test_mask=(np.bool_, (n,)),
                         orig_ids=(np.int64, (n,)), out_degree=(np.int64, (n,)), halo_out_degree=(np.int64, (h,)))
            for name in mapped:
                del specs[name]
        if info.layout == "chunked":
            held.enter_context(_reserved_for_copy(info, machine, specs))
        arrays = allocate(specs)
        arrays.update(mapped)  # checked by the chunked reader as they were mapped (values, finite features)
        node_at, edge_at = 0, 0
        for file in files:
            n_p, e_p = info.count(file.part, "nodes"), info.count(file.part, "edges")
            indptr = file.read("indptr")
            fmt.check_part_arrays(file.path, info, file.part, {"indptr": indptr})
            arrays["indptr"][node_at:node_at + n_p + 1] = indptr + edge_at
            streamed = {"indices": arrays["indices"][edge_at:edge_at + e_p]}
            if eids:
                streamed["eids"] = arrays["eids"][edge_at:edge_at + e_p]
            if nodes:
                streamed.update({name: arrays[name][node_at:node_at + n_p] for name in fmt.NODE_ARRAYS
                                 if name not in mapped})
            for name, out in streamed.items():
                file.read_into(name, out)
            fmt.check_part_arrays(file.path, info, file.part, streamed)
            node_at, edge_at = node_at + n_p, edge_at + e_p
        arrays["indptr"][n:] = e + halo["indptr"]
        _copy_halo_rows(info, files, halo, arrays["indices"][e:], "halo_indices")
        if eids:
            _copy_halo_rows(info, files, halo, arrays["eids"][e:], "halo_eids")
        arrays["halo_ids"][:] = halo["ids"]
        if nodes:
            arrays["halo_out_degree"][:] = halo["out_degree"]
    finally:
        held.close()
        for file in files:
            file.close()
    return LocalPartition(info, book, machine, parts, arrays), arrays


def mapped_node_arrays(info: fmt.PartitionSetInfo, parts: list[int], *, verify: bool = True) -> dict[str, np.ndarray]:
    """The node arrays a machine maps from its chunked part instead of copying (the features,
    labels, masks, original ids and out-degrees: a machine holding one part of a chunked set; its
    processes map the same files, so the page cache is the machine's one copy and a part larger
    than memory trains out of core); ``{}`` otherwise (the arrays are copied)."""
    if info.layout != "chunked" or len(parts) != 1:
        return {}
    return fmt.load_part_arrays(info, parts[0], fmt.NODE_ARRAYS, verify=verify)


def _reserved_for_copy(info: fmt.PartitionSetInfo, machine: int, specs: dict):
    """Chunked parts are mapped files, but what a machine merges (the structure with its halo's,
    and the node arrays of several parts) is copied into memory (its graph server's shared block):
    refuse, before allocating, a copy that this host's available memory, less what the other
    processes of the host have reserved for copies still running, cannot hold, instead of
    swapping or being killed; else hold the reservation while the copy fills
    (:mod:`unigraph.distributed.reservation`: servers of one host started together)."""
    needed = sum(np.dtype(dtype).itemsize * int(np.prod(shape, dtype=np.int64)) for dtype, shape in specs.values())
    return reserved(needed, f"{info.directory}: machine {machine}'s chunked parts",
                    hint="A graph server copies its machine's parts into shared memory (only the node arrays of "
                         "a machine that holds one chunked part are mapped instead). Use more machines (one part "
                         "each), or train one chunked graph out of core (`unigraph train --chunked`)")


def _merged_halo(info: fmt.PartitionSetInfo, files: list, first: int, end: int) -> dict[str, np.ndarray]:
    """The machine's halo: sorted ids outside ``first..end-1``, and for each the part file (index
    into ``files``) and row its in-edges are read from, their ``indptr`` and out-degrees."""
    ids, degree, out_degree, source, row = [], [], [], [], []
    for index, file in enumerate(files):
        arrays = {name: file.read(name) for name in ("halo_ids", "halo_indptr", "halo_out_degree")}
        fmt.check_part_arrays(file.path, info, file.part, arrays)
        keep = (arrays["halo_ids"] < first) | (arrays["halo_ids"] >= end)
        ids.append(arrays["halo_ids"][keep])
        degree.append(np.diff(arrays["halo_indptr"])[keep])
        out_degree.append(arrays["halo_out_degree"][keep])
        source.append(np.full(int(keep.sum()), index))
        row.append(np.nonzero(keep)[0])
    ids, degree, out_degree, source, row = (np.concatenate(a) for a in (ids, degree, out_degree, source, row))
    ids, once = np.unique(ids, return_index=True)  # a node in several parts' halos: its row from the first
    indptr = np.zeros(ids.size + 1, dtype=np.int64)
    np.cumsum(degree[once], out=indptr[1:])
    return {"ids": ids, "indptr": indptr, "out_degree": out_degree[once], "source": source[once], "row": row[once]}


def _copy_halo_rows(info, files: list, halo: dict, out: np.ndarray, name: str) -> None:
    """Stream array ``name`` (``halo_indices`` or ``halo_eids``) of every part, copying the rows
    the merged halo takes from that part to their place in ``out``."""
    for index, file in enumerate(files):
        taken = halo["source"] == index
        if not taken.any():
            continue
        part_indptr = file.read("halo_indptr")
        rows = halo["row"][taken]
        selected = np.zeros(part_indptr.size - 1, dtype=np.bool_)
        selected[rows] = True
        shift = np.zeros(part_indptr.size - 1, dtype=np.int64)  # a taken row's merged start - its start in the part
        shift[rows] = halo["indptr"][:-1][taken] - part_indptr[rows]
        for start, chunk in file.chunks(name):
            fmt.check_range(file.path, info, name, chunk)
            positions = np.arange(start, start + chunk.size)
            row_of = np.searchsorted(part_indptr, positions, side="right") - 1
            wanted = selected[row_of]
            out[positions[wanted] + shift[row_of[wanted]]] = chunk[wanted]
