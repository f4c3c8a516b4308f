"""Samplers that misbehave on purpose, for the worker-pool tests. They live in their own module
so that spawned worker processes can import them by name."""
from __future__ import annotations

import faulthandler
import json
import os
import signal
import time

import torch

from unigraph.data import rmat
from unigraph.sampling import NeighborSampler, NodeLoader

POISON = 7  # the node id whose batch misbehaves


class FailingSampler(NeighborSampler):
    def sample(self, graph, seeds, *, key=None):
        if POISON in seeds.tolist():
            raise ArithmeticError(f"poisoned batch containing node {POISON}")
        return super().sample(graph, seeds, key=key)


class DyingSampler(NeighborSampler):
    def sample(self, graph, seeds, *, key=None):
        if POISON in seeds.tolist():
            os._exit(3)
        return super().sample(graph, seeds, key=key)


class SleepingSampler(NeighborSampler):
    def sample(self, graph, seeds, *, key=None):
        if POISON in seeds.tolist():
            time.sleep(60)
        return super().sample(graph, seeds, key=key)


BALLAST_BYTES = 8 << 20  # far more than a socket buffer holds (about 200 KB on Linux)


class BigBatchSampler(NeighborSampler):
    """Every batch carries 8 MB of ballast: a worker that sends one blocks in the middle of the
    write until the caller reads (the state in which the OOM killer used to hang the caller).
    With a ``gate`` file name, batches other than the one holding node 0 wait until that file
    exists, so that the caller can stop reading first."""

    def __init__(self, fanouts, *, gate: str | None = None):
        super().__init__(fanouts)
        self.gate = gate

    def sample(self, graph, seeds, *, key=None):
        deadline = time.monotonic() + 60
        while (self.gate is not None and 0 not in seeds.tolist() and not os.path.exists(self.gate)
               and time.monotonic() < deadline):
            time.sleep(0.01)
        batch = super().sample(graph, seeds, key=key)
        batch.ballast = torch.ones(BALLAST_BYTES // 4)
        return batch


class SlowSampler(NeighborSampler):
    """Half a second per batch: the caller spends its time waiting for batches, the workers theirs
    busy (not waiting to read a task)."""

    def sample(self, graph, seeds, *, key=None):
        time.sleep(0.5)
        return super().sample(graph, seeds, key=key)


def serve_forever(kind: str) -> None:
    """The main program of the signal tests (run in a subprocess, ``tests`` on ``sys.path``): two
    spawned workers, their pids printed as a JSON line, then until a signal arrives:

    * ``"waiting"``: epochs of slow batches (the caller waits for batches, the workers compute).
      On Ctrl-C it prints the monotonic time the ``KeyboardInterrupt`` reached it, then lets it
      end the program.
    * ``"stalled"``: the caller stops reading after one batch while the workers send 8 MB
      batches: they stay blocked in the middle of a write.
    """
    faulthandler.register(signal.SIGUSR1, all_threads=True)   # a test that waits too long asks where we are
    # Ctrl-C as a program in a terminal has it, also where the test runner was started with SIGINT
    # ignored (a background job of a shell: its children inherit the ignoring)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    graph = rmat(200, 2000, seed=1)
    sampler = SlowSampler([2]) if kind == "waiting" else BigBatchSampler([2])
    loader = NodeLoader(graph, torch.arange(200), sampler, batch_size=16, num_workers=2, timeout=120)
    batches = iter(loader)
    next(batches)
    print(json.dumps({"pid": os.getpid(), "workers": loader.worker_pids}), flush=True)
    if kind == "stalled":
        time.sleep(600)
    try:
        while True:
            for _ in batches:
                pass
            batches = iter(loader)
    except KeyboardInterrupt:
        print(json.dumps({"interrupted": time.monotonic()}), flush=True)
        raise
