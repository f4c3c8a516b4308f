"""Child processes that may die at any moment, watched without ever blocking on them.

The sampling workers (:mod:`unigraph.sampling.workers`) and the ranks of a local job
(:func:`unigraph.train.launch`) share these pieces. Why each one:

* **One channel per child** (a socket pair). Nothing is shared between children, so no child can
  die holding a lock another one needs. (A ``multiprocessing.Queue`` shared by several writers has
  one pipe and one write lock: a writer killed in the middle of a message, as the out-of-memory
  killer does, leaves the lock taken and half a message that the reader then waits on forever.)
* **Framed messages, read without blocking.** A message is an 8-byte length and then its bytes.
  The child writes blocking; the parent reads only what is there (:class:`Channel`), so half a
  message never blocks it. The parent waits on every channel and every child's exit sentinel
  together (:func:`wait_any`, over ``multiprocessing.connection.wait``) with a timeout: a child
  that dies is seen the moment it dies, with its exit code (:func:`describe_exit`).
* **A lifeline** (:class:`Lifeline`): a pipe whose write end only the parent holds and never
  writes to. Each child watches the read end in a daemon thread (:func:`exit_with_parent`) and
  exits the moment it reads end-of-file, which happens when the parent exits, is killed (SIGKILL,
  the OOM killer) or cuts the lifeline to stop its children. This is portable to every POSIX
  system, and unlike Linux's ``prctl(PR_SET_PDEATHSIG)`` it follows the parent *process*, not the
  thread that happened to start the child. (A process the parent ``os.fork()``-s after starting
  its children also holds the write end: then the children exit when both have exited.)

Messages are pickles exchanged with our own children only (never with untrusted peers).
POSIX only (Linux, macOS): the channels are read with ``os.read`` on their file descriptors.
"""
from __future__ import annotations

import atexit
import os
import signal
import struct
import sys
import threading
import time
from multiprocessing.connection import wait

_HEADER = struct.Struct("<Q")


def describe_exit(exitcode: int | None) -> str:
    """How a process ended, in words: ``"exited with code 3"``, ``"was killed by signal 15 (SIGTERM)"``."""
    if exitcode is None:
        return "is still running"
    if exitcode >= 0:
        return f"exited with code {exitcode}"
    number = -exitcode
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "unknown signal"
    if number == getattr(signal, "SIGKILL", None):
        name += ", as the kernel's out-of-memory killer sends: is the machine short of memory?"
    return f"was killed by signal {number} ({name})"


def process_state(pid: int) -> str | None:
    """The kernel's one-letter state of process ``pid`` (``R`` running, ``S`` sleeping, ``T``
    stopped by a signal, ``t`` stopped by a debugger, ``Z`` exited ...), or None where ``/proc``
    does not say (not Linux, or the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return None
    closing = text.rfind(b")")  # the command name (in parentheses) may hold spaces and parentheses
    return text[closing + 2:closing + 3].decode("ascii", "replace") if closing > 0 else None


def exit_code_of(process, wait_seconds: float = 1.0) -> int | None:
    """``process.exitcode`` once its sentinel said it ended (the exit status may lag the sentinel by
    a moment: the descriptors close before the kernel records the status)."""
    process.join(timeout=wait_seconds)
    return process.exitcode


# ---------------------------------------------------------------------------------- parent side
class Channel:
    """The parent's end of one child's channel: framed messages in and out, never blocking.

    :meth:`receive` returns the messages that are complete so far; :meth:`send` queues a message
    and writes what the child's buffer takes (:meth:`flush` writes more later). ``closed`` turns
    True when the child's end is gone (it exited or was killed): a message it was writing is lost.
    """

    def __init__(self, connection):
        self._connection = connection
        self._fd = connection.fileno()
        os.set_blocking(self._fd, False)
        self._header = bytearray()
        self._body: bytearray | None = None
        self._filled = 0
        self._outgoing = bytearray()
        self.closed = False

    def fileno(self) -> int:
        return self._fd

    @property
    def partial(self) -> bool:
        """True while a message is half received (the child is in the middle of writing it)."""
        return self._body is not None or bool(self._header)

    def receive(self) -> list[bytearray]:
        """Every message completed by the bytes available now (possibly none); never blocks."""
        messages: list[bytearray] = []
        while not self.closed:
            try:
                if self._body is None:
                    data = os.read(self._fd, _HEADER.size - len(self._header))
                    if not data:
                        self.closed = True
                        break
                    self._header += data
                    if len(self._header) == _HEADER.size:
                        self._body, self._filled = bytearray(_HEADER.unpack(self._header)[0]), 0
                        self._header.clear()
                else:
                    count = os.readv(self._fd, [memoryview(self._body)[self._filled:]])
                    if count == 0:
                        self.closed = True
                        break
                    self._filled += count
                if self._body is not None and self._filled == len(self._body):
                    messages.append(self._body)
                    self._body = None
            except BlockingIOError:
                break
            except (ConnectionResetError, BrokenPipeError):
                self.closed = True
        return messages

    def send(self, payload: bytes) -> None:
        self._outgoing += _HEADER.pack(len(payload))
        self._outgoing += payload
        self.flush()

    @property
    def sending(self) -> bool:
        """True while queued bytes wait for room in the child's buffer."""
        return bool(self._outgoing)

    def flush(self) -> None:
        """Write as much of the queued bytes as the child's buffer takes now."""
        while self._outgoing and not self.closed:
            try:
                written = os.write(self._fd, self._outgoing)
            except BlockingIOError:
                return
            except (BrokenPipeError, ConnectionResetError):
                self.closed = True   # the child is gone; its sentinel tells how
                return
            del self._outgoing[:written]

    def close(self) -> None:
        self._connection.close()
        self.closed = True


