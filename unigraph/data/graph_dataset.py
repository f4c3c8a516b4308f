"""The graph-classification dataset record: many small graphs stored end to end.

All graphs live in a few flat tensors, as in PyG's in-memory datasets: ``edge_index`` holds every
graph's edges with node ids local to its graph, ``node_ptr``/``edge_ptr`` say where each graph's
nodes and edges start. A mini-batch is then a handful of vectorised gathers
(:func:`unigraph.data.batch.collate_dataset`) instead of one Python object per graph, and worker
processes share the tensors instead of pickling graphs.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import torch
from torch import Tensor

from unigraph.data.packing import _offsets, pack_graphs
from unigraph.sampling.csr_view import csr_ranges
from unigraph.user_graph import Graph


def _check_ptr(name: str, ptr: Tensor, total: int | None) -> None:
    """Offsets: 1-D int64, starting at 0, never decreasing, ending at ``total`` (when given)."""
    if not isinstance(ptr, Tensor) or ptr.dtype != torch.int64 or ptr.dim() != 1 or ptr.numel() < 1:
        raise ValueError(f"{name} must be a 1-D int64 tensor of num_graphs + 1 offsets, got "
                         f"{getattr(ptr, 'dtype', type(ptr).__name__)} {list(getattr(ptr, 'shape', []))}")
    if int(ptr[0]) != 0 or (total is not None and int(ptr[-1]) != total) or bool((ptr[1:] < ptr[:-1]).any()):
        end = "" if total is None else f" and end at {total}"
        raise ValueError(f"{name} must start at 0{end} and never decrease; got {ptr.tolist()[:8]}...")


@dataclasses.dataclass
class GraphDataset:
    """Many small graphs with a label each (graph classification or regression).

    Fields:
        name: the dataset's name.
        edge_index: ``[2, E]`` int64, all graphs' edges end to end, node ids local to each graph.
        node_ptr, edge_ptr: ``[G + 1]`` int64 offsets: graph ``g`` has nodes
            ``node_ptr[g]:node_ptr[g+1]`` and edges ``edge_ptr[g]:edge_ptr[g+1]``.
        x: node features ``[N, F]`` (float) or ``None`` (a model then uses a constant feature).
        edge_attr: edge features ``[E, ...]`` or ``None``.
        y: ``[G]`` int64 class labels, or ``[G, T]`` float regression targets.

    Checked on construction (dtypes, shapes, offsets, every edge inside its graph), so a dataset
    that exists is consistent. ``dataset[i]`` is ``(Graph, label)`` as in DGL's datasets.
    """

    name: str
    edge_index: Tensor
    node_ptr: Tensor
    edge_ptr: Tensor
    y: Tensor
    x: Tensor | None = None
    edge_attr: Tensor | None = None

    def __post_init__(self) -> None:
        ei = self.edge_index
        if not isinstance(ei, Tensor) or ei.dtype != torch.int64 or ei.dim() != 2 or ei.shape[0] != 2:
            raise ValueError(f"edge_index must be an int64 tensor of shape [2, E], got "
                             f"{getattr(ei, 'dtype', type(ei).__name__)} {list(getattr(ei, 'shape', []))}")
        if not isinstance(self.y, Tensor) or self.y.dim() not in (1, 2):
            raise ValueError(f"y must be a [G] or [G, T] tensor, got {list(getattr(self.y, 'shape', []))}")
        num_graphs = self.y.shape[0]
        _check_ptr("node_ptr", self.node_ptr, None)
        _check_ptr("edge_ptr", self.edge_ptr, ei.shape[1])
        for name, ptr in (("node_ptr", self.node_ptr), ("edge_ptr", self.edge_ptr)):
            if ptr.numel() != num_graphs + 1:
                raise ValueError(f"{name} has {ptr.numel()} entries but y labels {num_graphs} graphs "
                                 f"(need num_graphs + 1 = {num_graphs + 1})")
        if self.y.dim() == 1 and (self.y.dtype != torch.int64 or (num_graphs and int(self.y.min()) < 0)):
            raise ValueError(f"class labels y must be int64 and >= 0, got {self.y.dtype}"
                             f"{'' if self.y.dtype != torch.int64 else f' with minimum {int(self.y.min())}'}")
        if self.y.dim() == 2 and not self.y.is_floating_point():
            raise ValueError(f"regression targets y of shape [G, T] must be floating point, got {self.y.dtype}")
        num_nodes = int(self.node_ptr[-1])
        if self.x is not None and (not isinstance(self.x, Tensor) or self.x.dim() != 2 or self.x.shape[0] != num_nodes
                                   or not self.x.is_floating_point()):
            raise ValueError(f"x must be a floating-point tensor of shape [{num_nodes}, F], got "
                             f"{getattr(self.x, 'dtype', type(self.x).__name__)} {list(getattr(self.x, 'shape', []))}")
        if self.edge_attr is not None and (not isinstance(self.edge_attr, Tensor) or self.edge_attr.dim() == 0
                                           or self.edge_attr.shape[0] != ei.shape[1]):
            raise ValueError(f"edge_attr must have one row per edge ({ei.shape[1]}), got "
                             f"{list(getattr(self.edge_attr, 'shape', []))}")
        if ei.numel():  # every edge inside its own graph
            sizes = self.graph_sizes()[torch.repeat_interleave(torch.arange(num_graphs), self.edge_counts())]
            bad = (ei < 0).any(0) | (ei >= sizes).any(0)
            if bool(bad.any()):
                at = int(bad.nonzero()[0])
                graph = int(torch.searchsorted(self.edge_ptr, torch.tensor(at), right=True)) - 1
                raise ValueError(f"edge {at} ({ei[0, at].item()} -> {ei[1, at].item()}) of graph {graph} points "
                                 f"outside the graph's {int(sizes[at])} nodes (ids are local: 0..{int(sizes[at]) - 1})")

    # ------------------------------------------------------------------ sizes
    def __len__(self) -> int:
        return self.y.shape[0]

    def graph_sizes(self) -> Tensor:
        """Nodes of each graph, ``[G]``."""
        return self.node_ptr[1:] - self.node_ptr[:-1]

    def edge_counts(self) -> Tensor:
        """Edges of each graph, ``[G]``."""
        return self.edge_ptr[1:] - self.edge_ptr[:-1]

    @property
    def num_graphs(self) -> int:
        return len(self)

    @property
    def num_features(self) -> int:
        """Node feature width (1 when ``x`` is None: models read a constant feature)."""
        return self.x.shape[1] if self.x is not None else 1

    @property
    def num_classes(self) -> int:
        if self.y.dim() != 1:
            raise ValueError(f"{self.name} holds regression targets of shape {list(self.y.shape)}, not classes")
        return int(self.y.max()) + 1 if self.y.numel() else 0

    # ------------------------------------------------------------------ items
    def __getitem__(self, index: int) -> tuple[Graph, Tensor]:
        """Graph ``index`` (``ndata["x"]``, ``edata["edge_attr"]`` where present) and its label."""
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"index a GraphDataset with an int (use subset() for many), got {type(index).__name__}")
        if not -len(self) <= index < len(self):
            raise IndexError(f"graph index {index} out of range for {len(self)} graphs")
        index %= len(self)
        n0, n1 = int(self.node_ptr[index]), int(self.node_ptr[index + 1])
        e0, e1 = int(self.edge_ptr[index]), int(self.edge_ptr[index + 1])
        graph = Graph._trusted(self.edge_index[0, e0:e1], self.edge_index[1, e0:e1], n1 - n0, n1 - n0, False)
        if self.x is not None:
            graph.ndata["x"] = self.x[n0:n1]
        if self.edge_attr is not None:
            graph.edata["edge_attr"] = self.edge_attr[e0:e1]
        return graph, self.y[index]

    def subset(self, ids: Tensor | Sequence[int]) -> "GraphDataset":
        """The graphs ``ids`` (in that order) as a new dataset."""
        ids = check_graph_ids(ids, len(self))
        edge_index, node_ptr, edge_ptr, node_pos, edge_pos = gather_graphs(self, ids)
        return GraphDataset(self.name, edge_index, node_ptr, edge_ptr, self.y[ids],
                            None if self.x is None else self.x[node_pos],
                            None if self.edge_attr is None else self.edge_attr[edge_pos])

    def share_memory_(self) -> "GraphDataset":
        for value in (self.edge_index, self.node_ptr, self.edge_ptr, self.y, self.x, self.edge_attr):
            if value is not None:
                value.share_memory_()
        return self

    @classmethod
    def from_graphs(cls, graphs: Sequence[Graph], y: Tensor, name: str = "graphs") -> "GraphDataset":
        """Pack homogeneous graphs (node features in ``ndata["x"]``, edge features in
        ``edata["edge_attr"]``, present in all graphs or in none) with their labels ``y``."""
        packed = pack_graphs(graphs)
        return cls(name, packed.edge_index, packed.node_ptr, packed.edge_ptr, torch.as_tensor(y), packed.x,
                   packed.edge_attr)

    def __repr__(self) -> str:
        label = f"num_classes={self.num_classes}" if self.y.dim() == 1 else f"targets={self.y.shape[1]}"
        return (f"GraphDataset({self.name!r}, num_graphs={len(self)}, num_nodes={int(self.node_ptr[-1])}, "
                f"num_edges={self.edge_index.shape[1]}, num_features={self.num_features}, {label})")


def gather_graphs(dataset: GraphDataset, ids: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``(edge_index, node_ptr, edge_ptr, node_positions, edge_positions)`` of graphs ``ids``: the
    edges keep local node ids; the positions index the dataset's node and edge rows."""
    node_counts, node_pos = csr_ranges(dataset.node_ptr, ids)
    edge_counts, edge_pos = csr_ranges(dataset.edge_ptr, ids)
    return dataset.edge_index[:, edge_pos], _offsets(node_counts), _offsets(edge_counts), node_pos, edge_pos


