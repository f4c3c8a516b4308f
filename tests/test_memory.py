"""unigraph.memory.keep_freed_memory: freed large blocks stay in the process (measured in a child
process, since the setting is the whole process's), and the default is untouched."""
from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")

CHILD = """
import sys, torch
def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
if sys.argv[1] == "keep":
    import unigraph.memory
    unigraph.memory.keep_freed_memory()
before = rss_mb()
for _ in range(3):
    t = torch.ones(64 << 18)  # 64 MiB, above glibc's largest default mmap threshold (32 MiB)
    del t
print(rss_mb() - before)
"""


def _kept_mb(mode: str) -> float:
    done = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return float(done.stdout.strip().splitlines()[-1])


def test_freed_blocks_stay_only_when_asked():
    import unigraph.memory as memory
    if memory._mallopt() is None:
        pytest.skip("this C library is not glibc (no mallopt)")
    assert _kept_mb("default") < 32          # glibc unmapped every 64 MiB block on free
    assert _kept_mb("keep") >= 60            # at least one freed block is still resident


def test_refuses_clearly_without_glibc(monkeypatch):
    import unigraph.memory as memory
    monkeypatch.setattr(memory, "_mallopt", lambda: None)
    with pytest.raises(RuntimeError, match="glibc's mallopt"):
        memory.keep_freed_memory()
