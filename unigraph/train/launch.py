"""Start ``nproc`` ranks on this machine, as ``torchrun --nproc-per-node`` would, and fail fast.

Each rank is a fresh ``spawn``-ed interpreter (never ``fork``: a forked child inherits OpenMP and
lock state it cannot use) with the environment ``torchrun`` would give it (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), so the
same worker code runs under either. It then calls ``target(*args)``; its return value comes back
to the caller.

Failure handling (no silent hang; see ``docs/faults.md``):

* The launcher waits on every rank's exit and every rank's own channel at once
  (:mod:`unigraph.procs`), so it sees a failure the moment it happens: a rank that raises sends
  its traceback (with a timestamp) before it exits; a rank that dies without a Python error (a
  signal such as the OOM killer's SIGKILL, ``os._exit``, a segfault) is seen by its exit code.
* Half a second after the first failure (time for a simultaneous, independent failure to report
  too; up to ``CAUSE_SECONDS`` while every failure only says that a peer vanished, so that the
  peer's own end is seen), every rank still running is stopped and :class:`LaunchError` names
  the rank that failed *first* and how: its traceback, or its exit code or signal. A rank whose
  error only says that a peer vanished (a connection reset or closed by the peer, anywhere in its
  final exception's message) is a consequence, never the cause: it is listed after the root cause
  whatever its timestamp.
* Each rank sends a heartbeat every second (a thread of its own). A rank that falls silent and
  that the kernel reports stopped (SIGSTOP: state ``T`` in ``/proc``) fails the job within about
  ``STOPPED_AFTER`` (2) seconds, named as stopped; one silent for ``heartbeat_timeout`` seconds
  (120 by default: a numba kernel holds the GIL for seconds on a large graph) fails whatever its
  state. The other ranks' timeouts (collectives, RPC) would otherwise blame whoever waited longest.
* A rank that ends without a Python error is dated by the moment the launcher last saw it alive
  (when its previous wait began), not when it noticed the end: a peer's error about the lost
  connection, raised in between, sorts after it. Its end is its main thread's (``Z`` in ``/proc``,
  as a peer sees it), not the last of its threads' (:func:`unigraph.procs.wait_any`).
* A rank stuck in a collective fails by itself after the process group's timeout (see
  :func:`unigraph.train.distributed.init_distributed`); and the whole job is bounded by
  ``timeout`` seconds, after which the ranks still running print every thread's stack to their
  stderr (``faulthandler``) and are stopped.
* However the caller leaves (an error, Ctrl-C, a test's timeout, even SIGKILL), no rank outlives
  it: each rank holds the launcher's lifeline and exits the moment it ends.
* A rank whose gloo process group outlived ``destroy_process_group`` (torch keeps one while
  ``P2POp``s that used it live, as pipeline stages' do) leaves without the interpreter's teardown
  after it has reported its result (:func:`unigraph.procs.exit_if_gloo_outlived`): that teardown
  could otherwise abort it (SIGABRT) after its work was done.

Threads: each rank gets ``threads`` intra-op threads (default: the cores divided among the ranks,
at least 1), as ``torchrun`` sets ``OMP_NUM_THREADS``; and OpenMP threads wait passively
(``OMP_WAIT_POLICY=PASSIVE``), because spinning waiters steal the cores of the other ranks
(measured on 2 busy cores: every torch operation ~10x slower with spinning waiters).
"""
from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import os
import pickle
import signal
import socket
import threading
import time
import traceback
from typing import Any, Callable, NoReturn

import torch.multiprocessing as mp

from unigraph.procs import (
    Channel, Lifeline, describe_exit, exit_code_of, exit_if_gloo_outlived, exit_with_parent, process_state,
    send_message, start_child, stop_processes, wait_any)

