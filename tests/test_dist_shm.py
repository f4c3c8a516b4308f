"""Shared-memory blocks (unigraph.distributed.shm) and PSS/USS accounting (unigraph.distributed.memory),
across real processes (plain subprocesses: no torch.distributed)."""
from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys

import numpy as np
import pytest

from unigraph.distributed.memory import MemoryMonitor, read_smaps_rollup
from unigraph.distributed.shm import SharedArrays, layout_of

pytestmark = pytest.mark.skipif(not hasattr(os, "memfd_create") or not os.path.exists("/proc/self/smaps_rollup"),
                                reason="Linux only (memfd_create, /proc)")

SHM = str(pathlib.Path(__file__).resolve().parents[1] / "unigraph" / "distributed" / "shm.py")
# the child loads shm.py alone (numpy, no torch: a fast start) and maps the block
ATTACH = f"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("shm", {SHM!r})
shm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(shm)
block = shm.SharedArrays.attach(json.loads(sys.argv[1]), writable=sys.argv[2] == "rw")
if sys.argv[3] == "read":
    print(float(block.arrays["x"].sum()), block.arrays["ids"].tolist())  # touches every page of x
    print(open("/proc/self/smaps_rollup").read().split("Pss_Shmem:")[1].split()[0])
elif sys.argv[3] == "write":
    block.arrays["ids"][0] = 99
elif sys.argv[3] == "release":   # fill x, drop the pages from this process, read them back
    def shmem_kib():
        return int(open("/proc/self/status").read().split("RssShmem:")[1].split()[0])
    before = shmem_kib()
    block.arrays["x"][:] = 2.0
    filled = shmem_kib()
    block.release_pages()
    released = shmem_kib()
    print(before, filled, released, float(block.arrays["x"].sum()), shmem_kib())
elif sys.argv[3] == "take":      # random rows, read in chunks of 64 KiB of mapped pages
    import numpy as np
    def shmem_kib():
        return int(open("/proc/self/status").read().split("RssShmem:")[1].split()[0])
    before = shmem_kib()
    rows = np.random.default_rng(0).integers(0, 1024, 3000)
    taken = block.take("x", rows, mapped_bytes=64 << 10)
    empty = block.take("x", rows[:0])
    print(int((taken == rows[:, None]).all()), taken.shape[0], empty.shape, shmem_kib() - before)
