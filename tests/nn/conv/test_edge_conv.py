"""DynamicEdgeConv: EdgeConv on the k-nearest-neighbour graph of its input (unigraph's own knn,
checked against a brute-force one), with example ids and a (source, destination) pair."""
from __future__ import annotations

import pytest
import torch

import unigraph.nn as U
from unigraph.nn.knn import knn
from pyg_compare import TOL

IN = 4


def brute_knn(x, y, k, batch_x, batch_y):
    """Every query against every candidate of its example, by full sort."""
    pairs = []
    for q in range(y.shape[0]):
        same = (batch_x == batch_y[q]).nonzero().flatten()
        distance = ((x[same] - y[q]) ** 2).sum(-1)
        for j in same[distance.argsort(stable=True)[:k]].tolist():
            pairs.append((q, j))
    return pairs


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(2 * IN, 8), torch.nn.ReLU(), torch.nn.Linear(8, 5))


@pytest.mark.parametrize("k", [1, 3, 7])
def test_knn_matches_brute_force(k):
    gen = torch.Generator().manual_seed(k)
    x, y = torch.randn(13, IN, generator=gen, dtype=torch.float64), torch.randn(9, IN, generator=gen,
                                                                                  dtype=torch.float64)
    batch_x, batch_y = torch.tensor([0] * 6 + [1] * 7), torch.tensor([0] * 4 + [1] * 5)
    found = knn(x, y, k, batch_x, batch_y)
    assert sorted(map(tuple, found.t().tolist())) == sorted(brute_knn(x, y, k, batch_x, batch_y))
    single = knn(x, x, k)  # one example: a point is its own nearest neighbour
    assert single.shape[1] == 13 * k and (single[0] == single[1]).sum() == 13


def test_dynamic_edge_conv_is_edge_conv_on_the_knn_graph():
    torch.manual_seed(0)
    conv = U.DynamicEdgeConv(mlp(), k=3).double()
    assert str(conv).endswith("), k=3)")
    x = torch.randn(10, IN, dtype=torch.float64, requires_grad=True)
    batch = torch.tensor([0] * 4 + [1] * 6)
    edge_index = knn(x, x, 3, batch, batch).flip(0)
    plain = U.EdgeConv(conv.nn).double()
    torch.testing.assert_close(conv(x, batch), plain(x, edge_index), **TOL)
    grad = torch.autograd.grad(conv(x, batch).sum(), x)[0]
    torch.testing.assert_close(grad, torch.autograd.grad(plain(x, edge_index).sum(), x)[0], **TOL)
    # a pair: each destination's neighbours among the sources
    x_dst = torch.randn(5, IN, dtype=torch.float64)
    batch_dst = torch.tensor([0, 0, 1, 1, 1])
    pair_edges = knn(x, x_dst, 3, batch, batch_dst).flip(0)
    out = conv((x, x_dst), (batch, batch_dst))
    assert out.shape == (5, 5)
    torch.testing.assert_close(out, plain((x, x_dst), pair_edges), **TOL)


def test_refusals():
    with pytest.raises(ValueError, match="k must be a positive int"):
        U.DynamicEdgeConv(mlp(), k=0)
    with pytest.raises(ValueError, match="static graphs"):
        U.DynamicEdgeConv(mlp(), k=2)(torch.randn(2, 5, IN))
    with pytest.raises(ValueError, match="batch_x and batch_y together"):
        knn(torch.randn(3, 2), torch.randn(3, 2), 1, torch.zeros(3, dtype=torch.long), None)



def test_edge_conv_static_graph():
    """``[B, N, F]`` with one graph: each feature set alone, and PyG's (the split first Linear,
    a lone Linear, a network run per edge)."""
    import copy
    from pyg_compare import assert_same, assert_static_is_each_copy, loaded, random_edges
    pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference (test extra)")
    torch.manual_seed(0)
    edge_index = random_edges(9, 30)
    x = torch.randn(2, 9, IN, dtype=torch.float64)
    for nn in (mlp(), torch.nn.Linear(2 * IN, 5), torch.nn.Sequential(torch.nn.Tanh(), torch.nn.Linear(2 * IN, 5))):
        theirs = pyg_nn.EdgeConv(nn)
        ours = loaded(theirs, U.EdgeConv(copy.deepcopy(nn)))
        assert_static_is_each_copy(ours, x, edge_index)
        assert_same(theirs, ours, x, edge_index)


def test_dynamic_edge_conv_refuses_flow_as_pyg_does():
    with pytest.raises(TypeError, match="takes no flow"):
        U.DynamicEdgeConv(mlp(), k=2, flow="target_to_source")
