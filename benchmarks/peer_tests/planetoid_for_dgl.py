"""Cora / CiteSeer for the real DGL's runs of its examples, read from the local Planetoid files
with unigraph's reader (DGL's own ``dgl.data`` downloads them), so both libraries train on the
same graph: both directions of every citation, no self-loops, row-normalized features, the
standard split. What ``dataset`` returns answers ``[0]`` and ``num_classes`` as DGL's does."""
from __future__ import annotations

import os

from unigraph.data.planetoid import Planetoid
from unigraph.data.roots import planetoid_folder


class _Dataset:
    def __init__(self, graph, num_classes: int):
        self._graph, self.num_classes = graph, num_classes

    def __getitem__(self, idx: int):
        return self._graph

    def __len__(self) -> int:
        return 1


def dataset(dgl, name: str, transform=None) -> _Dataset:
    data = Planetoid(planetoid_folder(os.environ["DGL_DOWNLOAD_DIR"], name), name, normalize_features=True)
    graph = dgl.graph((data.graph.src.clone(), data.graph.dst.clone()), num_nodes=data.x.shape[0])
    graph.ndata["feat"], graph.ndata["label"] = data.x, data.y
    for part in ("train", "val", "test"):
        graph.ndata[f"{part}_mask"] = getattr(data, f"{part}_mask")
    return _Dataset(transform(graph) if transform is not None else graph, int(data.y.max()) + 1)
