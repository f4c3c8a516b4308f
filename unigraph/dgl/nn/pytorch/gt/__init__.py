"""DGL's graph transformer modules (``dgl.nn.pytorch.gt``)."""
from unigraph.dgl.nn.pytorch.gt.degree_encoder import DegreeEncoder
from unigraph.dgl.nn.pytorch.gt.lap_pos_encoder import LapPosEncoder
from unigraph.dgl.nn.pytorch.gt.biased_mha import BiasedMHA
from unigraph.dgl.nn.pytorch.gt.graphormer import GraphormerLayer
from unigraph.dgl.nn.pytorch.gt.path_encoder import PathEncoder
from unigraph.dgl.nn.pytorch.gt.egt import EGTLayer
from unigraph.dgl.nn.pytorch.gt.spatial_encoder import SpatialEncoder, SpatialEncoder3d

__all__ = ['DegreeEncoder', 'LapPosEncoder', 'BiasedMHA', 'GraphormerLayer', 'SpatialEncoder', 'SpatialEncoder3d', 'PathEncoder',
           'EGTLayer']
