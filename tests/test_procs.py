"""unigraph.procs in one process: framed messages arrive whole however the bytes are split,
half a message never blocks the reader, a closed peer is seen, exits are described."""
from __future__ import annotations

import multiprocessing
import os
import signal
import struct

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
