"""One graph server per machine: its partition(s) in shared memory, answering the other machines.

The server process of machine ``m`` (:mod:`unigraph.distributed.layout`) loads the machine's
parts once into a shared-memory block (:class:`~unigraph.distributed.shm.SharedArrays`) and the
machine's trainers and sampler processes **attach** to it (:func:`attach`): they map the same
pages, so the machine holds one copy of its partition however many processes read it, and each
process adds only its working set. The server then answers, in its RPC threads, what processes
of *other* machines ask about the nodes it owns (:data:`REQUESTS`); processes of its own machine
read the shared memory directly.

It also holds, in shared memory too:

* the **halo feature cache** (:mod:`unigraph.distributed.cache`): the remote rows the machine's
  seeds are expected to read most, fetched once from their owners at start (:meth:`GraphServer.fill_cache`);
* the **layer-wise inference tables** (:mod:`unigraph.train.inference`): layer ``i``'s output for
  the machine's nodes, written by the machine's trainers and read by everyone (the other machines
  through the ``"hidden"`` request), created the first time a trainer asks (:meth:`GraphServer.table`).

The same class serves in one process for tests and tools (``shared=False``: plain arrays,
answered through :class:`~unigraph.distributed.peers.LocalPeers`).
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import torch
from torch import Tensor

from unigraph.distributed import format as fmt
from unigraph.distributed.book import PartitionBook
from unigraph.distributed.cache import FeatureCache, choose
from unigraph.distributed.layout import JobLayout
from unigraph.distributed.local import REQUESTS as PARTITION_REQUESTS
from unigraph.distributed.local import (LocalPartition, allocate_in_memory, check_request_ids, load_machine,
                                       mapped_node_arrays)
from unigraph.distributed.memory import MemoryMonitor
from unigraph.distributed.shm import SharedArrays, tensors_of
from unigraph.train.inference import table_rows

REQUESTS = PARTITION_REQUESTS + ("hidden", "need")
FETCH_ROWS = 1 << 16  # feature rows asked of an owner in one request while filling the cache


class GraphServer:
    """Machine ``machine``'s partition, halo cache and inference tables (see the module docstring)."""

    def __init__(self, local: LocalPartition, layout: JobLayout, storage: SharedArrays | None):
        self.local, self.layout, self.storage = local, layout, storage
        self.machine = local.machine
        self.cache = FeatureCache(torch.zeros(0, dtype=torch.int64), local.x[:0] if local.x is not None else
                                  torch.zeros(0, 0))
        self._cache_storage: SharedArrays | None = None
        self._tables: dict[int, dict] = {}    # slot -> its block, array, ids, round, time.monotonic() made
        self._first_tables: dict[int, tuple] = {}  # slot -> (bytes, time made) of its first block
        self._needed: dict[int, tuple] = {}   # slot -> (round, mask of owned nodes)
        self._lock = threading.RLock()
        self.monitor: MemoryMonitor | None = None

    @classmethod
    def load(cls, directory, layout: JobLayout, machine: int, *, eids: bool = False, verify: bool = True,
             shared: bool = True) -> "GraphServer":
        """Load machine ``machine``'s parts of the set in ``directory`` (into shared memory when ``shared``)."""
        info = fmt.read_metadata(directory)
        holder: list[SharedArrays] = []

        def allocate(specs: dict) -> dict:
            if not shared:
                return allocate_in_memory(specs)
            holder.append(SharedArrays.create(specs, label=f"unigraph-machine{machine}"))
            return holder[0].arrays
        local, _ = load_machine(info, layout, machine, eids=eids, verify=verify, allocate=allocate)
        return cls(local, layout, holder[0] if holder else None)

    @property
    def shared(self) -> bool:
        return self.storage is not None

    # ------------------------------------------------------------------ the halo cache
    def fill_cache(self, graph, seeds: Tensor, fanouts, size: int) -> None:
        """Keep the features of the ``size`` halo nodes ``seeds`` are expected to read most
        (:func:`unigraph.distributed.cache.choose`), asked of their owners through ``graph`` (a
        :class:`~unigraph.distributed.store.DistGraph`) in requests of at most
        :data:`FETCH_ROWS` rows."""
        ids = choose(self.local, seeds, fanouts, size)
        specs = {"ids": (np.int64, (ids.numel(),)),
                 "rows": (self.local.x.numpy().dtype, (ids.numel(), self.local.x.shape[1]))}
        if self.shared:
            self._cache_storage = SharedArrays.create(specs, label=f"unigraph-cache{self.machine}")
            arrays = self._cache_storage.arrays
        else:
            arrays = allocate_in_memory(specs)
        tensors = tensors_of(arrays)
        tensors["ids"].copy_(ids)
        for start in range(0, ids.numel(), FETCH_ROWS):
            chunk = ids[start:start + FETCH_ROWS]
            local, remote = graph.request("features", chunk)
            for positions, rows in local:
                tensors["rows"][start + positions] = rows
            for positions, owner, future in remote:
                tensors["rows"][start + positions] = graph.wait(future, owner, "features")
        self.cache = FeatureCache(tensors["ids"], tensors["rows"])

    # ------------------------------------------------------------------ inference tables
    def need(self, ids: Tensor, slot: int, round_: int) -> Tensor:
        """Note that layer-wise evaluation round ``round_`` reads table ``slot`` at owned ``ids``
        (a request: every machine's trainers say what they will read; a new round starts afresh)."""
        rows = self.local.rows(ids).numpy()
        with self._lock:
            if self._needed.get(slot, (None, None))[0] != round_:
                self._needed[slot] = (round_, np.zeros(self.local.num_owned, dtype=np.bool_))
            mask = self._needed[slot][1]
        mask[rows] = True
        return torch.zeros(0, dtype=torch.int64)

    def needed(self, slot: int) -> Tensor:
        """The (sorted) owned nodes table ``slot`` must hold in the current round."""
        with self._lock:
            entry = self._needed.get(slot)
        return torch.zeros(0, dtype=torch.int64) if entry is None else \
            self.local.first + torch.from_numpy(np.nonzero(entry[1])[0].astype(np.int64))

    def table(self, slot: int, width: int, dtype: str):
        """The table of layer output ``slot``: one row of ``width`` values per node :meth:`needed`
        names, made for the round the first time a trainer asks; returns its description (shared)
        or the array (in process)."""
        for name, value in (("slot", slot), ("width", width)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"a table {name} must be an int >= 0, got {value!r}")
        with self._lock:
            round_ = self._needed.get(slot, (None, None))[0]
            table = self._tables.get(slot)
            if table is None or table["round"] != round_ or table["array"].shape[1] != width or \
                    str(table["array"].dtype) != dtype:
                if table is not None and table["holder"] is not None:
                    table["holder"].close()  # the last round's block: gone once the trainers map the new one
                ids = self.needed(slot)
                specs = {"rows": (np.dtype(dtype), (ids.numel(), width))}
                holder = SharedArrays.create(specs, label=f"unigraph-table{self.machine}_{slot}") if self.shared else None
                array = holder.arrays["rows"] if holder is not None else allocate_in_memory(specs)["rows"]
                table = self._tables[slot] = {"holder": holder, "array": array, "ids": ids, "round": round_,
                                              "made": time.monotonic()}
                self._first_tables.setdefault(slot, (holder.size if holder is not None else 0, table["made"]))
        return table["holder"].describe() if table["holder"] is not None else table["array"]

    def hidden(self, ids: Tensor, slot: int) -> Tensor:
        """Rows of table ``slot`` for owned ``ids``."""
        if slot not in self._tables:
            raise ValueError(f"machine {self.machine} has no inference table {slot} (no trainer made it)")
        table = self._tables[slot]
        return torch.from_numpy(table["array"][table_rows(table["ids"], ids, f"table {slot} of machine "
                                                          f"{self.machine}").numpy()])

    # ------------------------------------------------------------------ requests
    def answer(self, request: str, ids: Tensor, *args):
        """Run one of :data:`REQUESTS` for another machine."""
        if request in ("hidden", "need"):
            check_request_ids(ids)
            return getattr(self, request)(ids, *args)
        if request not in PARTITION_REQUESTS:
            raise ValueError(f"unknown request {request!r}; a graph server answers {', '.join(REQUESTS)}")
        return self.local.answer(request, ids, *args)

    def describe(self) -> dict:
        """What a process of this machine needs to attach (:func:`attach`)."""
        if not self.shared:
            raise ValueError("an in-process graph server has nothing to attach to")
        return {"machine": self.machine, "partition": self.storage.describe(),
                "cache": self._cache_storage.describe() if self._cache_storage is not None else None}

    # ------------------------------------------------------------------ memory of the machine
    def watch(self, pid: int, label: str) -> None:
        """Count process ``pid`` of this machine in the machine's memory (:meth:`memory`)."""
        if self.monitor is None:
            self.monitor = MemoryMonitor().start()
            self.monitor.add(os.getpid(), f"server{self.machine}")
        self.monitor.add(pid, label)

    def memory(self) -> dict:
        """The machine's memory so far: peak of the summed PSS of its processes (``at_peak``: every
        field's sum at that reading), each one's peaks, and the bytes of the shared blocks (one copy
        of the partition, the cache, the tables; ``shared_bytes_at_peak``: those that existed at
        the peak: a table is made when evaluation first runs)."""
        report = self.monitor.report() if self.monitor is not None else {"peak": {}, "at_peak": {}, "processes": {},
                                                                              "samples": 0, "peak_time": None}
        base = {"partition": self.storage.size if self.storage else 0,
                "cache": self._cache_storage.size if self._cache_storage else 0}
        report["shared_bytes"] = {**base, "tables": sum(t["holder"].size for t in self._tables.values()
                                                        if t["holder"] is not None)}
        peak_time = report["peak_time"]  # (every round's table of a slot has the same rows: the same nodes)
        report["shared_bytes_at_peak"] = {**base, "tables": sum(size for size, made in self._first_tables.values()
                                                                if peak_time is not None and made <= peak_time)}
        return report

    def close(self) -> dict:
        """Stop watching memory (returns :meth:`memory`)."""
        if self.monitor is not None:
            self.monitor.stop()
        return self.memory()


def attach(description: dict, info: fmt.PartitionSetInfo, layout: JobLayout) -> tuple[LocalPartition, FeatureCache]:
    """This machine's partition and cache, mapped read-only from its server's shared memory."""
    block = SharedArrays.attach(description["partition"])
    machine = description["machine"]
    parts = layout.machine_parts(machine)
    mapped = mapped_node_arrays(info, parts, verify=False)  # the server checked them; the page cache is shared
    local = LocalPartition(info, PartitionBook(layout.machine_offsets(info.offsets)), machine, parts,
                           {**block.arrays, **mapped})
    if description["cache"] is None:
        return local, FeatureCache(torch.zeros(0, dtype=torch.int64), local.x[:0])
    cache = tensors_of(SharedArrays.attach(description["cache"]).arrays)
    return local, FeatureCache(cache["ids"], cache["rows"])


def attach_table(description) -> tuple[np.ndarray, SharedArrays | None]:
    """A table made by :meth:`GraphServer.table`, mapped writable (the trainers fill it), and its
    shared block (``None`` for an in-process server's array) to :meth:`~SharedArrays.release_pages`."""
    if isinstance(description, np.ndarray):
        return description, None
    block = SharedArrays.attach(description, writable=True)
    return block.arrays["rows"], block
