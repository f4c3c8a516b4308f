"""``dgl.nn.pytorch``: the graph convolutions, readouts and other modules with DGL's signatures."""
from unigraph.dgl.nn.pytorch import conv, explain, gt  # noqa: F401
from unigraph.dgl.nn.pytorch.conv import *  # noqa: F401,F403
from unigraph.dgl.nn.pytorch.conv import __all__ as _conv
from unigraph.dgl.nn.pytorch.gt import *  # noqa: F401,F403
from unigraph.dgl.nn.pytorch.gt import __all__ as _gt
from unigraph.dgl.nn.pytorch.explain import *  # noqa: F401,F403
from unigraph.dgl.nn.pytorch.explain import __all__ as _explain
from unigraph.dgl.nn.pytorch.factory import KNNGraph, RadiusGraph, SegmentedKNNGraph
from unigraph.dgl.nn.pytorch.network_emb import DeepWalk, MetaPath2Vec
from unigraph.dgl.nn.pytorch.glob import (AvgPooling, GlobalAttentionPooling, MaxPooling, Set2Set, SetTransformerDecoder,
                                          SetTransformerEncoder, SortPooling, SumPooling, WeightAndSum)
from unigraph.dgl.nn.pytorch.hetero import HeteroGraphConv, HeteroLinear, HeteroEmbedding
from unigraph.dgl.nn.pytorch.jumping_knowledge import JumpingKnowledge
from unigraph.dgl.nn.pytorch.label_propagation import LabelPropagation
from unigraph.dgl.nn.pytorch.linear import TypedLinear
from unigraph.dgl.nn.pytorch.link import EdgePredictor, TransE, TransR
from unigraph.dgl.nn.pytorch.sequential import Sequential
from unigraph.dgl.ops import edge_softmax

__all__ = _conv + _gt + _explain + [
    'KNNGraph', 'SegmentedKNNGraph', 'RadiusGraph', 'DeepWalk', 'MetaPath2Vec',
    'SumPooling', 'AvgPooling', 'MaxPooling', 'SortPooling', 'GlobalAttentionPooling', 'Set2Set',
    'SetTransformerEncoder', 'SetTransformerDecoder', 'WeightAndSum', 'HeteroGraphConv', 'HeteroLinear',
    'HeteroEmbedding', 'JumpingKnowledge', 'LabelPropagation', 'TypedLinear', 'EdgePredictor', 'TransE',
    'TransR', 'Sequential', 'edge_softmax',
]
