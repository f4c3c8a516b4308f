"""A pool of persistent sampling processes that cannot deadlock the caller.

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
  plain bytes through the result pipe (pickled numpy arrays). Sending them as shared-memory
  tensors instead costs a new shared-memory segment and a file-descriptor hand-over per tensor,
  which measured about 6x slower here, and ties each batch to the life of the worker that made it.
* **Persistent workers**: started on the first epoch, reused by every later one, stopped by
  :meth:`WorkerPool.close` (or when the loader is garbage-collected, or at interpreter exit:
  the processes are daemons). A worker whose caller was killed outright notices within a second
  and exits, so no orphan keeps running.
* **One thread per worker** (torch and numba): ``W`` workers use ``W`` cores without
  oversubscription.
* **Never blocks without a bound.** The caller waits on the result queue in short slices; between
  slices it checks that every worker is alive and that a result arrived within ``timeout`` seconds
  (start-up, which imports torch, is bounded separately by ``start_timeout``: each worker reports
  ready before any batch is timed).
  A worker that raises sends its traceback text, which the caller re-raises as ``RuntimeError``;
  a worker that dies (segfault, ``os._exit``, OOM kill) is reported with its exit code; the pool
  is then shut down and the next epoch starts a fresh one.
* **Epoch tags**: every task carries its epoch number, so results of an epoch the caller abandoned
  (``break``, an exception) are recognised and dropped.
"""
from __future__ import annotations

import os
import pickle
import queue
import signal
import time
import traceback
import weakref
from typing import Any, Callable

import torch.multiprocessing as mp

from unigraph.kernels.cpu import numba_status

START_METHODS = ("spawn", "forkserver")
_POLL_SECONDS = 0.1
_PARENT_CHECK_SECONDS = 1.0


class WorkerError(RuntimeError):
    """A sampling worker raised, died, or produced nothing in time."""


def _worker_main(worker_id: int, make_batch: Callable, context: Any, tasks, results) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to handle
    import torch  # noqa: PLC0415 - in the child
    torch.set_num_threads(1)
    if numba_status()[0]:
        import numba  # noqa: PLC0415
        numba.set_num_threads(1)
    results.put(("ready", worker_id))
    parent = mp.parent_process()
    while True:
        try:
            task = tasks.get(timeout=_PARENT_CHECK_SECONDS)
        except queue.Empty:
            if parent is not None and not parent.is_alive():   # the caller was killed: do not linger
                return
            continue
        if task is None:
            return
        epoch, index, items, key = task
        try:  # pickled here, not in the queue's feeder thread, so that pickling errors are reported too
            results.put((epoch, index, pickle.dumps(make_batch(context, items, key), protocol=5), None))
        except BaseException:  # noqa: BLE001 - every failure goes back to the caller, with its traceback
            results.put((epoch, index, None, f"worker {worker_id} (pid {os.getpid()}):\n{traceback.format_exc()}"))


def _shutdown(processes: list, tasks: list, grace: float = 5.0) -> None:
    """Ask every worker to stop, give them ``grace`` seconds, then terminate (and kill) the rest."""
    for task_queue in tasks:
        try:
            task_queue.put(None)
        except (OSError, ValueError):   # queue already closed
            pass
    deadline = time.monotonic() + grace
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.terminate()
            process.join(timeout=5.0)
        if process.is_alive():
            process.kill()
            process.join()
    for task_queue in tasks:
        task_queue.cancel_join_thread()   # never wait on a pipe nobody reads any more
        task_queue.close()


