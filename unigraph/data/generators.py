"""Synthetic graphs with seeds: a planted-partition node-classification dataset and R-MAT
power-law graphs. Everything is vectorized torch and deterministic under ``seed``."""
from __future__ import annotations

import math

import torch

from unigraph.data.dataset import NodeDataset, mask_from_index
from unigraph.data.edges import undirected_simple_graph
from unigraph.user_graph import Graph


def _positive_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _probability(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def non_negative_number(name: str, value) -> float:
    """A finite real number >= 0 (NaN and infinities are refused: an infinite degree never ends)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a number >= 0 (finite), got {value!r}")
    return float(value)


def planted_partition(num_nodes: int = 2000, num_classes: int = 4, num_features: int = 32, *,
                      avg_degree: float = 8.0, homophily: float = 0.8, class_separation: float = 1.5,
                      train_per_class: int = 20, num_val: int = 500, num_test: int = 1000,
                      seed: int = 0) -> NodeDataset:
    """The built-in node-classification dataset: a stochastic block model with noisy class features.

    Algorithm:
      * Labels: ``num_nodes`` nodes split into ``num_classes`` classes of equal size (±1), in a
        random order.
      * Edges: ``num_nodes * avg_degree / 2`` undirected pairs. Each picks a uniformly random node
        ``u``; with probability ``homophily`` its partner is a random node of ``u``'s class,
        otherwise a random node of another class. Both directions are kept, self-loops and
        duplicates dropped, so the mean degree is slightly below ``avg_degree``.
      * Features: ``x_i = c_{y_i} + noise``, with class centroids ``c_k`` drawn as random
        directions of length ``class_separation`` and standard normal noise per entry. At the
        default separation one node's own features identify its class only about half the time,
        while averaging over its (mostly same-class) neighbours removes most of the noise: a
        two-layer GCN or GAT reaches well above the feature-only accuracy (tests check both).
      * Split (Planetoid-style): ``train_per_class`` training nodes per class, then ``num_val``
        validation and ``num_test`` test nodes, all drawn at random and disjoint.

    Deterministic under ``seed``.
    """
    _positive_int("num_nodes", num_nodes)
    _positive_int("num_classes", num_classes, 2)
    _positive_int("num_features", num_features)
    _positive_int("train_per_class", train_per_class)
    _positive_int("num_val", num_val, 0)
    _positive_int("num_test", num_test, 0)
    homophily = _probability("homophily", homophily)
    non_negative_number("avg_degree", avg_degree)
    non_negative_number("class_separation", class_separation)
    if num_nodes < num_classes * 2:
        raise ValueError(f"num_nodes={num_nodes} is too small for {num_classes} classes (need at least 2 nodes per class)")
    needed = train_per_class * num_classes + num_val + num_test
    if needed > num_nodes or train_per_class > num_nodes // num_classes:
        raise ValueError(f"the split needs {train_per_class}x{num_classes} training + {num_val} validation + "
                         f"{num_test} test nodes = {needed}, more than num_nodes={num_nodes}")
    gen = torch.Generator().manual_seed(seed)

    y = (torch.arange(num_nodes) % num_classes)[torch.randperm(num_nodes, generator=gen)]
    by_class = torch.sort(y, stable=True).indices                  # node ids grouped by class
    class_size = torch.bincount(y, minlength=num_classes)
    class_start = torch.cumsum(class_size, 0) - class_size

    num_pairs = int(round(num_nodes * avg_degree / 2))
    u = torch.randint(0, num_nodes, (num_pairs,), generator=gen)
    cu = y[u]
    same = torch.rand(num_pairs, generator=gen) < homophily
    draw = torch.rand(num_pairs, generator=gen)
    # same class: a uniform position inside u's class block of `by_class`
    inside = class_start[cu] + (draw * class_size[cu]).long().clamp_max(class_size[cu] - 1)
    # another class: a uniform position among the other N - |class| entries, skipping u's block
    others = num_nodes - class_size[cu]
    r = (draw * others).long().clamp_max(others - 1)
    outside = torch.where(r < class_start[cu], r, r + class_size[cu])
    v = by_class[torch.where(same, inside, outside)]
    graph = undirected_simple_graph(u, v, num_nodes)

    centroids = torch.randn(num_classes, num_features, generator=gen)
    centroids = class_separation * centroids / centroids.norm(dim=1, keepdim=True).clamp_min(1e-12)
    x = centroids[y] + torch.randn(num_nodes, num_features, generator=gen)

    order = torch.randperm(num_nodes, generator=gen)
    grouped = order[torch.sort(y[order], stable=True).indices]     # random order inside each class
    rank_in_class = torch.arange(num_nodes) - class_start[y[grouped]]
    train = mask_from_index(grouped[rank_in_class < train_per_class], num_nodes)
    rest = order[~train[order]]
    return NodeDataset(
        name="planted_partition", graph=graph, x=x.float(), y=y,
        train_mask=train,
        val_mask=mask_from_index(rest[:num_val], num_nodes),
        test_mask=mask_from_index(rest[num_val:num_val + num_test], num_nodes),
    )


def rmat(num_nodes: int, num_edges: int, *, a: float = 0.57, b: float = 0.19, c: float = 0.19,
         permute: bool = True, seed: int = 0, device: torch.device | str = "cpu") -> Graph:
    """An R-MAT power-law graph (Chakrabarti, Zhan and Faloutsos, SDM 2004) with ``num_edges``
    directed edges (multi-edges and self-loops possible, as in the model).

    Algorithm: with ``scale = ceil(log2(num_nodes))``, every edge descends ``scale`` levels of the
    adjacency matrix, choosing the top-left / top-right / bottom-left / bottom-right quadrant with
    probabilities ``a, b, c, d = 1 - a - b - c``; bit ``l`` of the source (destination) id is 1
    when the bottom (right) half is chosen at level ``l``. Edges that land outside
    ``num_nodes x num_nodes`` are drawn again. The defaults are Graph500's. R-MAT piles the high
    degrees onto low ids; ``permute=True`` relabels nodes by a random permutation so that degree
    and id are unrelated (as in real graphs).

    ``device``: where the edges are drawn (a GPU draws tens of millions in milliseconds, where a
    CPU takes a minute); the random stream is the device's, so another device gives another
    graph of the same model for the same ``seed``.
    """
    _positive_int("num_nodes", num_nodes)
    _positive_int("num_edges", num_edges, 0)
    for name, p in (("a", a), ("b", b), ("c", c)):
        _probability(name, p)
    if a + b + c > 1.0 + 1e-9:
        raise ValueError(f"a + b + c must be <= 1 (d = 1 - a - b - c), got {a + b + c}")
    device = torch.device(device)
    gen = torch.Generator(device).manual_seed(seed)
    scale = max(1, math.ceil(math.log2(num_nodes)))
    src_parts, dst_parts, have = [], [], 0
    while have < num_edges:
        want = int((num_edges - have) * (4 ** scale / num_nodes ** 2)) + 16  # expected rejections
        src = torch.zeros(want, dtype=torch.int64, device=device)
        dst = torch.zeros(want, dtype=torch.int64, device=device)
        for _ in range(scale):  # quadrant by r: [0, a) top-left, [a, a+b) top-right, [a+b, a+b+c) bottom-left
            r = torch.rand(want, generator=gen, device=device)
            bottom = r >= a + b
            right = (r >= a + b + c) | ((r >= a) & ~bottom)
            src = src * 2 + bottom
            dst = dst * 2 + right
        keep = (src < num_nodes) & (dst < num_nodes)
        src_parts.append(src[keep])
        dst_parts.append(dst[keep])
        have += int(keep.sum())
    src = torch.cat(src_parts)[:num_edges]
    dst = torch.cat(dst_parts)[:num_edges]
    if permute:
        relabel = torch.randperm(num_nodes, generator=gen, device=device)
        src, dst = relabel[src], relabel[dst]
    return Graph._trusted(src, dst, num_nodes, num_nodes, False)
