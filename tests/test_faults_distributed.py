"""Data parallelism under real faults: a rank that raises, is SIGKILLed or calls ``os._exit(3)``
in the middle of the collectives, in 2- and 3-rank gloo jobs started by :func:`unigraph.train.launch`
and by ``torchrun``. The job must end within seconds of the first failure (not after the 120 s
collective timeout the ranks were given) and name the rank that failed first and how."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dist_helpers import exchange_as_pipeline_stages, faulty_rank
from proc_helpers import children_of, kill_all, needs_proc, wait_gone
from unigraph.train import LaunchError, launch

# how the report must say the victim failed
HOW = {"raise": "raised an exception; the other ranks were stopped.\nTraceback",
       "sigkill": "was killed by signal 9 (SIGKILL",
       "exit": "exited with code 3 without raising a Python error"}


def _rank_pids(folder: Path) -> list[int]:
    return [int(path.read_text()) for path in folder.glob("rank*.pid")]


@needs_proc
@pytest.mark.timeout(180)
@pytest.mark.parametrize("nproc, victim, mode", [
    (2, 1, "raise"), (2, 1, "sigkill"), (2, 1, "exit"),
    (3, 0, "sigkill"),   # rank 0 also hosts the rendezvous store
    pytest.param(3, 2, "raise", marks=pytest.mark.slow), pytest.param(3, 1, "exit", marks=pytest.mark.slow)])
def test_the_job_ends_within_seconds_of_a_failure_and_names_the_rank_that_failed_first(tmp_path, nproc, victim, mode):
    try:
        with pytest.raises(LaunchError) as failure:
            launch(faulty_rank, nproc, args=(mode, victim, str(tmp_path)), timeout=150)
        ended = time.time() - float((tmp_path / "failed_at").read_text())
        message = str(failure.value)
        print(f"{nproc} ranks, rank {victim} {mode}: the job ended {ended:.2f}s after the failure")
        assert message.startswith(f"rank {victim} failed first: it "), message[:2000]
        assert HOW[mode] in message.split("\nrank ")[0], message[:2000]
        if mode == "raise":
            assert f"ValueError: rank {victim} failed on purpose at step 3" in message
        assert message.count("failed first") == 1
        assert ended < 10, f"the job ended {ended:.1f}s after the failure"
        assert len(_rank_pids(tmp_path)) == nproc
        wait_gone(_rank_pids(tmp_path), within=1)   # launch stopped every rank before it raised
    finally:
        kill_all(_rank_pids(tmp_path))


@needs_proc
@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["raise", pytest.param("sigkill", marks=pytest.mark.slow)])
def test_under_torchrun_a_failing_rank_leaves_at_once_and_torchrun_names_it(tmp_path, mode):
    """What we guarantee under torchrun: the failing rank leaves at once (no barrier on the way out),
    so torchrun's agent sees it fail, stops the other ranks and names it as the root cause."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "--monitor-interval", "0.1", str(Path(__file__).with_name("dist_helpers.py")), mode, "1", str(tmp_path)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    agent = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                             start_new_session=True)
    try:
        output, _ = agent.communicate(timeout=200)
        ended = time.time() - float((tmp_path / "failed_at").read_text())
        print(f"torchrun, rank 1 {mode}: the job ended {ended:.2f}s after the failure")
        assert agent.returncode != 0
        root_cause = output[output.index("Root Cause (first observed failure)"):]
        assert "rank      : 1 (local_rank: 1)" in root_cause, output[-3000:]
        if mode == "raise":
            # The error is printed before the interpreter exits; under heavy load gloo's teardown in
            # that exit sometimes aborts (SIGABRT, -6) after the print: still this rank, still at once.
            assert "ValueError: rank 1 failed on purpose" in output, output[-3000:]
            assert "exitcode  : 1 " in root_cause or "exitcode  : -6 " in root_cause, output[-3000:]
        else:
            assert "exitcode  : -9 " in root_cause, output[-3000:]
        assert ended < 30, f"torchrun ended {ended:.1f}s after the failure"
        wait_gone(_rank_pids(tmp_path), within=5)
    finally:
        kill_all([agent.pid, *_rank_pids(tmp_path)])