# A signal the kernel hands to another thread of the process (numba's, torch's) does not interrupt
# the main thread's wait: Python runs its handler (Ctrl-C's KeyboardInterrupt) only when the main
# thread next runs Python code. So waits are sliced: a Ctrl-C is acted on within one slice.
WAIT_SLICE_SECONDS = 0.2


def wait_any(channels: list[Channel], processes: list, timeout: float, *,
             main_thread: bool = False) -> tuple[list[Channel], list[int]]:
    """Wait up to ``timeout`` seconds for a channel to have bytes or a process to end; returns the
    readable channels and the indices of the processes that ended. Never waits longer.
    ``main_thread``: a process has ended once its main thread has (``Z`` in /proc), as a peer
    watching it sees it, though its other threads still exit (reads /proc for each live process
    on every return, ~10-20 us each: for the launcher, whose blame order needs it, not for a
    worker pool's per-batch wait)."""
    live = [channel for channel in channels if not channel.closed]
    sentinels = {process.sentinel: index for index, process in enumerate(processes)}
    deadline = time.monotonic() + max(0.0, timeout)
    while True:
        remaining = deadline - time.monotonic()
        ready = wait([*live, *sentinels], timeout=max(0.0, min(remaining, WAIT_SLICE_SECONDS)))
        # A sentinel stays open after its process ended while a copy of the child's end lives in a
        # process forked meanwhile by another thread (fork keeps close-on-exec descriptors until an
        # exec): ask each process too, so that such an end is seen within a slice, and in the same
        # wait as a peer's report of it. With main_thread, not waitpid alone: a killed process's
        # main thread is a zombie (``Z`` in /proc, what a peer watching it sees) while its other
        # threads (a heartbeat's) still exit, and only then does waitpid report it or its
        # descriptors close
        ended = {sentinels[item] for item in ready if not isinstance(item, Channel)}
        ended |= {index for index, process in enumerate(processes)
                  if index not in ended and (not process.is_alive() or (main_thread and _main_thread_ended(process)))}
        if ready or ended or remaining <= WAIT_SLICE_SECONDS:
            break
    return [channel for channel in live if channel in ready], sorted(ended)


def _main_thread_ended(process) -> bool:
    """Whether ``process``'s main thread has ended (its other threads may still be exiting)."""
    return process_state(process.pid) in ("Z", "X")


class Lifeline:
    """A pipe whose write end only this process holds: children holding the read end see its end
    (and exit, see :func:`exit_with_parent`) when this process dies or :meth:`cut` is called.

    Pass :attr:`child_end` to each child at start; call :meth:`started` once all are started.
    """

    def __init__(self, context):
        self.child_end, self._parent_end = context.Pipe(duplex=False)

    def started(self) -> None:
        """Drop this process's copy of the children's end (they hold theirs)."""
        self.child_end.close()

    def cut(self) -> None:
        """Close the write end: every child holding the read end exits now."""
        self._parent_end.close()


