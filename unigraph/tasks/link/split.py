"""Train/validation/test edge splits for link prediction, with no message-passing leakage.

:func:`split_edges` (PyG's ``RandomLinkSplit``, the GAE paper's ``mask_test_edges``) divides the
edges of a graph at random. The held-out validation and test edges are removed from the graph
that messages flow on (``split.graph``) in *both* directions for an undirected graph, so a model
never sees an edge it is asked to predict. Validation and test negatives are fixed pairs that are
edges of the full graph in neither direction, never self-loops, and distinct across both sets.
"""
from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from unigraph.graph import Graph as CoreGraph
from unigraph.user_graph import Graph
from unigraph.tasks.link.negative import EdgeSet, negative_pairs


@dataclasses.dataclass
class LinkSplit:
    """An edge split.

    Fields:
        graph: the message-passing graph: every node of the original (with its ``ndata``), the
            training edges only (both directions when undirected).
        train_pos: ``[2, T]`` training edges (once each: ``u < v`` when undirected).
        val_pos, val_neg, test_pos, test_neg: ``[2, *]`` held-out edges and non-edges.
        undirected: whether pairs are unordered.
        test_graph: the message-passing graph for the test scores: the training edges and the
            validation edges (they are known by test time: PyG's ``RandomLinkSplit`` gives its
            test data the same), never a test edge. None: ``graph``.
    """

    graph: Graph
    train_pos: Tensor
    val_pos: Tensor
    val_neg: Tensor
    test_pos: Tensor
    test_neg: Tensor
    undirected: bool
    test_graph: Graph | None = None

    def __repr__(self) -> str:
        sizes = ", ".join(f"{name}={getattr(self, name).shape[1]}" for name in
                          ("train_pos", "val_pos", "val_neg", "test_pos", "test_neg"))
        return f"LinkSplit({self.graph!r}, {sizes}, undirected={self.undirected})"


def unique_pairs(graph: Graph, undirected: bool) -> Tensor:
    """``[2, P]``: each edge of ``graph`` once (no self-loops; ``u < v`` if undirected), sorted."""
    src, dst = graph.src, graph.dst
    keep = src != dst
    src, dst = src[keep], dst[keep]
    if undirected:
        src, dst = torch.minimum(src, dst), torch.maximum(src, dst)
    n = max(graph.num_nodes, 1)
    keys = torch.unique(src * n + dst)
    return torch.stack([keys // n, keys % n])


def split_edges(graph: Graph, val_ratio: float = 0.05, test_ratio: float = 0.1, *, undirected: bool = True,
                neg_ratio: float = 1.0, seed: int = 0) -> LinkSplit:
    """Split ``graph``'s edges (self-loops dropped, multi-edges merged; with ``undirected`` an
    edge and its reverse are one pair) into ``floor(test_ratio * P)`` test, ``floor(val_ratio * P)``
    validation and the rest training pairs; ``neg_ratio`` negatives per held-out positive."""
    if not isinstance(graph, CoreGraph) or graph.is_bipartite:
        raise TypeError(f"split_edges needs a homogeneous unigraph.Graph, got {graph!r}")
    for name, value in (("val_ratio", val_ratio), ("test_ratio", test_ratio), ("neg_ratio", neg_ratio)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    if val_ratio + test_ratio >= 1:
        raise ValueError(f"val_ratio + test_ratio must be < 1 to leave training edges, got {val_ratio + test_ratio}")
    generator = torch.Generator().manual_seed(seed)
    pairs = unique_pairs(graph.to("cpu"), undirected)
    pairs = pairs[:, torch.randperm(pairs.shape[1], generator=generator)]
    num_test, num_val = int(test_ratio * pairs.shape[1]), int(val_ratio * pairs.shape[1])
    test_pos, val_pos = pairs[:, :num_test], pairs[:, num_test:num_test + num_val]
    train_pos = pairs[:, num_test + num_val:]
    num_val_neg, num_test_neg = int(neg_ratio * num_val), int(neg_ratio * num_test)
    everything = EdgeSet(graph.edge_index.cpu(), graph.num_nodes, undirected=undirected)
    negatives = negative_pairs(graph, num_val_neg + num_test_neg, exclude=everything, undirected=undirected,
                               generator=generator)
    message_graph = _message_graph(graph, train_pos, undirected)
    test_graph = _message_graph(graph, torch.cat([train_pos, val_pos], 1), undirected)
    return LinkSplit(message_graph, train_pos, val_pos, negatives[:, :num_val_neg], test_pos,
                     negatives[:, num_val_neg:], undirected, test_graph)


def _message_graph(graph: Graph, pairs: Tensor, undirected: bool) -> Graph:
    """A graph over all of ``graph``'s nodes (with its ``ndata``) whose edges are ``pairs`` (both
    directions when undirected)."""
    edges = torch.cat([pairs, pairs.flip(0)], 1) if undirected else pairs
    message_graph = Graph(edges, num_nodes=graph.num_nodes)
    for key, value in graph.ndata.items():
        message_graph.ndata[key] = value
    return message_graph
