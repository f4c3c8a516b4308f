"""Inputs for operator tests: feature shapes per op (with DGL broadcasting) and tensor makers."""
from __future__ import annotations

import torch

from unigraph import backends as registry

# (u feature shape, e feature shape) pairs: equal, per-head broadcast both ways, scalar edge
# weights, 1-D tensors, and rank padding ((2, 3) with (2,) means e is read as (2, 1)).
BINARY_SHAPES = [((3,), (3,)), ((3,), (1,)), ((2, 3), (2, 1)), ((2, 1), (2, 3)), ((3,), ()), ((), ()),
                 ((2, 3), (2,))]
COPY_SHAPES = [(3,), (2, 3), ()]
DOT_SHAPES = [((3,), (3,)), ((2, 3), (2, 3)), ((2, 3), (1, 3))]
TARGET_PAIRS = [("u", "v"), ("v", "u"), ("u", "e"), ("e", "v"), ("u", "u"), ("e", "e"), ("v", "v")]


def cpu_test_backends() -> list[str]:
    """Backends that run here at normal test sizes (interpreted kernels have their own tests)."""
    return [name for name, backend in registry.all_backends().items()
            if registry.status_of(name).ok and not getattr(backend, "slow_on_cpu", False)]


def rows_for(graph, target: str) -> int:
    return {"u": graph.num_src_nodes, "v": graph.num_dst_nodes, "e": graph.num_edges}[target]


def features(gen: torch.Generator, rows: int, shape: tuple, *, away_from_zero: bool = False,
             dtype=torch.float64) -> torch.Tensor:
    """Random features; ``away_from_zero`` keeps |x| in [0.5, 1.5] (divisors)."""
    x = torch.randn((rows,) + tuple(shape), generator=gen, dtype=torch.float64)
    if away_from_zero:
        x = torch.sign(x) * (0.5 + torch.rand(x.shape, generator=gen, dtype=torch.float64))
        x = torch.where(x == 0, torch.ones((), dtype=x.dtype), x)
    return x.to(dtype).requires_grad_(True)
