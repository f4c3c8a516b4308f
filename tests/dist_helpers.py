"""Ranks for the data-parallel fault tests (one that fails on purpose, one that exchanges as pipeline
stages do): run by :func:`unigraph.train.launch` (importable by name) and by ``torchrun`` (as a script)."""
from __future__ import annotations

import atexit
import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from unigraph.procs import GLOO_WORKER_THREADS, native_threads_named
from unigraph.train.distributed import init_distributed, shutdown

FAIL_AT_STEP = 3


def write_pid(path) -> None:
    """This process's pid in ``path``, whole or not at all (written aside, then renamed): a peer
    waiting for the file must not read it created but still empty."""
    path = Path(path)
    aside = path.with_name(f".{path.name}.{os.getpid()}")
    aside.write_text(str(os.getpid()))
    os.replace(aside, path)


def faulty_rank(mode: str, victim: int, folder: str) -> int:
    """All-reduces in a loop; at step 3 rank ``victim`` fails as ``mode`` says ("raise",
    "sigkill", "exit" = ``os._exit(3)``, "sigstop"), after writing the time to ``folder/failed_at``. Each rank
    writes its pid to ``folder/rank<r>.pid``. The ``finally: shutdown()`` is the pattern that
    used to stall the job: a barrier on the failed rank while the others wait in an all-reduce."""
    context = init_distributed(timeout=120)   # far longer than the tests allow: nobody may wait for it
    write_pid(Path(folder) / f"rank{context.rank}.pid")
    try:
        for step in range(1000):
            if context.rank == int(victim) and step == FAIL_AT_STEP:
                (Path(folder) / "failed_at").write_text(repr(time.time()))
                if mode == "raise":
                    raise ValueError(f"rank {victim} failed on purpose at step {step}")
                if mode == "sigkill":
                    os.kill(os.getpid(), signal.SIGKILL)
                if mode == "exit":
                    os._exit(3)
                if mode == "sigstop":   # frozen, not dead: only heartbeats can tell
                    os.kill(os.getpid(), signal.SIGSTOP)
            dist.all_reduce(torch.ones(4))
        return context.rank
    finally:
        shutdown()


def exchange_as_pipeline_stages(folder: str) -> int:
    """Swap a tensor with the other rank through ``batch_isend_irecv`` (as pipeline stages do),
    all-reduce one Python-made tensor, leave the job; then write how many gloo worker threads
    outlived ``shutdown()`` and register an ``atexit`` handler that marks ``folder/atexit<r>``."""
    context = init_distributed(timeout=60)
    peer = 1 - context.rank
    received = torch.empty(3)
    ops = [dist.P2POp(dist.isend, torch.full((3,), float(context.rank)), peer), dist.P2POp(dist.irecv, received, peer)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    total = torch.ones(2)
    dist.all_reduce(total)
    shutdown()
    folder = Path(folder)
    (folder / f"threads{context.rank}").write_text(str(native_threads_named(GLOO_WORKER_THREADS)))
    atexit.register((folder / f"atexit{context.rank}").write_text, "ran")
    del ops   # held past shutdown() as a stage holds its operations: torch then keeps the group
    return int(received[0]) + int(total[0])


def killed_then_blamed(folder: str) -> None:
    """No process group: rank 0 writes its pid and SIGKILLs itself; rank 1 waits until rank 0 has
    died, then raises an error of its own (not recognizably a lost peer). Rank 0 died first."""
    rank = int(os.environ["RANK"])
    write_pid(Path(folder) / f"rank{rank}.pid")
    if rank == 0:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    while not (Path(folder) / "rank0.pid").exists():
        time.sleep(0.01)
    victim = int((Path(folder) / "rank0.pid").read_text())
    while True:
        try:
            with open(f"/proc/{victim}/stat", "rb") as stat:
                if stat.read().rsplit(b")", 1)[1][1:2] in (b"Z", b"X"):
                    break
        except OSError:
            break
        time.sleep(0.005)
    raise ValueError("rank 1 saw rank 0 vanish")


def blamed_before_killed(folder: str) -> None:
    """No process group: rank 1 raises an error that says (in a multi-line message, as an RPC error
    with its remote ``At:`` lines does) that its peer's connection closed; rank 0 SIGKILLs itself
    1.5 s after that report: the launcher hears the consequence well before it sees the cause end."""
    rank = int(os.environ["RANK"])
    write_pid(Path(folder) / f"rank{rank}.pid")
    raised = Path(folder) / "rank1.raised"
    if rank == 1:
        raised.write_text("")
        raise RuntimeError("the 'features' request to rank 0 failed: connection closed by peer\n\nAt:\n"
                           "  /somewhere/peers.py(102): _received")
    while not raised.exists():
        time.sleep(0.01)
    time.sleep(1.5)
    os.kill(os.getpid(), signal.SIGKILL)


def waiting_rank(folder: str) -> None:
    """Joins the job, writes its pid to ``folder/rank<r>.pid`` and waits in a collective that never
    completes (rank 0 sleeps instead): only the end of its launcher can end it."""
    context = init_distributed(timeout=600)
    write_pid(Path(folder) / f"rank{context.rank}.pid")
    if context.rank == 0:
        time.sleep(600)
    dist.all_reduce(torch.ones(1))


if __name__ == "__main__":   # under torchrun: python -m torch.distributed.run ... dist_helpers.py MODE VICTIM FOLDER
    faulty_rank(sys.argv[1], int(sys.argv[2]), sys.argv[3])


def store_listeners() -> list[str]:
    """Joins the job; returns the local addresses (hex, as /proc/net/tcp* writes them) listening on
    MASTER_PORT while the job runs, and the interface variables gloo and TensorPipe were given."""
    context = init_distributed(timeout=60)
    port = int(os.environ["MASTER_PORT"])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as file:
            for line in file.read().splitlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                if state == "0A" and int(local.split(":")[1], 16) == port:
                    found.append(local.split(":")[0])
    dist.all_reduce(torch.ones(1))
    shutdown()
    return found if context.rank == 0 else [os.environ.get("GLOO_SOCKET_IFNAME"), os.environ.get("TP_SOCKET_IFNAME")]
