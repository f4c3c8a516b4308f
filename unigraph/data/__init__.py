"""Datasets and graph generators.

* :class:`NodeDataset` - a graph with node features, labels and a train/val/test split.
* :func:`Planetoid` - Cora, CiteSeer, PubMed from their raw files (safe unpickling).
* :func:`planted_partition` - the built-in synthetic dataset (no download), for demos and tests.
* :func:`rmat` - R-MAT power-law graphs; :func:`random_geometric_graph` - points joined when
  close. (k-nearest-neighbour graphs, one per image for Vision GNNs: :func:`unigraph.knn_graph`.)
* :func:`academic_graph` - the built-in heterogeneous dataset (papers, authors, institutions, fields)
  with a planted signal, as a :class:`HeteroNodeDataset`.
* :func:`save_dataset` / :func:`load_dataset` - a safe on-disk format (no unrestricted pickle).
* :class:`GraphDataset` - many small labelled graphs (graph classification); :func:`collate` /
  :func:`collate_dataset` batch them into a :class:`GraphBatch`; :func:`read_tu` reads the TU
  format; :func:`motif_graphs` is a built-in graph-classification set (no download).
* :func:`read_ogb_node` - an OGB node-property dataset from its unpacked folder (no download).
"""
from unigraph.data.batch import GraphBatch, collate, collate_dataset
from unigraph.data.dataset import NodeDataset, normalize_features
from unigraph.data.graph_dataset import GraphDataset, split_graphs
from unigraph.data.motifs import motif_graphs
from unigraph.data.ogb import OGBNodeData, read_ogb_node
from unigraph.data.tu import TUFormatError, read_tu
from unigraph.data.generators import planted_partition, rmat
from unigraph.data.geometric import random_geometric_graph
from unigraph.data.hetero_synthetic import HeteroNodeDataset, academic_graph
from unigraph.data.planetoid import Planetoid
from unigraph.data.restricted_pickle import UnsafePickleError
from unigraph.data.storage import load_dataset, save_dataset
from unigraph.data.text_table import DataFormatError

__all__ = ["NodeDataset", "normalize_features", "Planetoid", "planted_partition", "rmat", "random_geometric_graph",
           "academic_graph", "HeteroNodeDataset",
           "save_dataset", "load_dataset", "UnsafePickleError",
           "GraphDataset", "GraphBatch", "collate", "collate_dataset", "split_graphs", "motif_graphs", "read_tu",
           "TUFormatError", "DataFormatError", "read_ogb_node", "OGBNodeData"]
