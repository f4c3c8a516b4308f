"""PyG's ``torch_geometric.nn.models`` contract: the basic GNN models (GCN, GraphSAGE, GIN, GAT,
PNA, EdgeCNN) with PyG's constructor, call and parameter names (a PyG state_dict loads), the MLP
and jumping knowledge they use. ``unigraph.models`` holds unigraph's own task models."""
from unigraph.nn.models.basic_gnn import GAT, GCN, GIN, PNA, BasicGNN, EdgeCNN, GraphSAGE
from unigraph.nn.models.jumping_knowledge import JumpingKnowledge
from unigraph.nn.mlp import MLP  # PyG keeps MLP among its models

__all__ = ["BasicGNN", "GCN", "GraphSAGE", "GIN", "GAT", "PNA", "EdgeCNN", "MLP", "JumpingKnowledge"]
