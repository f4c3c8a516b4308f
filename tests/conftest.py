"""Shared test configuration.

Hypothesis profiles: ``ci`` (default, quick) and ``thorough`` (many more examples), chosen with
``UNIGRAPH_HYPOTHESIS_PROFILE=thorough``; ``gpu`` (bounded, for the GPU run's few minutes:
``benchmarks/gpu/step_tests.py``) and ``dry_run`` (its CPU dry run: one example a test).
"""
from __future__ import annotations

import os

# Before anything imports torch: OpenMP waiters that spin make every torch op many times slower on
# a busy machine (see unigraph/__init__.py); unigraph sets this too, but torch is imported first here.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pathlib  # noqa: E402
import sys

import pytest
from hypothesis import HealthCheck, settings

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # for `benchmarks.peers` (the one DGL loader)
    sys.path.insert(0, str(REPO_ROOT))

settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", max_examples=400, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("gpu", max_examples=10, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dry_run", max_examples=1, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("UNIGRAPH_HYPOTHESIS_PROFILE", "ci"))

# the real Planetoid files: ../shared beside the checkout (the main one), or UNIGRAPH_PLANETOID_RAW (a worktree)
PLANETOID_RAW = pathlib.Path(os.environ.get("UNIGRAPH_PLANETOID_RAW")
                             or REPO_ROOT.parent / "shared" / "datasets" / "planetoid" / "raw")

# Triton picks compiled vs interpreted when it is first imported: on a CPU-only machine define its
# kernels interpreted now, before anything else imports it (see tests/triton_setup.py).
import triton_setup  # noqa: E402
triton_setup.define_interpreted_kernels()


@pytest.fixture(autouse=True)
def _reset_backend_choice():
    """Every test starts from the default backend choice, whatever the previous one set."""
    import unigraph
    unigraph.set_backend(None)
    yield
    unigraph.set_backend(None)


@pytest.fixture
def no_small_graph_rule(monkeypatch):
    """``auto`` without the small-graph rule (``backends/small_graph.py``): every call goes by the
    cost model and new graphs get their CSRs, for tests of those paths on small graphs."""
    from unigraph.backends import small_graph
    monkeypatch.setattr(small_graph, "SMALL_WORK", 0)
    monkeypatch.setattr(small_graph, "FRESH_WORK", 0)
    monkeypatch.setattr(small_graph, "CSR_FREE_EDGES", -1)
    monkeypatch.setattr(small_graph, "GPU_WORK", 0)
    monkeypatch.setattr(small_graph, "TINY_WORK", -1)


@pytest.fixture
def poisoned_output_pool(monkeypatch):
    """A fresh 64 MiB output pool (``kernels/cpu/alloc.py``) that pools every output (no size
    floor) and hands each one out filled with NaN / out-of-range values: an element a kernel
    forgets to write shows."""
    import gc
    from unigraph.kernels.cpu import alloc
    fresh = alloc._Pool(64 << 20)
    fresh.poison = True
    monkeypatch.setattr(alloc, "_POOL", fresh)
    monkeypatch.setattr(alloc, "MIN_BYTES", 0)
    yield fresh
    gc.collect()


@pytest.fixture(scope="session")
def dgl():
    from benchmarks.peers import load_dgl
    module = load_dgl()
    if module is None:
        pytest.skip("DGL is not installed (optional peer: pip install --no-deps dgl==2.1.0)")
    return module


@pytest.fixture(scope="session")
def planetoid_root() -> pathlib.Path:
    if not PLANETOID_RAW.is_dir():
        pytest.skip(f"Planetoid raw files not found at {PLANETOID_RAW} (they live outside the project, in ../shared)")
    return PLANETOID_RAW


def pytest_sessionfinish(session, exitstatus):
    """No child process a test left behind may hold the run at exit: multiprocessing joins its
    non-daemon children when the interpreter exits, so one hung child would hang the whole run
    (and CI) until its time limit, as a forked child did on 2026-11-27. Such children are named
    and killed here."""
    import multiprocessing
    left = multiprocessing.active_children()
    for child in left:
        child.kill()
        child.join(5)
    if left:
        names = ", ".join(f"{child.name} (pid {child.pid})" for child in left)
        writer = session.config.get_terminal_writer()
        writer.line()
        writer.line(f"killed child processes that tests left running: {names}", red=True)
