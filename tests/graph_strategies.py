"""Hypothesis strategies for graphs with the edge cases every kernel must survive:
no edges, isolated nodes, self-loops, multi-edges, one hub with a huge in-degree, bipartite."""
from __future__ import annotations

import dataclasses

import torch
from hypothesis import strategies as st

import unigraph


@dataclasses.dataclass
class DrawnGraph:
    graph: unigraph.Graph
    seed: int
    kind: str

    def generator(self) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed)


@st.composite
def graphs(draw, max_nodes: int = 9, max_edges: int = 30, hub_degree: int = 60,
           bipartite: bool | None = None) -> DrawnGraph:
    is_bipartite = draw(st.booleans()) if bipartite is None else bipartite
    num_src = draw(st.integers(0, max_nodes))
    num_dst = draw(st.integers(0, max_nodes)) if is_bipartite else num_src
    pairs: list[tuple[int, int]] = []
    kinds = []
    if num_src and num_dst:
        pairs = draw(st.lists(st.tuples(st.integers(0, num_src - 1), st.integers(0, num_dst - 1)),
                              max_size=max_edges))
        if draw(st.booleans()):  # a hub: one destination with a huge in-degree (multi-edges too)
            hub = draw(st.integers(0, num_dst - 1))
            degree = draw(st.integers(hub_degree // 2, hub_degree))
            hub_seed = draw(st.integers(0, 2**16))
            sources = torch.randint(0, num_src, (degree,), generator=torch.Generator().manual_seed(hub_seed))
            pairs += [(int(s), hub) for s in sources]
            kinds.append("hub")
        if draw(st.booleans()):  # self-loops on every node that is both source and destination
            pairs += [(i, i) for i in range(min(num_src, num_dst))]
            kinds.append("self-loops")
        if pairs and draw(st.booleans()):  # duplicate a few edges
            pairs += draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=5))
            kinds.append("multi-edges")
    if pairs:
        order = draw(st.permutations(range(len(pairs))))
        pairs = [pairs[i] for i in order]
    edge_index = torch.tensor(pairs, dtype=torch.int64).reshape(-1, 2).t()
    if is_bipartite:
        graph = unigraph.Graph(edge_index, num_src_nodes=num_src, num_dst_nodes=num_dst)
    else:
        graph = unigraph.Graph(edge_index, num_nodes=num_src)
    if not pairs:
        kinds.append("no edges")
    return DrawnGraph(graph, draw(st.integers(0, 2**31 - 1)), "+".join(kinds) or "random")
