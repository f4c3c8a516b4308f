"""The streaming planted-partition generator: independent of the chunk size, equal to its in-memory
twin, and with the class balance, homophily and split it is asked for."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from unigraph.storage.convert import to_node_dataset
from unigraph.storage.generate import BLOCK, PlantedSpec, planted_stream, planted_stream_dataset


def test_chunk_size_independent_and_equal_to_the_twin(tmp_path):
    spec = PlantedSpec(BLOCK + 1234, num_features=8, avg_degree=5, seed=7)   # two generation blocks
    a = planted_stream(tmp_path / "a", spec, chunk_bytes=10_000)
    b = planted_stream(tmp_path / "b", spec, chunk_bytes=1 << 22)
    for name in a.names():
        np.testing.assert_array_equal(a.load(name), b.load(name), err_msg=name)
    twin, back = planted_stream_dataset(spec), to_node_dataset(a)
    for field in ("x", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(back, field), getattr(twin, field)), field
    assert torch.equal(back.graph.edge_index, twin.graph.edge_index)
    assert a.meta["seed"] == 7 and a.meta["generator"] == "planted_stream"


def test_classes_homophily_degrees_and_split(tmp_path):
    spec = PlantedSpec(40_000, num_classes=5, num_features=4, avg_degree=10, homophily=0.7, train_fraction=0.2,
                       val_fraction=0.1, test_fraction=0.1)
    graph = planted_stream(tmp_path, spec)
    y, ptr, sources = graph.load("y"), graph.load("in_indptr"), graph.load("in_indices")
    assert np.bincount(y).tolist() == [8000] * 5
    degree = np.diff(ptr)
    assert degree.min() >= 1 and degree.max() <= 19 and abs(degree.mean() - 10) < 0.1
    dst = np.repeat(np.arange(spec.num_nodes), degree)
    assert abs((y[sources] == y[dst]).mean() - 0.7) < 0.01
    np.testing.assert_array_equal(graph.load("out_degree"), np.bincount(sources, minlength=spec.num_nodes))
    masks = np.stack([graph.load(m) for m in ("train_mask", "val_mask", "test_mask")])
    assert masks.sum(0).max() == 1 and np.allclose(masks.mean(1), [0.2, 0.1, 0.1], atol=0.01)
    x = graph.load("x")   # class means sit about class_separation from the origin, noise is unit normal
    assert abs(np.linalg.norm(x[y == 0].mean(0)) - spec.class_separation) < 0.05


@pytest.mark.parametrize("change, message", [
    ({"num_nodes": 0}, "num_nodes must be an int >= 1"), ({"num_classes": 1}, "num_classes must be an int >= 2"),
    ({"homophily": 1.5}, r"homophily must be a number in \[0, 1\]"), ({"feature_dtype": "int8"}, "feature_dtype"),
    ({"train_fraction": 0.9, "val_fraction": 0.2}, "must be <= 1"), ({"num_nodes": 2 ** 31}, "below 2\\*\\*31"),
])
def test_bad_settings_are_refused(change, message):
    with pytest.raises(ValueError, match=message):
        PlantedSpec(**{"num_nodes": 100, **change})
