"""Mini-batch sampling for graphs too large for full-batch training.

* :class:`NeighborSampler` - per-layer neighbour sampling into message-flow blocks (:class:`Blocks`).
* :class:`ClusterSampler` - Cluster-GCN: batches of graph partitions (:func:`partition_graph`).
* :class:`RandomWalkSampler` - GraphSAINT random-walk subgraphs with normalization coefficients.
* :class:`NodeLoader` - batches of seeds through any sampler, optionally in persistent worker
  processes with the graph and features in shared memory.
* :class:`NodeFeatureStore` - shared-memory features gathered by node id, with an optional cache
  of the highest-degree nodes on the training device.
* :class:`ControlVariateSampler` / :class:`ControlVariateGCN` - VR-GCN: GCN trained with 1-2 sampled
  neighbours per node, histories in a store (:mod:`unigraph.sampling.control_variate`).
"""
from unigraph.sampling.batch import EID, Blocks, Subgraph
from unigraph.sampling.cluster import ClusterSampler
from unigraph.sampling.control_variate import ControlVariateGCN, ControlVariateSampler
from unigraph.sampling.features import NodeFeatureStore
from unigraph.sampling.loader import NodeLoader
from unigraph.sampling.neighbor import NeighborSampler
from unigraph.sampling.partition import partition_graph
from unigraph.sampling.saint import RandomWalkSampler
from unigraph.sampling.workers import WorkerError

__all__ = ["NeighborSampler", "ClusterSampler", "RandomWalkSampler", "partition_graph", "NodeLoader",
           "NodeFeatureStore", "Blocks", "Subgraph", "EID", "WorkerError", "ControlVariateSampler", "ControlVariateGCN"]
