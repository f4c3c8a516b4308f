"""dgl.geometry (unigraph/dgl/geometry.py): farthest point sampling equal to DGL's from a given
start (float32 and float64, ties, every point of a cloud), a drawn start reproducible under
torch's seed and able to be any point; the greedy neighbour matching valid (every node labelled,
pairs are neighbours, at most two a label, consecutive labels when relabelled), equal to a plain
reference over the same drawn order, and reading each edge's own weight whatever the edge ids'
order (DGL 2.1 reads them in its CSR's slot order); bad input refused by name."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl
from unigraph.dgl.geometry import farthest_point_sampler, neighbor_matching


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape, npoints, start", [((3, 50, 3), 10, 0), ((2, 20, 5), 20, 7), ((1, 4, 2), 4, 3)])
def test_farthest_point_sampler_equals_dgl(dgl, dtype, shape, npoints, start):
    from dgl.geometry import farthest_point_sampler as theirs
    pos = torch.rand(shape, generator=torch.Generator().manual_seed(npoints), dtype=dtype)
    pos[0, 1] = pos[0, 2]        # a tie
    assert torch.equal(farthest_point_sampler(pos, npoints, start_idx=start), theirs(pos, npoints, start_idx=start))


def test_a_drawn_start_is_seeded_and_can_be_any_point():
    pos = torch.rand(200, 3, 2, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(5)
    first = farthest_point_sampler(pos, 2)
    torch.manual_seed(5)
    assert torch.equal(farthest_point_sampler(pos, 2), first)
    assert set(first[:, 0].tolist()) == {0, 1, 2}     # 200 clouds of 3: the last point too (DGL: never)


def test_farthest_point_sampler_refusals():
    with pytest.raises(udgl.DGLError, match=r"shape \(B, N, C\)"):
        farthest_point_sampler(torch.rand(10, 3), 2)
    with pytest.raises(udgl.DGLError, match="invalid start_idx"):
        farthest_point_sampler(torch.rand(1, 10, 3), 2, start_idx=10)
    with pytest.raises(udgl.DGLError, match="npoints"):
        farthest_point_sampler(torch.rand(1, 10, 3), 0)
    with pytest.raises(udgl.DGLError, match="npoints=11 is more than the 10 points"):
        farthest_point_sampler(torch.rand(2, 10, 3), 11)


def _bidirected(num_nodes: int, num_edges: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, num_nodes, (2, num_edges), generator=gen)
    return udgl.to_bidirected(udgl.graph((src, dst), num_nodes=num_nodes))


def _reference(graph, weights, order, keys):
    """The greedy matching over ``order`` written plainly (``keys``: the draw per edge id, unweighted)."""
    src, dst = (t.tolist() for t in graph.edges())
    labels = [-1] * graph.num_nodes()
    for u in order:
        if labels[u] >= 0:
            continue
        best, best_value = u, None
        for e in sorted(range(len(src)), key=lambda e: e):   # edge-id order within u's out-edges
            if src[e] != u or dst[e] == u or labels[dst[e]] >= 0:
                continue
            if weights is not None and weights[e] >= (best_value if best_value is not None else 0.0):
                best, best_value = dst[e], weights[e]
            elif weights is None and (best_value is None or keys[e] < best_value):
                best, best_value = dst[e], keys[e]
        labels[u] = min(u, best)
        labels[best] = labels[u]
    return torch.tensor(labels)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("relabel", [False, True])
def test_neighbor_matching_is_a_valid_matching_equal_to_the_reference(weighted, relabel):
    graph = _bidirected(60, 150, 1)
    weights = torch.rand(graph.num_edges(), generator=torch.Generator().manual_seed(2)) if weighted else None
    torch.manual_seed(3)
    labels = neighbor_matching(graph, weights, relabel_idx=relabel)
    torch.manual_seed(3)
    order = torch.randperm(graph.num_nodes()).tolist()
    keys = None if weighted else torch.rand(graph.num_edges(), dtype=torch.float64)
    if not weighted:   # the draws follow the CSR's slots: map them to edge ids for the reference
        _, _, eids = graph.adj_tensors("csr")
        keys = torch.empty_like(keys).index_copy_(0, eids, keys).tolist()
    expected = _reference(graph, weights.tolist() if weighted else None, order, keys)
    if relabel:
        expected = torch.unique(expected, return_inverse=True)[1]
    assert torch.equal(labels, expected)
    values, counts = torch.unique(labels, return_counts=True)
    assert labels.shape == (60,) and (labels >= 0).all() and (counts <= 2).all()
    for value in values[counts == 2]:
        u, v = (labels == value).nonzero().flatten().tolist()
        assert graph.has_edges_between(u, v)
    if relabel:
        assert torch.equal(values, torch.arange(values.numel()))


def test_each_edge_weighs_its_own_weight_whatever_the_edge_ids_order():
    # pairs (0, 1) and (2, 3) heavy, the cross edges light: every visiting order matches the pairs;
    # the edge ids run against the CSR's slot order
    src = torch.tensor([3, 2, 1, 0, 2, 1, 3, 0])
    dst = torch.tensor([2, 3, 0, 1, 1, 2, 0, 3])
    weights = torch.tensor([9.0, 9.0, 8.0, 8.0, 0.1, 0.1, 0.2, 0.2])
    graph = udgl.graph((src, dst), num_nodes=4)
    for seed in range(10):
        torch.manual_seed(seed)
        assert neighbor_matching(graph, weights, relabel_idx=False).tolist() == [0, 0, 2, 2]


def test_neighbor_matching_refusals():
    graph = _bidirected(5, 6, 0)
    with pytest.raises(udgl.DGLError, match="one weight per edge"):
        neighbor_matching(graph, torch.rand(3))
    with pytest.raises(udgl.DGLError, match="homogeneous"):
        neighbor_matching(udgl.heterograph({("a", "r", "b"): ([0], [1]), ("b", "s", "a"): ([1], [0])}))
