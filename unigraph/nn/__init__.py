"""Graph layers, one per file, each written once on ``unigraph.ops`` and run on every backend;
PyG's aggregation modules (``unigraph.nn.aggr``), normalizations (``unigraph.nn.norm``) and basic
models (``unigraph.nn.models``) under PyG's names, so ``from torch_geometric.nn import X`` becomes
``from unigraph.nn import X``."""
from unigraph.message_passing import MessagePassing
from unigraph.nn.dropout import Dropout
from unigraph.nn.edge_conv import DynamicEdgeConv, EdgeConv
from unigraph.nn.gat_conv import GATConv
from unigraph.nn.gatv2_conv import GATv2Conv
from unigraph.nn.gcn_conv import GCNConv
from unigraph.nn.gin_conv import GINConv, GINEConv
from unigraph.nn.graph_conv import GraphConv
from unigraph.nn.hgt_conv import HGTConv
from unigraph.nn.mr_conv import MRConv
from unigraph.nn.pna_conv import PNAConv
from unigraph.nn.rgcn_conv import FastRGCNConv, RGCNConv
from unigraph.nn.sage_conv import SAGEConv
from unigraph.nn.hetero_conv import HeteroConv  # heterogeneous layers: RGCNConv, HGTConv, HeteroConv
from unigraph.nn.aggr import (
    Aggregation, DegreeScalerAggregation, LSTMAggregation, MaxAggregation, MeanAggregation, MinAggregation,
    MLPAggregation, MultiAggregation, PowerMeanAggregation, SoftmaxAggregation, StdAggregation, SumAggregation,
    VarAggregation)
from unigraph.nn.norm import BatchNorm, GraphNorm, InstanceNorm, LayerNorm
from unigraph.nn.pool import global_add_pool, global_max_pool, global_mean_pool
from unigraph.nn.models import GAT, GCN, GIN, MLP, PNA, EdgeCNN, GraphSAGE, JumpingKnowledge

__all__ = ["MessagePassing", "GCNConv", "SAGEConv", "GATConv", "GATv2Conv", "GINConv", "GINEConv", "GraphConv",
           "EdgeConv", "DynamicEdgeConv", "MRConv", "PNAConv", "RGCNConv", "FastRGCNConv", "HGTConv", "HeteroConv",
           "Aggregation", "SumAggregation", "MeanAggregation", "MaxAggregation", "MinAggregation", "VarAggregation",
           "StdAggregation", "SoftmaxAggregation", "PowerMeanAggregation", "MultiAggregation", "LSTMAggregation",
           "MLPAggregation", "DegreeScalerAggregation", "BatchNorm", "LayerNorm", "GraphNorm", "InstanceNorm",
           "GCN", "GraphSAGE", "GIN", "GAT", "PNA", "EdgeCNN", "MLP", "JumpingKnowledge",
           "global_add_pool", "global_mean_pool", "global_max_pool", "Dropout"]