def start_child(context, target, args: tuple, *, name: str, lifeline: Lifeline, daemon: bool) -> tuple:
    """Start ``target(*args, channel, lifeline)`` in a new process of ``context`` (a multiprocessing
    context) with a channel of its own; returns the process and this process's :class:`Channel`."""
    ours, theirs = context.Pipe(duplex=True)
    process = context.Process(target=target, name=name, daemon=daemon, args=(*args, theirs, lifeline.child_end))
    try:
        process.start()
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()   # the child has its own copy; ours would keep its end open after it died
    return process, Channel(ours)


def stop_processes(processes: list, grace: float = 1.0) -> None:
    """Wait up to ``grace`` seconds in all for ``processes`` to end (their lifeline was cut or they
    were asked to stop), then terminate (SIGTERM) and kill (SIGKILL) whatever is left."""
    deadline = time.monotonic() + grace
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
    for escalate in ("terminate", "kill"):
        alive = [process for process in processes if process.is_alive()]
        for process in alive:
            getattr(process, escalate)()
            if escalate == "terminate" and hasattr(signal, "SIGCONT"):
                try:  # a stopped process acts on SIGTERM only once it runs again
                    os.kill(process.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        for process in alive:
            process.join(timeout=2.0)


# ---------------------------------------------------------------------------------- child side
GLOO_WORKER_THREADS = "pt_gloo"   # how torch names a gloo process group's worker threads (Linux thread names)


def native_threads_named(prefix: str) -> int:
    """How many of this process's threads the kernel names ``prefix...`` (0 where ``/proc`` does not say)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    count = 0
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                count += comm.read().startswith(prefix)
        except OSError:
            continue   # the thread ended meanwhile
    return count


def exit_if_gloo_outlived(exit_code: int = 0) -> None:
    """End this process now, without the interpreter's finalization, if worker threads of a
    ``torch.distributed`` gloo process group are still running; otherwise return (the caller
    exits normally).

    Why: while ``P2POp``s that used a gloo group live (``torch.distributed.pipelining``'s stages
    hold theirs), torch keeps the group alive after ``destroy_process_group()``, and with it its
    worker threads (seen with torch 2.13). A worker frees each finished operation's tensors; when it does so
    late (a busy machine), after finalization has begun, freeing a tensor that Python created
    takes the GIL, the interpreter ends that thread, and the C++ runtime aborts the process:
    "terminate called without an active exception", SIGABRT, after the work was done (about
    once in a hundred pipeline jobs on 2 busy cores). Here the process does what exit would do
    while Python is alive (joins its non-daemon threads, runs the ``atexit`` handlers, flushes
    stdout and stderr) and then leaves with ``os._exit``, so no destructor runs.
    """
    if not native_threads_named(GLOO_WORKER_THREADS):
        return
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon and thread is not threading.main_thread():
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(exit_code)


def exit_with_parent(lifeline, exit_code: int = 0) -> None:
    """In a child: exit (``os._exit``, at once, whatever the main thread is doing) as soon as the
    parent dies or cuts the lifeline."""
    def watch() -> None:
        fd = lifeline.fileno()
        while True:
            try:
                if not os.read(fd, 1):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        os._exit(exit_code)

    threading.Thread(target=watch, name="unigraph-parent-watch", daemon=True).start()


def send_message(connection, payload: bytes) -> None:
    """In a child: write one framed message (blocking). Raises ``BrokenPipeError`` (or
    ``ConnectionResetError``) if the parent has gone."""
    fd = connection.fileno()
    for part in (_HEADER.pack(len(payload)), payload):
        view = memoryview(part)
        while view:
            view = view[os.write(fd, view):]


def receive_message(connection) -> bytearray | None:
    """In a child: read one framed message (blocking); None when the parent's end is closed."""
    fd = connection.fileno()
    header = _read_exactly(fd, _HEADER.size)
    if header is None:
        return None
    body = bytearray(_HEADER.unpack(header)[0])
    view, filled = memoryview(body), 0
    while filled < len(body):
        count = os.readv(fd, [view[filled:]])
        if count == 0:
            return None
        filled += count
    return body


def _read_exactly(fd: int, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data
