"""Ready-made models: node classifiers (GCN, GraphSAGE, GAT, GIN) that take a graph or one sampled
block per layer, R-GCN for heterogeneous graphs, a graph classifier (GINClassifier), a link
predictor (GAE), and Vision GNN (kNN graphs over image patches)."""
from unigraph.models.gae import GAE
from unigraph.models.gat import GAT
from unigraph.models.gcn import GCN
from unigraph.models.gin import GIN
from unigraph.models.gin_classifier import GINClassifier
from unigraph.models.graph_sage import GraphSAGE
from unigraph.models.knn import knn_graph
from unigraph.models.rgcn import RGCN
from unigraph.models.vig import FFN, Grapher, ViG

__all__ = ["GCN", "GraphSAGE", "GAT", "GIN", "GINClassifier", "GAE", "RGCN", "knn_graph", "Grapher", "FFN", "ViG"]
