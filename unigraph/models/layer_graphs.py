"""One graph per layer: the full graph for every layer, or sampled blocks (block ``i`` for layer ``i``)."""
from __future__ import annotations

from typing import Any, Sequence

from unigraph.graph import Graph


def graphs_per_layer(g: Graph | Sequence[Graph], num_layers: int, who: str) -> list[Graph]:
    """``[g] * num_layers`` for one graph; the blocks themselves (checked) for a list of blocks."""
    if isinstance(g, Graph):
        return [g] * num_layers
    if isinstance(g, (list, tuple)):
        if len(g) != num_layers:
            raise ValueError(f"{who} has {num_layers} layers but got {len(g)} blocks; pass one block per layer "
                             "(block i feeds layer i) or one graph for all layers")
        for i, block in enumerate(g):
            _check_graph(block, f"{who} block {i}")
        for i in range(1, len(g)):
            if g[i].num_src_nodes != g[i - 1].num_dst_nodes:
                raise ValueError(f"{who}: block {i} has {g[i].num_src_nodes} source nodes but block {i - 1} "
                                 f"outputs {g[i - 1].num_dst_nodes} destination nodes; they must match")
        return list(g)
    raise TypeError(f"{who} expects a unigraph.Graph or a list of blocks, got {type(g).__name__}")


def _check_graph(g: Any, who: str) -> None:
    if not isinstance(g, Graph):
        raise TypeError(f"{who} expects a unigraph.Graph or a list of blocks, got {type(g).__name__}")