SETTLE_SECONDS = 0.5   # after the first failure, how long the other ranks may still report theirs
CAUSE_SECONDS = 3.0    # while every failure only says a peer vanished, how long to wait for the peer's own end
HEARTBEAT_SECONDS = 1.0   # how often a rank says it is alive (a thread of its own)
STOPPED_AFTER = 2.0       # a rank that is silent this long and stopped (SIGSTOP: state T in /proc) has failed
HEARTBEAT_TIMEOUT = 120.0  # a rank silent this long has failed whatever its state (a numba kernel holds the GIL
# for seconds on a large graph, so the heartbeat thread of a busy rank may be late; never this late)
# What a rank's error says when it only lost a peer (gloo, NCCL, the rendezvous store): a consequence.
PEER_LOST = ("connection closed by peer", "connection reset by peer", "broken pipe", "remote process exited",
             "communicator was aborted",
             "process_vm_readv: no such process")   # tensorpipe's shared-memory channel reading a dead peer (RPC)


class LaunchError(RuntimeError):
    """A rank failed (its error text is in the message) or the job ran out of time."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port of ``host`` that was free a moment ago (the rendezvous port of a job)."""
    family, sockaddr = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0][::4]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind(sockaddr)
        return sock.getsockname()[1]


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    """``values`` in ``os.environ`` while the children are spawned (they copy it at start)."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class _Reporter:
    """A rank's side of its channel: whole messages under a lock (the heartbeat thread writes too)."""

    def __init__(self, rank: int, channel):
        self.rank, self.channel, self.lock = rank, channel, threading.Lock()

    def send(self, kind: str, payload: Any = None, message: bytes | None = None) -> None:
        message = message if message is not None else pickle.dumps((kind, self.rank, time.time(), payload))
        with self.lock:
            send_message(self.channel, message)

    def beat_forever(self) -> None:
        while True:
            time.sleep(HEARTBEAT_SECONDS)
            try:
                self.send("beat")
            except OSError:  # the launcher is gone: the lifeline ends this process
                return


def _rank_main(local_rank: int, target: Callable, args: tuple, threads: int, channel, lifeline) -> None:
    exit_with_parent(lifeline, exit_code=1)
    os.environ.update(RANK=str(local_rank), LOCAL_RANK=str(local_rank))
    if hasattr(signal, "SIGUSR1"):  # the launcher asks for every thread's stack before it stops a stuck job
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    reporter = _Reporter(local_rank, channel)
    threading.Thread(target=reporter.beat_forever, name="unigraph-heartbeat", daemon=True).start()
    import torch  # noqa: PLC0415 - in the child
    torch.set_num_threads(threads)
    try:
        value = target(*args)
        # plain pickle bytes: a tensor sent as a torch shared-memory handle would vanish with this rank
        message = pickle.dumps(("result", local_rank, time.time(), value))
    except BaseException as error:
        reporter.send("error", (traceback.format_exc(), "".join(traceback.format_exception_only(error))))
        raise   # (after reporting: the launcher acts on the report, not on this process's exit)
    reporter.send("result", message=message)
    exit_if_gloo_outlived(0)   # a gloo group torch kept after destroy_process_group could abort the exit


@dataclasses.dataclass(order=True)
class _Failure:
    consequence: bool   # the error only says that a peer vanished
    when: float         # wall-clock time of the error (the rank's) or of the exit (seen by the launcher)
    rank: int
    how: str            # "raised an exception", "was killed by signal 9 (SIGKILL)", ...
    text: str = ""      # the traceback, if any

    def traceback(self) -> str:
        return f"\n{self.text.rstrip()}" if self.text else ""


def _error_failure(rank: int, when: float, text: str, message: str) -> _Failure:
    """A rank's error: its traceback ``text`` and its final exception's own ``message``
    (``format_exception_only``), which may span lines (an RPC error carries the remote ``At:``
    lines): the whole message is read, not the traceback's last line."""
    lowered = message.lower()
    return _Failure(any(pattern in lowered for pattern in PEER_LOST), when, rank, "raised an exception", text)


