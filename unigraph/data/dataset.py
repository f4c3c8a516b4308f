"""The node-classification dataset record every loader and generator returns."""
from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from unigraph.graph import Graph


def normalize_features(x: Tensor) -> Tensor:
    """Row-normalize: each row divided by its sum (rows summing to 0 stay 0).

    This is PyG's ``NormalizeFeatures`` and the GCN/GAT papers' preprocessing of the Planetoid
    bag-of-words features. Returns a new tensor.
    """
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.dim() != 2:
        raise TypeError(f"normalize_features expects a 2-D floating-point tensor, got "
                        f"{type(x).__name__} {getattr(x, 'dtype', '')} {list(getattr(x, 'shape', []))}")
    row_sum = x.sum(dim=1, keepdim=True)
    return x / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)


def mask_from_index(index: Tensor, num_nodes: int) -> Tensor:
    """A bool mask of ``num_nodes`` entries, True at ``index``."""
    mask = torch.zeros(num_nodes, dtype=torch.bool)
    mask[index] = True
    return mask


@dataclasses.dataclass
class NodeDataset:
    """A graph with node features, labels and a train/validation/test split.

    Fields:
        name: the dataset's name (``"cora"``, ``"planted_partition"``, ...).
        graph: a homogeneous :class:`~unigraph.Graph` holding both directions of every edge
            (no self-loops added: a model adds them if it wants them).
        x: float32 features ``[N, F]``; y: int64 labels ``[N]``.
        train_mask, val_mask, test_mask: bool ``[N]``.

    The fields are checked on construction (shapes, dtypes, label range), so a dataset that
    exists is consistent.
    """

    name: str
    graph: Graph
    x: Tensor
    y: Tensor
    train_mask: Tensor
    val_mask: Tensor
    test_mask: Tensor

    def __post_init__(self) -> None:
        if not isinstance(self.graph, Graph) or self.graph.is_bipartite:
            raise TypeError(f"NodeDataset.graph must be a homogeneous unigraph.Graph, got {self.graph!r}")
        n = self.graph.num_nodes
        if not isinstance(self.x, Tensor) or self.x.dim() != 2 or self.x.shape[0] != n or not self.x.is_floating_point():
            raise ValueError(f"x must be a floating-point tensor of shape [{n}, F], got "
                             f"{getattr(self.x, 'dtype', type(self.x).__name__)} {list(getattr(self.x, 'shape', []))}")
        if not isinstance(self.y, Tensor) or self.y.dtype != torch.int64 or self.y.shape != (n,):
            raise ValueError(f"y must be an int64 tensor of shape [{n}], got "
                             f"{getattr(self.y, 'dtype', type(self.y).__name__)} {list(getattr(self.y, 'shape', []))}")
        if n and int(self.y.min()) < 0:
            raise ValueError(f"labels must be >= 0, found {int(self.y.min())}")
        for mask_name in ("train_mask", "val_mask", "test_mask"):
            mask = getattr(self, mask_name)
            if not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.shape != (n,):
                raise ValueError(f"{mask_name} must be a bool tensor of shape [{n}], got "
                                 f"{getattr(mask, 'dtype', type(mask).__name__)} {list(getattr(mask, 'shape', []))}")

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def num_features(self) -> int:
        return self.x.shape[1]

    @property
    def num_classes(self) -> int:
        return int(self.y.max()) + 1 if self.y.numel() else 0

    def normalize_features(self) -> "NodeDataset":
        """A copy whose features are row-normalized (see :func:`normalize_features`)."""
        return dataclasses.replace(self, x=normalize_features(self.x))

    def to(self, device: torch.device | str) -> "NodeDataset":
        """A copy with the graph and every tensor on ``device``."""
        return NodeDataset(self.name, self.graph.to(device), self.x.to(device), self.y.to(device),
                           self.train_mask.to(device), self.val_mask.to(device), self.test_mask.to(device))

    def __repr__(self) -> str:
        return (f"NodeDataset({self.name!r}, num_nodes={self.num_nodes}, num_edges={self.graph.num_edges}, "
                f"num_features={self.num_features}, num_classes={self.num_classes}, "
                f"train/val/test={int(self.train_mask.sum())}/{int(self.val_mask.sum())}/{int(self.test_mask.sum())})")
