"""Samplers that misbehave on purpose, for the worker-pool tests. They live in their own module
so that spawned worker processes can import them by name."""
from __future__ import annotations

import os
import time

from unigraph.sampling import NeighborSampler

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
