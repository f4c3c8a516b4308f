"""Host-wide memory reservations, so that processes of one host that each check ``MemAvailable``
before a large copy cannot all pass together and overcommit together.

Why: ``MemAvailable`` only counts what is already filled. Graph servers of one host started at
once (``unigraph train --partitions`` with several machines on one host, or several jobs) each
read the same figure before any of them has copied anything, so each sees room for its own copy
and together they swap or are killed. A reservation is held from the check until the copy is
filled (by then ``MemAvailable`` counts it); a check subtracts the live reservations of the
other processes of the host.

The ledger is one small file per user in the temporary directory (``UNIGRAPH_RESERVATIONS``
overrides the path), read and rewritten under an exclusive ``flock`` of a lock file beside it,
rewritten whole (a temporary file, then a rename). An entry whose process is gone (or whose pid
now names a process started later) is dropped, so a killed server leaves no reservation behind. Conservative while copies run: pages a holder has
already filled are counted twice (in ``MemAvailable`` and in its reservation) until it finishes.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import tempfile
from typing import Callable, Iterator

from unigraph.benchmarking.environment import available_memory_gb

ENV_VAR = "UNIGRAPH_RESERVATIONS"


class MemoryReservationError(ValueError):
    """The copy does not fit in what the host has available less the others' reservations."""


def ledger_path() -> pathlib.Path:
    override = os.environ.get(ENV_VAR, "").strip()
    if override:
        return pathlib.Path(override)
    return pathlib.Path(tempfile.gettempdir()) / f"unigraph-memory-reservations-{os.getuid()}.json"


def available_bytes() -> int | None:
    """``MemAvailable`` in bytes (:func:`~unigraph.benchmarking.environment.available_memory_gb`,
    the one reader of /proc/meminfo), or None where there is none."""
    available = available_memory_gb()
    return None if available is None else int(available * 2**30)


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat field 22), or None."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _alive(entry: dict) -> bool:
    """Whether the process that wrote ``entry`` still runs: its pid exists and, where /proc says,
    started when the entry says (a pid reused by another process does not hold the reservation)."""
    pid = entry["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    started = _start_time(pid)
    return started is None or entry.get("started") in (None, started)


def _read(path: pathlib.Path) -> list[dict]:
    try:
        entries = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):  # none yet, or a torn file from a crash: start over
        return []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("pid"), int)
            and isinstance(e.get("bytes"), int)] if isinstance(entries, list) else []


def _write(path: pathlib.Path, entries: list[dict]) -> None:
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w") as file:
        json.dump(entries, file)
    os.replace(temporary, path)


@contextlib.contextmanager
def _locked(path: pathlib.Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def others_reserved(path: pathlib.Path | None = None) -> int:
    """Bytes reserved by the other live processes of this host."""
    path = path or ledger_path()
    with _locked(path):
        return sum(e["bytes"] for e in _read(path) if e["pid"] != os.getpid() and _alive(e))


@contextlib.contextmanager
def reserved(nbytes: int, what: str, *, hint: str = "", available: Callable[[], int | None] | None = None,
             path: pathlib.Path | None = None) -> Iterator[None]:
    """Reserve ``nbytes`` on this host while the block runs (the copy that fills them), or raise
    :class:`MemoryReservationError` naming ``what``, the sizes, the others' reservations and
    ``hint`` (what to do instead), before anything is allocated. Without ``MemAvailable`` (not
    Linux) nothing is checked."""
    path = path or ledger_path()
    pid = os.getpid()
    with _locked(path):
        entries = [e for e in _read(path) if _alive(e)]
        others = sum(e["bytes"] for e in entries if e["pid"] != pid)
        free = (available or available_bytes)()
        if free is not None and nbytes > free - others:
            raise MemoryReservationError(
                f"{what}: {nbytes / 2**30:.2f} GiB needed in memory, {free / 2**30:.2f} GiB available"
                + (f", of which {others / 2**30:.2f} GiB is reserved by other processes of this host still "
                   f"copying (ledger {path})" if others else "")
                + ": refused before allocating anything" + (f". {hint}" if hint else ""))
        entry = {"pid": pid, "started": _start_time(pid), "bytes": int(nbytes), "what": what}
        _write(path, entries + [entry])
    try:
        yield
    finally:
        with _locked(path):
            entries = _read(path)
            if entry in entries:
                entries.remove(entry)
            _write(path, [e for e in entries if _alive(e)])
