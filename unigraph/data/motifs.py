"""A built-in graph-classification dataset: which motif is hidden in a random graph (no download).

Each graph is a random tree of ``base_nodes`` nodes (every new node joins a uniformly chosen
earlier one), plus ``noise_edges`` random extra edges (which close random cycles), plus one motif
joined to a random tree node by one edge. The label is the motif:

=====  ==========  =========================================================
label  motif       structure
=====  ==========  =========================================================
0      ``cycle``   a 6-cycle
1      ``house``   a 4-cycle with a triangle roof (5 nodes, 6 edges)
2      ``clique``  a complete graph on 4 nodes
3      ``star``    a hub with 5 leaves
4      ``grid``    a 3 x 3 grid
=====  ==========  =========================================================

Node ids are shuffled, every edge is present in both directions, no self-loops or duplicates.
Node features are a constant 1 (the model must read structure, not features). Classes are
balanced (graph ``i`` has label ``i % num_classes`` before shuffling the order of graphs).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from unigraph.data.graph_dataset import GraphDataset


def _cycle(n: int) -> list[tuple[int, int]]:
    return [(i, (i + 1) % n) for i in range(n)]


def _grid(rows: int, cols: int) -> list[tuple[int, int]]:
    at = lambda r, c: r * cols + c  # noqa: E731
    return ([(at(r, c), at(r, c + 1)) for r in range(rows) for c in range(cols - 1)]
            + [(at(r, c), at(r + 1, c)) for r in range(rows - 1) for c in range(cols)])


# name -> (number of nodes, undirected edges)
MOTIFS: dict[str, tuple[int, list[tuple[int, int]]]] = {
    "cycle": (6, _cycle(6)),
    "house": (5, _cycle(4) + [(0, 4), (1, 4)]),
    "clique": (4, [(i, j) for i in range(4) for j in range(i + 1, 4)]),
    "star": (6, [(0, i) for i in range(1, 6)]),
    "grid": (9, _grid(3, 3)),
}


def _one_graph(rng: np.random.Generator, motif: str, base_nodes: tuple[int, int],
               noise_edges: int) -> tuple[np.ndarray, int]:
    """``(pairs, num_nodes)`` of one graph: each undirected edge once, node ids shuffled."""
    n_base = int(rng.integers(base_nodes[0], base_nodes[1] + 1))
    parents = (rng.random(n_base - 1) * np.arange(1, n_base)).astype(np.int64)  # node i+1 joins a node < i+1
    edges = [np.stack([parents, np.arange(1, n_base)], 1)]
    if noise_edges:
        edges.append(rng.integers(0, n_base, size=(noise_edges, 2)))
    size, motif_edges = MOTIFS[motif]
    edges.append(np.asarray(motif_edges, dtype=np.int64) + n_base)
    edges.append(np.array([[int(rng.integers(0, n_base)), n_base + int(rng.integers(0, size))]]))
    pairs = np.concatenate(edges)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    pairs = np.unique(np.sort(pairs, axis=1), axis=0)
    return rng.permutation(n_base + size)[pairs], n_base + size


def motif_graphs(num_graphs: int = 1000, *, motifs: Sequence[str] = tuple(MOTIFS), base_nodes: tuple[int, int] = (10, 30),
                 noise_edges: int = 2, seed: int = 0) -> GraphDataset:
    """``num_graphs`` labelled graphs (see the module docstring); the same ``seed`` gives the same
    dataset on every machine (numpy's PCG64 generator)."""
    if isinstance(num_graphs, bool) or not isinstance(num_graphs, int) or num_graphs < 1:
        raise ValueError(f"num_graphs must be a positive int, got {num_graphs!r}")
    unknown = [m for m in motifs if m not in MOTIFS]
    if unknown or len(motifs) < 2 or len(set(motifs)) != len(motifs):
        raise ValueError(f"motifs must be two or more distinct names from {', '.join(MOTIFS)}; got {list(motifs)}")
    if len(base_nodes) != 2 or not 2 <= base_nodes[0] <= base_nodes[1]:
        raise ValueError(f"base_nodes must be (low, high) with 2 <= low <= high, got {base_nodes!r}")
    if isinstance(noise_edges, bool) or not isinstance(noise_edges, int) or noise_edges < 0:
        raise ValueError(f"noise_edges must be an int >= 0, got {noise_edges!r}")
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(num_graphs) % len(motifs))
    edge_lists, node_counts = [], []
    for label in labels:
        pairs, num_nodes = _one_graph(rng, motifs[label], base_nodes, noise_edges)
        edge_lists.append(np.concatenate([pairs, pairs[:, ::-1]]).T)
        node_counts.append(num_nodes)
    edge_counts = [e.shape[1] for e in edge_lists]
    node_ptr = torch.tensor(np.concatenate([[0], np.cumsum(node_counts)]), dtype=torch.int64)
    edge_ptr = torch.tensor(np.concatenate([[0], np.cumsum(edge_counts)]), dtype=torch.int64)
    return GraphDataset("motifs", torch.from_numpy(np.concatenate(edge_lists, axis=1).astype(np.int64)),
                        node_ptr, edge_ptr, torch.from_numpy(labels.astype(np.int64)),
                        x=torch.ones(int(node_ptr[-1]), 1))
