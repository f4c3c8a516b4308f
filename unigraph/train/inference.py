"""Layer-wise inference: a model's exact output at chosen nodes without the whole graph in one step.

Full-graph evaluation (``model(graph, x)``) holds every layer's messages for every edge at once;
evaluating seeds on blocks that keep every in-edge holds each seed's whole computation tree,
which on a power-law graph reaches most of the graph from a single hub. Layer-wise inference
(as in DGL's and DistDGL's GraphSAGE examples) computes one layer at a time for every node that
the next layer reads, in batches of destination nodes with **every** in-edge of each::

    h_{l+1}[v] = layer_l(block of v's in-edges, h_l[v and its in-neighbours])      batch by batch

storing ``h_{l+1}`` in a table (one row per node) before the next layer starts; the last layer
runs only at the nodes asked for. What it holds at a time: one table of the widest hidden layer
per layer in flight (the input features are read where they are) and one batch, at most
``batch_edges`` in-edges (a single node with more in-edges is a batch of its own). It is exact
for layers whose output at a node depends only on that node's in-edges and the nodes'
representations (GraphSAGE, GAT, GIN's convolution; GIN's batch norm in eval mode); GCN on a block
normalizes by the sources' out-degree within the block (DGL's convention), so GCN differs from
its full-graph output, as it does on sampled blocks.

Where the rows come from is a :class:`LayerSource`: :class:`GraphSource` for a graph in this
process (the single-process :class:`~unigraph.train.Trainer`), and the partitioned trainers' source
(:mod:`unigraph.distributed.train`), whose tables live in each machine's shared memory and whose
remote rows come from their owners; both run :func:`layerwise_outputs`.
"""
from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.models import GAT, GIN, GraphSAGE
from unigraph.sampling.batch import block_from_csr
from unigraph.sampling.csr_view import csr_ranges, relabel_sorted
from unigraph.train.layers import model_layers

BATCH_EDGES = 1 << 16  # in-edges per batch: bounds a batch's messages (65536 x hidden width)


class LayerSource(Protocol):
    """Where layer-wise inference reads the graph and the layers' inputs, and writes their outputs."""

    def in_edges(self, dst: Tensor) -> tuple[Tensor, Tensor]:
        """``(counts, sources)``: every in-edge of each node of ``dst`` (global ids, CSR order)."""

    def prepare(self, widths: list[int], dtype: torch.dtype) -> None:
        """Make room for the outputs of layers ``0 .. L-2`` (``widths[l]`` values per node)."""

    def gather(self, layer: int, ids: Tensor) -> Tensor:
        """Rows of ``h_layer`` (layer 0: the input features) for ``ids``."""

    def store(self, layer: int, dst: Tensor, rows: Tensor) -> None:
        """Write ``h_layer`` rows of ``dst`` (``layer >= 1``)."""

    def synchronize(self, layer: int) -> None:
        """Return once ``h_layer`` is complete everywhere (a barrier across processes; a no-op in one)."""


def edge_batches(degrees: Tensor, batch_edges: int) -> list[tuple[int, int]]:
    """``[(start, stop)]``: consecutive runs of nodes with at most ``batch_edges`` in-edges together
    (a node with more forms a run alone)."""
    if isinstance(batch_edges, bool) or not isinstance(batch_edges, int) or batch_edges < 1:
        raise ValueError(f"batch_edges must be an int >= 1, got {batch_edges!r}")
    runs, start, base = [], 0, 0
    ends = torch.cumsum(degrees, 0).tolist()
    for i, end in enumerate(ends):
        if i > start and end - base > batch_edges:
            runs.append((start, i))
            start, base = i, ends[i - 1]
    if ends:
        runs.append((start, len(ends)))
    return runs


def check_exact(model: torch.nn.Module) -> None:
    """Refuse a model whose layer-wise output would differ from its full-graph output."""
    if not isinstance(model, (GraphSAGE, GAT, GIN)):
        raise ValueError(f"layer-wise evaluation is exact for GraphSAGE, GAT and GIN only, not {type(model).__name__} "
                         "(GCN normalizes by degrees within each batch's block): evaluate it on the whole graph "
                         "(evaluation='full') or on sampled blocks (eval fanouts)")


