"""unigraph.procs in one process: framed messages arrive whole however the bytes are split,
half a message never blocks the reader, a closed peer is seen, exits are described."""
from __future__ import annotations

import multiprocessing
import os
import signal
import struct
import subprocess
import sys
import time

import pytest

from unigraph.procs import Channel, describe_exit, receive_message, send_message

pytestmark = pytest.mark.skipif(os.name != "posix", reason="channels are POSIX file descriptors")


def _pair():
    ours, theirs = multiprocessing.get_context("spawn").Pipe(duplex=True)
    return Channel(ours), theirs


def _frame(payload: bytes) -> bytes:
    return struct.pack("<Q", len(payload)) + payload


def test_messages_split_anywhere_arrive_whole_and_in_order():
    channel, theirs = _pair()
    payloads = [b"", b"x", os.urandom(100_000), b"last"]
    stream = b"".join(_frame(p) for p in payloads)
    got = []
    for start in range(0, len(stream), 7_777):   # cut through headers and bodies alike
        os.write(theirs.fileno(), stream[start:start + 7_777])
        got += channel.receive()
    assert [bytes(m) for m in got] == payloads
    assert not channel.partial and not channel.closed


def test_half_a_message_does_not_block_and_a_closed_peer_is_seen():
    channel, theirs = _pair()
    os.write(theirs.fileno(), _frame(b"0123456789")[:13])   # header and 5 of 10 bytes
    assert channel.receive() == [] and channel.partial and not channel.closed
    assert channel.receive() == []                             # nothing more: returns at once
    theirs.close()
    assert channel.receive() == [] and channel.closed and channel.partial


def test_sending_more_than_the_buffer_holds_queues_the_rest_until_the_reader_reads():
    channel, theirs = _pair()
    payload = os.urandom(4 << 20)
    channel.send(payload)                        # returns at once: what did not fit is queued
    assert channel.sending
    os.set_blocking(theirs.fileno(), False)
    received = bytearray()
    while channel.sending or len(received) < 8 + len(payload):
        try:
            received += os.read(theirs.fileno(), 1 << 20)
        except BlockingIOError:
            pass
        channel.flush()
    assert bytes(received) == _frame(payload)


def test_a_child_end_sends_and_a_closed_parent_ends_receiving():
    channel, theirs = _pair()
    send_message(theirs, b"hello")
    assert [bytes(m) for m in channel.receive()] == [b"hello"]
    channel.send(b"task")
    assert receive_message(theirs) == b"task"
    channel.close()
    assert receive_message(theirs) is None
    with pytest.raises((BrokenPipeError, ConnectionResetError)):
        send_message(theirs, b"x" * (1 << 20))


def test_exits_are_described_in_words():
    assert describe_exit(0) == "exited with code 0"
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-signal.SIGKILL).startswith("was killed by signal 9 (SIGKILL, as the kernel's out-of-memory")
    assert describe_exit(-signal.SIGTERM) == "was killed by signal 15 (SIGTERM)"
    assert describe_exit(None) == "is still running"


# the main thread blocks SIGINT, so the kernel gives it to the other thread: the main thread's wait
# is not interrupted, and only the next Python it runs raises the KeyboardInterrupt
_CTRL_C_ELSEWHERE = """
import multiprocessing, signal, sys, threading, time
from unigraph.procs import Channel, wait_any
signal.signal(signal.SIGINT, signal.default_int_handler)   # (a runner started as a background job ignores it)
other = threading.Thread(target=time.sleep, args=(60,), daemon=True)
other.start()                                       # made before the mask: SIGINT stays open for it
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
ours, theirs = multiprocessing.get_context("spawn").Pipe(duplex=True)
print("waiting", flush=True)
began = time.monotonic()
try:
    wait_any([Channel(ours)], [], timeout=30)
except KeyboardInterrupt:
    print(f"interrupted {time.monotonic() - began:.2f}", flush=True)
"""


