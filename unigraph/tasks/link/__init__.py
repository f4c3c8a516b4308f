"""Link prediction: split the edges, sample negatives, load mini-batches, decode, evaluate.

* :func:`split_edges` -> :class:`LinkSplit` (no held-out edge in the message-passing graph).
* :func:`negative_pairs`, :func:`corrupt_destinations` - uniform or degree-weighted non-edges.
* :class:`LinkNeighborLoader` -> :class:`LinkBatch` (seed edges, negatives, sampled blocks).
* :class:`DotDecoder`, :class:`MLPDecoder`; metrics in :mod:`unigraph.tasks.metrics`
  (:func:`link_auc`, :func:`hits_at_k`, :func:`mrr`); the model: :class:`unigraph.models.GAE`.
"""
from unigraph.tasks.link.decoders import DotDecoder, MLPDecoder
from unigraph.tasks.link.loader import LinkBatch, LinkNeighborLoader
from unigraph.tasks.link.negative import EdgeSet, corrupt_destinations, negative_pairs
from unigraph.tasks.link.split import LinkSplit, split_edges
from unigraph.tasks.metrics import hits_at_k, link_auc, mrr

__all__ = ["split_edges", "LinkSplit", "negative_pairs", "corrupt_destinations", "EdgeSet", "LinkNeighborLoader",
           "LinkBatch", "DotDecoder", "MLPDecoder", "link_auc", "hits_at_k", "mrr"]
