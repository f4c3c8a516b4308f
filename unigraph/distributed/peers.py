"""How a process asks another machine's graph server: ``torch.distributed.rpc``, or in-process for tests.

Every remote operation of the distributed graph is one of the server's requests
(:data:`unigraph.distributed.server.REQUESTS`) carrying a tensor of global node ids. The caller
sends at most one request per owner machine per batch (or per hop) and gets a
``torch.futures.Future`` back at once, so requests to every owner are in flight together and
local work proceeds meanwhile.

* :class:`RpcPeers` sends requests with ``torch.distributed.rpc.rpc_async`` to the owner
  machine's server (TensorPipe: tensors travel as raw bytes beside the message; only the request
  name and small ints are pickled, between processes of one job). The server's RPC thread pool
  runs :func:`_answer` on the object this process registered with :func:`serve`. An error on the
  server comes back as the caller's exception, with the server's traceback; a dead server fails
  the request at once (closed connection) or after the RPC timeout. :func:`control` runs the
  few set-up calls a process makes on its own machine's server (attach, tables, memory).
* :class:`LocalPeers` holds several machines' servers in one process and answers directly: the
  same requests, the same code, no processes (the sampler's statistical tests run on it).

Both count requests and the bytes of the tensors sent and received (payload only; RPC headers
are not counted).
"""
from __future__ import annotations

import threading

import torch
from torch import Tensor

from unigraph.distributed.layout import server_name

_SERVED = None  # the GraphServer this process runs, if any
CONTROL = ("describe", "table", "needed", "watch", "memory")


class RemoteError(RuntimeError):
    """A request to another machine's server failed (the server raised, died, or did not answer in time)."""


def owner_name(machine: int) -> str:
    """The RPC name of the process that answers for machine ``machine``'s nodes: its server."""
    return server_name(machine)


def serve(server) -> None:
    """Let this process answer requests with ``server`` (a GraphServer; ``None``: stop answering)."""
    global _SERVED
    _SERVED = server


def _answer(request: str, ids: Tensor, *args):
    """What a server runs for an incoming RPC (module-level, so RPC can name it)."""
    if _SERVED is None:
        raise RuntimeError(f"this process serves no partition, but was sent a {request!r} request")
    return _SERVED.answer(request, ids, *args)


def _control(method: str, *args):
    if _SERVED is None or method not in CONTROL:
        raise RuntimeError(f"this process is no graph server that answers {method!r}")
    return getattr(_SERVED, method)(*args)


def control(machine: int, method: str, *args, timeout: float = 300.0):
    """Run set-up call ``method`` (one of :data:`CONTROL`) on machine ``machine``'s server and wait."""
    from torch.distributed import rpc  # noqa: PLC0415
    return rpc.rpc_sync(server_name(machine), _control, args=(method, *args), timeout=timeout)


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
        who = f"machine {owner}'s graph server ({owner_name(owner)})"
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
    """Every machine's server in this process; a request is answered at once (tests, single-process tools)."""

    def __init__(self, servers: dict):
        super().__init__()
        self.servers = servers

    def _send(self, owner, request, ids, *args):
        future = torch.futures.Future()
        try:
            future.set_result(self.servers[owner].answer(request, ids, *args))
        except Exception as err:  # noqa: BLE001 - delivered to the caller through the future, as RPC does
            future.set_exception(err)
        return future
