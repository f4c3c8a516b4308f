"""Layer-wise inference: a model's exact output at chosen nodes without the whole graph in one step.

Full-graph evaluation (``model(graph, x)``) holds every layer's messages for every edge at once;
evaluating seeds on blocks that keep every in-edge holds each seed's whole computation tree,
which on a power-law graph reaches most of the graph from a single hub. Layer-wise inference
(as in DGL's and DistDGL's GraphSAGE examples) computes one layer at a time for every node that
the next layer reads, in batches of destination nodes with **every** in-edge of each::

    h_{l+1}[v] = layer_l(block of v's in-edges, h_l[v and its in-neighbours])      batch by batch

storing ``h_{l+1}`` in a table before the next layer starts. Only the nodes a later layer reads
are computed: the last layer runs at the nodes asked for (``F``), layer ``L-2`` at ``F`` and their
in-neighbours, and so on down (:meth:`LayerSource.plan`); on the benchmark graph (2% of the nodes
evaluated, mean degree 20.5) that is a third of the nodes for a two-layer model. What it holds at a
time: the table of each hidden layer in flight, one row per node computed (the input features are
read where they are), and one batch, at most ``batch_edges`` in-edges (a single node with more
in-edges is a batch of its own). It is exact
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
MIN_BATCH_EDGES = 4096


def sampled_batch_edges(batch_size: int, fanouts) -> int:
    """The most in-edges a sampled training batch of ``batch_size`` seeds can hold with ``fanouts``
    (seeds first; every entry concrete): ``sum_l n_l f_l`` with ``n_0 = batch_size`` and
    ``n_{l+1} = n_l (1 + f_l)``; at least :data:`MIN_BATCH_EDGES`. Layer-wise batches of this many
    in-edges gather about as many rows as a training batch does, so evaluating keeps a trainer's
    memory where training put it."""
    edges, nodes = 0, int(batch_size)
    for fanout in fanouts:
        edges += nodes * int(fanout)
        nodes *= 1 + int(fanout)
    return max(MIN_BATCH_EDGES, edges)


class LayerSource(Protocol):
    """Where layer-wise inference reads the graph and the layers' inputs, and writes their outputs."""

    def in_edges(self, dst: Tensor) -> tuple[Tensor, Tensor]:
        """``(counts, sources)``: every in-edge of each node of ``dst`` (global ids, CSR order)."""

    def plan(self, final_nodes: Tensor, num_layers: int) -> list[Tensor]:
        """``targets[l]`` (``l < L-1``): the nodes at which this process computes layer ``l``'s output
        ``h_{l+1}``: its share of the nodes layer ``l+1`` reads (sorted), given that the last layer
        runs at ``final_nodes``. Also records, per table, the rows it will hold."""

    def prepare(self, widths: list[int], dtype: torch.dtype) -> None:
        """Make room for the outputs of layers ``0 .. L-2`` (``widths[l]`` values per row, a row per
        planned node)."""

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
def layerwise_outputs(model: torch.nn.Module, source: LayerSource, final_nodes: Tensor, *, in_width: int,
                      batch_edges: int = BATCH_EDGES) -> Tensor:
    """The model's output (eval mode) at ``final_nodes``, computed layer by layer (see the module
    docstring). When several processes cooperate each gives its own ``final_nodes`` and computes
    its share of every hidden layer (``source.plan``), reading the others' rows through ``source``.
    Returns ``[len(final_nodes), out]``."""
    check_exact(model)
    was_training = model.training
    model.eval()
    try:
        dtype = next(model.parameters()).dtype
        layers = model_layers(model)
        widths = layer_widths(model, in_width, dtype)
        targets = source.plan(final_nodes, len(layers))
        source.prepare(widths[:-1], dtype)
        outputs: list[Tensor] = []
        for index, layer in enumerate(layers):
            last = index == len(layers) - 1
            dst_all = final_nodes if last else targets[index]
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


def table_rows(ids: Tensor, nodes: Tensor, what: str) -> Tensor:
    """The rows of ``nodes`` in a table holding the (sorted) ``ids``; an id it does not hold is an
    error in the plan, refused rather than read from another node's row."""
    rows = torch.searchsorted(ids, nodes).clamp_max(max(ids.numel() - 1, 0))
    if nodes.numel() and (not ids.numel() or not torch.equal(ids[rows], nodes)):
        missing = nodes[ids[rows] != nodes][0] if ids.numel() else nodes[0]
        raise RuntimeError(f"{what} holds no row of node {int(missing)} (the layer-wise plan missed it)")
    return rows


def reach(source: LayerSource, nodes: Tensor) -> Tensor:
    """``nodes`` and their in-neighbours, sorted and distinct."""
    return torch.unique(torch.cat([nodes, source.in_edges(nodes)[1].to(torch.int64)]))


def source_degrees(source: LayerSource, nodes: Tensor) -> Tensor:
    degrees = getattr(source, "in_degrees", None)
    return degrees(nodes) if degrees is not None else source.in_edges(nodes)[0]


class GraphSource:
    """A graph and its features in this process (``x`` on the graph's nodes); the hidden tables
    are tensors with a row per planned node, made by :meth:`prepare`."""

    def __init__(self, graph: Graph, x: Tensor):
        self.ptr, self.sources, _ = graph.in_csr()
        self.x = x
        self.ids: dict[int, Tensor] = {}
        self.tables: dict[int, Tensor] = {}

    def in_degrees(self, nodes: Tensor) -> Tensor:
        return self.ptr[nodes + 1] - self.ptr[nodes]

    def in_edges(self, dst: Tensor) -> tuple[Tensor, Tensor]:
        counts, positions = csr_ranges(self.ptr, dst)
        return counts, self.sources[positions]

    def plan(self, final_nodes: Tensor, num_layers: int) -> list[Tensor]:
        targets, reads = [None] * (num_layers - 1), final_nodes
        for layer in reversed(range(num_layers - 1)):
            reads = reach(self, reads)
            targets[layer] = self.ids[layer + 1] = reads
        return targets

    def prepare(self, widths: list[int], dtype: torch.dtype) -> None:
        self.tables = {layer + 1: torch.empty(self.ids[layer + 1].numel(), width, dtype=dtype)
                       for layer, width in enumerate(widths)}

    def gather(self, layer: int, ids: Tensor) -> Tensor:
        if layer == 0:
            return self.x[ids]
        return self.tables[layer][table_rows(self.ids[layer], ids, f"table {layer}")]

    def store(self, layer: int, dst: Tensor, rows: Tensor) -> None:
        self.tables[layer][table_rows(self.ids[layer], dst, f"table {layer}")] = rows

    def synchronize(self, layer: int) -> None:
        self.tables.pop(layer - 1, None)  # layer - 1's table is no longer read


def graph_outputs(model: torch.nn.Module, graph: Graph, x: Tensor, nodes: Tensor, *,
                  batch_edges: int = BATCH_EDGES) -> Tensor:
    """:func:`layerwise_outputs` of a graph held in this process, at ``nodes``."""
    return layerwise_outputs(model, GraphSource(graph, x), nodes, in_width=x.shape[1], batch_edges=batch_edges)
