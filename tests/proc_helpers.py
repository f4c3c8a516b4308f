"""What the fault tests need to know about processes, read from Linux's ``/proc``; and the report
of a checking program run in a child process."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

needs_proc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads processes from Linux's /proc")


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as file:
            text = file.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text[text.rindex(")") + 2:].split()   # after "pid (comm) ": state, ppid, ...


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(int(name))
            if fields is not None and int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(name))
    return found


def is_gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie nobody has reaped yet counts as gone)."""
    fields = _stat(pid)
    return fields is None or fields[0] in ("Z", "X")


def wait_gone(pids, within: float) -> float:
    """Seconds until every one of ``pids`` was gone; fails after ``within`` seconds."""
    began = time.monotonic()
    while not all(is_gone(pid) for pid in pids):
        if time.monotonic() - began > within:
            alive = [pid for pid in pids if not is_gone(pid)]
            raise AssertionError(f"processes {alive} were still alive {within}s later")
        time.sleep(0.01)
    return time.monotonic() - began


def shm_files(pid: int) -> set[str]:
    """The files under /dev/shm that ``pid`` has mapped or open and that still have a name (a
    named semaphore of ``multiprocessing``, a shared-memory segment not yet unlinked)."""
    found = set()
    try:
        with open(f"/proc/{pid}/maps") as file:
            found.update(line.split(None, 5)[5].strip() for line in file if "/dev/shm/" in line)
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("/dev/shm/"):
                found.add(target)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return {path for path in found if not path.endswith("(deleted)")}


def kill_all(pids) -> None:
    """Clean-up after a failed test: SIGKILL whatever of ``pids`` is still alive."""
    for pid in pids:
        if not is_gone(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def json_report(process: subprocess.Popen, timeout: float):
    """The JSON of the last line a checking program (started with text pipes) printed, after it
    exited 0; killed if it runs past ``timeout`` seconds (the test then fails)."""
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        process.kill()
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def dropped_in_forked_workers(taken: list, size: int, enabled) -> tuple[list, list]:
    """F.dropout of ``torch.ones(size)`` in two forked DataLoader workers, seeded, with unigraph's
    kernels (``enabled`` True) and without: (outputs, how many entries each worker's own copy of
    ``taken`` gained) for each."""
    import torch
    import torch.nn.functional as F

    class Drop(torch.utils.data.Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            before = len(taken)  # the worker's own copy of the list
            return F.dropout(torch.ones(size), 0.5), torch.tensor(len(taken) - before)

    results = []
    for flag in (True, False):
        torch.manual_seed(4)
        with enabled(flag):
            loader = torch.utils.data.DataLoader(Drop(), batch_size=None, num_workers=1,
                                                 multiprocessing_context="fork")
            got = list(loader)
        results.append(([x for x, _ in got], [int(n) for _, n in got]))
    return results
