"""Host-wide memory reservations: servers of one host that check MemAvailable together cannot
all pass and overcommit together (unigraph.distributed.reservation)."""
from __future__ import annotations

import json
import multiprocessing
import os

import pytest

from unigraph.distributed.reservation import MemoryReservationError, others_reserved, reserved

GIB = 2**30


def test_a_second_copy_sees_the_first_ones_reservation_until_it_is_filled(tmp_path):
    ledger = tmp_path / "ledger.json"
    free = lambda: 10 * GIB  # noqa: E731 - MemAvailable before either copy has filled anything
    with reserved(6 * GIB, "server A", path=ledger, available=free):
        [entry] = json.loads(ledger.read_text())
        assert (entry["pid"], entry["bytes"], entry["what"]) == (os.getpid(), 6 * GIB, "server A")
        # the same process's own entry does not count against it (one server, several steps)
        assert others_reserved(ledger) == 0
    assert json.loads(ledger.read_text()) == []  # released when the copy is done
    with reserved(6 * GIB, "server B", path=ledger, available=free):
        pass


def _hold(ledger, ready, release):
    with reserved(6 * GIB, "server A", path=ledger, available=lambda: 10 * GIB):
        ready.set()
        release.wait(30)


def test_another_process_reservation_refuses_what_would_overcommit_and_a_dead_one_frees(tmp_path):
    ledger = tmp_path / "ledger.json"
    context = multiprocessing.get_context("fork")
    ready, release = context.Event(), context.Event()
    holder = context.Process(target=_hold, args=(ledger, ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        assert others_reserved(ledger) == 6 * GIB
        with pytest.raises(MemoryReservationError, match=r"server B: 6.00 GiB needed in memory, 10.00 GiB available, "
                                                          r"of which 6.00 GiB is reserved by other processes"):
            with reserved(6 * GIB, "server B", path=ledger, available=lambda: 10 * GIB, hint="Use more machines"):
                pytest.fail("the block must not run")
        with reserved(4 * GIB, "server C", path=ledger, available=lambda: 10 * GIB):  # what is left still fits
            pass
    finally:
        holder.kill()  # killed while holding: its entry must not block the host forever
        holder.join(30)
    with reserved(6 * GIB, "server B", path=ledger, available=lambda: 10 * GIB):
        assert [e["what"] for e in json.loads(ledger.read_text())] == ["server B"]


def test_a_torn_ledger_or_no_meminfo_does_not_stop_a_copy(tmp_path):
    ledger = tmp_path / "ledger.json"
    ledger.write_text('[{"pid": 1')  # a crash mid-write left this (writes are atomic; still tolerated)
    with reserved(GIB, "server", path=ledger, available=lambda: 2 * GIB):
        pass
    with reserved(10**15, "server", path=ledger, available=lambda: None):  # not Linux: nothing to check against
        pass


def test_a_reused_pid_does_not_hold_a_dead_servers_reservation(tmp_path):
    ledger = tmp_path / "ledger.json"
    # a live process's pid (our parent's), but the entry's writer started at another time: it died
    # and its pid was reused
    ledger.write_text(json.dumps([{"pid": os.getppid(), "started": -1, "bytes": 9 * GIB, "what": "dead server"}]))
    assert others_reserved(ledger) == 0
    with reserved(6 * GIB, "server B", path=ledger, available=lambda: 10 * GIB):
        assert [e["what"] for e in json.loads(ledger.read_text())] == ["server B"]
