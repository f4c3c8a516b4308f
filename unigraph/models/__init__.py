"""unigraph's task models: node classifiers (GCN, GraphSAGE, GAT, GIN) that take a graph or one
sampled block per layer, R-GCN for heterogeneous graphs, a graph classifier (GINClassifier), a link
predictor (GAE), and Vision GNN (kNN graphs over image patches).

These are the paper setups the command line and the benchmarks train (sizes by keyword, dropout
where the papers put it, the sparse input path of bag-of-words features). PyG's models, with
PyG's constructor ``GCN(in_channels, hidden_channels, num_layers, out_channels=None, ...)``, call
``model(x, edge_index, ...)`` and parameter names, are :mod:`unigraph.nn.models` (also
``unigraph.nn.GCN``, ...): use those when porting a PyG script or loading a PyG state_dict."""
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
