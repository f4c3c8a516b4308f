"""Joining a ``torch.distributed`` job and the few collectives the trainers need.

A process learns its place from the environment, exactly as ``torchrun`` sets it (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``); :func:`unigraph.train.launch`
sets the same variables, so a worker runs the same code under either. Backend: NCCL where the
process has a GPU, gloo otherwise. Every process group gets a ``timeout``: a collective that
waits longer for a missing rank raises instead of hanging.
"""
from __future__ import annotations

import dataclasses
import datetime
import os
import sys

import torch
import torch.distributed as dist

ENV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


DEFAULT_TIMEOUT = 300.0


@dataclasses.dataclass(frozen=True)
class DistContext:
    """This process's place in the job; ``timeout`` (seconds) also bounds the sub-groups trainers
    create (``torch.distributed.new_group`` would otherwise default to 30 minutes)."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: torch.device
    timeout: float = DEFAULT_TIMEOUT

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def launched_by_environment() -> bool:
    """True when ``torchrun`` (or :func:`unigraph.train.launch`) started this process with more than one rank."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1


def _env_int(name: str) -> int:
    value = os.environ.get(name)
    if value is None:
        raise ValueError(f"the environment variable {name} is not set; start the job with torchrun or "
                         f"`unigraph train --nproc N` (needed: {', '.join(ENV_VARS)})")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"the environment variable {name} must be an integer, got {value!r}") from None


def init_distributed(timeout: float = DEFAULT_TIMEOUT, backend: str | None = None) -> DistContext:
    """Join the process group the environment describes (idempotent) and return this rank's context.

    ``backend``: ``"gloo"`` or ``"nccl"``; ``None`` picks NCCL when a GPU is visible, else gloo.
    """
    rank, world_size = _env_int("RANK"), _env_int("WORLD_SIZE")
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if name not in os.environ:
            raise ValueError(f"the environment variable {name} is not set; start the job with torchrun or "
                             "`unigraph train --nproc N`")
    if not 0 <= rank < world_size:
        raise ValueError(f"RANK must be in 0..WORLD_SIZE-1 = 0..{world_size - 1}, got {rank}")
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    if backend == "nccl":
        if not torch.cuda.is_available():
            raise ValueError("backend='nccl' needs a CUDA GPU; use 'gloo' on the CPU")
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if not dist.is_initialized():
        dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout))
    return DistContext(rank, world_size, local_rank, backend, device, timeout)


def current_context() -> DistContext | None:
    """The context of an already initialized process group, or None (its sub-groups get the default
    timeout: torch does not say which timeout the group was created with)."""
    if not dist.is_available() or not dist.is_initialized():
        return None
    backend = dist.get_backend()
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    return DistContext(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", dist.get_rank())),
                       backend, device)


def shutdown() -> None:
    """Leave the job: wait for every rank (so no operation is still in flight anywhere), then destroy
    the process groups. Call it after the objects that use the groups (a ``DistributedDataParallel``
    model, pipeline stages) are gone: destroying those after the groups can hang in their C++
    destructors (seen here about once in ten gloo runs; pytorch/pytorch#75097 describes the kind).

    Called while an exception propagates (in a ``finally`` or ``except`` block, or a context
    manager's exit), it does nothing: the other ranks may be waiting in a different collective, so
    a barrier would stall this rank, and with it the report of its error, for the whole collective
    timeout (300 s by default). The error then ends this process at once, and the other ranks
    are stopped by :func:`unigraph.train.launch` or ``torchrun`` (or fail on the lost connection).
    """
    if sys.exc_info()[1] is not None:
        return
    if dist.is_available() and dist.is_initialized():
        if dist.get_world_size() > 1:
            dist.barrier()
        dist.destroy_process_group()


def all_reduce_sum(values: list[float], device: torch.device, group=None) -> list[float]:
    """Element-wise sums of ``values`` over the ranks of ``group`` (float64)."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    return tensor.tolist()


def broadcast_values(values: list[float], src: int, device: torch.device) -> list[float]:
    """Rank ``src``'s ``values`` on every rank (the others pass a list of the same length)."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.broadcast(tensor, src=src)
    return tensor.tolist()


def average_gradients(parameters, group, group_size: int) -> None:
    """Replace every gradient by its mean over ``group`` (one flat all-reduce; missing gradients count as 0)."""
    parameters = [p for p in parameters if p.requires_grad]
    if group_size == 1 or not parameters:
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parameters]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
    flat /= group_size
    offset = 0
    for p, g in zip(parameters, grads):
        p.grad = flat[offset:offset + g.numel()].view_as(g).clone()
        offset += g.numel()
