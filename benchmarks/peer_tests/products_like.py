"""A generated stand-in for ogbn-products, built through whichever ``dgl`` is loaded (the real one
or ``unigraph.dgl``), so both runs of DGL's mini-batch GraphSAGE example get the same graph.

ogbn-products: 2,449,029 nodes, 61,859,140 undirected edges (mean degree ~50.5), 100 features,
47 classes, split 8% / 1.6% / 90.4%. :func:`dataset` keeps the degree, features, classes and split
and scales the node count (``UNIGRAPH_PRODUCTS_SCALE``, default 0.02: 48,980 nodes) with
:func:`unigraph.data.arxiv_like` (a degree-corrected stochastic block model, power-law degrees).
"""
from __future__ import annotations

import os

import torch

from unigraph.data.arxiv_like import arxiv_like

PRODUCTS = {"num_nodes": 2_449_029, "num_edges": 61_859_140, "num_features": 100, "num_classes": 47}


class _Dataset:
    def __init__(self, graph, num_classes: int, train_idx, val_idx, test_idx):
        self._graph, self.num_classes = graph, num_classes
        self.train_idx, self.val_idx, self.test_idx = train_idx, val_idx, test_idx

    def __getitem__(self, idx: int):
        return self._graph

    def __len__(self) -> int:
        return 1


def dataset(dgl, scale: float | None = None, seed: int = 0) -> _Dataset:
    """The stand-in as DGL's ``AsNodePredDataset`` would give it (``[0]``, ``num_classes``,
    ``train_idx``/``val_idx``/``test_idx``), with ``g.ndata['feat']`` and ``g.ndata['label']``."""
    scale = float(os.environ.get("UNIGRAPH_PRODUCTS_SCALE", "0.02")) if scale is None else scale
    data = arxiv_like(num_nodes=round(PRODUCTS["num_nodes"] * scale), num_edges=round(PRODUCTS["num_edges"] * scale),
                      num_features=PRODUCTS["num_features"], num_classes=PRODUCTS["num_classes"],
                      train_fraction=0.08, val_fraction=0.016, seed=seed)
    src, dst = data.graph.src.clone(), data.graph.dst.clone()
    graph = dgl.graph((src, dst), num_nodes=data.x.shape[0])
    graph.ndata["feat"], graph.ndata["label"] = data.x, data.y
    return _Dataset(graph, int(data.y.max()) + 1, *(torch.nonzero(m).flatten()
                                                    for m in (data.train_mask, data.val_mask, data.test_mask)))
