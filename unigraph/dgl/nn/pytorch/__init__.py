"""``dgl.nn.pytorch``: the graph convolutions and readouts with DGL's signatures."""
from unigraph.dgl.nn.pytorch import conv  # noqa: F401
from unigraph.dgl.nn.pytorch.conv import GATConv, GINConv, GraphConv, SAGEConv
from unigraph.dgl.nn.pytorch.glob import AvgPooling, MaxPooling, SumPooling
from unigraph.dgl.ops import edge_softmax

__all__ = ["GraphConv", "GATConv", "SAGEConv", "GINConv", "SumPooling", "AvgPooling", "MaxPooling", "edge_softmax"]
