"""How a process asks the owner of a partition: ``torch.distributed.rpc``, or in-process for tests.

Every remote operation of the distributed graph is one of the owner's requests
(:data:`unigraph.distributed.local.REQUESTS`) carrying a tensor of global node ids. The caller
sends at most one request per owner per batch (or per hop) and gets a ``torch.futures.Future``
back at once, so requests to every owner are in flight together and local work proceeds
meanwhile.

* :class:`RpcPeers` sends requests with ``torch.distributed.rpc.rpc_async`` (TensorPipe: tensors
  travel as raw bytes beside the message; only the request name and small ints are pickled, between
  processes of one job). The owner's RPC thread pool runs :func:`_answer` on the partition this
  process registered with :func:`serve`. An error on the owner comes back as the caller's
  exception, with the owner's traceback; a dead owner fails the request at once (closed
  connection) or after the RPC timeout.
* :class:`LocalPeers` holds several partitions in one process and answers directly: the same
  requests, the same code, no processes (the sampler's statistical tests run on it).

Both count requests and the bytes of the tensors sent and received (payload only; RPC headers
are not counted).
"""
from __future__ import annotations

import threading

import torch
from torch import Tensor

from unigraph.distributed.local import LocalPartition

_SERVED: LocalPartition | None = None


class RemoteError(RuntimeError):
    """A request to another partition's owner failed (the owner raised, died, or did not answer in time)."""


def owner_name(part: int) -> str:
    """The RPC name of the process that owns (holds and serves) partition ``part``."""
    return f"part{part}"


def serve(partition: LocalPartition | None) -> None:
    """Let this process answer requests about ``partition`` (``None``: stop answering)."""
    global _SERVED
    _SERVED = partition


def _answer(request: str, ids: Tensor, *args):
    """What an owner runs for an incoming RPC (module-level, so RPC can name it)."""
    if _SERVED is None:
        raise RuntimeError(f"this process serves no partition, but was sent a {request!r} request")
    return _SERVED.answer(request, ids, *args)


def payload_bytes(value) -> int:
    if isinstance(value, Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (tuple, list)):
        return sum(payload_bytes(v) for v in value)
    return 0


class Peers:
    """Sends requests to owners and keeps traffic counters (``requests``, ``bytes_sent``,
    ``bytes_received``: tensor payloads only)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.requests = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.bytes_by_request: dict[str, int] = {}  # sent + received, per kind of request

    def _count(self, request: str, sent: int = 0, received: int = 0) -> None:
        with self._lock:
            self.bytes_sent += sent
            self.bytes_received += received
            self.bytes_by_request[request] = self.bytes_by_request.get(request, 0) + sent + received

    def request(self, owner: int, request: str, ids: Tensor, *args) -> torch.futures.Future:
        """Ask ``owner`` to run ``request`` on ``ids``; the future holds its answer."""
        with self._lock:
            self.requests += 1
        self._count(request, sent=payload_bytes(ids))
        return self._send(owner, request, ids, *args).then(lambda future: self._received(future, request))

    def _received(self, future: torch.futures.Future, request: str):
        value = future.value()  # raises the owner's error here, in the callback's future
        self._count(request, received=payload_bytes(value))
        return value

    def _send(self, owner: int, request: str, ids: Tensor, *args) -> torch.futures.Future:
        raise NotImplementedError

    def traffic(self) -> dict:
        with self._lock:
            return {"requests": self.requests, "bytes_sent": self.bytes_sent, "bytes_received": self.bytes_received,
                    "bytes_by_request": dict(self.bytes_by_request)}

    def reset_traffic(self) -> None:
        with self._lock:
            self.requests = self.bytes_sent = self.bytes_received = 0
            self.bytes_by_request = {}


# What TensorPipe says when the other end of a connection is gone (its process died or left).
CONNECTION_LOST = ("eof", "pipe closed", "connection reset", "connection refused", "broken pipe")


def describe_failure(err: BaseException, who: str) -> str:
    """The error of a request to ``who``, saying so plainly when ``who``'s process is gone."""
    text = str(err)
    if any(marker in text.lower() for marker in CONNECTION_LOST):
        return f"{who} is gone (connection closed by peer: its process died or left): {text}"
    return text


def wait(future: torch.futures.Future, owner: int, request: str):
    """The value of a request's future; a failure becomes :class:`RemoteError` naming the owner."""
    try:
        return future.wait()
    except RuntimeError as err:
        who = f"partition {owner} ({owner_name(owner)})"
        raise RemoteError(f"the {request!r} request to {who} failed: {describe_failure(err, who)}") from err


class RpcPeers(Peers):
    """Requests over ``torch.distributed.rpc`` (the caller has joined the job's RPC group)."""

    def __init__(self, timeout: float):
        super().__init__()
        self.timeout = timeout

    def _send(self, owner, request, ids, *args):
        from torch.distributed import rpc  # noqa: PLC0415
        return rpc.rpc_async(owner_name(owner), _answer, args=(request, ids, *args), timeout=self.timeout)


class LocalPeers(Peers):
    """Every partition in this process; a request is answered at once (tests, single-process tools)."""

    def __init__(self, partitions: dict[int, LocalPartition]):
        super().__init__()
        self.partitions = partitions

    def _send(self, owner, request, ids, *args):
        future = torch.futures.Future()
        try:
            future.set_result(self.partitions[owner].answer(request, ids, *args))
        except Exception as err:  # noqa: BLE001 - delivered to the caller through the future, as RPC does
            future.set_exception(err)
        return future