@needs_proc
@pytest.mark.timeout(180)
def test_no_rank_outlives_a_launcher_that_is_killed(tmp_path):
    """The caller of launch() is SIGKILLed (no clean-up runs in it): its ranks, one sleeping and
    one waiting in a collective, exit at once (they hold its lifeline)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    program = ("import dist_helpers; from unigraph.train import launch; "
               f"launch(dist_helpers.waiting_rank, 2, args=({str(tmp_path)!r},))")
    caller = subprocess.Popen([sys.executable, "-c", program], env=env)
    ranks: list[int] = []
    try:
        deadline = time.monotonic() + 150
        while len(_rank_pids(tmp_path)) < 2 and time.monotonic() < deadline and caller.poll() is None:
            time.sleep(0.05)
        ranks = children_of(caller.pid)
        assert len(_rank_pids(tmp_path)) == 2 and set(_rank_pids(tmp_path)) <= set(ranks), "the ranks did not start"
        caller.kill()
        caller.wait(timeout=10)
        seconds = wait_gone(ranks, within=10)
        print(f"ranks gone {seconds:.2f}s after their launcher's SIGKILL")
        assert seconds < 5
    finally:
        kill_all([caller.pid, *ranks, *_rank_pids(tmp_path)])


@pytest.mark.parametrize("tail, consequence", [
    ("RuntimeError: Connection closed by peer [127.0.0.1]:1234", True),
    ("unigraph.distributed.peers.RemoteError: the 'sample' request to partition 1 (part1) failed: Got the following "
     "error when running the callback: RuntimeError: process_vm_readv: No such process (this error originated at "
     "tensorpipe/channel/cma/context_impl.cc:60)", True),      # RPC reading a killed peer's memory
    ("ValueError: the batch had no seeds", False),
])
def test_an_error_that_only_says_a_peer_died_is_a_consequence(tail, consequence):
    from unigraph.train.launch import _error_failure
    failure = _error_failure(0, 0.0, "Traceback (most recent call last):\n  ...\n" + tail, tail)
    assert failure.consequence is consequence


@pytest.mark.parametrize("consequence", [True, False])
def test_a_lost_peer_is_read_in_the_whole_final_message_not_the_tracebacks_last_line(consequence):
    """An RPC error's message carries the remote side's ``At:`` lines after its own text."""
    from unigraph.train.launch import _error_failure
    said = "machine 1's graph server is gone (connection closed by peer" if consequence else "no seeds"
    message = f"unigraph.distributed.peers.RemoteError: {said}: eof\n\nAt:\n  /x/peers.py(102): _received\n"
    failure = _error_failure(0, 0.0, "Traceback (most recent call last):\n  ...\n" + message, message)
    assert failure.consequence is consequence


@needs_proc
@pytest.mark.timeout(120)
def test_a_rank_whose_gloo_group_outlived_the_job_still_exits_cleanly_after_its_atexit_handlers(tmp_path):
    assert launch(exchange_as_pipeline_stages, 2, args=(str(tmp_path),), timeout=90) == [1 + 2, 0 + 2]
    for rank in range(2):
        assert (tmp_path / f"atexit{rank}").read_text() == "ran"
        # torch 2.13 keeps the group (and its two worker threads) while the P2POps live: the ranks
        # then leave through exit_if_gloo_outlived. If torch stops doing so, this test needs a new way in.
        assert int((tmp_path / f"threads{rank}").read_text()) == 2


@pytest.mark.slow
@needs_proc
@pytest.mark.timeout(900)
def test_pipeline_jobs_on_busy_cores_never_abort_at_exit(tmp_path):
    """Before the fix about one pipeline job in a hundred (2 cores kept busy) ended with a rank
    killed by SIGABRT after its result ("terminate called without an active exception")."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        for attempt in range(40):
            done = subprocess.run(
                [sys.executable, "-m", "unigraph.cli", "train", "--model", "sage", "--pipeline-stages", "2",
                 "--micro-batches", "2", "--batch-size", "20", "--fanouts", "3,3", "--epochs", "2", "--nodes", "200",
                 "--progress", "off", "--timeout", "60"], capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, f"attempt {attempt}: {done.stderr[-2000:]}"
    finally:
        kill_all([process.pid for process in busy])
        for process in busy:
            process.wait()
