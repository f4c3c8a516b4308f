"""NUMA-aware placement: one process per NUMA node, bound to that node's cores, with as many threads.

On a machine with several memory nodes (sockets), a process whose threads wander between sockets
reads half its memory from the other socket's controller, and its threads' caches are not
shared. The graph-store design this follows (DGL's large-scale training tutorial) measured about
4x on a 4-socket machine from running one trainer per socket, pinned there. Linux lists the nodes
in ``/sys/devices/system/node/node<N>/cpulist`` (``0-3,8-11``); :func:`topology` reads it, keeps
the cores this process may use (``os.sched_getaffinity``) and drops nodes left without any.

:func:`plan` places ``nproc`` processes: process ``r`` on node ``r * nodes // nproc`` (consecutive
processes share a node when there are more processes than nodes), each node's cores divided
evenly among its processes; threads per process = its cores. :func:`bind` applies one placement
in the calling process (``os.sched_setaffinity``, ``torch.set_num_threads``; memory then comes
from the local node by Linux's first-touch policy). :func:`launch` starts the processes through
:func:`unigraph.train.launch.launch`, each binding itself before it runs its target.

**One node:** :func:`plan` returns no placements (``None``): nothing is bound and thread counts
are left as they are (a machine without ``/sys/devices/system/node``, a single socket, or a
process allowed on one node's cores only).
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
from typing import Callable, Sequence

NODE_ROOT = "/sys/devices/system/node"


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where process ``rank`` runs: NUMA ``node``, its ``cpus`` and ``threads``."""

    rank: int
    node: int
    cpus: tuple[int, ...]
    threads: int


def parse_cpulist(text: str) -> list[int]:
    """The cores of a Linux cpulist (``"0-3,8-11"``; ``""`` is none); ValueError if malformed."""
    cpus: list[int] = []
    text = text.strip()
    if not text:
        return cpus
    for part in text.split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if match is None:
            raise ValueError(f"malformed cpulist entry {part!r} in {text!r}")
        low, high = int(match.group(1)), int(match.group(2) or match.group(1))
        if high < low:
            raise ValueError(f"malformed cpulist range {part!r} in {text!r}")
        cpus.extend(range(low, high + 1))
    return sorted(set(cpus))


def topology(root: str | os.PathLike = NODE_ROOT, allowed: Sequence[int] | None = None) -> dict[int, tuple[int, ...]]:
    """``{node: cores}`` of the NUMA nodes under ``root`` that have cores this process may use
    (``allowed``; default ``os.sched_getaffinity(0)``). Without ``root``, one node 0 with every
    allowed core."""
    allowed_set = set(allowed if allowed is not None else os.sched_getaffinity(0))
    root = pathlib.Path(root)
    nodes = {}
    for path in sorted(root.glob("node[0-9]*"), key=lambda p: int(p.name[4:])) if root.is_dir() else []:
        if not path.name[4:].isdigit() or not (path / "cpulist").is_file():
            continue
        cpus = tuple(c for c in parse_cpulist((path / "cpulist").read_text()) if c in allowed_set)
        if cpus:
            nodes[int(path.name[4:])] = cpus
    return nodes or {0: tuple(sorted(allowed_set))}


def plan(nproc: int | None = None, *, root: str | os.PathLike = NODE_ROOT,
         allowed: Sequence[int] | None = None) -> list[Placement] | None:
    """Placements of ``nproc`` processes (default: one per node), or ``None`` on one node."""
    nodes = topology(root, allowed)
    if len(nodes) < 2:
        return None
    nproc = len(nodes) if nproc is None else nproc
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"nproc must be an int >= 1, got {nproc!r}")
    order = sorted(nodes)
    placements = []
    for rank in range(nproc):
        node = order[rank * len(order) // nproc]
        sharing = [r for r in range(nproc) if order[r * len(order) // nproc] == node]
        cpus = nodes[node]
        share = len(sharing)
        if share > len(cpus):
            raise ValueError(f"{share} processes on NUMA node {node} with {len(cpus)} usable cores: at most one process "
                             "per core")
        k = sharing.index(rank)
        mine = cpus[k * len(cpus) // share:(k + 1) * len(cpus) // share]
        placements.append(Placement(rank, node, mine, len(mine)))
    return placements


def bind(placement: Placement) -> None:
    """Pin the calling process to ``placement``'s cores and use that many torch threads."""
    import torch  # noqa: PLC0415 - only the bound processes need it
    os.sched_setaffinity(0, placement.cpus)
    torch.set_num_threads(placement.threads)


def _bound(target: Callable, placements: list[Placement] | None, args: tuple):
    """Each launched process: bind itself (by its ``RANK``), then run ``target(*args)``."""
    if placements is not None:
        bind(placements[int(os.environ["RANK"])])
    return target(*args)


def launch(target: Callable, nproc: int | None = None, args: tuple = (), *, root: str | os.PathLike = NODE_ROOT,
           **options) -> list:
    """:func:`unigraph.train.launch.launch` with every process bound to its NUMA node (see
    :func:`plan`; on one node the processes are started unbound, ``nproc`` defaulting to 1)."""
    from unigraph.train.launch import launch as start  # noqa: PLC0415
    placements = plan(nproc, root=root)
    count = len(placements) if placements is not None else (nproc or 1)
    if placements is not None and options.get("threads") is None:
        options["threads"] = max(p.threads for p in placements)
    return start(_bound, count, args=(target, placements, args), **options)
