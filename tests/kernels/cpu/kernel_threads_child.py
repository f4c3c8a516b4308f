"""The program of ``test_kernel_threads.py``'s CPU-time checks, run in a fresh process (numba's
pool starts once per process, with ``NUMBA_NUM_THREADS`` threads): a large g-SpMM on the numba
backend, timed by CPU time over wall time, where torch runs one thread:

* ``main``: after ``torch.set_num_threads(1)`` in this process;
* ``dataloader``: inside a torch DataLoader worker (torch sets one thread there), forked from a
  process whose numba pool already runs;
* ``launch``: in a rank of unigraph's launcher (``torch.multiprocessing`` spawn, ``threads=1``:
  ``OMP_NUM_THREADS=1`` as torchrun sets it) whose environment asks numba for more
  (``NUMBA_NUM_THREADS=2``; numba reads neither torch's setting nor ``OMP_NUM_THREADS``).

Prints one JSON line: ``{scenario: {"ratio": cpu / wall, "calls": n, "torch_threads": t}}``. With
one thread the ratio is at most ~1.0 whatever else runs on the machine (other processes can only
lower it); numba's default (every core) made it 1.76-1.97 on 2 cores.
"""
from __future__ import annotations

import json
import sys
import time

import torch

NODES, EDGES, WIDTH = 60_000, 600_000, 64
SECONDS = 0.4   # of timed calls, at least MIN_CALLS of them
MIN_CALLS = 4


def measure(_: object = None) -> dict:
    """CPU time / wall time of repeated numba g-SpMMs in this process, at torch's thread count now."""
    from unigraph import Graph, ops
    generator = torch.Generator().manual_seed(0)
    g = Graph(torch.randint(0, NODES, (2, EDGES), generator=generator), num_nodes=NODES)
    x = torch.randn(NODES, WIDTH, generator=generator)
    ops.gspmm(g, "copy_u", "sum", u=x, backend="numba")   # compiled (or loaded from numba's cache), CSR built
    calls, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
    while calls < MIN_CALLS or time.perf_counter() - wall0 < SECONDS:
        ops.gspmm(g, "copy_u", "sum", u=x, backend="numba")
        calls += 1
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {"ratio": cpu / wall, "calls": calls, "torch_threads": torch.get_num_threads()}


class _OneItem(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> dict:
        return measure()


def in_dataloader_worker() -> dict:
    loader = torch.utils.data.DataLoader(_OneItem(), batch_size=None, num_workers=1,
                                         multiprocessing_context="fork")
    return next(iter(loader))


def in_launched_rank() -> dict:
    from unigraph.train.launch import launch
    return launch(measure, 1, threads=1, env={"NUMBA_NUM_THREADS": "2"}, timeout=240)[0]


SCENARIOS = {"main": measure, "dataloader": in_dataloader_worker, "launch": in_launched_rank}

if __name__ == "__main__":
    torch.set_num_threads(1)   # the user's setting
    report = {name: SCENARIOS[name]() for name in sys.argv[1:]}
    print(json.dumps(report), flush=True)
