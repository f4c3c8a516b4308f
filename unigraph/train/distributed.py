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
import errno
import ipaddress
import os
import socket
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


def resolve_master(address: str, port: int | None) -> tuple[int, tuple]:
    """``(family, socket address)`` of the job's master (``port`` None: any port); ``ValueError``
    naming an address that does not resolve or a port outside ``1..65535``, so that a typo fails
    at once rather than after every rank waited out its timeout."""
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535):
        raise ValueError(f"the master port must be in 1..65535, got {port!r}")
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(address, port or 0, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError, OSError) as err:
        raise ValueError(f"the master address {address!r} does not resolve ({err})") from None
    return family, sockaddr


def listen_on_master(address: str, port: int | None) -> socket.socket:
    """A listening socket bound to the master address only (not every interface; ``port`` None:
    a free one); ``ValueError`` when ``address`` is not one of this machine's or the port is taken."""
    family, sockaddr = resolve_master(address, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(1024)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRNOTAVAIL:
            raise ValueError(f"the master address {address!r} ({sockaddr[0]}) is not an address of this machine; the "
                             "machine of node rank 0 hosts the rendezvous store there") from None
        if err.errno == errno.EADDRINUSE:
            raise ValueError(f"the master port {port} is already in use on {address} ({sockaddr[0]})") from None
        raise ValueError(f"cannot listen on the master address {address}:{port} ({err.strerror or err})") from None
    return sock


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(resolve_master(address, None)[1][0]).is_loopback
    except ValueError:
        return False


def _loopback_interface() -> str | None:
    names = [name for _, name in socket.if_nameindex()] if hasattr(socket, "if_nameindex") else []
    return next((name for name in ("lo", "lo0") if name in names), None)


_STORE = None  # rank 0's rendezvous store and its listening socket (kept alive while the job runs)


def _host_store(address: str, port: int, world_size: int, timeout: float) -> None:
    """On rank 0: start the rendezvous store (``torch.distributed.TCPStore``) listening on the master
    address only. torch's own would listen on every interface; the process group and RPC then
    join this one (torch shares one store server per port in a process: ``multi_tenant``)."""
    global _STORE
    sock = listen_on_master(address, port)
    try:
        store = dist.TCPStore(address, port, world_size, is_master=True, multi_tenant=True, wait_for_workers=False,
                              master_listen_fd=sock.fileno(), timeout=datetime.timedelta(seconds=timeout))
    except BaseException:
        sock.close()
        raise
    _STORE = (store, sock)  # the store listens on this socket's descriptor: both live as long as the job


def init_distributed(timeout: float = DEFAULT_TIMEOUT, backend: str | None = None) -> DistContext:
    """Join the process group the environment describes (idempotent) and return this rank's context.

    ``backend``: ``"gloo"`` or ``"nccl"``; ``None`` picks NCCL when a GPU is visible, else gloo.

    Network exposure: ``torch.distributed`` has no authentication. Rank 0's rendezvous store
    listens on ``MASTER_ADDR`` only (unless torchrun's agent hosts it); with a loopback master
    (one machine) gloo and TensorPipe are told to use the loopback interface too
    (``GLOO_SOCKET_IFNAME`` / ``TP_SOCKET_IFNAME``, unless set). Any process that can reach those
    ports can read and write the store; run multi-machine jobs on a private network only
    (``docs/security.md``).
    """
    rank, world_size = _env_int("RANK"), _env_int("WORLD_SIZE")
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if name not in os.environ:
            raise ValueError(f"the environment variable {name} is not set; start the job with torchrun or "
                             "`unigraph train --nproc N`")
    address, port = os.environ["MASTER_ADDR"], _env_int("MASTER_PORT")
    resolve_master(address, port)
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
        if is_loopback(address) and (interface := _loopback_interface()) is not None:
            for variable in ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
                os.environ.setdefault(variable, interface)
        if rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != str(True):
            _host_store(address, port, world_size, timeout)
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
    global _STORE
    if dist.is_available() and dist.is_initialized():
        if dist.get_world_size() > 1:
            dist.barrier()
        dist.destroy_process_group()
    if _STORE is not None:
        _STORE[1].close()
        _STORE = None


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