"""


def attach_in_child(description: dict, mode: str, action: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", ATTACH, json.dumps(description), mode, action], capture_output=True,
                          text=True, timeout=120)


def test_another_process_maps_the_same_pages_without_a_copy():
    block = SharedArrays.create({"x": (np.float32, (512, 512)), "ids": (np.int64, (3,)), "none": (np.int32, (0,))})
    try:
        block.arrays["x"][:] = 0.5
        block.arrays["ids"][:] = [4, 5, 6]
        child = attach_in_child(block.describe(), "ro", "read")
        assert child.returncode == 0, child.stderr
        total, ids, pss_shmem_kib = child.stdout.split("\n")[0].split(" ", 1) + [child.stdout.split("\n")[1]]
        assert float(total) == 0.5 * 512 * 512 and json.loads(ids) == [4, 5, 6]
        # the child touched 1 MiB of x: shared with this process, it is charged half of it
        assert 400 <= int(pss_shmem_kib) <= 700
        assert attach_in_child(block.describe(), "rw", "write").returncode == 0
        assert block.arrays["ids"][0] == 99                          # a writable mapping writes the same memory
    finally:
        block.close()


def test_released_pages_leave_the_rss_and_keep_their_data():
    block = SharedArrays.create({"x": (np.float32, (1024, 1024)), "ids": (np.int64, (3,))})   # x: 4 MiB
    try:
        child = attach_in_child(block.describe(), "rw", "release")
        assert child.returncode == 0, child.stderr
        before, filled, released, total, reread = (float(v) for v in child.stdout.split())
        assert filled - before >= 4000 and released - before < 200      # KiB: the 4 MiB came and went
        assert total == 2.0 * 1024 * 1024 and reread - before >= 4000    # the child's writes survived it
        assert float(block.arrays["x"].sum()) == 2.0 * 1024 * 1024     # and reach the creator
        block.release_pages()                                            # the creator's own mapping too
        assert float(block.arrays["x"].sum()) == 2.0 * 1024 * 1024
        SharedArrays.create({"none": (np.int32, (0,))}).release_pages()  # an empty block: nothing to do
    finally:
        block.close()


def test_taken_rows_are_copies_whose_pages_leave_the_rss():
    block = SharedArrays.create({"ids": (np.int64, (5,)), "x": (np.float32, (1024, 1024))})   # x at an offset
    try:
        block.arrays["x"][:] = np.arange(1024, dtype=np.float32)[:, None]
        child = attach_in_child(block.describe(), "ro", "take")
        assert child.returncode == 0, child.stderr
        equal, count, empty, grown_kib = child.stdout.split(maxsplit=3)[:3] + [child.stdout.split()[-1]]
        assert equal == "1" and count == "3000" and empty.startswith("(0")
        assert int(grown_kib) < 200                  # 3000 rows of 4 KiB read: none of their pages kept
        block.release_rows("x", 0, 512)              # the creator's own mapping: the data stays
        assert float(block.arrays["x"][511, 0]) == 511.0 and block.arrays["ids"].tolist() == [0] * 5
    finally:
        block.close()


def test_a_read_only_mapping_refuses_writes_loudly():
    block = SharedArrays.create({"ids": (np.int64, (3,))})
    try:
        child = attach_in_child(block.describe(), "ro", "write")
        assert child.returncode != 0                                 # numpy refuses: the array is read-only
        assert "read-only" in child.stderr
        assert block.arrays["ids"].tolist() == [0, 0, 0]
    finally:
        block.close()


def test_nothing_outlives_the_creator_and_a_stale_description_is_refused():
    code = (ATTACH.split("block =")[0] + "import time; import numpy as np\n"
            "b = shm.SharedArrays.create({'x': (np.int8, (10,))}); print(json.dumps(b.describe()), flush=True)\n"
            "time.sleep(60)")
    creator = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        description = json.loads(creator.stdout.readline())
        before = set(os.listdir("/dev/shm"))
        os.kill(creator.pid, signal.SIGKILL)
        creator.wait(timeout=30)
        assert set(os.listdir("/dev/shm")) - before == set()          # no name to leave behind
        with pytest.raises(OSError, match="must still be running"):
            SharedArrays.attach(description)
    finally:
        if creator.poll() is None:
            creator.kill()
            creator.wait()


def test_a_description_of_a_closed_block_is_refused_when_a_new_block_reuses_its_descriptor():
    old = SharedArrays.create({"x": (np.int64, (4,))}, label="old")
    description = old.describe()
    old.close()
    new = SharedArrays.create({"x": (np.int64, (64,))}, label="new")   # bigger: a size check alone would pass
    try:
        assert new.fd == description["fd"]                              # the lowest free number: the same one
        with pytest.raises(OSError, match="no longer the shared block 'old'"):
            SharedArrays.attach(description)
        assert SharedArrays.attach(new.describe()).arrays["x"].shape == (64,)
    finally:
        new.close()


def test_layout_packs_aligned_arrays_and_refuses_negative_sizes():
    layout, size = layout_of({"a": (np.int8, (3,)), "b": (np.float64, (2, 2)), "c": (np.int32, (0,))})
    assert [(name, offset) for name, _, _, offset in layout] == [("a", 0), ("b", 64), ("c", 128)]
    assert size == 128
    with pytest.raises(ValueError, match="negative dimension"):
        layout_of({"a": (np.int8, (-1,))})


def test_the_monitor_sums_pss_over_processes_at_one_time():
    block = SharedArrays.create({"x": (np.uint8, (8 << 20,))})
    try:
        block.arrays["x"][:] = 1                                      # 8 MiB, all in this process
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            monitor = MemoryMonitor(interval=0.05, pids=[os.getpid()])
            monitor.add(child.pid, "sleeper")
            reading = monitor.sample()
            own, other = read_smaps_rollup(), read_smaps_rollup(child.pid)
            assert reading["Pss_Shmem"] >= 8 << 20                    # this process alone maps the block
            assert abs(reading["Pss"] - own["Pss"] - other["Pss"]) < 4 << 20
            assert other["Uss"] == other["Private_Clean"] + other["Private_Dirty"] > 0
            report = monitor.start().stop()
            assert report["peak"]["Pss"] >= reading["Pss"] - (4 << 20) and set(report["processes"]) == {
                str(os.getpid()), "sleeper"}
        finally:
            child.kill()
            child.wait()
        assert read_smaps_rollup(child.pid) is None                   # a process that is gone reads as None
    finally:
        block.close()
