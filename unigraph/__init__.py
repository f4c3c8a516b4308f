"""unigraph: write a graph neural network once, run it on the fastest kernels for your graph.

Quick tour::

    import torch, unigraph
    g = unigraph.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]))
    h = unigraph.ops.gspmm(g, "copy_u", "sum", u=torch.randn(3, 8))   # sum of in-neighbours
    print(unigraph.explain(g, "copy_u", "sum", 8))                     # which backend and why
    print(unigraph.info())                                             # which kernels exist here
"""
from unigraph import _openmp

# torch's OpenMP wait policy is the user's: nothing is set here (numba's own pool waits passively:
# unigraph/_openmp.py); this notes what torch's libgomp reads, for benchmark reports.
_openmp.note_import()

from unigraph import torch_dropout as _torch_dropout  # torch's CPU dropout, the same bits sooner
_torch_dropout.install()  # and its bernoulli_ (off: UNIGRAPH_TORCH_BERNOULLI=0)

from unigraph.graph import DegreeStats
from unigraph.user_graph import Graph
from unigraph.hetero import HeteroGraph
from unigraph import ops
from unigraph.backends.selector import explain, info, set_backend, use_backend
from unigraph import function
from unigraph.message_passing import MessagePassing, MessagePlan
from unigraph.nn import EdgeConv, GATConv, GATv2Conv, GCNConv, GINConv, GraphConv, MRConv, SAGEConv
from unigraph.nn import DynamicEdgeConv, GINEConv, PNAConv
from unigraph.nn import FastRGCNConv, HeteroConv, HGTConv, RGCNConv
from unigraph.models import FFN, GAT, GCN, GIN, GraphSAGE, Grapher, ViG, knn_graph

__version__ = "0.1.0"

__all__ = ["Graph", "DegreeStats", "HeteroGraph", "HeteroConv", "RGCNConv", "HGTConv", "ops", "explain", "info", "set_backend", "use_backend", "__version__",
           "function", "MessagePassing", "MessagePlan",
           "GCNConv", "SAGEConv", "GATConv", "GATv2Conv", "GINConv", "GraphConv", "EdgeConv", "MRConv",
           "GINEConv", "DynamicEdgeConv", "PNAConv", "FastRGCNConv",
           "GCN", "GraphSAGE", "GAT", "GIN", "knn_graph", "Grapher", "FFN", "ViG"]
