"""unigraph.procs.exit_if_gloo_outlived, in child interpreters: with no gloo worker thread it
returns; with one it does what exit does while Python is alive (non-daemon threads joined,
atexit handlers run, streams flushed) and skips the teardown that could abort the process."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from unigraph.procs import native_threads_named

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux thread names (/proc, prctl)")

# A thread the kernel names as torch names a gloo worker (PR_SET_NAME = 15 names the calling thread).
NAMED_THREAD = textwrap.dedent("""
    import ctypes, threading
    def named(name, started):
        ctypes.CDLL(None).prctl(15, name.encode(), 0, 0, 0)
        started.set()
        threading.Event().wait()
    def start_named(name):
        started = threading.Event()
        threading.Thread(target=named, args=(name, started), daemon=True).start()
        started.wait()
""")

EXITING = NAMED_THREAD + textwrap.dedent("""
    import atexit, sys, threading, time
    from pathlib import Path
    from unigraph.procs import exit_if_gloo_outlived
    folder = Path(sys.argv[1])
    class Teardown:
        def __del__(self):
            (folder / "teardown").write_text("ran")
    kept = Teardown()   # a module global: freed only by the interpreter's teardown
    atexit.register((folder / "atexit").write_text, "ran")
    def late():
        time.sleep(0.3)
        (folder / "thread").write_text("ran")
    threading.Thread(target=late).start()
    if sys.argv[2] == "gloo":
        start_named("pt_gloo_runloop")
    print("unflushed", end="")
    exit_if_gloo_outlived(3)
    print(" returned", end="")
""")


def _run(tmp_path, mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", EXITING, str(tmp_path), mode], capture_output=True, text=True,
                          timeout=60)


def test_a_thread_is_counted_by_the_name_the_kernel_gives_it():
    code = NAMED_THREAD + textwrap.dedent("""
        from unigraph.procs import native_threads_named
        before = native_threads_named("pt_gloo")
        start_named("pt_gloo_runloop"); start_named("pt_gloo_runloop"); start_named("other")
        print(before, native_threads_named("pt_gloo"), native_threads_named("other"))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["0", "2", "1"], done.stderr
    assert native_threads_named("no thread is named like this") == 0


def test_without_gloo_threads_it_returns_and_the_process_exits_normally(tmp_path):
    done = _run(tmp_path, "plain")
    assert (done.returncode, done.stdout) == (0, "unflushed returned"), done.stderr
    assert all((tmp_path / name).read_text() == "ran" for name in ("atexit", "thread", "teardown"))


def test_with_gloo_threads_it_leaves_after_what_exit_runs_in_python_and_skips_the_teardown(tmp_path):
    done = _run(tmp_path, "gloo")
    assert (done.returncode, done.stdout) == (3, "unflushed"), done.stderr
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "ran"    # the non-daemon thread was joined first
    assert not (tmp_path / "teardown").exists()          # no destructor ran
