"""Vision GNN: batched kNN graphs equal a brute-force search, images in a batch never share edges,
and the small ViG classifier trains (its loss goes down) on random 3x32x32 tensors."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import unigraph
from unigraph import knn_graph


def brute_force_neighbours(x: torch.Tensor, k: int, loop: bool, dilation: int = 1) -> list[list[int]]:
    out = []
    for i in range(x.shape[0]):
        distance = ((x - x[i]) ** 2).sum(-1)
        if not loop:
            distance[i] = float("inf")
        order = [int(j) for j in torch.argsort(distance) if torch.isfinite(distance[j])]
        out.append(order[: k * dilation][::dilation][:k])
    return out


def in_neighbours(g: unigraph.Graph) -> list[list[int]]:
    ptr, src, _ = g.in_csr()
    return [src[ptr[i]:ptr[i + 1]].tolist() for i in range(g.num_dst_nodes)]


@pytest.mark.parametrize("loop", [False, True])
@pytest.mark.parametrize("dilation", [1, 2])
def test_knn_graph_matches_brute_force(loop, dilation):
    x = torch.randn(30, 4, generator=torch.Generator().manual_seed(0))
    g = knn_graph(x, 5, loop=loop, dilation=dilation)
    assert g.num_nodes == 30 and g.num_edges == 30 * 5
    assert in_neighbours(g) == brute_force_neighbours(x, 5, loop, dilation)  # nearest first


def test_knn_graph_batches_never_cross_and_handle_small_examples():
    gen = torch.Generator().manual_seed(1)
    sizes = [7, 3, 12]
    x = torch.randn(sum(sizes), 5, generator=gen)
    batch = torch.repeat_interleave(torch.arange(3), torch.tensor(sizes))
    g = knn_graph(x, 4, batch)
    neighbours = in_neighbours(g)
    start = 0
    for size in sizes:
        part = x[start:start + size]
        expected = [[j + start for j in row] for row in brute_force_neighbours(part, 4, loop=False)]
        assert neighbours[start:start + size] == expected  # 3 nodes: only 2 candidates each
        start += size


def test_knn_graph_three_d_equals_batch_vector_and_cosine_normalizes():
    x = torch.randn(4, 9, 3, generator=torch.Generator().manual_seed(2))
    batch = torch.arange(4).repeat_interleave(9)
    assert in_neighbours(knn_graph(x, 3)) == in_neighbours(knn_graph(x.reshape(36, 3), 3, batch))
    scaled = x * torch.rand(4, 9, 1, generator=torch.Generator().manual_seed(3)) * 10
    assert in_neighbours(knn_graph(scaled, 3, cosine=True)) == in_neighbours(knn_graph(F.normalize(x, dim=-1), 3))


@pytest.mark.parametrize("call, error, match", [
    (lambda x: knn_graph(x, 0), ValueError, "k must be a positive int"),
    (lambda x: knn_graph(x, 2, dilation=0), ValueError, "dilation must be a positive int"),
    (lambda x: knn_graph(x.long(), 2), TypeError, "floating-point"),
    (lambda x: knn_graph(x[0], 2), ValueError, "shape \\[N, F\\] or \\[B, n, F\\]"),
    (lambda x: knn_graph(x, 2, torch.tensor([1, 0, 0, 0, 0, 0])), ValueError, "sorted ascending"),
    (lambda x: knn_graph(x, 2, torch.tensor([0, 0])), ValueError, "one entry per row"),
])
def test_knn_graph_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call(torch.randn(6, 2))


def test_grapher_and_vig_keep_images_apart():
    """In eval mode a batch gives the same result as its images one by one: no edge, no statistic
    crosses images."""
    torch.manual_seed(0)
    grapher = unigraph.Grapher(16, k=4).eval()
    tokens = torch.randn(3, 10, 16)
    one_by_one = torch.cat([grapher(tokens[i:i + 1]) for i in range(3)])
    torch.testing.assert_close(grapher(tokens), one_by_one, atol=1e-5, rtol=1e-5)
    model = unigraph.ViG(num_classes=10, channels=16, depth=2, k=4).eval()
    images = torch.randn(3, 3, 32, 32)
    torch.testing.assert_close(model(images), torch.cat([model(images[i:i + 1]) for i in range(3)]),
                               atol=1e-5, rtol=1e-5)


def test_vig_trains_on_random_images():
    torch.manual_seed(0)
    model = unigraph.ViG(num_classes=10, channels=32, depth=2, k=6)
    images = torch.randn(16, 3, 32, 32)
    labels = torch.randint(0, 10, (16,))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    losses = []
    for _ in range(12):
        opt.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert model(images).shape == (16, 10)
    assert losses[-1] < 0.5 * losses[0], losses
    with pytest.raises(ValueError, match="expects images of shape \\[B, 3, 32, 32\\]"):
        model(torch.randn(2, 3, 28, 28))
