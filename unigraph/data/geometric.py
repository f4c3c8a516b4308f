"""Random geometric graphs: points in the unit cube joined when close.

k-nearest-neighbour graphs (one per image for Vision GNNs) are :func:`unigraph.knn_graph`
(``unigraph/nn/knn.py``), batched and with dilation; they are not repeated here.
Distances are computed exactly, a block of rows at a time (``O(N^2)`` work, ``O(block * N)``
memory), which suits test- and demo-sized graphs.
"""
from __future__ import annotations

import torch

from unigraph.data.edges import undirected_simple_graph
from unigraph.data.generators import non_negative_number
from unigraph.user_graph import Graph

_ROWS_PER_BLOCK = 1024


def random_geometric_graph(num_nodes: int, radius: float, *, dim: int = 2, seed: int = 0) -> Graph:
    """``num_nodes`` points drawn uniformly in the unit cube ``[0, 1]^dim``, joined (both directions)
    when their Euclidean distance is at most ``radius``; no self-loops.

    The positions are in ``graph.ndata["pos"]``. Deterministic under ``seed``.
    """
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 0:
        raise ValueError(f"num_nodes must be an int >= 0, got {num_nodes!r}")
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a positive int, got {dim!r}")
    non_negative_number("radius", radius)
    pos = torch.rand(num_nodes, dim, generator=torch.Generator().manual_seed(seed))
    src_parts, dst_parts = [], []
    for start in range(0, num_nodes, _ROWS_PER_BLOCK):
        close = (torch.cdist(pos[start:start + _ROWS_PER_BLOCK], pos) <= radius).nonzero()
        src_parts.append(close[:, 1])
        dst_parts.append(close[:, 0] + start)
    src = torch.cat(src_parts) if src_parts else torch.zeros(0, dtype=torch.int64)
    dst = torch.cat(dst_parts) if dst_parts else torch.zeros(0, dtype=torch.int64)
    graph = undirected_simple_graph(src, dst, num_nodes)
    graph.ndata["pos"] = pos
    return graph
