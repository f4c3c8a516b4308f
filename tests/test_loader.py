"""NodeLoader and NodeFeatureStore: epochs cover every seed once, workers give the same batches as
the calling process, and a worker that raises, dies or hangs is reported, never waited on forever."""
from __future__ import annotations

import math
import os
import time

import pytest
import torch

from loader_helpers import POISON, DyingSampler, FailingSampler, SleepingSampler
from test_sampling_neighbor import check_blocks, computation_trees
from unigraph.data import planted_partition, rmat
from unigraph.sampling import NeighborSampler, NodeFeatureStore, NodeLoader, WorkerError


@pytest.fixture(scope="module")
def dataset():
    return planted_partition(num_nodes=600, num_val=100, num_test=200)


def _same_batches(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x.seeds, y.seeds) and torch.equal(x.input_nodes, y.input_nodes)
        assert torch.equal(x.x, y.x) and torch.equal(x.y, y.y)
        for p, q in zip(x.blocks, y.blocks):
            assert torch.equal(p.in_csr()[0], q.in_csr()[0]) and torch.equal(p.src, q.src)


def test_an_epoch_covers_every_seed_once_with_features_and_labels(dataset):
    nodes = torch.arange(dataset.num_nodes)
    sampler = NeighborSampler([3, 2], return_eids=True)
    loader = NodeLoader(dataset.graph, nodes, sampler, batch_size=64, features=dataset.x, labels=dataset.y)
    batches = list(loader)
    assert len(loader) == len(batches) == math.ceil(600 / 64)
    assert [b.seeds.numel() for b in batches] == [64] * 9 + [600 - 9 * 64]
    assert torch.equal(torch.sort(torch.cat([b.seeds for b in batches])).values, nodes)
    for batch in batches:
        assert torch.equal(batch.x, dataset.x[batch.input_nodes]) and torch.equal(batch.y, dataset.y[batch.seeds])
        check_blocks(dataset.graph, batch, batch.seeds, [3, 2], replace=False)


def test_shuffling_is_seeded_and_changes_every_epoch(dataset):
    nodes = torch.arange(100)
    sampler = NeighborSampler([2])

    def order(loader):
        return torch.cat([b.seeds for b in loader])

    first, second = NodeLoader(dataset.graph, nodes, sampler, batch_size=30, seed=4), \
        NodeLoader(dataset.graph, nodes, sampler, batch_size=30, seed=4)
    epoch1 = order(first)
    assert torch.equal(epoch1, order(second))                       # same seed, same epoch: same order
    assert not torch.equal(epoch1, order(first))                    # next epoch: another order
    assert not torch.equal(epoch1, nodes)
    in_order = NodeLoader(dataset.graph, nodes, sampler, batch_size=30, shuffle=False, drop_last=True)
    assert torch.equal(order(in_order), nodes[:90]) and len(in_order) == 3


@pytest.fixture(scope="module")
def two_worker_loader(dataset):
    loader = NodeLoader(dataset.graph, torch.arange(dataset.num_nodes), NeighborSampler([4, 3]), batch_size=50,
                        features=dataset.x, labels=dataset.y, num_workers=2, seed=9, timeout=60)
    yield loader
    loader.close()


@pytest.mark.timeout(120)
def test_two_workers_yield_the_batches_of_the_calling_process(dataset, two_worker_loader):
    reference = NodeLoader(dataset.graph, torch.arange(dataset.num_nodes), NeighborSampler([4, 3]), batch_size=50,
                           features=dataset.x, labels=dataset.y, seed=9)
    _same_batches(list(reference), list(two_worker_loader))
    pids = two_worker_loader.worker_pids
    assert len(pids) == 2 and os.getpid() not in pids
    _same_batches(list(reference), list(two_worker_loader))          # second epoch, same workers
    assert two_worker_loader.worker_pids == pids


@pytest.mark.timeout(120)
def test_an_abandoned_epoch_does_not_leak_into_the_next(dataset, two_worker_loader):
    for batch in two_worker_loader:                                 # leave after one batch, tasks in flight
        break
    next_epoch = list(two_worker_loader)
    reference = NodeLoader(dataset.graph, torch.arange(dataset.num_nodes), NeighborSampler([4, 3]), batch_size=50,
                           features=dataset.x, labels=dataset.y, seed=9)
    for _ in range(two_worker_loader.epoch):
        expected = list(reference)
    _same_batches(expected, next_epoch)


def _small_graph():
    return rmat(200, 2000, seed=1)


@pytest.mark.timeout(120)
def test_a_worker_that_raises_reports_its_traceback_and_the_pool_survives():
    with NodeLoader(_small_graph(), torch.arange(200), FailingSampler([2]), batch_size=16, num_workers=2,
                    timeout=60, start_method="forkserver") as loader:
        for attempt in range(2):                                     # and again: nothing hangs
            with pytest.raises(WorkerError, match=rf"(?s)Traceback.*ArithmeticError: poisoned batch containing node {POISON}"):
                for _ in loader:
                    pass
        assert len(loader.worker_pids) == 2


@pytest.mark.timeout(120)
def test_a_worker_that_dies_is_reported_with_its_exit_code():
    with NodeLoader(_small_graph(), torch.arange(200), DyingSampler([2]), batch_size=16, num_workers=2,
                    timeout=60, start_method="forkserver") as loader:
        with pytest.raises(WorkerError, match=r"sampling worker \d \(pid \d+\) died unexpectedly: it exited with code 3"):
            list(loader)
        assert loader.worker_pids == []                              # shut down; a next epoch starts afresh


