"""Sampling workers under real faults: a worker SIGKILLed in the middle of writing a batch, the
caller SIGKILLed, Ctrl-C. Each fault is made with real processes and signals; every test bounds
its time and kills whatever it started, even when it fails."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from loader_helpers import BALLAST_BYTES, BigBatchSampler
from proc_helpers import children_of, kill_all, needs_proc, shm_files, wait_gone
from unigraph.data import rmat
from unigraph.sampling import NodeLoader, WorkerError

TESTS = Path(__file__).parent


def _pending_bytes(fd: int) -> int:
    import fcntl
    import termios
    count = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return int.from_bytes(count, sys.byteorder)


def _wait_until_blocked_writing(loader: NodeLoader, worker: int) -> None:
    """Until ``worker`` has filled its channel and stopped: blocked in the middle of a batch write."""
    fd = loader._pool._channels[worker].fileno()   # the caller's end of that worker's channel
    deadline, last, stable_since = time.monotonic() + 60, -1, time.monotonic()
    while time.monotonic() < deadline:
        pending = _pending_bytes(fd)
        if pending != last:
            last, stable_since = pending, time.monotonic()
        elif pending > 0 and time.monotonic() - stable_since > 0.2:
            assert pending < BALLAST_BYTES, "the whole batch fit in the buffer: the worker is not blocked"
            return
        time.sleep(0.01)
    raise AssertionError(f"worker {worker} never filled its channel ({last} bytes pending)")


@needs_proc
@pytest.mark.timeout(300)
def test_a_worker_killed_in_the_middle_of_writing_a_batch_is_reported_at_once(tmp_path):
    graph, nodes = rmat(200, 2000, seed=1), torch.arange(64)
    gate = tmp_path / "gate"
    settings = dict(batch_size=8, shuffle=False, seed=5)
    pids: list[int] = []
    loader = NodeLoader(graph, nodes, BigBatchSampler([2], gate=str(gate)), num_workers=2, prefetch=2, timeout=60,
                        start_method="forkserver", **settings)
    try:
        for attempt in range(6):   # once hung 3 tries in 5
            victim = attempt % 2   # worker 1 holds the batch the caller waits for; worker 0 the one after
            gate.unlink(missing_ok=True)
            batches = iter(loader)
            next(batches)          # batch 0; the others wait at the gate until the caller stops reading
            pids += loader.worker_pids
            gate.touch()
            _wait_until_blocked_writing(loader, victim)
            pid = loader.worker_pids[victim]
            os.kill(pid, signal.SIGKILL)
            began = time.monotonic()
            with pytest.raises(WorkerError) as failure:
                next(batches)
            detected = time.monotonic() - began
            message = str(failure.value)
            assert (f"sampling worker {victim} (pid {pid}) died unexpectedly: it was killed by signal 9 (SIGKILL"
                    in message)
            assert "died in the middle of sending one" in message and "the pool was shut down" in message
            assert detected < 5, f"the dead worker was noticed after {detected:.1f}s"
            assert loader.worker_pids == []
            wait_gone(pids, within=5)
        # nothing was left holding a lock or half a message: a whole epoch now matches the calling process
        gate.touch()
        reference = NodeLoader(graph, nodes, BigBatchSampler([2], gate=str(gate)), **settings)
        for _ in range(loader.epoch + 1):
            expected = list(reference)
        got = list(loader)
        pids += loader.worker_pids
        assert len(got) == len(expected) == 8
        for a, b in zip(got, expected):
            assert torch.equal(a.seeds, b.seeds) and torch.equal(a.input_nodes, b.input_nodes)
            assert torch.equal(a.ballast, b.ballast)
    finally:
        loader.close()
        kill_all(pids)


def _read_line(process: subprocess.Popen, within: float, waiting_for: str) -> str:
    """The serving process's next stdout line, waiting at most ``within`` seconds. On time out its
    threads' stacks (faulthandler on SIGUSR1) and stderr go into the failure, rather than a hang
    that only the test's time limit ends."""
    ready, _, _ = select.select([process.stdout], [], [], within)
    if ready:
        return process.stdout.readline()
    os.kill(process.pid, signal.SIGUSR1)
    time.sleep(1.0)
    process.kill()
    _, errors = process.communicate(timeout=30)
    raise AssertionError(f"no line from the serving process within {within:.0f}s ({waiting_for}); its stacks and "
                         f"stderr:\n{errors[-6000:]}")


def _start_serving(kind: str, **popen) -> tuple[subprocess.Popen, dict]:
    """A subprocess running ``loader_helpers.serve_forever(kind)`` (2 spawned workers); its JSON line."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    process = subprocess.Popen([sys.executable, "-c", f"import loader_helpers; loader_helpers.serve_forever({kind!r})"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **popen)
    line = _read_line(process, 120, "starting its workers")
    if not line:
        process.kill()
        raise AssertionError(f"the serving process exited with {process.wait()} before starting its workers: "
                             f"{process.stderr.read()[-3000:]}")
    return process, json.loads(line)


@needs_proc
@pytest.mark.timeout(180)
def test_workers_exit_when_the_caller_is_killed_and_leave_nothing_in_dev_shm():
    process, started = _start_serving("stalled")   # the workers are blocked in the middle of writing batches
    children = children_of(process.pid)   # the two workers and the resource tracker that spawn starts
    try:
        assert set(started["workers"]) <= set(children)
        shared = set().union(*(shm_files(pid) for pid in [process.pid, *children]))
        process.kill()                     # SIGKILL: no clean-up runs in the caller
        process.wait(timeout=10)
        seconds = wait_gone(children, within=10)
        print(f"workers and resource tracker gone {seconds:.2f}s after the caller's SIGKILL")
        assert seconds < 5
        left = sorted(path for path in shared if os.path.exists(path))
        assert not left, f"left in /dev/shm after the caller was killed: {left}"
    finally:
        kill_all([process.pid, *children])


@needs_proc
@pytest.mark.timeout(180)
def test_ctrl_c_interrupts_the_caller_at_once_and_stops_the_workers():
    process, started = _start_serving("waiting", start_new_session=True)   # its own group, like a terminal's job
    children = children_of(process.pid)
    try:
        time.sleep(1.0)                                         # in the middle of an epoch
        sent = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)                   # what Ctrl-C in a terminal does: the whole group
        line = _read_line(process, 30, "the KeyboardInterrupt")
        assert line, f"the caller exited with {process.wait()} without a KeyboardInterrupt"
        interrupted = json.loads(line)["interrupted"] - sent
        wait_gone(started["workers"], within=10)
        workers_gone = time.monotonic() - sent
        process.wait(timeout=60)   # then the interpreter's own teardown (torch's: 1-4 s on a busy machine)
        wait_gone(children, within=10)
        print(f"Ctrl-C: KeyboardInterrupt after {interrupted:.3f}s, workers gone after {workers_gone:.2f}s")
        assert interrupted < 1.0
        assert workers_gone < 2.0
    finally:
        kill_all([process.pid, *children])
