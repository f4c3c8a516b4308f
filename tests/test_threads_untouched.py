"""unigraph leaves the user's thread counts alone: after any call, ``torch.get_num_threads()`` and
numba's thread count are what the user set (the first sampled batch used to turn torch's 1 into
2, and a DGL-style loop with one thread per process ran 5x slower)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from proc_helpers import json_report

TESTS = Path(__file__).parent


def _run(first: str, rest: str) -> subprocess.Popen:
    """``thread_checks.py`` in a fresh process (numba's pool starts once per process). numba gets 3
    threads, so that a reset of torch's count to numba's shows on any machine."""
    env = dict(os.environ, NUMBA_NUM_THREADS="3",
               PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    env.pop("OMP_NUM_THREADS", None)
    return subprocess.Popen([sys.executable, str(TESTS / "thread_checks.py"), first, rest],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.timeout(600)
def test_no_unigraph_call_changes_the_thread_counts_the_user_set():
    # two fresh processes at once: the first call into numba is a sampled batch in one, a kernel in the other
    runs = {"sample_numba": _run("sample_numba", "all"), "big_gspmm_numba": _run("big_gspmm_numba", "first-only")}
    for first, process in runs.items():
        report = json_report(process, timeout=500)
        assert report["changed"] == [], f"first call {first}: " + "\n".join(report["changed"])
