"""Hostile graphs and features through every public constructor and every op on every CPU
backend, in a subprocess (tests/fuzz_graphs_driver.py): each call is refused with a clear
error or matches a float64 reference; a crash fails the test naming the example, instead of
killing the test run.

The default run keeps to one subprocess and ``UNIGRAPH_FUZZ_EXAMPLES`` examples (default 40);
the ``slow`` test runs 600 freshly random ones (``pytest -m slow tests/test_fuzz_graphs.py``).
"""
from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

import pytest

DRIVER = pathlib.Path(__file__).with_name("fuzz_graphs_driver.py")


def run_fuzzer(examples: int, *extra: str) -> str:
    env = dict(os.environ, TRITON_INTERPRET="1")  # the Triton backends run interpreted, on tiny inputs only
    run = subprocess.run([sys.executable, "-X", "faulthandler", str(DRIVER), str(examples), *extra],
                         capture_output=True, text=True, env=env, timeout=3000)
    examples_seen = [line for line in run.stdout.splitlines() if line.startswith("EXAMPLE ")]
    last = examples_seen[-1] if examples_seen else "(none)"
    if run.returncode < 0:
        pytest.fail(f"the fuzzer died of {signal.Signals(-run.returncode).name} while running\n{last}\n"
                    f"{run.stderr[-4000:]}")
    assert run.returncode == 0, f"a falsifying example ({len(examples_seen)} run):\n{run.stderr[-6000:]}"
    summary = run.stdout.strip().splitlines()[-1]
    assert summary.startswith("EXAMPLES DONE"), summary
    return summary


def counts(summary: str) -> dict[str, int]:
    return {k: int(v) for k, v in (item.split("=") for item in summary.split()[3:])}


def test_hostile_graphs_and_features_never_crash():
    summary = run_fuzzer(int(os.environ.get("UNIGRAPH_FUZZ_EXAMPLES", "40")))
    seen = counts(summary)
    # both outcomes were exercised: graphs refused at construction, results compared, mutations caught
    assert seen.get("computed", 0) > 100 and seen.get("graphs_built", 0) > 5, summary
    assert sum(v for k, v in seen.items() if k.startswith("constructor_refused")) > 5, summary
    assert seen.get("mutation_refused", 0) > 0, summary


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_hostile_graphs_and_features_thorough():
    run_fuzzer(600, "--random")
