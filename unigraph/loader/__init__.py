"""Loaders named as PyG names them, for tasks beyond node classification.

* :class:`GraphLoader` - mini-batches of small graphs (graph classification), with workers,
  shuffling and a progress bar.
* :class:`LinkNeighborLoader` - seed edges with negatives and the sampled neighbourhoods of both
  endpoints (link prediction).

Node-wise mini-batches: :class:`unigraph.sampling.NodeLoader` (and :mod:`unigraph.dataloading`
for DGL's spelling).
"""
from unigraph.loader.graph_loader import GraphLoader
from unigraph.tasks.link.loader import LinkNeighborLoader

__all__ = ["GraphLoader", "LinkNeighborLoader"]
