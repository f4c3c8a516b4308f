"""Graphs end to end: the flat layout that graph datasets store and batches are built from.

:func:`pack_graphs` concatenates homogeneous graphs (their node ids stay local to each graph) and
records where each graph's nodes and edges start; :class:`~unigraph.data.GraphDataset` stores
that layout and :mod:`unigraph.data.batch` shifts it into one block-diagonal graph.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import torch
from torch import Tensor

from unigraph.graph import Graph as CoreGraph  # accepted as input: either class

NODE_KEY, EDGE_KEY = "x", "edge_attr"  # the ndata / edata keys a batch carries


@dataclasses.dataclass
class PackedGraphs:
    """Graphs end to end (node ids local to each graph) and their offsets."""

    edge_index: Tensor
    node_ptr: Tensor
    edge_ptr: Tensor
    x: Tensor | None
    edge_attr: Tensor | None


def _offsets(counts: Tensor) -> Tensor:
    return torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])


def _common(graphs: Sequence[CoreGraph], store: str, key: str) -> Tensor | None:
    has = [key in getattr(g, store) for g in graphs]
    if any(has) and not all(has):
        missing = has.index(False)
        raise ValueError(f"graph {missing} has no {store}[{key!r}] but graph {has.index(True)} has; "
                         "every graph of a batch needs the same features")
    return torch.cat([getattr(g, store)[key] for g in graphs]) if graphs and all(has) else None


def pack_graphs(graphs: Sequence[CoreGraph]) -> PackedGraphs:
    """Concatenate homogeneous graphs (``ndata["x"]`` and ``edata["edge_attr"]`` come along)."""
    for i, g in enumerate(graphs):
        if not isinstance(g, CoreGraph) or g.is_bipartite:
            raise TypeError(f"item {i} must be a homogeneous unigraph.Graph, got {g!r}")
    device = graphs[0].device if graphs else torch.device("cpu")
    node_counts = torch.tensor([g.num_nodes for g in graphs], dtype=torch.int64, device=device)
    edge_counts = torch.tensor([g.num_edges for g in graphs], dtype=torch.int64, device=device)
    edge_index = (torch.cat([g.edge_index for g in graphs], dim=1) if graphs
                  else torch.empty(2, 0, dtype=torch.int64, device=device))
    return PackedGraphs(edge_index, _offsets(node_counts), _offsets(edge_counts),
                        _common(graphs, "ndata", NODE_KEY), _common(graphs, "edata", EDGE_KEY))
