"""DGL's namespace on unigraph (baseline: unigraph's existing API under DGL's names)."""
import torch

from unigraph.hetero import HeteroGraph
from unigraph.user_graph import Graph as DGLGraph
from unigraph.dgl import function, nn, ops
from unigraph.dgl.base import ALL, EID, NID, DGLError


def graph(data, num_nodes=None, idtype=None, device=None):
    src, dst = data
    return DGLGraph(torch.stack([torch.as_tensor(src), torch.as_tensor(dst)]), num_nodes=num_nodes)


def heterograph(data_dict, num_nodes_dict=None, idtype=None, device=None):
    return HeteroGraph(data_dict, num_nodes_dict)