def layer_widths(model: torch.nn.Module, in_width: int, dtype: torch.dtype) -> list[int]:
    """Output width of every layer, found by running each on one node with no edge."""
    widths, width = [], in_width
    empty = Graph.from_csr(torch.zeros(2, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), 1, bipartite=True)
    with torch.no_grad():
        for layer in model_layers(model):
            width = layer(empty, torch.zeros(1, width, dtype=dtype)).shape[-1]
            widths.append(int(width))
    return widths


@torch.no_grad()
def layerwise_outputs(model: torch.nn.Module, source: LayerSource, hidden_nodes: Tensor, final_nodes: Tensor, *,
                      in_width: int, batch_edges: int = BATCH_EDGES) -> Tensor:
    """The model's output (eval mode) at ``final_nodes``, computed layer by layer.

    This process computes the hidden layers at ``hidden_nodes`` (all nodes in one process; its
    share of them when several processes cooperate, each then reading the others' rows through
    ``source``) and the last layer at ``final_nodes``. Returns ``[len(final_nodes), out]``.
    """
    check_exact(model)
    was_training = model.training
    model.eval()
    try:
        dtype = next(model.parameters()).dtype
        layers = model_layers(model)
        widths = layer_widths(model, in_width, dtype)
        source.prepare(widths[:-1], dtype)
        outputs: list[Tensor] = []
        for index, layer in enumerate(layers):
            last = index == len(layers) - 1
            dst_all = final_nodes if last else hidden_nodes
            degrees = source_degrees(source, dst_all)
            for start, stop in edge_batches(degrees, batch_edges):
                dst = dst_all[start:stop]
                counts, sources = source.in_edges(dst)
                local, new = relabel_sorted(dst, sources)
                indptr = torch.zeros(dst.numel() + 1, dtype=torch.int64)
                torch.cumsum(counts, 0, out=indptr[1:])
                block = block_from_csr(indptr, local, dst.numel() + new.numel(), None)
                h = source.gather(index, torch.cat([dst, new])).to(dtype)
                out = layer(block, h)
                if last:
                    outputs.append(out)
                else:
                    source.store(index + 1, dst, out)
            if not last:
                source.synchronize(index + 1)
        return torch.cat(outputs) if outputs else torch.zeros(0, widths[-1], dtype=dtype)
    finally:
        model.train(was_training)


def source_degrees(source: LayerSource, nodes: Tensor) -> Tensor:
    degrees = getattr(source, "in_degrees", None)
    return degrees(nodes) if degrees is not None else source.in_edges(nodes)[0]


class GraphSource:
    """A graph and its features in this process (``x`` on the graph's nodes); the hidden tables
    are ``num_nodes x width`` tensors made by :meth:`prepare`."""

    def __init__(self, graph: Graph, x: Tensor):
        self.ptr, self.sources, _ = graph.in_csr()
        self.x = x
        self.tables: dict[int, Tensor] = {}
        self.num_nodes = graph.num_nodes

    def in_degrees(self, nodes: Tensor) -> Tensor:
        return self.ptr[nodes + 1] - self.ptr[nodes]

    def in_edges(self, dst: Tensor) -> tuple[Tensor, Tensor]:
        counts, positions = csr_ranges(self.ptr, dst)
        return counts, self.sources[positions]

    def prepare(self, widths: list[int], dtype: torch.dtype) -> None:
        self.tables = {layer + 1: torch.empty(self.num_nodes, width, dtype=dtype) for layer, width in enumerate(widths)}

    def gather(self, layer: int, ids: Tensor) -> Tensor:
        return self.x[ids] if layer == 0 else self.tables[layer][ids]

    def store(self, layer: int, dst: Tensor, rows: Tensor) -> None:
        self.tables[layer][dst] = rows

    def synchronize(self, layer: int) -> None:
        self.tables.pop(layer - 1, None)  # layer - 1's table is no longer read


def graph_outputs(model: torch.nn.Module, graph: Graph, x: Tensor, nodes: Tensor, *,
                  batch_edges: int = BATCH_EDGES) -> Tensor:
    """:func:`layerwise_outputs` of a graph held in this process, at ``nodes``."""
    return layerwise_outputs(model, GraphSource(graph, x), torch.arange(graph.num_nodes), nodes,
                             in_width=x.shape[1], batch_edges=batch_edges)
