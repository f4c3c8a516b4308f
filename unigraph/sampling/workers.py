"""A pool of persistent sampling processes that cannot hang or outlive the caller.

Design (why each choice):

* **Start method ``spawn``** (``forkserver`` also accepted, ``fork`` refused). A forked child
  inherits a copy of the parent's threads' state but not the threads: OpenMP runtimes (torch's
  intra-op pool, numba's ``omp`` threading layer) and locks held by other threads at the time of
  the fork can leave the child waiting forever. A spawned child starts a fresh interpreter
  (about 2-4 s to import torch). ``forkserver`` forks workers from a clean single-threaded server
  process that has imported unigraph once, so pools after the first start in milliseconds.
* **Shared memory, sent once.** The graph's CSR tensors, the features and the labels are moved to
  shared memory and handed to each worker when it starts (torch's multiprocessing pickler sends
  handles, not data). Per batch, only the seed ids go out and the sampled arrays come back, as
  plain pickled bytes. Sending them as shared-memory tensors instead costs a new shared-memory
  segment and a file-descriptor hand-over per tensor, which measured about 6x slower here, and
  ties each batch to the life of the worker that made it.
* **One channel per worker, no shared lock** (:mod:`unigraph.procs`). Each worker has its own
  socket pair for tasks and results. A worker killed in the middle of writing a batch (the OOM
  killer's SIGKILL) can hold nothing the others need, and the half batch it leaves is never
  waited on: the caller reads only the bytes that are there, waiting on every channel and every
  worker's exit sentinel at once.
* **Persistent workers**: started on the first epoch, reused by every later one, stopped by
  :meth:`WorkerPool.close` (or when the loader is garbage-collected, or at interpreter exit).
  Stopping cuts the pool's lifeline, and every worker exits at once, whatever it is doing. The
  same lifeline ends when the caller dies, even by SIGKILL: no worker outlives it by more than
  a moment, and nothing is left in ``/dev/shm`` (no named semaphores are used).
* **One thread per worker** (torch and numba): ``W`` workers use ``W`` cores without
  oversubscription.
* **Never blocks without a bound.** The caller waits at most ``timeout`` seconds for each batch
  (start-up, which imports torch, is bounded separately by ``start_timeout``: each worker reports
  ready before any batch is timed). A worker that raises sends its traceback text, which the
  caller re-raises as :class:`WorkerError` (the pool survives); a worker that dies (segfault,
  ``os._exit``, OOM kill) is reported at once with its exit code or signal, the pool is shut
  down and the next epoch starts a fresh one.
* **Ctrl-C is the caller's.** Workers ignore SIGINT (a terminal sends it to the whole process
  group); the caller's ``KeyboardInterrupt`` arrives while it waits, and a pool interrupted in
  the middle of an epoch stops its workers at once.
* **Epoch tags**: every task carries its epoch number, so results of an epoch the caller abandoned
  (``break``, an exception in the loop body) are recognised and dropped.
"""
from __future__ import annotations

import collections
import os
import pickle
import signal
import sys
import time
import traceback
import weakref
from typing import Any, Callable

import torch.multiprocessing as mp

from unigraph.kernels.cpu import numba_status
from unigraph.procs import (
    Channel, Lifeline, describe_exit, exit_code_of, exit_with_parent, receive_message, send_message, start_child,
    stop_processes, wait_any)

START_METHODS = ("spawn", "forkserver")
_FLUSH_SECONDS = 0.01   # how often to retry a task that did not fit in a worker's buffer


class WorkerError(RuntimeError):
    """A sampling worker raised, died, or produced nothing in time."""


