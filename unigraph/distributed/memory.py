"""What a process, and a machine's processes together, hold in memory: PSS and USS from ``/proc``.

RSS counts a shared page in full in every process that maps it, so the RSS of a server and three
trainers that map one copy of a partition adds that copy four times. ``/proc/PID/smaps_rollup``
gives instead (kB, Linux >= 4.14):

* ``Pss`` - proportional set size: each page divided by the number of processes mapping it. The
  PSS of a machine's processes adds up to what they hold together (``Pss_Shmem``: their share of
  the shared-memory blocks; ``Pss_File``: of the libraries; ``Pss_Anon``: private heap).
* ``Private_Clean + Private_Dirty`` - unique set size (USS): what the process alone holds, the
  memory its end would free: its *working set* beside the shared partition.

:class:`MemoryMonitor` samples a set of processes every ``interval`` seconds in a thread and keeps
the peak of their summed PSS (a peak of the sum, not a sum of peaks) and each one's peaks.
"""
from __future__ import annotations

import os
import threading
import time

FIELDS = ("Rss", "Pss", "Pss_Anon", "Pss_File", "Pss_Shmem", "Private_Clean", "Private_Dirty")


def read_smaps_rollup(pid: int | str = "self") -> dict[str, int] | None:
    """``{field: bytes}`` of :data:`FIELDS` plus ``Uss`` for process ``pid``; ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as file:
            text = file.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    values = dict.fromkeys(FIELDS, 0)
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(":")
        if name in values:
            values[name] = int(rest.split()[0]) * 1024
    values["Uss"] = values["Private_Clean"] + values["Private_Dirty"]
    return values


def available() -> bool:
    return os.path.exists("/proc/self/smaps_rollup")


class MemoryMonitor:
    """Samples the processes in :attr:`pids` (add with :meth:`add`) every ``interval`` seconds.

    ``peak`` holds the largest sum over the processes of each field seen at one sampling time
    (``peak["Pss"]``: the machine's memory at its peak); ``at_peak`` every field's sum at the
    reading where the summed PSS peaked (e.g. the USS of all processes at that moment);
    ``peaks[pid]`` each process's own peaks.
    """

    def __init__(self, interval: float = 0.25, pids=()):
        self.interval = interval
        self.pids: dict[int, str] = {}
        self.peak: dict[str, int] = {}
        self.at_peak: dict[str, int] = {}
        self.peak_time: float | None = None  # time.monotonic() of the reading where the summed PSS peaked
        self.peaks: dict[int, dict[str, int]] = {}
        self.samples = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        for pid in pids:
            self.add(pid)

    def add(self, pid: int, label: str = "") -> None:
        with self._lock:
            self.pids[int(pid)] = label or str(pid)

    def sample(self) -> dict[str, int]:
        """Read every process once and update the peaks; returns the sums of this reading."""
        with self._lock:
            pids = dict(self.pids)
        total: dict[str, int] = {}
        for pid in pids:
            values = read_smaps_rollup(pid)
            if values is None:
                continue
            own = self.peaks.setdefault(pid, {})
            for name, value in values.items():
                total[name] = total.get(name, 0) + value
                own[name] = max(own.get(name, 0), value)
        with self._lock:
            if total.get("Pss", 0) > self.peak.get("Pss", -1):
                self.at_peak, self.peak_time = dict(total), time.monotonic()
            for name, value in total.items():
                self.peak[name] = max(self.peak.get(name, 0), value)
            self.samples += 1
        return total

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> "MemoryMonitor":
        if self._thread is None and available():
            self.sample()
            self._thread = threading.Thread(target=self._run, name="unigraph-memory", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> dict:
        """Stop sampling (after one last reading) and return :meth:`report`."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.sample()
        return self.report()

    def report(self) -> dict:
        with self._lock:
            return {"peak": dict(self.peak), "at_peak": dict(self.at_peak), "peak_time": self.peak_time,
                    "samples": self.samples,
                    "processes": {self.pids[pid]: dict(values) for pid, values in self.peaks.items()}}
