"""The :class:`HeteroGraph`: typed nodes and canonical relations, each relation a validated :class:`Graph`."""
from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Sequence

import torch
from torch import Tensor

from unigraph.graph import FeatureStore, _as_edge_index, _check_count
from unigraph.graph import Graph as CoreGraph
from unigraph.user_graph import Graph
from unigraph.hetero import convert, homogeneous
from unigraph.hetero.names import Relation, check_relation, check_type_name


def _edge_pair(value: Any, relation: Relation) -> Tensor:
    """``edge_index`` ``[2, E]`` from a tensor/array/list or a DGL-style ``(src, dst)`` pair."""
    if isinstance(value, CoreGraph):
        raise TypeError(f"relation {relation}: give its edges as an edge_index [2, E] or a (src, dst) pair, "
                        "not a Graph (the HeteroGraph builds each relation's Graph with its types' node counts)")
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, Tensor) for v in value):
        src, dst = value
        if src.dim() != 1 or dst.dim() != 1 or src.numel() != dst.numel():
            raise ValueError(f"relation {relation}: a (src, dst) pair needs two 1-D tensors of equal length, "
                             f"got shapes {list(src.shape)} and {list(dst.shape)}")
        if src.dtype != dst.dtype:
            raise TypeError(f"relation {relation}: src and dst have different dtypes ({src.dtype}, {dst.dtype})")
        value = torch.stack([src, dst])
    try:
        return _as_edge_index(value)
    except (TypeError, ValueError) as err:
        raise type(err)(f"relation {relation}: {err}") from None


class _TypedStores(Mapping):
    """Read-only mapping from a node type (or relation) to its :class:`FeatureStore`."""

    def __init__(self, stores: dict, what: str, resolve: Callable[[Any], Any] | None = None):
        self._stores = stores
        self._what = what
        self._resolve = resolve

    def __getitem__(self, key) -> FeatureStore:
        if self._resolve is not None:
            key = self._resolve(key)
        try:
            return self._stores[key]
        except KeyError:
            raise KeyError(f"{self._what}: no {key!r}; valid keys are {list(self._stores)}") from None

    def __iter__(self) -> Iterator:
        return iter(self._stores)

    def __len__(self) -> int:
        return len(self._stores)

    def __repr__(self) -> str:
        return f"{self._what}({ {k: dict((n, tuple(t.shape)) for n, t in v.items()) for k, v in self._stores.items()} })"


