"""Training from disk: the mapped loader's batches are NodeLoader's, the feature store's rows are the
file's, and out-of-core training equals in-memory mini-batch training on the twin, step for step."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from unigraph.sampling import NeighborSampler, NodeLoader
from unigraph.storage.features import MappedFeatureStore, top_nodes
from unigraph.storage.generate import PlantedSpec, planted_stream, planted_stream_dataset
from unigraph.storage.loader import MappedNodeLoader
from unigraph.storage.train import OutOfCoreTrainer
from unigraph.train import Trainer, TrainConfig, build_node_classifier
from unigraph.train.rng import seed_everything

SPEC = PlantedSpec(3000, num_features=8, avg_degree=6, homophily=0.8, class_separation=1.0, seed=3)


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    return planted_stream(tmp_path_factory.mktemp("g"), SPEC, chunk_bytes=4096)


@pytest.fixture(scope="module")
def twin():
    return planted_stream_dataset(SPEC)


def test_feature_store_rows_cache_and_advice(graph, twin):
    store = MappedFeatureStore(graph, cache_rows=100)
    degree = graph.load("out_degree")
    hot = np.lexsort((np.arange(len(degree)), -degree))[:100]
    assert store.cache_ids.tolist() == sorted(hot.tolist()) == top_nodes(graph, "out_degree", 100).tolist()
    for seed in range(3):   # the cache is keyed on node ids: new ids every call, against the plain rows
        ids = torch.from_numpy(np.random.default_rng(seed).integers(0, SPEC.num_nodes, 500))
        ids[:50] = store.cache_ids[:50]
        assert torch.equal(store.gather(ids), twin.x[ids])
    assert store.hits >= 150 and store.hits + store.misses == 1500
    assert torch.equal(MappedFeatureStore(graph, cache_rows=10 ** 9).cache_ids, torch.arange(SPEC.num_nodes))
    mapped = graph.mapped("x")
    assert mapped.advise_rows(np.arange(0, 1000)) == 1                  # contiguous rows: one page range
    assert mapped.advise_rows(np.arange(0, 3000, 600)) == 5
    assert mapped.advise_rows(np.arange(0, 3000, 600), max_ranges=4) == 0


def test_top_nodes_ties_go_to_the_lower_id(tmp_path):
    from unigraph.storage.chunked import ChunkedGraph, ChunkedWriter
    with ChunkedWriter(tmp_path, name="t", num_nodes=7, num_edges=10, chunk_bytes=16) as writer:
        writer.add("out_degree", np.array([1, 3, 3, 0, 3, 2, 1]))
        writer.finish()
    assert top_nodes(ChunkedGraph(tmp_path), "out_degree", 2).tolist() == [1, 2]
    assert top_nodes(ChunkedGraph(tmp_path), "out_degree", 4).tolist() == [1, 2, 4, 5]


@pytest.mark.parametrize("prefetch, advise, cache_rows", [(0, False, 0), (2, True, 300)])
def test_loader_batches_are_node_loader_batches(graph, twin, prefetch, advise, cache_rows):
    seeds = twin.train_mask.nonzero().squeeze(1)
    mapped = MappedNodeLoader(graph, seeds, NeighborSampler([4, 3]), features=MappedFeatureStore(
        graph, cache_rows=cache_rows), batch_size=64, seed=5, prefetch=prefetch, advise=advise)
    memory = NodeLoader(twin.graph, seeds, NeighborSampler([4, 3]), batch_size=64, features=twin.x, labels=twin.y,
                        seed=5)
    for _ in range(2):   # two epochs: new orders, the same on both
        pairs = list(zip(mapped, memory, strict=True))
        assert len(pairs) == len(memory)
        for a, b in pairs:
            assert torch.equal(a.input_nodes, b.input_nodes) and torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
            for block_a, block_b in zip(a.blocks, b.blocks):
                assert all(torch.equal(u, v) for u, v in zip(block_a.in_csr()[:2], block_b.in_csr()[:2]))
    assert mapped.stats["batches"] == 2 * len(memory)


def test_errors_in_the_prefetch_thread_reach_the_caller_and_no_thread_is_left(graph, twin):
    class Broken:
        def advise(self, ids):
            return 0

        def gather(self, ids):
            raise RuntimeError("disk on fire")

    seeds = twin.train_mask.nonzero().squeeze(1)
    threads = threading.active_count()
    loader = MappedNodeLoader(graph, seeds, NeighborSampler([2]), features=Broken(), batch_size=8, prefetch=2)
    with pytest.raises(RuntimeError, match="disk on fire"):
        next(iter(loader))
    fine = MappedNodeLoader(graph, seeds, NeighborSampler([2]), features=None, batch_size=8, prefetch=2)
    for _ in zip(range(3), fine):   # leave the epoch early
        pass
    assert threading.active_count() == threads


def _model():
    seed_everything(0)
    return build_node_classifier("sage", SPEC.num_features, SPEC.num_classes, num_layers=2, hidden_channels=16,
                                 dropout=0.0).double()


def test_out_of_core_training_equals_in_memory_training_on_the_twin(graph, twin):
    """float64, two epochs of mini-batches: the losses and the final weights are equal (same
    batches, same samples, same rows), and SAGE's exact evaluation on blocks gives the full-graph
    accuracies."""
    config = TrainConfig(epochs=2, batch_size=128, fanouts=(4, 3), lr=0.01, seed=0, progress="off", patience=None)
    on_disk = OutOfCoreTrainer(_model(), graph, config, cache_rows=200, prefetch=2)
    in_memory = Trainer(_model(), twin, config)
    a, b = on_disk.fit(), in_memory.fit()
    assert a.losses == b.losses
    for (name, p), q in zip(on_disk.model.state_dict().items(), in_memory.model.state_dict().values()):
        assert torch.equal(p, q), name
    assert a.history[-1].val_acc == pytest.approx(b.history[-1].val_acc, abs=1e-12)
    assert a.test_acc == pytest.approx(b.test_acc, abs=1e-12)
    assert on_disk.features.hits > 0 and on_disk.layout["mode"] == "out_of_core"


def test_out_of_core_trainer_refuses(graph, tmp_path):
    with pytest.raises(ValueError, match="give config.batch_size"):
        OutOfCoreTrainer(_model(), graph, TrainConfig(epochs=1))
    from unigraph.storage.convert import from_edge_list
    (tmp_path / "e.txt").write_text("0 1\n1 2\n")
    bare = from_edge_list(tmp_path / "e.txt", tmp_path / "bare")
    with pytest.raises(ValueError, match=r"lacks the arrays \['x', 'y'"):
        OutOfCoreTrainer(_model(), bare, TrainConfig(epochs=1, batch_size=4))


def _vm_flags(array: np.ndarray) -> set[str]:
    """The kernel's VmFlags of the mapping holding ``array`` (/proc/self/smaps)."""
    address, flags, inside = array.__array_interface__["data"][0], None, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                begin, end = (int(x, 16) for x in head.split("-"))
                inside = begin <= address < end
            elif inside and line.startswith("VmFlags:"):
                flags = set(line.split()[1:])
    assert flags is not None, "the array's mapping is not in /proc/self/smaps"
    return flags


@pytest.mark.skipif(not hasattr(__import__("mmap"), "MADV_RANDOM"), reason="no madvise(MADV_RANDOM)")
def test_randomly_read_mappings_are_advised_random_and_read_the_same(graph, twin):
    # "rr": the kernel reads only the faulting page (no read-around: 4 MB per 1 KB row before)
    store = MappedFeatureStore(graph)
    loader = MappedNodeLoader(graph, torch.arange(100), NeighborSampler([3]), batch_size=50)
    assert "rr" in _vm_flags(store.mapped.array)
    assert "rr" in _vm_flags(graph.array("in_indices")) and "rr" in _vm_flags(graph.array("in_indptr"))
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, SPEC.num_nodes, 300))
    assert torch.equal(store.gather(ids), twin.x[ids])
    assert len(list(loader)) == 2
