"""PyG's ``torch_geometric.nn.models`` contract: the basic GNN models (GCN, GraphSAGE, GIN, GAT,
PNA, EdgeCNN) with PyG's constructor, call and parameter names (a PyG state_dict loads), the MLP
and jumping knowledge they use. ``unigraph.models`` holds unigraph's own task models."""
from unigraph.nn.models.basic_gnn import GAT, GCN, GIN, PNA, BasicGNN, EdgeCNN, GraphSAGE
from unigraph.nn.models.jumping_knowledge import JumpingKnowledge
from unigraph.nn.models.autoencoder import InnerProductDecoder, GAE, VGAE, ARGA, ARGVA
from unigraph.nn.models.correct_and_smooth import CorrectAndSmooth
from unigraph.nn.models.deep_graph_infomax import DeepGraphInfomax
from unigraph.nn.models.deepgcn import DeepGCNLayer
from unigraph.nn.models.label_prop import LabelPropagation
from unigraph.nn.models.lightgcn import LightGCN
from unigraph.nn.models.linkx import LINKX
from unigraph.nn.models.mask_label import MaskLabel
from unigraph.nn.models.meta import MetaLayer
from unigraph.nn.models.metapath2vec import MetaPath2Vec
from unigraph.nn.models.node2vec import Node2Vec
from unigraph.nn.models.pmlp import PMLP
from unigraph.nn.models.rect import RECT_L
from unigraph.nn.models.signed_gcn import SignedGCN
from unigraph.nn.mlp import MLP  # PyG keeps MLP among its models

__all__ = ["BasicGNN", "GCN", "GraphSAGE", "GIN", "GAT", "PNA", "EdgeCNN", "MLP", "JumpingKnowledge",
           "InnerProductDecoder", "GAE", "VGAE", "ARGA", "ARGVA", "SignedGCN", "DeepGraphInfomax",
           "LabelPropagation", "CorrectAndSmooth", "Node2Vec", "MetaPath2Vec", "DeepGCNLayer",
           "LightGCN", "LINKX", "PMLP", "RECT_L", "MaskLabel", "MetaLayer"]
