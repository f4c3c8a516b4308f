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
from unigraph.nn.agnn_conv import AGNNConv
from unigraph.nn.antisymmetric_conv import AntiSymmetricConv
from unigraph.nn.appnp import APPNP
from unigraph.nn.arma_conv import ARMAConv
from unigraph.nn.cg_conv import CGConv
from unigraph.nn.cheb_conv import ChebConv
from unigraph.nn.cluster_gcn_conv import ClusterGCNConv
from unigraph.nn.dir_gnn_conv import DirGNNConv
from unigraph.nn.dna_conv import DNAConv
from unigraph.nn.eg_conv import EGConv
from unigraph.nn.fa_conv import FAConv
from unigraph.nn.feast_conv import FeaStConv
from unigraph.nn.film_conv import FiLMConv
from unigraph.nn.gated_graph_conv import GatedGraphConv
from unigraph.nn.gcn2_conv import GCN2Conv
from unigraph.nn.gen_conv import GENConv, MessageNorm
from unigraph.nn.general_conv import GeneralConv
from unigraph.nn.gmm_conv import GMMConv
from unigraph.nn.gps_conv import GPSConv, PerformerAttention
from unigraph.nn.gravnet_conv import GravNetConv
from unigraph.nn.han_conv import HANConv
from unigraph.nn.heat_conv import HEATConv
from unigraph.nn.hypergraph_conv import HypergraphConv
from unigraph.nn.le_conv import LEConv
from unigraph.nn.lg_conv import LGConv
from unigraph.nn.mf_conv import MFConv
from unigraph.nn.mixhop_conv import MixHopConv
from unigraph.nn.nn_conv import ECConv, NNConv
from unigraph.nn.pan_conv import PANConv
from unigraph.nn.pdn_conv import PDNConv
from unigraph.nn.point_conv import PointNetConv
from unigraph.nn.point_gnn_conv import PointGNNConv
from unigraph.nn.point_transformer_conv import PointTransformerConv
from unigraph.nn.ppf_conv import PPFConv
from unigraph.nn.res_gated_graph_conv import ResGatedGraphConv
from unigraph.nn.rgat_conv import RGATConv
from unigraph.nn.sg_conv import SGConv
from unigraph.nn.signed_conv import SignedConv
from unigraph.nn.simple_conv import SimpleConv
from unigraph.nn.spline_conv import SplineConv
from unigraph.nn.ssg_conv import SSGConv
from unigraph.nn.supergat_conv import SuperGATConv
from unigraph.nn.tag_conv import TAGConv
from unigraph.nn.transformer_conv import TransformerConv
from unigraph.nn.wl_conv import WLConv
from unigraph.nn.wl_conv_continuous import WLConvContinuous
from unigraph.nn.hetero_conv import HeteroConv  # heterogeneous layers: RGCNConv, HGTConv, HeteroConv
from unigraph.nn.aggr import (
    Aggregation, DegreeScalerAggregation, LSTMAggregation, MaxAggregation, MeanAggregation, MinAggregation,
    MLPAggregation, MultiAggregation, PowerMeanAggregation, SoftmaxAggregation, StdAggregation, SumAggregation,
    VarAggregation)
from unigraph.nn.norm import BatchNorm, GraphNorm, InstanceNorm, LayerNorm
from unigraph.nn.pool import global_add_pool, global_max_pool, global_mean_pool
from unigraph.nn.models import GAT, GCN, GIN, MLP, PNA, EdgeCNN, GraphSAGE, JumpingKnowledge
from unigraph.nn.models import (
    ARGA, ARGVA, GAE, LINKX, PMLP, RECT_L, VGAE, CorrectAndSmooth, DeepGCNLayer, DeepGraphInfomax,
    InnerProductDecoder, LabelPropagation, LightGCN, MaskLabel, MetaLayer, MetaPath2Vec, Node2Vec, SignedGCN)

__all__ = ["MessagePassing", "GCNConv", "SAGEConv", "GATConv", "GATv2Conv", "GINConv", "GINEConv", "GraphConv",
           "EdgeConv", "DynamicEdgeConv", "MRConv", "PNAConv", "RGCNConv", "FastRGCNConv", "HGTConv", "HeteroConv",
           "Aggregation", "SumAggregation", "MeanAggregation", "MaxAggregation", "MinAggregation", "VarAggregation",
           "StdAggregation", "SoftmaxAggregation", "PowerMeanAggregation", "MultiAggregation", "LSTMAggregation",
           "MLPAggregation", "DegreeScalerAggregation", "BatchNorm", "LayerNorm", "GraphNorm", "InstanceNorm",
           "GCN", "GraphSAGE", "GIN", "GAT", "PNA", "EdgeCNN", "MLP", "JumpingKnowledge",
           "global_add_pool", "global_mean_pool", "global_max_pool", "Dropout",
           "ChebConv", "SGConv", "SSGConv", "APPNP", "TAGConv", "ARMAConv", "GCN2Conv", "LGConv",
           "SimpleConv", "MixHopConv", "ClusterGCNConv", "LEConv", "TransformerConv", "AGNNConv",
           "SuperGATConv", "FAConv", "ResGatedGraphConv", "GatedGraphConv", "RGATConv", "GENConv", "MessageNorm",
           "GeneralConv", "FiLMConv", "EGConv", "DirGNNConv", "AntiSymmetricConv", "GPSConv", "PerformerAttention", "NNConv", "ECConv",
           "CGConv", "GMMConv", "SplineConv", "PDNConv", "MFConv", "FeaStConv", "PointNetConv", "PPFConv",
           "PointTransformerConv", "PointGNNConv", "GravNetConv", "HypergraphConv", "SignedConv", "DNAConv",
           "WLConv", "WLConvContinuous", "HEATConv", "HANConv", "PANConv",
           "InnerProductDecoder", "GAE", "VGAE", "ARGA", "ARGVA", "SignedGCN", "DeepGraphInfomax",
           "LabelPropagation", "CorrectAndSmooth", "Node2Vec", "MetaPath2Vec", "DeepGCNLayer", "LightGCN",
           "LINKX", "PMLP", "RECT_L", "MaskLabel", "MetaLayer"]
