"""The scaling model of docs/distributed.md as code: what each machine stores and what crosses the network.

One place for the arithmetic that the docs quote, that ``benchmarks/dist_scaling.py`` checks
against runs at 1M / 2M / 4M nodes and extrapolates to DistDGL's graph (100M nodes, 3B edges).

Notation: ``N`` nodes, ``E`` directed edges, ``F`` float32 features, ``M`` machines (one part
each), ``hidden`` the hidden width (the layer-wise evaluation table), ``halo`` and ``halo_edges``
the halo nodes and their in-edges per owned node (measured from the partition report), ``cache``
the cached rows per machine as a share of its nodes, ``C`` the fixed memory per machine (server
and trainer processes: interpreter, torch, numba, RPC and gloo, the model and its batches).

Bytes a machine's shared memory holds (``unigraph.distributed.server``):

* per owned node: features ``4F``, label, original id, out-degree and CSR offset (8 each), three
  split flags (3): ``4F + 35``;
* per stored edge (its nodes' in-edges and its halo's): 4 (int32 source ids);
* per halo node: id, out-degree and CSR offset: 24;
* per cached row: ``4F + 8``; per row of the layer-wise evaluation table (the nodes the last layer
  reads: a share ``t`` of the machine's nodes): ``4 hidden``.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Graph:
    nodes: float
    edges: float
    features: int = 128


@dataclasses.dataclass
class Constants:
    """What the model takes from a measurement (see :func:`fit`)."""

    fixed_bytes: float            # C: per machine, beside its shared blocks
    halo: float                   # halo nodes per owned node
    halo_edges: float             # halo in-edges per owned node
    cache_share: float            # cached rows per owned node
    hidden: int                   # evaluation table width
    table_share: float            # t: rows of the evaluation table per owned node
    rows_per_seed: float          # r: feature rows gathered per training seed
    remote_share: float           # rho: of those, owned by another machine
    hit_rate: float               # h: of the remote ones, served by the cache
    sample_bytes_per_seed: float  # s: sampling requests and replies per seed
    gradient_bytes: float         # G: the model's gradient


def shared_bytes(graph: Graph, machines: int, c: Constants, *, table: bool = True) -> dict[str, float]:
    """One machine's shared blocks (bytes), by kind."""
    owned = graph.nodes / machines
    f = graph.features
    out = {"nodes": owned * (4 * f + 35), "edges": 4 * graph.edges / machines,
           "halo": owned * (24 * c.halo + 4 * c.halo_edges), "cache": owned * c.cache_share * (4 * f + 8)}
    out["table"] = owned * c.table_share * 4 * c.hidden if table else 0.0
    return out


def memory_per_machine(graph: Graph, machines: int, c: Constants) -> float:
    """``C`` plus the machine's shared blocks."""
    return c.fixed_bytes + sum(shared_bytes(graph, machines, c).values())


def bytes_per_epoch(seeds: float, features: int, machines: int, batch: float, c: Constants) -> dict[str, float]:
    """Training traffic of one epoch, all machines together: remote feature rows not cached
    (``4F + 8`` bytes each: a row and its id), sampling, and the ring all-reduce's
    ``2 (M - 1) G`` per step of ``batch`` seeds."""
    rows = seeds * c.rows_per_seed * c.remote_share * (1 - c.hit_rate) * (4 * features + 8)
    sampling = seeds * c.sample_bytes_per_seed
    all_reduce = 2 * (machines - 1) * c.gradient_bytes * seeds / batch
    return {"features": rows, "sampling": sampling, "rpc": rows + sampling, "all_reduce": all_reduce}


def fit(run: dict, graph: Graph, machines: int, hidden: int, gradient_bytes: float) -> Constants:
    """The constants of one measured run (``benchmarks.distributed.describe_run``'s result, with
    the partition report's per-part halo sizes in ``run["parts"]``)."""
    owned = graph.nodes / machines
    parts = run["parts"]
    halo = sum(p["halo"] for p in parts) / graph.nodes
    halo_edges = sum(p["halo_edges"] for p in parts) / graph.nodes
    cache_share = run["cache_rows_per_machine"] / owned
    tables = [m["shared_bytes"]["tables"] for m in run["machines"]]
    table_share = sum(tables) / len(tables) / (owned * 4 * hidden)
    c = Constants(0.0, halo, halo_edges, cache_share, hidden, table_share, run["rows_per_seed"], run["remote_row_share"],
                  run["cache_hit_rate"] or 0.0, run["sample_bytes_per_epoch"] / run["seeds_per_epoch"], gradient_bytes)
    measured = max(m["pss_peak"] for m in run["machines"])
    c.fixed_bytes = measured - sum(shared_bytes(graph, machines, c).values())
    return c


# DistDGL (Zheng et al., "DistDGL: Distributed Graph Neural Network Training for Billion-Scale
# Graphs", IA3 2020): GraphSAGE on a graph of 100M nodes and 3B edges, 16 machines, 13 s per epoch.
DISTDGL = {"nodes": 100e6, "edges": 3e9, "machines": 16, "epoch_seconds": 13.0}