class HeteroGraph:
    """A graph with typed nodes and typed edges (PyG's ``HeteroData``, DGL's heterograph).

    Nodes of each type are numbered ``0..num_nodes(type) - 1`` on their own. Edges are grouped in
    canonical relations ``(src_type, name, dst_type)``; each relation is a validated
    :class:`~unigraph.Graph` whose sources are nodes of ``src_type`` and destinations nodes of
    ``dst_type``: a homogeneous graph for a self-relation (``src_type == dst_type``), a bipartite one
    otherwise. Messages flow from source to destination, as in :class:`~unigraph.Graph`.

    Args:
        edges: ``{(src_type, name, dst_type): edge_index}``; an edge index is a ``[2, E]`` integer
            tensor (or array / nested list) or a DGL-style ``(src, dst)`` pair of 1-D tensors.
        num_nodes: ``{node_type: count}``. Types listed here exist even without edges; a type not
            listed gets ``max index + 1`` over every relation it takes part in.

    Node types are numbered in the order of ``num_nodes``, then of their first appearance in
    ``edges``; relations in the order of ``edges`` (:attr:`node_types`, :attr:`relations`). Those
    numbers are the type ids of :meth:`to_homogeneous` and the relation ids of
    :class:`~unigraph.nn.RGCNConv`.

    Every index is checked against its own type's count before anything else, and a wrong one
    raises ``ValueError`` naming the relation, the type, the index and the valid range.

    Features: ``hg.ndata[node_type][key]`` (rows = that type's nodes) and
    ``hg.edata[relation][key]`` (rows = that relation's edges); :meth:`collect` gathers one key of
    every type into a dict (the ``x_dict`` the heterogeneous layers take).

    A sampled *block* (:class:`~unigraph.hetero.HeteroNeighborSampler`) is a HeteroGraph with
    separate source and destination node sets per type (``num_src_nodes(t)``,
    ``num_dst_nodes(t)``), the destinations of each type being the first sources of that type (DGL's
    block convention); its node features are in ``srcdata`` and ``dstdata``.
    """

    def __init__(self, edges: Mapping[Relation, Any], num_nodes: Mapping[str, int] | None = None):
        if not isinstance(edges, Mapping):
            raise TypeError(f"edges must be a dict {{(src_type, name, dst_type): edge_index}}, got {type(edges).__name__}")
        if num_nodes is not None and not isinstance(num_nodes, Mapping):
            raise TypeError(f"num_nodes must be a dict {{node_type: count}}, got {type(num_nodes).__name__}")
        counts: dict[str, int | None] = {}
        for ntype, count in (num_nodes or {}).items():
            check_type_name(ntype, "a node type")
            counts[ntype] = _check_count(f"num_nodes[{ntype!r}]", count)
        parsed: dict[Relation, Tensor] = {}
        for key, value in edges.items():
            relation = check_relation(key)
            parsed[relation] = _edge_pair(value, relation)
        inferred: dict[str, int] = {}
        for (src_type, _, dst_type), edge_index in parsed.items():
            for ntype, row in ((src_type, edge_index[0]), (dst_type, edge_index[1])):
                counts.setdefault(ntype, None)
                if row.numel():
                    inferred[ntype] = max(inferred.get(ntype, 0), int(row.max()) + 1)
        devices = {str(edge_index.device) for edge_index in parsed.values()}
        if len(devices) > 1:
            raise ValueError(f"every relation's edges must be on one device, got {sorted(devices)}; move them with .to()")
        sizes = {ntype: count if count is not None else inferred.get(ntype, 0) for ntype, count in counts.items()}
        graphs = {}
        for relation, edge_index in parsed.items():
            src_type, _, dst_type = relation
            try:
                if src_type == dst_type:
                    graphs[relation] = Graph(edge_index, num_nodes=sizes[src_type])
                else:
                    graphs[relation] = Graph(edge_index, num_src_nodes=sizes[src_type], num_dst_nodes=sizes[dst_type])
            except (TypeError, ValueError) as err:
                raise type(err)(f"relation {relation} (source type {src_type!r} has {sizes[src_type]} nodes, "
                                f"destination type {dst_type!r} has {sizes[dst_type]}): {err}") from None
        self._init(graphs, sizes, sizes, is_block=False)

    def _init(self, graphs: dict[Relation, Graph], num_src: dict[str, int], num_dst: dict[str, int],
              is_block: bool) -> None:
        self._graphs = graphs
        self._num_src = dict(num_src)
        self._num_dst = dict(num_dst)
        self.is_block = is_block
        self._memo: dict[Any, Any] = {}
        self._srcdata = {t: FeatureStore(n, f"srcdata[{t!r}]" if is_block else f"ndata[{t!r}]",
                                         f"source nodes of type {t!r}" if is_block else f"nodes of type {t!r}")
                         for t, n in self._num_src.items()}
        self._dstdata = ({t: FeatureStore(n, f"dstdata[{t!r}]", f"destination nodes of type {t!r}")
                          for t, n in self._num_dst.items()} if is_block else self._srcdata)

    @classmethod
    def _trusted(cls, graphs: dict[Relation, Graph], num_src: dict[str, int], num_dst: dict[str, int] | None = None,
                 ) -> "HeteroGraph":
        """From relation graphs already known to be valid (samplers, transforms). ``num_dst`` given:
        a block."""
        graph = cls.__new__(cls)
        graph._init(graphs, num_src, num_src if num_dst is None else num_dst, is_block=num_dst is not None)
        return graph

    # ------------------------------------------------------------------ types and sizes
    @property
    def node_types(self) -> list[str]:
        return list(self._num_src)

    @property
    def relations(self) -> list[Relation]:
        """The canonical relations ``(src_type, name, dst_type)``, in order (DGL's ``canonical_etypes``)."""
        return list(self._graphs)

    def metadata(self) -> tuple[list[str], list[Relation]]:
        """``(node_types, relations)``, as PyG's ``HeteroData.metadata()``."""
        return self.node_types, self.relations

    def _check_ntype(self, ntype: str) -> str:
        if ntype not in self._num_src:
            raise KeyError(f"no node type {ntype!r}; this graph has {self.node_types}")
        return ntype

    def relation(self, key: Any) -> Relation:
        """The canonical relation for ``key``: the triple itself, or a relation name used once."""
        if isinstance(key, tuple):
            if key not in self._graphs:
                raise KeyError(f"no relation {key!r}; this graph has {self.relations}")
            return key
        if isinstance(key, str):
            found = [r for r in self._graphs if r[1] == key]
            if len(found) == 1:
                return found[0]
            if not found:
                raise KeyError(f"no relation named {key!r}; this graph has {self.relations}")
            raise KeyError(f"the name {key!r} is used by several relations {found}; give the (src, name, dst) triple")
        raise TypeError(f"a relation key is a (src_type, name, dst_type) tuple or a name, got {type(key).__name__}")

    def __getitem__(self, key: Any) -> Graph:
        """The :class:`~unigraph.Graph` of one relation (by triple or unique name)."""
        return self._graphs[self.relation(key)]

    def __contains__(self, key: Any) -> bool:
        return key in self._graphs

    def items(self) -> Iterator[tuple[Relation, Graph]]:
        return iter(self._graphs.items())

    def num_nodes(self, ntype: str | None = None) -> int:
        """Nodes of one type, or of all types together."""
        if self.is_block:
            raise AttributeError("a block has num_src_nodes(type) and num_dst_nodes(type); use those")
        return self._num_src[self._check_ntype(ntype)] if ntype is not None else sum(self._num_src.values())

    def num_src_nodes(self, ntype: str | None = None) -> int:
        return self._num_src[self._check_ntype(ntype)] if ntype is not None else sum(self._num_src.values())

    def num_dst_nodes(self, ntype: str | None = None) -> int:
        return self._num_dst[self._check_ntype(ntype)] if ntype is not None else sum(self._num_dst.values())

    @property
    def num_nodes_dict(self) -> dict[str, int]:
        """``{node_type: count}`` (PyG's ``num_nodes_dict``)."""
        if self.is_block:
            raise AttributeError("a block has num_src_nodes_dict and num_dst_nodes_dict; use those")
        return dict(self._num_src)

    @property
    def num_src_nodes_dict(self) -> dict[str, int]:
        return dict(self._num_src)

    @property
    def num_dst_nodes_dict(self) -> dict[str, int]:
        return dict(self._num_dst)

    def num_edges(self, relation: Any = None) -> int:
        """Edges of one relation, or of all relations together."""
        if relation is not None:
            return self[relation].num_edges
        return sum(g.num_edges for g in self._graphs.values())

    @property
    def device(self) -> torch.device:
        for graph in self._graphs.values():
            return graph.device
        return torch.device("cpu")

    # ------------------------------------------------------------------ features
    @property
    def ndata(self) -> Mapping[str, FeatureStore]:
        """``{node_type: FeatureStore}`` (rows = that type's nodes)."""
        if self.is_block:
            raise AttributeError("a block keeps node features in srcdata and dstdata, not ndata")
        return _TypedStores(self._srcdata, "ndata")

    @property
    def srcdata(self) -> Mapping[str, FeatureStore]:
        return _TypedStores(self._srcdata, "srcdata")

    @property
    def dstdata(self) -> Mapping[str, FeatureStore]:
        return _TypedStores(self._dstdata, "dstdata")

    @property
    def edata(self) -> Mapping[Relation, FeatureStore]:
        """``{relation: FeatureStore}`` (rows = that relation's edges; the relation Graph's ``edata``);
        a relation may be named by its triple or its unique name."""
        return _TypedStores({r: g.edata for r, g in self._graphs.items()}, "edata", self.relation)

    def collect(self, key: str, *, side: str = "src") -> dict[str, Tensor]:
        """``{node_type: feature}`` for every type whose node data holds ``key`` (PyG's ``collect``)."""
        if side not in ("src", "dst"):
            raise ValueError(f"side must be 'src' or 'dst', got {side!r}")
        stores = self._srcdata if side == "src" else self._dstdata
        return {t: store[key] for t, store in stores.items() if key in store}

    # ------------------------------------------------------------------ caches and transforms
    def memo(self, key: Any, build: Callable[[], Any]) -> Any:
        """``build()`` once per ``key``, cached on this graph. The structure of a HeteroGraph never
        changes after construction, so anything derived from it alone may be cached here."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def prepare(self) -> "HeteroGraph":
        """Build every relation graph's cached formats now (see :meth:`unigraph.Graph.prepare`)."""
        for graph in self._graphs.values():
            graph.prepare()
        return self

    def to(self, device: torch.device | str) -> "HeteroGraph":
        """A copy on ``device`` with every feature."""
        graphs = {r: g.to(device) for r, g in self._graphs.items()}
        out = HeteroGraph._trusted(graphs, self._num_src, self._num_dst if self.is_block else None)
        pairs = [(self._srcdata, out._srcdata)] + ([(self._dstdata, out._dstdata)] if self.is_block else [])
        for mine, theirs in pairs:
            for ntype, store in mine.items():
                for key, value in store.items():
                    theirs[ntype][key] = value.to(device)
        return out

    def add_reverse_relations(self, prefix: str = "rev_") -> "HeteroGraph":
        """A copy with, for each relation ``(s, name, d)``, the reverse ``(d, prefix + name, s)``
        (edges flipped, edge features copied; DGL's ``AddReverse``). Node features come along."""
        if self.is_block:
            raise ValueError("add_reverse_relations works on a whole graph, not on a sampled block")
        graphs = {r: g.reverse().reverse() for r, g in self._graphs.items()}  # own copies: edata stores not shared
        for (src_type, name, dst_type), graph in self._graphs.items():
            reverse = (dst_type, prefix + name, src_type)
            if reverse in graphs:
                raise ValueError(f"cannot add {reverse}: the graph already has a relation of that name; "
                                 "choose another prefix")
            graphs[reverse] = graph.reverse()
        out = HeteroGraph._trusted(graphs, self._num_src)
        for ntype, store in self._srcdata.items():
            for key, value in store.items():
                out._srcdata[ntype][key] = value
        return out

    def to_homogeneous(self, node_features: Sequence[str] = (), edge_features: Sequence[str] = ()) -> Graph:
        """One :class:`~unigraph.Graph` over all nodes (type after type) with type ids; see
        :func:`unigraph.hetero.homogeneous.to_homogeneous`."""
        return homogeneous.to_homogeneous(self, node_features, edge_features)

    @classmethod
    def from_homogeneous(cls, graph: Graph, node_types: Sequence[str], relations: Sequence[Relation], *,
                         node_type: Tensor | None = None, edge_type: Tensor | None = None) -> "HeteroGraph":
        """The inverse of :meth:`to_homogeneous` (see :func:`unigraph.hetero.homogeneous.from_homogeneous`;
        ``unigraph.hetero.from_homogeneous`` is this method)."""
        return homogeneous.from_homogeneous(graph, node_types, relations, node_type=node_type, edge_type=edge_type,
                                            cls=cls)

    # The conversions below the class build it through the `cls` they are given (their modules
    # sit below this one and name no HeteroGraph class).
    @classmethod
    def from_pyg(cls, data: Any) -> "HeteroGraph":
        """From a PyG ``HeteroData`` (every node and edge tensor attribute comes along)."""
        return convert.from_pyg(data, cls=cls)

    def to_pyg(self) -> Any:
        """A ``torch_geometric.data.HeteroData`` with every relation and feature."""
        return convert.to_pyg(self)

    @classmethod
    def from_dgl(cls, dgl_graph: Any) -> "HeteroGraph":
        """From a DGL heterograph (node and edge features come along). Needs DGL importable."""
        return convert.from_dgl(dgl_graph, cls=cls)

    def to_dgl(self) -> Any:
        """A DGL heterograph with every relation and feature. Needs DGL importable."""
        return convert.to_dgl(self)

    def __repr__(self) -> str:
        if self.is_block:
            nodes = ", ".join(f"{t}: {self._num_src[t]}->{self._num_dst[t]}" for t in self._num_src)
            kind = "block"
        else:
            nodes = ", ".join(f"{t}: {n}" for t, n in self._num_src.items())
            kind = "graph"
        edges = ", ".join(f"{r}: {g.num_edges}" for r, g in self._graphs.items())
        return f"HeteroGraph({kind}; nodes {{{nodes}}}; edges {{{edges}}})"