def check_graph_ids(ids, num_graphs: int) -> Tensor:
    """``ids`` as a 1-D int64 tensor of graph indices in ``0..num_graphs-1`` (a bool mask is turned
    into indices)."""
    ids = torch.as_tensor(ids)
    if ids.dtype == torch.bool:
        if ids.shape != (num_graphs,):
            raise ValueError(f"a bool mask of graphs needs {num_graphs} entries, got {list(ids.shape)}")
        ids = ids.nonzero().flatten()
    if ids.dtype.is_floating_point or ids.dim() != 1:
        raise ValueError(f"graph ids must be a 1-D integer tensor, got {ids.dtype} {list(ids.shape)}")
    ids = ids.to(torch.int64)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_graphs):
        bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
        raise ValueError(f"graph id {bad} is outside 0..{num_graphs - 1}")
    return ids


def split_graphs(num_graphs: int, fractions: Sequence[float] = (0.8, 0.1, 0.1), *, seed: int = 0,
                 labels: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Train/validation/test graph ids drawn at random under ``seed``; with ``labels`` the split is
    stratified (each class divided in the same proportions)."""
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(f"fractions must be three non-negative numbers summing to 1, got {tuple(fractions)}")
    generator = torch.Generator().manual_seed(seed)
    groups = [torch.arange(num_graphs)] if labels is None else [
        (labels == c).nonzero().flatten() for c in torch.unique(labels)]
    parts: list[list[Tensor]] = [[], [], []]
    for group in groups:
        group = group[torch.randperm(group.numel(), generator=generator)]
        n_train = round(fractions[0] * group.numel())
        n_val = round(fractions[1] * group.numel())
        for part, piece in zip(parts, (group[:n_train], group[n_train:n_train + n_val], group[n_train + n_val:])):
            part.append(piece)
    return tuple(torch.sort(torch.cat(p)).values for p in parts)
