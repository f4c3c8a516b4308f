"""LinkNeighborLoader: mini-batches of seed edges, their negatives, and the sampled neighbourhoods
of every endpoint (PyG's ``LinkNeighborLoader``, DGL's ``EdgeDataLoader`` / edge-prediction sampler).

Per batch of ``B`` positive seed edges ``(u, v)``:

1. ``neg_ratio`` negatives per positive, ``(u, v')`` with ``v'`` drawn by
   :func:`~unigraph.tasks.link.negative.corrupt_destinations` (never an edge of ``negatives_avoid``,
   default the graph itself, never ``u``);
2. the distinct endpoints of all pairs become the seeds (``output_nodes``, sorted) of one
   :class:`~unigraph.sampling.NeighborSampler` call, so every endpoint's computation tree is sampled
   once however many pairs it is in;
3. optionally (``exclude``) the seed edges are removed from the sampled blocks: ``"self"`` drops
   each positive edge ``u -> v``, ``"reverse"`` drops it and ``v -> u`` (undirected graphs), so the
   model cannot read the answer from the messages (DGL's ``exclude="self"``/``"reverse_id"``).

Everything is keyed by the loader's ``seed``, the epoch and the batch number, so runs repeat.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Iterator

import torch
from torch import Tensor

from unigraph.graph import Graph as CoreGraph
from unigraph.user_graph import Graph
from unigraph.sampling.batch import Blocks
from unigraph.sampling.counter_rng import GOLDEN, mix64_int
from unigraph.tasks.link.negative import METHODS, EdgeSet, corrupt_destinations

EXCLUDE_MODES = (None, "self", "reverse")


@dataclasses.dataclass
class LinkBatch:
    """One link mini-batch.

    Fields:
        input_nodes: global ids of the nodes whose features the first layer reads.
        output_nodes: global ids of the pairs' endpoints (sorted); the model's embeddings rows.
        blocks: one bipartite block per layer (DGL's order), as :class:`~unigraph.sampling.Blocks`.
        edge_label_index: ``[2, P + Q]`` pairs as rows of ``output_nodes`` (positives first).
        edge_label: ``[P + Q]`` float, 1 for the ``P`` positives, 0 for the ``Q`` negatives.
        x: features of ``input_nodes`` (when the loader has features).

    DGL-style loops unpack ``for input_nodes, pos_graph, neg_graph, blocks in loader``.
    """

    input_nodes: Tensor
    output_nodes: Tensor
    blocks: list[Graph]
    edge_label_index: Tensor
    edge_label: Tensor
    x: Tensor | None = None

    @property
    def num_pos(self) -> int:
        return int(self.edge_label.sum())

    def pair_graphs(self) -> tuple[Graph, Graph]:
        """``(pos_graph, neg_graph)`` over ``output_nodes``, as DGL's edge loaders give them."""
        n, p = self.output_nodes.numel(), self.num_pos
        return (Graph(self.edge_label_index[:, :p], num_nodes=n), Graph(self.edge_label_index[:, p:], num_nodes=n))

    def __iter__(self):
        pos_graph, neg_graph = self.pair_graphs()
        return iter((self.input_nodes, pos_graph, neg_graph, self.blocks))

    def to(self, device: torch.device | str) -> "LinkBatch":
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return LinkBatch(move(self.input_nodes), move(self.output_nodes), [b.to(device) for b in self.blocks],
                         move(self.edge_label_index), move(self.edge_label), move(self.x))


def drop_seed_edges(batch: Blocks, positives: Tensor, mode: str, num_nodes: int) -> list[Graph]:
    """The blocks without the edges ``positives`` (global ``[2, P]``; ``"reverse"``: either way)."""
    seeds = EdgeSet(positives, num_nodes, undirected=mode == "reverse")
    blocks = []
    for block in batch.blocks:
        src, dst = batch.input_nodes[block.src], batch.input_nodes[block.dst]
        keep = ~seeds.contains(src, dst)
        kept = Graph._trusted(block.src[keep], block.dst[keep], block.num_src_nodes, block.num_dst_nodes, True)
        for key, value in block.edata.items():
            kept.edata[key] = value[keep]
        blocks.append(kept)
    return blocks


class LinkNeighborLoader:
    """Iterates over seed edges in :class:`LinkBatch` es.

    Args:
        graph: the message-passing graph (e.g. :attr:`LinkSplit.graph`).
        sampler: a :class:`~unigraph.sampling.NeighborSampler` (fanouts in layer order).
        edge_label_index: ``[2, E]`` positive seed edges (default: every edge of ``graph``).
        neg_ratio: negatives per positive (0: none).
        neg_method: ``"uniform"`` or ``"degree"`` (see :mod:`~unigraph.tasks.link.negative`).
        negatives_avoid: ``[2, E']`` edges negatives must not be (default: ``graph``'s edges);
            pass the full graph's edges so held-out positives are never drawn as negatives.
        exclude: ``None``, ``"self"`` or ``"reverse"`` (see the module docstring).
        batch_size, shuffle, drop_last, seed: as in :class:`~unigraph.sampling.NodeLoader`.
        features: node features; each batch gets ``x = features[input_nodes]``.
        device: where batches are delivered.

    Sampling runs in the calling process (no worker processes for this loader yet).
    """

    def __init__(self, graph: Graph, sampler, edge_label_index: Tensor | None = None, *, neg_ratio: int = 1,
                 neg_method: str = "uniform", negatives_avoid: Tensor | None = None, exclude: str | None = None,
                 batch_size: int = 256, shuffle: bool = True, drop_last: bool = False,
                 features: Tensor | None = None, seed: int = 0, device: torch.device | str | None = None):
        if not isinstance(graph, CoreGraph) or graph.is_bipartite:
            raise TypeError(f"LinkNeighborLoader needs a homogeneous unigraph.Graph, got {graph!r}")
        if not hasattr(sampler, "sample"):
            raise TypeError(f"sampler must be a NeighborSampler (with sample()), got {type(sampler).__name__}")
        if exclude not in EXCLUDE_MODES:
            raise ValueError(f"exclude must be one of {EXCLUDE_MODES}, got {exclude!r}")
        if neg_method not in METHODS:
            raise ValueError(f"neg_method must be one of {', '.join(map(repr, METHODS))}, got {neg_method!r}")
        for name, value, minimum in (("batch_size", batch_size, 1), ("neg_ratio", neg_ratio, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
        edges = graph.edge_index if edge_label_index is None else Graph(edge_label_index, num_nodes=graph.num_nodes).edge_index
        if features is not None and (not isinstance(features, Tensor) or features.shape[0] != graph.num_nodes):
            raise ValueError(f"features must have one row per node ({graph.num_nodes}), got "
                             f"{list(getattr(features, 'shape', [])) or type(features).__name__}")
        self.graph, self.sampler, self.edges = graph, sampler, edges
        self.neg_ratio, self.neg_method, self.exclude = neg_ratio, neg_method, exclude
        avoid = graph.edge_index if negatives_avoid is None else Graph(negatives_avoid, num_nodes=graph.num_nodes).edge_index
        self.avoid = EdgeSet(avoid, graph.num_nodes)
        self.batch_size, self.shuffle, self.drop_last, self.seed = batch_size, shuffle, drop_last, seed
        self.features = features
        self.device = None if device is None else torch.device(device)
        self._epoch = 0

    def __len__(self) -> int:
        count = self.edges.shape[1] / self.batch_size
        return math.floor(count) if self.drop_last else math.ceil(count)

    def make_batch(self, positives: Tensor, key: int) -> LinkBatch:
        """The batch for positive seed edges ``positives`` ``[2, B]`` under ``key``."""
        generator = torch.Generator().manual_seed(key & ((1 << 63) - 1))
        negatives = corrupt_destinations(self.graph, positives[0], self.neg_ratio, exclude=self.avoid,
                                         method=self.neg_method, generator=generator)
        pairs = torch.cat([positives, negatives], 1)
        nodes, local = torch.unique(pairs.flatten(), return_inverse=True)
        sampled = self.sampler.sample(self.graph, nodes, key=key)
        blocks = sampled.blocks if self.exclude is None else drop_seed_edges(sampled, positives, self.exclude,
                                                                                   self.graph.num_nodes)
        label = torch.cat([torch.ones(positives.shape[1]), torch.zeros(negatives.shape[1])])
        x = None if self.features is None else self.features[sampled.input_nodes]
        return LinkBatch(sampled.input_nodes, sampled.seeds, blocks, local.view(2, -1), label, x)

    def __iter__(self) -> Iterator[LinkBatch]:
        self._epoch += 1
        epoch_key = mix64_int(self.seed + self._epoch * GOLDEN)
        order = torch.arange(self.edges.shape[1])
        if self.shuffle:
            order = order[torch.randperm(order.numel(), generator=torch.Generator().manual_seed(
                epoch_key & ((1 << 63) - 1)))]
        for index, ids in enumerate(order.split(self.batch_size)):
            if self.drop_last and ids.numel() < self.batch_size:
                break
            batch = self.make_batch(self.edges[:, ids], mix64_int(epoch_key + index))
            yield batch if self.device is None else batch.to(self.device)
