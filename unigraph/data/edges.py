"""Edge-list clean-up shared by the dataset loaders and generators."""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.graph import unique_pairs
from unigraph.user_graph import Graph


def undirected_simple_graph(src: Tensor, dst: Tensor, num_nodes: int) -> Graph:
    """The graph with both directions of every edge, self-loops dropped and duplicates merged.

    Edges come out sorted by destination, then source: the order PyG's ``coalesce(...,
    sort_by_row=False)`` gives, so that edge ids match PyG's datasets.
    """
    src, dst = src.to(torch.int64), dst.to(torch.int64)
    both_src, both_dst = torch.cat([src, dst]), torch.cat([dst, src])
    keep = both_src != both_dst
    dst, src, _ = unique_pairs(both_dst[keep], both_src[keep])
    return Graph(torch.stack([src, dst]), num_nodes=num_nodes)
