"""``knn_graph`` lives in :mod:`unigraph.nn.knn` (beside the bipartite ``knn`` that
DynamicEdgeConv uses); re-exported here where the models import it."""
from unigraph.nn.knn import knn_graph

__all__ = ["knn_graph"]