def launch(target: Callable, nproc: int, args: tuple = (), *, timeout: float = 600.0, threads: int | None = None,
           env: dict[str, str] | None = None, heartbeat_timeout: float = HEARTBEAT_TIMEOUT) -> list[Any]:
    """Run ``target(*args)`` in ``nproc`` ranks; return their return values, in rank order.

    ``target`` must be importable by name (a module-level function) and its arguments picklable.
    ``env`` adds environment variables for the ranks. Raises :class:`LaunchError` within about a
    second of the first failure of any rank, naming that rank and how it failed (traceback, exit
    code or signal), within about ``STOPPED_AFTER`` seconds of a rank being stopped (SIGSTOP,
    seen through its heartbeats and ``/proc``), after ``heartbeat_timeout`` seconds of a rank's
    silence, or when ``timeout`` seconds pass (the stuck ranks first print every thread's stack to
    their stderr). However the caller leaves (an error, Ctrl-C, a test timeout, SIGKILL), no rank
    outlives it.
    """
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"nproc must be an int >= 1, got {nproc!r}")
    if not callable(target):
        raise TypeError(f"target must be a module-level function, got {type(target).__name__}")
    if threads is None:
        threads = max(1, (os.cpu_count() or 1) // nproc)
    variables = {"WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc), "MASTER_ADDR": "127.0.0.1",
                 "MASTER_PORT": str(free_port()), "OMP_NUM_THREADS": str(threads),
                 "NUMBA_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
                 **(env or {})}
    job = _Job(mp.get_context("spawn"), nproc, heartbeat_timeout)
    try:
        with _environment(variables):
            job.start(target, args, threads)
        return job.wait(timeout)
    finally:
        job.stop()   # a no-op after a clean finish; otherwise no rank outlives the caller


class _Job:
    """The ranks of one :func:`launch`, their channels, and what they reported."""

    def __init__(self, context, nproc: int, heartbeat_timeout: float = HEARTBEAT_TIMEOUT):
        self.context = context
        self.nproc = nproc
        self.heartbeat_timeout = heartbeat_timeout
        self.last_heard: dict[int, float] = {}   # rank -> monotonic time of its last message (heartbeats included)
        self.alive_at = time.time()              # when the last wait began: ranks it did not see end were alive then
        self.lifeline = Lifeline(context)
        self.processes: list = []
        self.channels: list[Channel] = []
        self.results: dict[int, Any] = {}
        self.failures: dict[int, _Failure] = {}
        self.exited: set[int] = set()

    def start(self, target: Callable, args: tuple, threads: int) -> None:
        for rank in range(self.nproc):   # not daemons: a rank may start sampling workers of its own
            process, channel = start_child(self.context, _rank_main, (rank, target, args, threads),
                                           name=f"unigraph-rank-{rank}", lifeline=self.lifeline, daemon=False)
            self.processes.append(process)
            self.channels.append(channel)
            self.last_heard[rank] = time.monotonic()
        self.lifeline.started()

    def wait(self, timeout: float) -> list[Any]:
        deadline = time.monotonic() + timeout
        first_failure = None
        while len(self.exited) < self.nproc:
            now = time.monotonic()
            if first_failure is None and self.failures:
                first_failure = now
            settle = self._settle_seconds()
            if first_failure is not None and now - first_failure >= settle:
                break
            if now >= deadline:
                self._time_out(timeout)
            limit = deadline if first_failure is None else min(deadline, first_failure + settle)
            self._poll(min(limit - now, HEARTBEAT_SECONDS))
            self._check_heartbeats()
        if self.failures:
            self._poll(0.0)   # a rank that ended meanwhile is named for its own end, not for being stopped
            self.stop()
            raise LaunchError(self._failure_report())
        return [self.results[rank] for rank in range(self.nproc)]

    def _settle_seconds(self) -> float:
        """How long after the first failure the others may still report: longer while every failure
        so far only says a peer vanished, so the peer's own end (its exit code, seen a moment after
        its connections closed) can be named as the cause."""
        return CAUSE_SECONDS if all(failure.consequence for failure in self.failures.values()) else SETTLE_SECONDS

    def _poll(self, seconds: float) -> None:
        """Wait up to ``seconds`` for news from any rank, and take it in."""
        running = [rank for rank in range(self.nproc) if rank not in self.exited]
        # A rank this wait does not see end was alive when it began (a rank dead by then would be
        # seen at once): a rank seen ending in the next wait is dated then, so that an error another
        # rank raised about its end sorts after it (that rank's clock is this one's). Read before the
        # wait, not after its return: the launcher may be descheduled between the two (a loaded
        # machine), while the rank dies and its peer reports it.
        began = time.time()
        readable, ended = wait_any(self.channels, [self.processes[rank] for rank in running], seconds, main_thread=True)
        ended_after, self.alive_at = self.alive_at, began
        for channel in readable:
            self._receive(self.channels.index(channel))
        for rank in (running[index] for index in ended):
            self._receive(rank)   # everything it wrote before it exited
            self.exited.add(rank)
            code = exit_code_of(self.processes[rank])
            if rank in self.failures:
                continue
            if code != 0:
                self.failures[rank] = _Failure(False, ended_after, rank, describe_exit(code) +
                                               ("" if rank in self.results else " without raising a Python error"))
            elif rank not in self.results:
                self.failures[rank] = _Failure(False, ended_after, rank, "exited (code 0) without returning a result")

    def _check_heartbeats(self) -> None:
        """A rank silent for ``STOPPED_AFTER`` seconds that the kernel says is stopped, or silent for
        ``heartbeat_timeout`` seconds in any state, has failed (dated by its last message)."""
        now = time.monotonic()
        for rank in range(self.nproc):
            silent = now - self.last_heard[rank]
            if rank in self.exited or rank in self.failures or silent < STOPPED_AFTER:
                continue
            state = process_state(self.processes[rank].pid)
            if state in ("T", "t"):
                how = (f"was stopped (process state {state}: SIGSTOP, a debugger or job control) and has sent no "
                       f"heartbeat for {silent:.1f} s")
            elif silent >= self.heartbeat_timeout:
                how = (f"has sent no heartbeat for {silent:.0f} s (heartbeat_timeout={self.heartbeat_timeout:g}): it is "
                       f"hung in code that holds the GIL, stopped or starved (process state {state or 'unknown'})")
            else:
                continue
            self.failures[rank] = _Failure(False, time.time() - silent, rank, how)

    def _receive(self, rank: int) -> None:
        for message in self.channels[rank].receive():
            kind, _, when, payload = pickle.loads(message)   # from our own ranks
            self.last_heard[rank] = time.monotonic()
            if kind == "beat":
                continue
            if kind == "result":
                self.results[rank] = payload
            else:
                self.failures[rank] = _error_failure(rank, when, *payload)

    def _time_out(self, timeout: float) -> NoReturn:
        stuck = [rank for rank in range(self.nproc) if rank not in self.exited]
        alive = [self.processes[rank] for rank in stuck if self.processes[rank].is_alive()]
        if alive and hasattr(signal, "SIGUSR1"):
            for process in alive:
                os.kill(process.pid, signal.SIGUSR1)
            time.sleep(1.0)
        self.stop()
        message = (f"the job did not finish within timeout={timeout}s; ranks {stuck} were still running "
                   "(their stacks are on stderr) and all ranks were stopped")
        raise LaunchError(message + ("\n" + self._failure_report() if self.failures else ""))

    def _failure_report(self) -> str:
        first, *others = sorted(self.failures.values())
        lines = [f"rank {first.rank} failed first: it {first.how}; the other ranks were stopped.{first.traceback()}"]
        for failure in others:
            cause = " (it lost a peer: a consequence, not a cause)" if failure.consequence else ""
            lines.append(f"rank {failure.rank} failed after that{cause}: it {failure.how}.{failure.traceback()}")
        return "\n".join(lines)

    def stop(self) -> None:
        """Stop every rank at once and reap them. Cutting the lifeline makes a running rank exit;
        one already in the interpreter's teardown (after its error) cannot run the lifeline's
        thread any more, and is terminated after a short grace."""
        self.lifeline.cut()
        for channel in self.channels:
            channel.close()
        stop_processes(self.processes, grace=0.3)