def test_ctrl_c_given_to_another_thread_ends_the_wait_within_a_slice():
    child = subprocess.Popen([sys.executable, "-c", _CTRL_C_ELSEWHERE], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "waiting"
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=20)
        assert out.startswith("interrupted"), out
        assert float(out.split()[1]) < 2.0     # 30 s (the whole timeout) before the waits were sliced
    finally:
        child.kill()


def _exit_leaving_a_grandchild_with_the_sentinel(seconds: float) -> None:
    """Fork a grandchild that holds every descriptor of this process (the sentinel's write end
    among them) for ``seconds``, and end at once."""
    if os.fork() == 0:
        time.sleep(seconds)
        os._exit(0)
    os._exit(3)


def test_an_end_whose_sentinel_another_process_holds_open_is_seen_within_a_slice():
    """A process forked from another thread while a child starts inherits the child's end of its
    sentinel pipe: the sentinel then stays silent until that process ends. wait_any also asks the
    process itself, so the end is seen at once, not when the holder exits."""
    from unigraph.procs import WAIT_SLICE_SECONDS, wait_any
    child = multiprocessing.get_context("fork").Process(target=_exit_leaving_a_grandchild_with_the_sentinel, args=(10.0,))
    child.start()
    try:
        began = time.monotonic()
        readable, ended = wait_any([], [child], timeout=8)
        assert ended == [0] and readable == []
        assert time.monotonic() - began < 1.0 + WAIT_SLICE_SECONDS
        assert child.exitcode == 3
    finally:
        child.join(1)


# A process whose main thread ends (pthread_exit: state Z, as a SIGKILLed process's main thread
# while its other threads still exit) while a C thread (no Python, no GIL) sleeps on for argv[1]
# seconds: until then waitpid cannot report it and its descriptors stay open.
_MAIN_THREAD_ENDS_FIRST = """
import ctypes, sys
libc = ctypes.CDLL(None)
thread = ctypes.c_ulong()
libc.pthread_create(ctypes.byref(thread), None, ctypes.cast(libc.sleep, ctypes.c_void_p),
                    ctypes.c_void_p(int(sys.argv[1])))
libc.pthread_exit(None)
"""


class _Child:
    """What wait_any reads of a process (``sentinel``, ``pid``, ``is_alive``) for a plain
    subprocess: the sentinel is a pipe whose write end only the child holds."""

    def __init__(self, code: str, *args: str):
        read, write = os.pipe()
        self.popen = subprocess.Popen([sys.executable, "-c", code, *args], pass_fds=(write,))
        os.close(write)
        self.sentinel, self.pid = read, self.popen.pid

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def close(self) -> None:
        self.popen.kill()   # (a no-op once it exited) never left behind: a test runner may wait on it
        self.popen.wait(10)
        os.close(self.sentinel)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_process_whose_main_thread_ended_is_seen_ended_within_a_slice():
    """A peer watching a killed rank's /proc entry sees it end (``Z``) before the kernel lets the
    parent reap it; wait_any(main_thread=True) sees that end too, so a peer's report of it never
    comes first (the launcher's blame order)."""
    from unigraph.procs import WAIT_SLICE_SECONDS, process_state, wait_any
    child = _Child(_MAIN_THREAD_ENDS_FIRST, "5")
    try:
        deadline = time.monotonic() + 20   # (an interpreter's start on a loaded machine)
        while process_state(child.pid) != "Z":
            assert time.monotonic() < deadline, process_state(child.pid)
            time.sleep(0.01)
        assert child.is_alive()   # (the C thread sleeps on: no sentinel, no waitpid)
        assert wait_any([], [child], timeout=0) == ([], [])   # a worker pool's wait: the whole process
        began = time.monotonic()
        readable, ended = wait_any([], [child], timeout=4, main_thread=True)
        assert ended == [0] and readable == []
        assert time.monotonic() - began < 1.0 + WAIT_SLICE_SECONDS
    finally:
        child.close()