def _worker_main(worker_id: int, make_batch: Callable, context: Any, channel, lifeline) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the caller's to handle
    exit_with_parent(lifeline)
    # numba takes a named semaphore (a file in /dev/shm) when it starts its threads in a process whose
    # start method is "fork", which an OOM kill or the lifeline's os._exit would leave behind. This
    # process never starts another, and if it did, spawn would be the safe way.
    mp.set_start_method("spawn", force=True)
    if numba_status()[0]:   # first: starting numba's OpenMP pool resets this thread's OpenMP thread count
        import numba  # noqa: PLC0415 - in the child
        numba.set_num_threads(1)
    import torch  # noqa: PLC0415
    torch.set_num_threads(1)
    try:
        send_message(channel, pickle.dumps(("ready", worker_id)))
        while (message := receive_message(channel)) is not None:
            epoch, index, items, key = pickle.loads(message)   # from the parent that started us
            try:  # pickled here, so that a batch that cannot be pickled is reported like any error
                payload = pickle.dumps((epoch, index, make_batch(context, items, key), None), protocol=5)
            except BaseException:  # noqa: BLE001 - every failure goes back to the caller, with its traceback
                payload = pickle.dumps((epoch, index, None, f"worker {worker_id} (pid {os.getpid()}):\n"
                                                            f"{traceback.format_exc()}"))
            send_message(channel, payload)
    except (BrokenPipeError, ConnectionResetError):
        pass   # the caller closed the pool or died
    # Leave at once: nothing here needs the interpreter's teardown, which takes seconds on a busy
    # machine, and during which the lifeline's thread can no longer end the process.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _shutdown(lifeline: Lifeline, processes: list, channels: list, grace: float = 1.0) -> None:
    """Cut the lifeline (every worker exits at once), close the channels, reap the processes."""
    lifeline.cut()
    for channel in channels:
        channel.close()
    stop_processes(processes, grace)