class WorkerPool:
    """``num_workers`` processes that run ``make_batch(context, items, key)`` on request.

    ``context`` (picklable; tensors in it should already be in shared memory) is sent to each
    worker once, at start. :meth:`run` takes an iterable of ``(items, key)`` tasks for one epoch
    and yields the results in task order, keeping ``prefetch`` tasks per worker in flight.
    """

    def __init__(self, make_batch: Callable, context: Any, num_workers: int, *,
                 start_method: str = "spawn", timeout: float = 120.0, start_timeout: float = 300.0,
                 prefetch: int = 2):
        if start_method not in START_METHODS:
            raise ValueError(f"start_method must be one of {START_METHODS}, got {start_method!r}: "
                             "'fork' can deadlock a child that inherits OpenMP (torch, numba) thread state")
        self._ctx = mp.get_context(start_method)
        if start_method == "forkserver":  # the server imports torch once; each worker then forks in milliseconds
            self._ctx.set_forkserver_preload(["unigraph.sampling.loader"])
        self._make_batch = make_batch
        self._context = context
        self.num_workers = num_workers
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.prefetch = prefetch
        self._processes: list = []
        self._tasks: list = []
        self._results = None
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
        self._results = self._ctx.Queue()
        for worker_id in range(self.num_workers):
            tasks = self._ctx.Queue()
            process = self._ctx.Process(target=_worker_main, name=f"unigraph-sampler-{worker_id}",
                                        args=(worker_id, self._make_batch, self._context, tasks, self._results),
                                        daemon=True)
            process.start()
            self._processes.append(process)
            self._tasks.append(tasks)
        self._finalizer = weakref.finalize(self, _shutdown, self._processes, self._tasks)
        started, ready = time.monotonic(), 0
        while ready < self.num_workers:   # start-up (imports) is timed apart from the batches
            try:
                self._results.get(timeout=_POLL_SECONDS)
                ready += 1
            except queue.Empty:
                dead = self._dead_workers()
                if dead:
                    raise self._fail(f"{dead} while starting; the pool was shut down") from None
                if time.monotonic() - started > self.start_timeout:
                    raise self._fail(f"the sampling workers did not start within {self.start_timeout}s") from None

    def close(self, grace: float = 5.0) -> None:
        """Stop the workers, waiting up to ``grace`` seconds for them to finish (idempotent)."""
        registered = self._finalizer.detach() if self._finalizer is not None else None
        if registered is not None:
            _, shutdown, args, _ = registered
            shutdown(*args, grace=grace)
        self._processes, self._tasks, self._results, self._finalizer = [], [], None, None

    def _fail(self, message: str) -> WorkerError:
        self.close(grace=0.5)   # something is wrong with a worker: do not wait long for it
        return WorkerError(message)

    def _dead_workers(self) -> str:
        return "; ".join(f"sampling worker {worker_id} (pid {process.pid}) exited unexpectedly with exit code "
                         f"{process.exitcode}" for worker_id, process in enumerate(self._processes)
                         if not process.is_alive())

    def _next_result(self, epoch: int) -> tuple:
        waited_since = time.monotonic()
        while True:
            try:
                result = self._results.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                dead = self._dead_workers()
                if dead:
                    raise self._fail(f"{dead}; the pool was shut down")
                if time.monotonic() - waited_since > self.timeout:
                    raise self._fail(f"no batch arrived from the sampling workers within timeout={self.timeout}s; "
                                     "the pool was shut down (raise `timeout` for very slow batches)")
                continue
            if result[0] == epoch:
                return result

    def run(self, tasks: list[tuple[Any, int]]):
        """Yield ``make_batch`` of every task, in order. Raises :class:`WorkerError` on failure."""
        self.start()
        self._epoch += 1
        epoch = self._epoch
        in_flight_limit = self.prefetch * self.num_workers
        sent = 0
        done: dict[int, Any] = {}
        for index in range(len(tasks)):
            while sent < len(tasks) and sent - index < in_flight_limit:
                items, key = tasks[sent]
                self._tasks[sent % self.num_workers].put((epoch, sent, items, key))
                sent += 1
            while index not in done:
                _, finished, payload, error = self._next_result(epoch)
                if error is not None:
                    raise WorkerError(f"sampling batch {finished} failed in {error}")
                done[finished] = pickle.loads(payload)
            yield done.pop(index)
