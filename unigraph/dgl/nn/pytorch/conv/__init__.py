"""DGL's graph convolutions (``dgl.nn.pytorch.conv``), one layer a file."""
from unigraph.dgl.nn.pytorch.conv.gatconv import GATConv
from unigraph.dgl.nn.pytorch.conv.ginconv import GINConv
from unigraph.dgl.nn.pytorch.conv.graphconv import GraphConv
from unigraph.dgl.nn.pytorch.conv.sageconv import SAGEConv

__all__ = ["GraphConv", "GATConv", "SAGEConv", "GINConv"]