class WorkerPool:
    """``num_workers`` processes that run ``make_batch(context, items, key)`` on request.

    ``context`` (picklable; tensors in it should already be in shared memory) is sent to each
    worker once, at start. :meth:`run` takes a list of ``(items, key)`` tasks for one epoch
    and yields the results in task order, keeping ``prefetch`` tasks per worker in flight.
    """

    def __init__(self, make_batch: Callable, context: Any, num_workers: int, *,
                 start_method: str = "spawn", timeout: float = 120.0, start_timeout: float = 300.0,
                 prefetch: int = 2):
        if start_method not in START_METHODS:
            raise ValueError(f"start_method must be one of {START_METHODS}, got {start_method!r}: "
                             "'fork' can deadlock a child that inherits OpenMP (torch, numba) thread state")
        self._ctx = mp.get_context(start_method)
        if start_method == "forkserver":  # the server imports torch (and numba) once; workers fork in milliseconds
            kernels = ["unigraph.kernels.sampling"] if numba_status()[0] else []
            self._ctx.set_forkserver_preload(["unigraph.sampling.loader", *kernels])
        self._make_batch = make_batch
        self._context = context
        self.num_workers = num_workers
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.prefetch = prefetch
        self._processes: list = []
        self._channels: list[Channel] = []
        self._inbox: collections.deque = collections.deque()   # (worker id, message) received, not yet used
        self._in_flight: list[set[int]] = []                   # per worker: batches of this epoch it holds
        self._epoch = 0
        self._finalizer = None

    @property
    def running(self) -> bool:
        return bool(self._processes)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._processes]

    def start(self) -> None:
        if self.running:
            return
        lifeline = Lifeline(self._ctx)
        self._processes, self._channels = [], []
        self._in_flight = [set() for _ in range(self.num_workers)]
        self._inbox.clear()
        # registered first: whatever happens below, these processes are stopped with the pool
        self._finalizer = weakref.finalize(self, _shutdown, lifeline, self._processes, self._channels)
        for worker_id in range(self.num_workers):
            process, channel = start_child(self._ctx, _worker_main, (worker_id, self._make_batch, self._context),
                                           name=f"unigraph-sampler-{worker_id}", lifeline=lifeline, daemon=True)
            self._processes.append(process)
            self._channels.append(channel)
        lifeline.started()
        deadline, ready = time.monotonic() + self.start_timeout, 0
        while ready < self.num_workers:   # start-up (imports) is timed apart from the batches
            self._receive(deadline, f"the sampling workers did not start within start_timeout={self.start_timeout}s",
                          "while starting")
            ready += 1

    def close(self, grace: float = 1.0) -> None:
        """Stop the workers at once (idempotent); waits up to ``grace`` seconds for them to exit
        before killing them."""
        registered = self._finalizer.detach() if self._finalizer is not None else None
        if registered is not None:
            _, shutdown, args, _ = registered
            shutdown(*args, grace=grace)
        self._processes, self._channels, self._finalizer = [], [], None
        self._inbox.clear()

    def _fail(self, message: str) -> WorkerError:
        self.close()
        return WorkerError(f"{message}; the pool was shut down")

    def _dead_workers(self, ended: list[int], when: str) -> str:
        """Which workers died and how, with the batches they held."""
        reports = []
        for worker_id, process in enumerate(self._processes):
            channel = self._channels[worker_id]
            if worker_id not in ended and not channel.closed:
                continue
            how = describe_exit(exit_code_of(process))
            text = f"sampling worker {worker_id} (pid {process.pid}) died {when}: it {how}"
            if self._in_flight[worker_id]:
                text += f"; it held batches {sorted(self._in_flight[worker_id])} of this epoch"
            if channel.partial:
                text += " and died in the middle of sending one"
            reports.append(text)
        return "; ".join(reports)

    def _receive(self, deadline: float, timeout_message: str, when: str = "unexpectedly") -> tuple[int, tuple]:
        """The next message from any worker, as ``(worker id, message)``. Raises :class:`WorkerError`
        (and shuts the pool down) the moment a worker dies, or when ``deadline`` passes."""
        while not self._inbox:
            for channel in self._channels:
                channel.flush()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail(timeout_message)
            sending = any(channel.sending for channel in self._channels)
            readable, ended = wait_any(self._channels, self._processes,
                                       min(remaining, _FLUSH_SECONDS) if sending else remaining)
            if ended:   # at once, without reading the others' batches: only what the dead sent (was it mid-batch?)
                for worker_id in ended:
                    self._channels[worker_id].receive()
                raise self._fail(self._dead_workers(ended, when))
            for channel in readable:
                worker_id = self._channels.index(channel)
                self._inbox.extend((worker_id, pickle.loads(m)) for m in channel.receive())  # from our workers
            if any(channel.closed for channel in self._channels):   # gone, though its exit status lags
                raise self._fail(self._dead_workers(ended, when))
        return self._inbox.popleft()

    def run(self, tasks: list[tuple[Any, int]]):
        """Yield ``make_batch`` of every task, in order. Raises :class:`WorkerError` on failure."""
        self._epoch += 1
        epoch = self._epoch
        in_flight_limit = self.prefetch * self.num_workers
        sent = 0
        done: dict[int, Any] = {}
        try:
            self.start()   # (inside: a Ctrl-C while the workers start stops them too)
            for held in self._in_flight:
                held.clear()
            for index in range(len(tasks)):
                while sent < len(tasks) and sent - index < in_flight_limit:
                    items, key = tasks[sent]
                    self._channels[sent % self.num_workers].send(pickle.dumps((epoch, sent, items, key), protocol=5))
                    self._in_flight[sent % self.num_workers].add(sent)
                    sent += 1
                deadline = time.monotonic() + self.timeout
                while index not in done:
                    worker_id, (task_epoch, finished, batch, error) = self._receive(
                        deadline, f"batch {index} did not arrive from the sampling workers within timeout="
                                  f"{self.timeout}s (raise `timeout` for very slow batches)")
                    if task_epoch != epoch:
                        continue   # a batch of an abandoned epoch
                    self._in_flight[worker_id].discard(finished)
                    if error is not None:
                        raise WorkerError(f"sampling batch {finished} failed in {error}")
                    done[finished] = batch
                yield done.pop(index)
        except (WorkerError, GeneratorExit):
            raise
        except BaseException:   # Ctrl-C (or anything else) while waiting: the pool's state is unknown
            self.close(grace=0.0)
            raise
