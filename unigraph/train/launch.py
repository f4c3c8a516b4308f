"""Start ``nproc`` ranks on this machine, as ``torchrun --nproc-per-node`` would, and fail fast.

Each rank is a fresh ``spawn``-ed interpreter (never ``fork``: a forked child inherits OpenMP and
lock state it cannot use) with the environment ``torchrun`` would give it (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), so the
same worker code runs under either. It then calls ``target(*args)``; its return value comes back
to the caller.

Failure handling (no silent hang):

* A rank that raises records its traceback (with a timestamp) before exiting. As soon as any rank
  exits with an error, the others are stopped (SIGTERM, then SIGKILL) and :class:`LaunchError`
  is raised with the error of the rank that failed *first*: a rank that failed only because its
  peer vanished (a broken connection) is listed after the root cause.
* A rank that dies without a Python error (a signal, ``os._exit``) is reported with its exit code.
* A rank stuck in a collective fails by itself after the process group's timeout (see
  :func:`unigraph.train.distributed.init_distributed`); and the whole job is bounded by
  ``timeout`` seconds, after which the ranks still running print every thread's stack to their
  stderr (``faulthandler``) and are stopped.
* However the caller leaves (an error, Ctrl-C, a test's timeout), no rank outlives it.

Threads: each rank gets ``threads`` intra-op threads (default: the cores divided among the ranks,
at least 1), as ``torchrun`` sets ``OMP_NUM_THREADS``; and OpenMP threads wait passively
(``OMP_WAIT_POLICY=PASSIVE``), because spinning waiters steal the cores of the other ranks
(measured on 2 busy cores: every torch operation ~10x slower with spinning waiters).
"""
from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
import signal
import socket
import time
import traceback
from typing import Any, Callable

import torch.multiprocessing as mp

_POLL_SECONDS = 0.2


class LaunchError(RuntimeError):
    """A rank failed (its error text is in the message) or the job ran out of time."""


def free_port() -> int:
    """A TCP port that was free a moment ago (the rendezvous port of a local job)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
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


def _rank_main(local_rank: int, target: Callable, args: tuple, threads: int, results) -> None:
    os.environ.update(RANK=str(local_rank), LOCAL_RANK=str(local_rank))
    if hasattr(signal, "SIGUSR1"):  # the launcher asks for every thread's stack before it stops a stuck job
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    import torch  # noqa: PLC0415 - in the child
    torch.set_num_threads(threads)
    try:
        value = target(*args)
    except BaseException:
        results.put(("error", local_rank, time.time(), traceback.format_exc()))
        raise
    # Plain pickle bytes: a tensor sent through a torch queue would live in this process's shared
    # memory, which vanishes when this rank exits, possibly before the caller reads it.
    results.put(("result", local_rank, time.time(), pickle.dumps(value)))


def launch(target: Callable, nproc: int, args: tuple = (), *, timeout: float = 600.0, threads: int | None = None,
           env: dict[str, str] | None = None) -> list[Any]:
    """Run ``target(*args)`` in ``nproc`` ranks; return their return values, in rank order.

    ``target`` must be importable by name (a module-level function) and its arguments picklable.
    ``env`` adds environment variables for the ranks. Raises :class:`LaunchError` when a rank
    fails or ``timeout`` seconds pass (the stuck ranks first print every thread's stack to their
    stderr). However the caller leaves (an error, Ctrl-C, a test timeout), no rank outlives it.
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
    results = mp.get_context("spawn").SimpleQueue()
    with _environment(variables):
        context = mp.start_processes(_rank_main, args=(target, args, threads, results), nprocs=nproc,
                                     join=False, start_method="spawn")
    values: dict[int, Any] = {}
    errors: list[tuple[float, int, str]] = []

    def drain() -> None:
        while not results.empty():
            kind, rank, when, payload = results.get()
            if kind == "result":
                values[rank] = pickle.loads(payload)  # from our own ranks
            else:
                errors.append((when, rank, payload))

    deadline = time.monotonic() + timeout
    try:
        while True:
            drain()
            if context.join(timeout=_POLL_SECONDS, grace_period=2.0):
                break
            if time.monotonic() > deadline:
                stuck = [rank for rank, process in enumerate(context.processes) if process.is_alive()]
                _stop(context, dump_stacks=True)
                drain()
                raise LaunchError(f"the job did not finish within timeout={timeout}s; ranks {stuck} were still running "
                                  "(their stacks are on stderr) and all ranks were stopped" + _format_errors(errors))
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as failure:
        drain()
        if not errors:  # died without a Python error (signal, os._exit)
            raise LaunchError(f"rank {failure.error_index} failed: {failure}; the other ranks were stopped") from None
        raise LaunchError(_format_errors(errors, first=True)) from None
    finally:
        _stop(context)  # a no-op after a clean finish; otherwise no rank outlives the caller
    drain()
    missing = sorted(set(range(nproc)) - set(values))
    if missing:
        raise LaunchError(f"ranks {missing} exited without returning a result")
    return [values[rank] for rank in range(nproc)]


def _stop(context, dump_stacks: bool = False) -> None:
    alive = [process for process in context.processes if process.is_alive()]
    if dump_stacks and alive and hasattr(signal, "SIGUSR1"):
        for process in alive:
            os.kill(process.pid, signal.SIGUSR1)
        time.sleep(1.0)
    for process in alive:
        process.terminate()
    for process in alive:
        process.join(timeout=5.0)
        if process.is_alive():
            process.kill()
            process.join()


def _format_errors(errors: list[tuple[float, int, str]], first: bool = False) -> str:
    if not errors:
        return ""
    errors = sorted(errors)
    lines = []
    if first:
        lines.append(f"rank {errors[0][1]} failed first; the other ranks were stopped. Its error:\n{errors[0][2]}")
        errors = errors[1:]
    for _, rank, text in errors:
        lines.append(f"rank {rank} failed after that:\n{text}" if first else f"rank {rank} failed:\n{text}")
    return ("" if first else "\n") + "\n".join(lines)
