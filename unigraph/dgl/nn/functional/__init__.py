"""``dgl.nn.functional``: the functional forms DGL keeps beside its layers."""
from unigraph.dgl.ops import edge_softmax

__all__ = ["edge_softmax"]
