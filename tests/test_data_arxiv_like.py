"""The arxiv-like labelled generator at a small size: deterministic, simple and undirected, skewed
degrees (and a uniform twin), homophilous, with a signal the graph adds to the features."""
from __future__ import annotations

import pytest
import torch

from unigraph import ops
from unigraph.data.arxiv_like import ARXIV_SIZE, PRODUCTS_SIZE, arxiv_like, memory_bytes, scaled


@pytest.fixture(scope="module")
def small():
    return arxiv_like(3000, 15000, 16, 8, seed=3)


def test_deterministic_under_its_seed(small):
    again = arxiv_like(3000, 15000, 16, 8, seed=3)
    assert torch.equal(small.graph.edge_index, again.graph.edge_index)
    assert torch.equal(small.x, again.x) and torch.equal(small.y, again.y)
    assert torch.equal(small.train_mask, again.train_mask)
    other = arxiv_like(3000, 15000, 16, 8, seed=4)
    assert not torch.equal(small.y, other.y)


def test_sizes_split_and_a_simple_undirected_graph(small):
    g = small.graph
    assert g.num_nodes == 3000 and small.x.shape == (3000, 16) and small.x.dtype == torch.float32
    assert int(small.y.min()) >= 0 and int(small.y.max()) < 8
    masks = torch.stack([small.train_mask, small.val_mask, small.test_mask]).int()
    assert bool((masks.sum(0) == 1).all())                                # disjoint and covering
    assert int(small.train_mask.sum()) == int(0.54 * 3000) and int(small.val_mask.sum()) == int(0.18 * 3000)
    src, dst = g.src, g.dst
    assert not bool((src == dst).any())                                   # no self-loops
    keys = src * 3000 + dst
    assert torch.unique(keys).numel() == keys.numel()                     # no duplicates
    assert torch.equal(torch.sort(keys).values, torch.sort(dst * 3000 + src).values)   # both directions
    assert 0.9 * 2 * 15000 < g.num_edges <= 2 * 15000


def test_power_law_degrees_are_skewed_and_the_uniform_twin_is_not(small):
    degree = small.graph.in_degrees().float()
    uniform = arxiv_like(3000, 15000, 16, 8, degrees="uniform", seed=3).graph.in_degrees().float()
    skew = degree.max() / degree.median()
    assert skew > 20                                                      # hubs, as in citation graphs
    assert uniform.max() / uniform.median() < 4
    assert skew > 5 * uniform.max() / uniform.median()


def test_labels_follow_the_edges_and_the_graph_adds_signal(small):
    src, dst, y = small.graph.src, small.graph.dst, small.y
    assert abs(float((y[src] == y[dst]).float().mean()) - 0.65) < 0.06   # edge homophily ~ the parameter
    counts = torch.bincount(y, minlength=8)
    assert counts[0] > 2 * counts[-1]                                     # imbalanced classes

    def nearest_centroid_accuracy(h):
        train, test = small.train_mask, small.test_mask
        centroids = torch.stack([h[train & (y == k)].mean(0) for k in range(8)])
        predicted = torch.cdist(h, centroids).argmin(1)
        return float((predicted[test] == y[test]).float().mean())
    alone = nearest_centroid_accuracy(small.x)
    averaged = nearest_centroid_accuracy(ops.gspmm(small.graph, "copy_u", "mean", small.x))
    assert 0.2 < alone < 0.9 and averaged > alone + 0.1


def test_bad_arguments_are_refused_by_name():
    for kwargs, match in [(dict(num_nodes=1), "num_nodes"), (dict(num_classes=1), "num_classes"),
                          (dict(degrees="zipf"), "degrees"), (dict(exponent=1.0), "exponent"),
                          (dict(homophily=1.5), "homophily"), (dict(train_fraction=0.9, val_fraction=0.2), "<= 1"),
                          (dict(num_nodes=10, num_classes=20), "exceeds")]:
        args = dict(num_nodes=100, num_edges=200, num_features=4, num_classes=4) | kwargs
        with pytest.raises(ValueError, match=match):
            arxiv_like(**args)


def test_presets_scale_and_memory_estimate():
    quarter = scaled(PRODUCTS_SIZE, 0.25)
    assert quarter["num_nodes"] == round(PRODUCTS_SIZE["num_nodes"] / 4) and quarter["num_features"] == 100
    with pytest.raises(ValueError, match="scale"):
        scaled(ARXIV_SIZE, 0)
    parts = memory_bytes(**{k: ARXIV_SIZE[k] for k in ("num_nodes", "num_edges", "num_features")})
    assert parts["features (float32)"] == 169_343 * 128 * 4
    assert sum(parts.values()) < 2**30                                    # arxiv size fits anywhere
