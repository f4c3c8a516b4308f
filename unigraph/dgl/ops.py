from unigraph.ops import edge_softmax, gsddmm, gspmm  # noqa: F401
