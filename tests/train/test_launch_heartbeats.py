"""The launcher watches its ranks' heartbeats: a SIGSTOPped rank (alive, silent) ends the job within
seconds, named as stopped, instead of after the collectives' timeout with another rank blamed; and a
rank killed by a signal is listed first even when a peer's error about it arrives in the same poll,
or (an error that says the peer's connection closed) before its end is seen."""
from __future__ import annotations

import time

import pytest

import importlib
from dist_helpers import blamed_before_killed, faulty_rank, killed_then_blamed
from proc_helpers import kill_all, needs_proc, wait_gone
from unigraph.train import LaunchError, launch

launch_module = importlib.import_module("unigraph.train.launch")  # (unigraph.train.launch is also the function)


def _rank_pids(folder) -> list[int]:
    return [int(path.read_text()) for path in folder.glob("rank*.pid")]


@needs_proc
@pytest.mark.timeout(180)
def test_a_stopped_rank_is_named_within_seconds(tmp_path):
    """Rank 1 stops itself (SIGSTOP) in the middle of all-reduces that wait up to 120 s for it."""
    try:
        with pytest.raises(LaunchError) as failure:
            launch(faulty_rank, 2, args=("sigstop", 1, str(tmp_path)), timeout=150)
        ended = time.time() - float((tmp_path / "failed_at").read_text())
        message = str(failure.value)
        print(f"a stopped rank ended the job {ended:.2f}s after it stopped")
        assert message.startswith("rank 1 failed first: it was stopped (process state T"), message[:2000]
        assert ended < 15, f"the job ended {ended:.1f}s after the rank stopped"
        wait_gone(_rank_pids(tmp_path), within=5)   # a stopped process is killed too (SIGCONT after SIGTERM)
    finally:
        kill_all(_rank_pids(tmp_path))


@needs_proc
@pytest.mark.timeout(180)
@pytest.mark.parametrize("late", ["before its check", "after its check"])
def test_a_rank_killed_by_a_signal_is_listed_before_the_peer_that_saw_it_die(tmp_path, monkeypatch, late):
    """The launcher's waits are slow (as on a loaded machine), so rank 0's end and rank 1's error
    about it (raised after rank 0 died, not recognizably a lost peer) arrive in the same poll. Slow
    after the check too (the launcher descheduled between a wait's check and the next poll: CI
    load, 2026-11-27): rank 0 then dies, and rank 1 reports it, after a check that found rank 0
    alive but before the wait returns, and its end must still be dated before rank 1's error."""
    real_wait = launch_module.wait_any

    def slow_wait(channels, processes, timeout, **how):   # sees news only every 0.4 s
        pause = max(0.0, min(timeout, 0.4))
        if late == "before its check":
            time.sleep(pause)
            return real_wait(channels, processes, 0, **how)
        news = real_wait(channels, processes, 0, **how)
        time.sleep(pause)
        return news

    monkeypatch.setattr(launch_module, "wait_any", slow_wait)
    try:
        with pytest.raises(LaunchError) as failure:
            launch(killed_then_blamed, 2, args=(str(tmp_path),), timeout=120)
        message = str(failure.value)
        assert message.startswith("rank 0 failed first: it was killed by signal 9 (SIGKILL"), message[:2000]
        assert "rank 1 failed after that" in message and "rank 1 saw rank 0 vanish" in message
    finally:
        kill_all(_rank_pids(tmp_path))


@needs_proc
@pytest.mark.timeout(180)
def test_a_lost_peer_error_heard_before_the_peers_end_waits_for_it_and_is_listed_after_it(tmp_path):
    """CI on 2026-11-26: a trainer's RPC error about a killed server (its message ends in remote ``At:``
    lines) reached the launcher a poll before the server's exit, and was named as the cause."""
    try:
        with pytest.raises(LaunchError) as failure:
            launch(blamed_before_killed, 2, args=(str(tmp_path),), timeout=120)
        message = str(failure.value)
        assert message.startswith("rank 0 failed first: it was killed by signal 9 (SIGKILL"), message[:2000]
        assert "rank 1 failed after that (it lost a peer: a consequence, not a cause)" in message, message[:2000]
    finally:
        kill_all(_rank_pids(tmp_path))


def test_a_silent_rank_fails_after_the_heartbeat_timeout(tmp_path):
    """A rank that sends nothing for ``heartbeat_timeout`` seconds fails whatever its state."""
    import multiprocessing
    job = launch_module._Job(multiprocessing.get_context("spawn"), 1, heartbeat_timeout=5.0)

    class Running:
        pid = 0   # /proc/0 does not exist: state unknown
    job.processes = [Running()]
    job.last_heard = {0: time.monotonic() - 6.0}
    job._check_heartbeats()
    assert "has sent no heartbeat for 6 s (heartbeat_timeout=5)" in job.failures[0].how