@pytest.mark.timeout(120)
def test_a_hanging_worker_hits_the_timeout_and_is_stopped():
    loader = NodeLoader(_small_graph(), torch.arange(200), SleepingSampler([2]), batch_size=16, num_workers=2,
                        timeout=2, shuffle=False, start_method="forkserver")
    started = time.monotonic()
    with pytest.raises(WorkerError, match="within timeout=2s"):
        list(loader)
    assert time.monotonic() - started < 40                           # worker start-up + 2 s, not the 60 s sleep
    assert loader.worker_pids == []


def test_bad_loader_arguments(dataset):
    graph, sampler = dataset.graph, NeighborSampler([2])
    with pytest.raises(ValueError, match="'fork' can deadlock"):
        NodeLoader(graph, torch.arange(10), sampler, num_workers=2, start_method="fork")
    with pytest.raises(ValueError, match="nodes holds node id 600"):
        NodeLoader(graph, torch.tensor([0, 600]), sampler)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        NodeLoader(graph, torch.arange(10), sampler, batch_size=0)
    with pytest.raises(ValueError, match="features have 10 rows"):
        NodeLoader(graph, torch.arange(10), sampler, features=torch.zeros(10, 3))
    with pytest.raises(TypeError, match="sampler must have sample"):
        NodeLoader(graph, torch.arange(10), object())


# ---------------------------------------------------------------- the feature store
def test_feature_store_gathers_rows_and_caches_the_highest_degree_nodes(dataset):
    store = NodeFeatureStore(dataset.x)
    ids = torch.tensor([5, 0, 599, 5])
    assert torch.equal(store.gather(ids), dataset.x[ids])
    degrees = torch.zeros(600, dtype=torch.int64)
    degrees[[3, 5, 9]] = torch.tensor([10, 30, 20])
    store.cache_hot_nodes(degrees, 2, "cpu")                        # nodes 5 and 9
    assert torch.equal(store.cache, dataset.x[[5, 9]])
    hits, misses = store.hits, store.misses
    assert torch.equal(store.gather(ids), dataset.x[ids])
    assert (store.hits - hits, store.misses - misses) == (2, 2)
    with pytest.raises(ValueError, match="num_cached must be an int in 0..600"):
        store.cache_hot_nodes(degrees, 601, "cpu")


def test_feature_store_on_another_device_gathers_there_and_refuses_what_needs_the_cpu(dataset):
    # a graph sampled on a GPU without workers takes its features where they are (the GPU run's
    # mini-batch found "keeps features in CPU memory" here); "meta" stands in for that device
    store = NodeFeatureStore(dataset.x.to("meta"))
    rows = store.gather(torch.tensor([5, 0]))
    assert rows.device.type == "meta" and rows.shape == (2,) + tuple(dataset.x.shape[1:])
    with pytest.raises(ValueError, match="shared CPU memory; these are on meta"):
        store.share_memory_()
    with pytest.raises(ValueError, match="already on meta"):
        store.cache_hot_nodes(dataset.graph, 10, "cpu")
    with pytest.raises(ValueError, match="shared CPU memory; these are on meta"):
        NodeLoader(dataset.graph, torch.arange(600), NeighborSampler([3]), features=dataset.x.to("meta"), num_workers=1)


def test_loader_with_a_device_cache_gathers_the_same_features(dataset):
    store = NodeFeatureStore(dataset.x).cache_hot_nodes(dataset.graph, 100, "cpu")
    cached = NodeLoader(dataset.graph, torch.arange(600), NeighborSampler([3]), batch_size=100, features=store,
                        labels=dataset.y, device="cpu")
    plain = NodeLoader(dataset.graph, torch.arange(600), NeighborSampler([3]), batch_size=100, features=dataset.x,
                       labels=dataset.y)
    _same_batches(list(plain), list(cached))
    assert store.hits > 0 and store.misses > 0


def test_data_parallel_ranks_split_the_global_batches_and_sample_the_samecomputation_trees(dataset):
    nodes, sampler = torch.arange(101), NeighborSampler([3, 2])
    ranks = [list(NodeLoader(dataset.graph, nodes, sampler, batch_size=10, seed=2, num_replicas=2, rank=r))
             for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == 5                               # 50 each; one node left out
    shuffled = NodeLoader(dataset.graph, nodes, sampler, batch_size=101, seed=2)
    order = next(iter(shuffled)).seeds[:100]                                 # the epoch's shared order
    global_batches = [order[i * 20:(i + 1) * 20] for i in range(5)]
    for b, expected in enumerate(global_batches):
        together = torch.cat([ranks[0][b].seeds, ranks[1][b].seeds])
        assert torch.equal(torch.sort(together).values, torch.sort(expected).values)
    # the same key per global batch: a seed's sampled neighbourhood does not depend on its rank
    key_loader = NodeLoader(dataset.graph, nodes, sampler, batch_size=20, seed=2)
    whole = sampler.sample(dataset.graph, torch.cat([ranks[0][0].seeds, ranks[1][0].seeds]),
                           key=key_loader._epoch_tasks(1)[0][1])
    whole_trees = computation_trees(whole)
    for rank_batch in (ranks[0][0], ranks[1][0]):
        for key, sources in computation_trees(rank_batch).items():
            assert whole_trees[key] == sources
    with pytest.raises(ValueError, match="rank must be in 0..num_replicas-1 = 0..1"):
        NodeLoader(dataset.graph, nodes, sampler, num_replicas=2, rank=2)
