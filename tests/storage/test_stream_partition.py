"""Streaming partitioning (LDG, Fennel): deterministic, balanced under its caps (one process and
several), better than random on a graph with communities, and the numba kernel equal to the Python one."""
from __future__ import annotations

import numpy as np
import pytest

from unigraph.data import planted_partition
from unigraph.kernels import streaming_partition as kernels
from unigraph.kernels.cpu import numba_status
from unigraph.storage.convert import write_dataset
from unigraph.storage.stream_partition import stream_assign


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    dataset = planted_partition(6000, num_features=4, avg_degree=10, homophily=0.9, train_per_class=150, num_val=300,
                                num_test=300, seed=5)
    return write_dataset(dataset, tmp_path_factory.mktemp("g"), chunk_bytes=1 << 14)


def _cut(graph, assign):
    ptr, sources = graph.load("in_indptr"), graph.load("in_indices")
    dst = np.repeat(np.arange(graph.num_nodes), np.diff(ptr))
    return float((assign[sources] != assign[dst]).mean())


@pytest.mark.parametrize("method", ["ldg", "fennel"])
def test_balanced_deterministic_and_better_than_random(graph, tmp_path, method):
    a, details = stream_assign(graph, 4, tmp_path / "a", method=method, imbalance=0.02, balance=("nodes", "train"),
                               block_nodes=1000)
    a = np.array(a)
    b = np.array(stream_assign(graph, 4, tmp_path / "b", method=method, imbalance=0.02, balance=("nodes", "train"),
                               block_nodes=1000)[0])
    np.testing.assert_array_equal(a, b)
    assert np.bincount(a, minlength=4).max() <= np.ceil(6000 / 4 * 1.02)
    train = graph.load("train_mask")
    assert np.bincount(a[train], minlength=4).max() <= np.ceil(train.sum() / 4 * 1.02)
    random = np.random.default_rng(0).permutation(np.arange(6000) % 4)
    assert _cut(graph, a) < _cut(graph, random) - 0.1                     # random cuts ~75%
    assert details["name"] == method and details["constraints"] == ["nodes", "train"]


def test_numba_kernel_equals_the_python_kernel(graph, tmp_path, monkeypatch):
    if not numba_status()[0]:
        pytest.skip("numba is not installed")
    compiled = np.array(stream_assign(graph, 3, tmp_path / "n", method="fennel", passes=2, block_nodes=777)[0])
    monkeypatch.setattr(kernels, "kernel", lambda: kernels.assign_block)
    python = np.array(stream_assign(graph, 3, tmp_path / "p", method="fennel", passes=2, block_nodes=777)[0])
    np.testing.assert_array_equal(compiled, python)


@pytest.mark.parametrize("pool", ["thread", pytest.param("process", marks=pytest.mark.slow)])
def test_restreaming_in_parallel_keeps_the_caps(graph, tmp_path, pool):
    """Two workers, three passes: each worker may fill only its share of a part's free capacity in
    a round, so the caps hold exactly; the result does not depend on timing (a second run, and
    threads against processes)."""
    runs = [np.array(stream_assign(graph, 4, tmp_path / f"w{k}", method="ldg", passes=3, workers=2, block_nodes=500,
                                   imbalance=0.03, balance=("nodes", "edges"), pool=kind)[0])
            for k, kind in enumerate([pool, "thread"])]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert np.bincount(runs[0], minlength=4).max() <= np.ceil(6000 / 4 * 1.03)
    degree = np.diff(graph.load("in_indptr"))
    loads = np.bincount(runs[0], weights=degree, minlength=4)
    assert loads.max() <= np.ceil(degree.sum() / 4 * 1.03)


def test_bad_settings(graph, tmp_path):
    for kwargs, message in (({"method": "metis"}, "method must be one of"), ({"passes": 0}, "passes must be"),
                            ({"balance": ("colour",)}, "balance takes"), ({"imbalance": -1}, "imbalance")):
        with pytest.raises(ValueError, match=message):
            stream_assign(graph, 2, tmp_path, **kwargs)
    with pytest.raises(ValueError, match="num_parts must be at most the 6000 nodes"):
        stream_assign(graph, 6001, tmp_path)
