"""Mini-batches of small graphs: one block-diagonal :class:`~unigraph.Graph` plus a batch vector.

Graph ``k`` of a batch keeps its nodes and edges in order; its node ids are shifted by the number
of nodes before it (``ptr[k]``), so no edge joins two graphs and one message-passing call runs on
every graph at once. ``batch[i]`` is the graph of node ``i`` (PyG's ``Batch.batch``); global
pooling reduces over it through :meth:`GraphBatch.readout`, a bipartite graph from the nodes to
the graphs, so pooling is one g-SpMM on the same kernels as the layers.

* :func:`collate` - graphs (or ``(graph, label)`` pairs) into a :class:`GraphBatch` (``dgl.batch``,
  PyG's ``Batch.from_data_list``).
* :func:`collate_dataset` - graphs ``ids`` of a :class:`~unigraph.data.GraphDataset` with a few
  vectorised gathers (what :class:`~unigraph.sampling.GraphLoader` uses).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import torch
from torch import Tensor

from unigraph.data.graph_dataset import GraphDataset, check_graph_ids, gather_graphs
from unigraph.data.packing import EDGE_KEY, NODE_KEY, PackedGraphs, pack_graphs
from unigraph.user_graph import Graph
from unigraph.sampling.batch import _from_wire, _to_wire


@dataclasses.dataclass
class GraphBatch:
    """Graphs batched into one block-diagonal graph.

    Fields:
        graph: the homogeneous :class:`~unigraph.Graph` of every graph's nodes and edges, with node
            features in ``ndata["x"]`` and edge features in ``edata["edge_attr"]`` where present.
        batch: ``[N]`` int64, the graph of each node (sorted: graph 0's nodes first).
        ptr: ``[num_graphs + 1]``: graph ``k`` has nodes ``ptr[k]:ptr[k+1]``.
        y: the graphs' labels (``[num_graphs]`` or ``[num_graphs, T]``), or ``None``.

    PyG-style code reads ``batch.x``, ``batch.edge_index``, ``batch.batch``, ``batch.y``,
    ``batch.num_graphs``; DGL-style code unpacks ``for graph, labels in loader``.
    Empty graphs (no nodes) are allowed: pooling gives them zeros.
    """

    graph: Graph
    batch: Tensor
    ptr: Tensor
    y: Tensor | None = None

    @property
    def num_graphs(self) -> int:
        return self.ptr.numel() - 1

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def x(self) -> Tensor | None:
        return self.graph.ndata[NODE_KEY] if NODE_KEY in self.graph.ndata else None

    @property
    def edge_attr(self) -> Tensor | None:
        return self.graph.edata[EDGE_KEY] if EDGE_KEY in self.graph.edata else None

    @property
    def edge_index(self) -> Tensor:
        return self.graph.edge_index

    def graph_sizes(self) -> Tensor:
        return self.ptr[1:] - self.ptr[:-1]

    def readout(self) -> Graph:
        """The bipartite graph node ``i`` -> graph ``batch[i]`` (built once, cached): pooling is a
        reduction over its in-edges, so an empty graph is a destination without in-edges."""
        if not hasattr(self, "_readout"):
            self._readout = readout_graph(self.ptr)
        return self._readout

    def __iter__(self):
        """DGL's unpacking: ``graph, labels = batch``."""
        return iter((self.graph, self.y))

    def to(self, device: torch.device | str) -> "GraphBatch":
        return GraphBatch(self.graph.to(device), self.batch.to(device), self.ptr.to(device),
                          None if self.y is None else self.y.to(device))

    def __getstate__(self) -> dict:  # compact across process pipes: the arrays, not the Graph object
        parts = (self.graph.src, self.graph.dst, self.ptr, self.batch, self.y, self.x, self.edge_attr)
        return {"parts": _to_wire(parts)}

    def __setstate__(self, state: dict) -> None:
        src, dst, ptr, batch, y, x, edge_attr = _from_wire(state["parts"])
        graph = Graph._trusted(src, dst, batch.numel(), batch.numel(), False)
        _attach(graph, x, edge_attr)
        self.__dict__.update(graph=graph, batch=batch, ptr=ptr, y=y)


def readout_graph(ptr: Tensor) -> Graph:
    """Nodes ``ptr[k]:ptr[k+1]`` -> graph ``k``, as a bipartite graph with its in-CSR ready."""
    num_nodes = int(ptr[-1])
    return Graph.from_csr(ptr, torch.arange(num_nodes, device=ptr.device), num_nodes, bipartite=True, validate=False)


def _attach(graph: Graph, x: Tensor | None, edge_attr: Tensor | None) -> None:
    if x is not None:
        graph.ndata[NODE_KEY] = x
    if edge_attr is not None:
        graph.edata[EDGE_KEY] = edge_attr


def batch_from_packed(packed: PackedGraphs, y: Tensor | None) -> GraphBatch:
    """Shift each graph's local node ids by the nodes before it and build the batch."""
    num_graphs = packed.node_ptr.numel() - 1
    graphs = torch.arange(num_graphs, device=packed.node_ptr.device)
    node_counts = packed.node_ptr[1:] - packed.node_ptr[:-1]
    edge_counts = packed.edge_ptr[1:] - packed.edge_ptr[:-1]
    num_nodes, num_edges = int(packed.node_ptr[-1]), packed.edge_index.shape[1]
    shift = packed.node_ptr[torch.repeat_interleave(graphs, edge_counts, output_size=num_edges)]
    graph = Graph._trusted(packed.edge_index[0] + shift, packed.edge_index[1] + shift, num_nodes, num_nodes, False)
    _attach(graph, packed.x, packed.edge_attr)
    batch = torch.repeat_interleave(graphs, node_counts, output_size=num_nodes)
    return GraphBatch(graph, batch, packed.node_ptr, y)


def collate(items: Sequence[Any]) -> GraphBatch:
    """Batch graphs, or ``(graph, label)`` pairs (labels stacked into ``y``)."""
    items = list(items)
    if not items:
        raise ValueError("collate needs at least one graph")
    pairs = isinstance(items[0], tuple)
    if pairs and any(not isinstance(item, tuple) or len(item) != 2 for item in items):
        raise TypeError("collate takes graphs or (graph, label) pairs, not a mix")
    graphs = [item[0] for item in items] if pairs else items
    y = torch.stack([torch.as_tensor(item[1]) for item in items]) if pairs else None
    return batch_from_packed(pack_graphs(graphs), y)


def collate_dataset(dataset: GraphDataset, ids) -> GraphBatch:
    """Batch graphs ``ids`` of ``dataset`` (vectorised: no per-graph Python work)."""
    ids = check_graph_ids(ids, len(dataset))
    edge_index, node_ptr, edge_ptr, node_pos, edge_pos = gather_graphs(dataset, ids)
    packed = PackedGraphs(edge_index, node_ptr, edge_ptr, None if dataset.x is None else dataset.x[node_pos],
                          None if dataset.edge_attr is None else dataset.edge_attr[edge_pos])
    return batch_from_packed(packed, dataset.y[ids])
