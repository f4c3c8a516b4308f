"""``dgl.nn``: DGL's layers for PyTorch (:mod:`unigraph.dgl.nn.pytorch`), with DGL's signatures,
parameter names, initialization and output shapes, computed by unigraph's operators."""
from unigraph.dgl.nn import functional  # noqa: F401
from unigraph.dgl.nn.pytorch import *  # noqa: F401,F403 - dgl.nn re-exports the backend's layers, as DGL does
from unigraph.dgl.nn.pytorch import __all__  # noqa: F401
