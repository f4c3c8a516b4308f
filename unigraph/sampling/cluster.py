"""Cluster-GCN sampling (Chiang et al., KDD 2019): a mini-batch is the subgraph induced by a few
graph partitions, including the edges between them."""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.sampling.batch import Subgraph
from unigraph.sampling.csr_view import InCSR, check_node_ids, csr_ranges, in_csr_view
from unigraph.sampling.partition import partition_graph
from unigraph.sampling.subgraph import induced_subgraph


class ClusterSampler:
    """Partitions ``graph`` once into ``num_parts`` parts (:func:`partition_graph`, our own
    balanced partitioner) and samples batches of parts.

    Use with a :class:`NodeLoader` over the part ids: ``NodeLoader(graph, torch.arange(num_parts),
    sampler, batch_size=parts_per_batch)``. Each batch is a :class:`Subgraph` over the nodes of the
    chosen parts (part after part, nodes in id order inside a part) with every edge among them,
    so edges between the chosen parts are kept, as in Cluster-GCN's stochastic multiple partitions.
    ``key`` is accepted for the loader's protocol; the batch depends only on the parts chosen.
    """

    def __init__(self, graph: Graph, num_parts: int, *, refine_rounds: int = 8, imbalance: float = 0.05,
                 seed: int = 0):
        self.num_parts = num_parts
        self.part = partition_graph(graph, num_parts, refine_rounds=refine_rounds, imbalance=imbalance, seed=seed)
        self.num_nodes = graph.num_nodes
        order = torch.sort(self.part, stable=True)
        self.part_nodes = order.indices                                # node ids grouped by part
        self.part_ptr = torch.zeros(num_parts + 1, dtype=torch.int64)
        torch.cumsum(torch.bincount(self.part, minlength=num_parts), 0, out=self.part_ptr[1:])

    def __repr__(self) -> str:
        sizes = self.part_ptr[1:] - self.part_ptr[:-1]
        return f"ClusterSampler(num_parts={self.num_parts}, part sizes {int(sizes.min())}..{int(sizes.max())})"

    def num_items(self, graph: Graph | InCSR) -> int:
        """Items are part ids: ``0..num_parts-1``."""
        return self.num_parts

    def nodes_of(self, parts: Tensor) -> Tensor:
        """The node ids of ``parts``, part after part."""
        parts = check_node_ids("parts", parts, self.num_parts, torch.device("cpu"))
        return self.part_nodes[csr_ranges(self.part_ptr, parts)[1]]

    def sample(self, graph: Graph | InCSR, parts, *, key: int | None = None) -> Subgraph:
        """The subgraph induced by the nodes of ``parts`` (distinct part ids)."""
        csr = in_csr_view(graph)
        if csr.num_nodes != self.num_nodes:
            raise ValueError(f"this ClusterSampler partitioned a graph of {self.num_nodes} nodes, "
                             f"not this one ({csr.num_nodes} nodes)")
        parts = check_node_ids("parts", parts, self.num_parts, torch.device("cpu"))
        if torch.unique(parts).numel() != parts.numel():
            raise ValueError("parts hold duplicate part ids; each part may appear once per batch")
        nodes = self.nodes_of(parts).to(csr.device)
        return Subgraph(nodes=nodes, graph=induced_subgraph(csr, nodes))
