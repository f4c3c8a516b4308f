"""Hypothesis strategies for typed graphs with the edge cases heterogeneous code must survive: node
types with no nodes, relations with no edges, self-relations, several relations between the same two
types, multi-edges, hubs."""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from unigraph import HeteroGraph


@st.composite
def hetero_graphs(draw, max_types: int = 3, max_nodes: int = 7, max_relations: int = 5, max_edges: int = 14,
                  min_relations: int = 0, min_nodes: int = 0) -> HeteroGraph:
    num_types = draw(st.integers(1, max_types))
    types = [f"t{i}" for i in range(num_types)]
    counts = {t: draw(st.integers(min_nodes, max_nodes)) for t in types}
    relations = []
    if draw(st.booleans()):                                   # a self-relation on the first type
        relations.append(("t0", "self", "t0"))
    for i in range(draw(st.integers(min_relations, max_relations))):
        relations.append((draw(st.sampled_from(types)), f"r{i}", draw(st.sampled_from(types))))
    edges = {}
    for src_type, name, dst_type in relations:
        n_src, n_dst = counts[src_type], counts[dst_type]
        pairs = []
        if n_src and n_dst:
            pairs = draw(st.lists(st.tuples(st.integers(0, n_src - 1), st.integers(0, n_dst - 1)), max_size=max_edges))
            if pairs and draw(st.booleans()):                 # a hub and multi-edges
                hub = draw(st.integers(0, n_dst - 1))
                pairs += [(s, hub) for s, _ in pairs] + pairs[:2]
        edges[(src_type, name, dst_type)] = torch.tensor(pairs, dtype=torch.int64).reshape(-1, 2).t()
    return HeteroGraph(edges, counts)


def random_features(hg: HeteroGraph, width, gen: torch.Generator, dtype=torch.float64, side: str = "src"
                    ) -> dict[str, torch.Tensor]:
    """``{type: [rows, width]}`` for every node type (``width`` an int or ``{type: int}``)."""
    counts = hg.num_src_nodes_dict if side == "src" else hg.num_dst_nodes_dict
    widths = width if isinstance(width, dict) else {t: width for t in hg.node_types}
    return {t: torch.randn(counts[t], widths[t], generator=gen, dtype=dtype) for t in hg.node_types}
