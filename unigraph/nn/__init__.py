"""Graph layers, one per file, each written once on ``unigraph.ops`` and run on every backend."""
from unigraph.message_passing import MessagePassing
from unigraph.nn.edge_conv import EdgeConv
from unigraph.nn.dropout import Dropout
from unigraph.nn.gat_conv import GATConv
from unigraph.nn.gatv2_conv import GATv2Conv
from unigraph.nn.gcn_conv import GCNConv
from unigraph.nn.gin_conv import GINConv
from unigraph.nn.graph_conv import GraphConv
from unigraph.nn.hgt_conv import HGTConv
from unigraph.nn.mr_conv import MRConv
from unigraph.nn.rgcn_conv import RGCNConv
from unigraph.nn.sage_conv import SAGEConv
from unigraph.hetero.hetero_conv import HeteroConv  # heterogeneous layers: RGCNConv, HGTConv, HeteroConv

__all__ = ["MessagePassing", "GCNConv", "SAGEConv", "GATConv", "GATv2Conv", "GINConv", "GraphConv", "EdgeConv",
           "MRConv", "RGCNConv", "HGTConv", "HeteroConv", "Dropout"]
