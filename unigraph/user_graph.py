"""``unigraph.Graph``, the class users construct: the core structure plus the methods that need the
layers above it.

:class:`unigraph.graph.Graph` (the core) is a validated edge list with its cached formats and
feature stores; ops, message passing, samplers and datasets take it and build it. The methods here
call *into* those layers, so they cannot live on the core without an import circle (the graph would
import message passing, which imports the ops, which import the graph):

* DGL-style message passing on the stored features: :meth:`Graph.update_all`,
  :meth:`Graph.apply_edges` (:mod:`unigraph.message_passing.dgl_style`);
* conversions from and to PyG, scipy, networkx and DGL (:mod:`unigraph.convert`).

Every graph unigraph hands to a user is of this class: the modules that build graphs for users
(datasets and generators in :mod:`unigraph.data`, samplers and loaders, heterograph relations,
link-prediction loaders, batching, benchmark graph sources, :func:`unigraph.knn_graph`) import it,
so this module imports none of them (``tests/test_import_layers.py`` checks it). Every function of
unigraph takes either class (this one is a subclass), and the core's transforms (``to``,
``reverse``, ``add_self_loops``, ...) keep the class of the graph they start from. Graphs built
inside a layer and never returned (the structure of a PyG-style ``conv(x, edge_index)`` call) stay
core graphs. A core graph built by hand gets these methods with :meth:`Graph.view` (the same
tensors, caches and features, no copy). DGL's whole graph API is one layer higher still, in
:mod:`unigraph.dgl`.
"""
from __future__ import annotations

from typing import Any, Callable

from unigraph import convert
from unigraph.graph import Graph as CoreGraph
from unigraph.message_passing import dgl_style
from unigraph.message_passing.plan import MessagePlan


class Graph(CoreGraph):
    """A :class:`unigraph.graph.Graph` (its arguments, checks and caches) with DGL-style message
    passing and the conversions; see the module docstring."""

    @classmethod
    def view(cls, graph: CoreGraph) -> "Graph":
        """``graph`` as this class: the same index tensors, cached formats and feature stores (a
        feature set on one is seen on the other), with no copy and no check repeated."""
        if not isinstance(graph, CoreGraph):
            raise TypeError(f"view expects a unigraph.graph.Graph, got {type(graph).__name__}")
        if isinstance(graph, cls):
            return graph
        out = cls.__new__(cls)
        out.__dict__ = graph.__dict__  # one state, two faces: caches and features stay shared
        return out

    # ------------------------------------------------------------------ DGL-style message passing
    def update_all(self, message_fn: Any, reduce_fn: Any, update_fn: Callable | None = None) -> MessagePlan:
        """Messages along every edge, reduced into ``dstdata`` (``ndata``), then ``update_fn``, as
        DGL's ``update_all``; built-ins live in :mod:`unigraph.function`. Returns the
        :class:`~unigraph.message_passing.MessagePlan` saying what ran."""
        return dgl_style.update_all(self, message_fn, reduce_fn, update_fn)

    def apply_edges(self, fn: Any) -> MessagePlan:
        """Per-edge features from ``fn`` into ``edata``, as DGL's ``apply_edges``."""
        return dgl_style.apply_edges(self, fn)

    # ------------------------------------------------------------------ conversions
    @classmethod
    def from_pyg(cls, data: Any, num_nodes: int | None = None) -> "Graph":
        """From a PyG ``Data``/``Batch`` (features, labels, masks and edge attributes come along), the
        first graph of a PyG dataset, or a bare ``edge_index``."""
        return convert.from_pyg(data, num_nodes, cls=cls)

    def to_pyg(self) -> Any:
        """A ``torch_geometric.data.Data`` with ``edge_index`` and every node/edge feature."""
        return convert.to_pyg(self)

    @classmethod
    def from_scipy(cls, matrix: Any) -> "Graph":
        """From a scipy sparse matrix: entry ``(i, j)`` is the edge ``i -> j``; its value lands
        in ``edata['weight']``. A non-square matrix gives a bipartite graph."""
        return convert.from_scipy(matrix, cls=cls)

    def to_scipy(self, fmt: str = "coo", weight: str | None = None) -> Any:
        """A scipy sparse matrix with entry ``(src, dst)``; values from ``edata[weight]`` or ones."""
        return convert.to_scipy(self, fmt, weight)

    @classmethod
    def from_networkx(cls, nx_graph: Any) -> "Graph":
        """From a networkx graph; nodes are numbered in ``nx_graph.nodes`` order and an
        undirected graph gets both directions of every edge."""
        return convert.from_networkx(nx_graph, cls=cls)

    def to_networkx(self) -> Any:
        """A ``networkx.MultiDiGraph`` (multi-edges and isolated nodes are kept)."""
        return convert.to_networkx(self)

    @classmethod
    def from_dgl(cls, dgl_graph: Any) -> "Graph":
        """From a DGL graph or block (one relation). Node/edge features are copied along."""
        return convert.from_dgl(dgl_graph, cls=cls)

    def to_dgl(self) -> Any:
        """A ``dgl.DGLGraph`` (or a block for bipartite graphs). Needs DGL importable."""
        return convert.to_dgl(self)
