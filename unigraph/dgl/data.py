"""``dgl.data``'s citation graphs read from local Planetoid files (nothing is downloaded):
:class:`CoraGraphDataset`, :class:`CiteseerGraphDataset`, :class:`PubmedGraphDataset`, and
:class:`AsNodePredDataset`.

The files are the raw ``ind.<name>.*`` Planetoid files (:func:`unigraph.data.Planetoid` reads and
checks them), looked for in ``raw_dir``, else in ``$DGL_DOWNLOAD_DIR``, else in ``~/.dgl`` (each
also under ``raw/``, ``<name>/`` and ``<name>/raw/``). The graph is DGL's: both directions of every
citation, no self-loops, ``ndata['feat']`` row-normalized as DGL's (and the GCN paper's),
``ndata['label']`` and the standard ``train_mask``/``val_mask``/``test_mask``.
"""
from __future__ import annotations

import os
import pathlib
from typing import Any, Callable

import torch

from unigraph.data.planetoid import Planetoid
from unigraph.data.roots import planetoid_folder
from unigraph.dgl.base import DGLError
from unigraph.dgl.graph import DGLGraph


def _root(raw_dir: str | None) -> pathlib.Path:
    if raw_dir is not None:
        return pathlib.Path(raw_dir)
    return pathlib.Path(os.environ.get("DGL_DOWNLOAD_DIR", pathlib.Path.home() / ".dgl"))


class _CitationGraphDataset:
    name = ""

    def __init__(self, raw_dir: str | None = None, force_reload: bool = False, verbose: bool = True,
                 transform: Callable | None = None, reverse_edge: bool = True, **unsupported):
        if unsupported:
            raise DGLError(f"{type(self).__name__} got arguments unigraph does not support: {sorted(unsupported)}")
        if not reverse_edge:
            raise DGLError("reverse_edge=False (one direction per citation) is not supported")
        folder = planetoid_folder(_root(raw_dir), self.name)
        dataset = Planetoid(folder, self.name, normalize_features=True)
        graph = DGLGraph.view(dataset.graph)
        graph.ndata["feat"] = dataset.x
        graph.ndata["label"] = dataset.y
        graph.ndata["train_mask"] = dataset.train_mask
        graph.ndata["val_mask"] = dataset.val_mask
        graph.ndata["test_mask"] = dataset.test_mask
        self._graph, self._transform = graph, transform
        self.num_classes = int(dataset.y.max()) + 1
        if verbose:
            print(f"  NumNodes: {graph.num_nodes()}\n  NumEdges: {graph.num_edges()}\n  NumFeats: {dataset.x.shape[1]}"
                  f"\n  NumClasses: {self.num_classes}\n  (read from {folder})")

    def __len__(self) -> int:
        return 1

    def __getitem__(self, idx: int) -> DGLGraph:
        if idx != 0:
            raise IndexError(f"{type(self).__name__} holds one graph; got index {idx}")
        return self._transform(self._graph) if self._transform is not None else self._graph

    @property
    def num_labels(self) -> int:
        return self.num_classes


class CoraGraphDataset(_CitationGraphDataset):
    name = "cora"


class CiteseerGraphDataset(_CitationGraphDataset):
    name = "citeseer"


class PubmedGraphDataset(_CitationGraphDataset):
    name = "pubmed"


class AsNodePredDataset:
    """A one-graph dataset as a node prediction task (DGL's ``AsNodePredDataset``): ``train_idx``,
    ``val_idx``, ``test_idx`` from the graph's masks and ``num_classes``."""

    def __init__(self, dataset: Any, split_ratio: Any = None, target_ntype: str | None = None, **kwargs):
        if split_ratio is not None or target_ntype is not None:
            raise DGLError("AsNodePredDataset(split_ratio=, target_ntype=) is not supported; give a graph with masks")
        self._graph = dataset[0]
        ndata = self._graph.ndata
        self.train_idx, self.val_idx, self.test_idx = (torch.nonzero(ndata[f"{part}_mask"]).flatten()
                                                       for part in ("train", "val", "test"))
        self.num_classes = getattr(dataset, "num_classes", None) or int(ndata["label"].max()) + 1

    def __len__(self) -> int:
        return 1

    def __getitem__(self, idx: int):
        if idx != 0:
            raise IndexError(f"AsNodePredDataset holds one graph; got index {idx}")
        return self._graph


__all__ = ["CoraGraphDataset", "CiteseerGraphDataset", "PubmedGraphDataset", "AsNodePredDataset"]
