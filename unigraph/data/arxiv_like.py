"""Labelled graphs the size and shape of the OGB node-classification graphs, generated (no download):
skewed (power-law) degrees, dense features, many imbalanced classes and a known signal, so that
accuracy is comparable between libraries and runs.

* :func:`arxiv_like` - ogbn-arxiv's size by default: 169,343 nodes, 1,166,243 undirected pairs
  (about 2.3M directed edges), 128 dense features, 40 classes.
* :data:`PRODUCTS_SIZE` - the arguments for an ogbn-products-sized graph (2,449,029 nodes, ~123M
  directed edges, 100 features, 47 classes); scale it with :func:`scaled`.
"""
from __future__ import annotations

import math

import torch

from unigraph.data.dataset import NodeDataset, mask_from_index
from unigraph.data.edges import undirected_simple_graph

ARXIV_SIZE = dict(num_nodes=169_343, num_edges=1_166_243, num_features=128, num_classes=40)
PRODUCTS_SIZE = dict(num_nodes=2_449_029, num_edges=61_859_140, num_features=100, num_classes=47)
DEGREES = ("power_law", "uniform")
_CHUNK = 1 << 24  # edges drawn per step: bounds the float64 temporaries at products size


def scaled(size: dict, scale: float) -> dict:
    """``size`` with nodes and edges multiplied by ``scale`` (features and classes kept)."""
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or not 0 < scale <= 1:
        raise ValueError(f"scale must be a number in (0, 1], got {scale!r}")
    return {**size, "num_nodes": max(2, round(size["num_nodes"] * scale)),
            "num_edges": max(1, round(size["num_edges"] * scale))}


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _check_fraction(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def _node_weights(num_nodes: int, degrees: str, exponent: float, gen: torch.Generator) -> torch.Tensor:
    """Each node's share of edge endpoints: Pareto-distributed (degree distribution ~ k^-exponent)
    or all equal."""
    if degrees == "uniform":
        return torch.ones(num_nodes, dtype=torch.float64)
    u = torch.rand(num_nodes, generator=gen, dtype=torch.float64)
    return (1.0 - u).pow(-1.0 / (exponent - 1.0))


def arxiv_like(num_nodes: int = ARXIV_SIZE["num_nodes"], num_edges: int = ARXIV_SIZE["num_edges"],
               num_features: int = ARXIV_SIZE["num_features"], num_classes: int = ARXIV_SIZE["num_classes"], *,
               degrees: str = "power_law", exponent: float = 2.5, homophily: float = 0.65,
               class_separation: float = 1.5, class_skew: float = 0.6, train_fraction: float = 0.54,
               val_fraction: float = 0.18, seed: int = 0) -> NodeDataset:
    """A labelled, degree-skewed graph (a degree-corrected stochastic block model).

    Algorithm:
      * Labels: class ``k`` has probability proportional to ``(k + 1) ** -class_skew`` (imbalanced,
        like arXiv's subject areas); each node draws its class independently.
      * Degrees: node ``i`` has weight ``w_i``, Pareto-distributed with tail exponent ``exponent``
        for ``degrees="power_law"`` (at the defaults the largest degree is thousands of times the
        median, as in citation graphs), or 1 for ``degrees="uniform"``.
      * Edges: ``num_edges`` undirected pairs. Each draws its first end ``u`` with probability
        proportional to ``w_u``; with probability ``homophily`` its partner is drawn the same way
        among ``u``'s class, otherwise among all nodes. Both directions are kept, self-loops and
        duplicates dropped (so a little under ``2 * num_edges`` directed edges).
      * Features: ``x_i = c_{y_i} + noise``: class centroids are random directions of length
        ``class_separation``, the noise standard normal per entry, so one node's features alone
        identify its class far less often than its neighbourhood does.
      * Split: a random ``train_fraction`` / ``val_fraction`` / rest (test), disjoint (ogbn-arxiv's
        proportions by default).

    Deterministic under ``seed``. ``degrees`` gives the uniform-degree twin of the same graph
    family (same sizes, labels and features), for rows on both.
    """
    _check_int("num_nodes", num_nodes, 2)
    _check_int("num_edges", num_edges, 1)
    _check_int("num_features", num_features, 1)
    _check_int("num_classes", num_classes, 2)
    if num_classes > num_nodes:
        raise ValueError(f"num_classes={num_classes} exceeds num_nodes={num_nodes}")
    if degrees not in DEGREES:
        raise ValueError(f"degrees must be one of {DEGREES}, got {degrees!r}")
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)) or not exponent > 1:
        raise ValueError(f"exponent must be a number > 1, got {exponent!r}")
    for name, value in (("class_separation", class_separation), ("class_skew", class_skew)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    homophily = _check_fraction("homophily", homophily)
    train_fraction = _check_fraction("train_fraction", train_fraction)
    val_fraction = _check_fraction("val_fraction", val_fraction)
    if train_fraction + val_fraction > 1:
        raise ValueError(f"train_fraction + val_fraction must be <= 1, got {train_fraction} + {val_fraction}")
    gen = torch.Generator().manual_seed(seed)

    class_p = torch.arange(1, num_classes + 1, dtype=torch.float64).pow(-float(class_skew))
    y = torch.multinomial(class_p / class_p.sum(), num_nodes, replacement=True, generator=gen)
    weights = _node_weights(num_nodes, degrees, float(exponent), gen)

    # nodes sorted by class; one cumulative weight over that order serves both draws
    order = torch.sort(y, stable=True).indices
    cdf = torch.cumsum(weights[order], 0)
    class_size = torch.bincount(y, minlength=num_classes)
    class_end = torch.cumsum(class_size, 0)
    class_start = class_end - class_size
    below = torch.cat([cdf.new_zeros(1), cdf])  # below[j]: the weight before position j

    def draw(lo: torch.Tensor, hi: torch.Tensor, first: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        """Positions in ``order`` drawn with probability ~ weight between cumulative ``lo`` and ``hi``."""
        r = lo + torch.rand(lo.shape, generator=gen, dtype=torch.float64) * (hi - lo)
        return torch.searchsorted(cdf, r, right=True).clamp(first, last)

    sources, partners = [], []
    for start in range(0, num_edges, _CHUNK):
        count = min(_CHUNK, num_edges - start)
        zero, total = cdf.new_zeros(count), cdf[-1].expand(count)
        first, last = torch.zeros(count, dtype=torch.int64), torch.full((count,), num_nodes - 1)
        u = order[draw(zero, total, first, last)]
        same = torch.rand(count, generator=gen) < homophily
        cs, ce = class_start[y[u]], class_end[y[u]]
        lo = torch.where(same, below[cs], zero)
        hi = torch.where(same, below[ce], total)
        v = order[draw(lo, hi, torch.where(same, cs, first), torch.where(same, ce - 1, last))]
        sources.append(u)
        partners.append(v)
    graph = undirected_simple_graph(torch.cat(sources), torch.cat(partners), num_nodes)

    centroids = torch.randn(num_classes, num_features, generator=gen)
    centroids = class_separation * centroids / centroids.norm(dim=1, keepdim=True).clamp_min(1e-12)
    x = centroids[y] + torch.randn(num_nodes, num_features, generator=gen)

    perm = torch.randperm(num_nodes, generator=gen)
    n_train, n_val = int(train_fraction * num_nodes), int(val_fraction * num_nodes)
    return NodeDataset(name=f"arxiv_like({degrees})", graph=graph, x=x.float(), y=y,
                       train_mask=mask_from_index(perm[:n_train], num_nodes),
                       val_mask=mask_from_index(perm[n_train:n_train + n_val], num_nodes),
                       test_mask=mask_from_index(perm[n_train + n_val:], num_nodes))


def memory_bytes(num_nodes: int, num_edges: int, num_features: int) -> dict[str, int]:
    """Peak bytes :func:`arxiv_like` needs for these sizes, by part (the dataset it returns, and the
    temporaries of making the edge list simple, which sorts all 2 x ``num_edges`` directed keys)."""
    directed = 2 * num_edges
    return {"edge draws (int64 pairs)": 2 * num_edges * 8,
            "dedup: both directions, keys, sort": directed * 8 * 5,
            "graph (src, dst)": directed * 16,
            "features (float32)": num_nodes * num_features * 4,
            "labels, weights, masks": num_nodes * (8 + 8 + 8 + 3)}
