"""DGL's graph class on unigraph: :class:`DGLGraph`, one relation (a homogeneous graph, a
bipartite graph between two node types, or a sampled block).

A ``DGLGraph`` *is* a :class:`unigraph.Graph` (a subclass): every unigraph op, layer and sampler
takes it as it is, with its cached formats. What it adds is DGL's API over the same structure:
type names, ``idtype``, the views ``g.nodes[ids].data`` / ``g.edges[u, v].data`` with DGL's
initializers, the structure queries (``edge_ids``, ``in_edges``, ``successors``, ...), the
mutations DGL performs in place (``add_nodes``, ``add_edges``, ``remove_edges``, ``remove_nodes``:
they rebuild the validated structure and drop every cached format, so nothing computed for the old
edges survives) and DGL's message passing entry points (:mod:`unigraph.dgl.messages`). Several
relations are a :class:`~unigraph.dgl.heterograph.DGLHeteroGraph`. What both classes share
through their public face (subgraphs, ``metagraph``, ``to_networkx``, ``inc``, ``filter_nodes``,
...) is the mixin :class:`~unigraph.dgl.common.GraphAPI`. A bipartite graph mutates per node type
and keeps a batch's counts by type, as a heterograph does. ``formats()`` keeps DGL's sparse-format
bookkeeping (what it reports and refuses), not a restriction of what unigraph builds.

Ids: unigraph keeps every index in int64. ``idtype`` (``torch.int64`` or ``torch.int32``) is the
dtype DGL would hand back: ids this class returns (``edges()``, ``nodes()``, ``edge_ids``, ...)
are cast to it; ids it receives may have any integer dtype.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
from torch import Tensor

from unigraph import graph_compat
from unigraph.dgl import adjacency, messages
from unigraph.dgl.base import CROSS_REDUCERS, DEFAULT_ETYPE, DEFAULT_NTYPE, EID, NID, DGLError, is_all
from unigraph.dgl.common import GraphAPI
from unigraph.dgl.init import zero_initializer
from unigraph.dgl.subgraph import TypedParts
from unigraph.dgl.views import EdgeView, TypedCount, TypedData, as_ids
from unigraph.graph import FeatureStore
from unigraph.graph import Graph as CoreGraph
from unigraph.user_graph import Graph

IDTYPES = (torch.int32, torch.int64)
FORMATS = ("coo", "csr", "csc")


def check_idtype(idtype: Any) -> torch.dtype:
    if idtype not in IDTYPES:
        raise DGLError(f"idtype must be torch.int32 or torch.int64, got {idtype!r}")
    return idtype


def _count(value: int, of: Callable[[Any], int], keyword: str = "ntype") -> int:
    return value if torch.compiler.is_compiling() else TypedCount(value, of, keyword)


class DGLGraph(GraphAPI, Graph):
    """One relation with DGL's API (see the module docstring). Build it with
    :func:`unigraph.dgl.graph`, :func:`unigraph.dgl.heterograph` (one relation),
    :func:`unigraph.dgl.create_block` or :func:`unigraph.dgl.to_block`; the constructor is
    :class:`unigraph.Graph`'s (``edge_index``, ``num_nodes`` / ``num_src_nodes``, ``num_dst_nodes``)."""

    # ------------------------------------------------------------------ construction
    def _init_unchecked(self, src: Tensor, dst: Tensor, num_src: int, num_dst: int, bipartite: bool) -> None:
        super()._init_unchecked(src, dst, num_src, num_dst, bipartite)
        self._set_dgl_defaults()

    def _set_dgl_defaults(self) -> None:
        self._srctype = self._dsttype = DEFAULT_NTYPE
        self._etype = DEFAULT_ETYPE
        self._block = self.is_bipartite  # a bipartite graph is a block unless typed as two node types
        self._src_first = False   # ntypes lists the source type first (dgl.block_to_graph), not sorted
        self._idtype = torch.int64
        self._initializers: dict[str, dict[Any, Callable]] = {"node": {}, "edge": {}}
        self._batch_num_nodes: Tensor | None = None
        self._batch_num_edges: Tensor | None = None
        self._formats_allowed: tuple[str, ...] = FORMATS   # DGL's sparse-format bookkeeping (see formats)
        self._formats_made: tuple[str, ...] = ("coo",)
        self._given_format: str | None = None   # built from this CSR/CSC with edge ids in slot order (adj_tensors)

    @classmethod
    def view(cls, graph: CoreGraph) -> "DGLGraph":
        """A core graph (a sampled block, a dataset's graph) as a DGLGraph: the same structure,
        caches and feature stores, no copy. The DGL attributes start at their defaults (a bipartite
        graph is a block)."""
        if not isinstance(graph, CoreGraph):
            raise TypeError(f"view expects a unigraph Graph, got {type(graph).__name__}")
        if isinstance(graph, cls):
            return graph
        out = cls.__new__(cls)
        out.__dict__ = dict(graph.__dict__)  # own DGL attributes; structure, caches and stores are shared
        out._set_dgl_defaults()
        return out

    def _with_types(self, srctype: str, etype: str, dsttype: str, block: bool | None = None) -> "DGLGraph":
        self._srctype, self._etype, self._dsttype = srctype, etype, dsttype
        if block is not None:
            self._block = block
        return self

    def _carry(self, other: "DGLGraph") -> "DGLGraph":
        """Give ``other`` (a graph derived from this one) this graph's types, idtype and initializers."""
        other._srctype, other._etype, other._dsttype = self._srctype, self._etype, self._dsttype
        other._block, other._idtype, other._src_first = self._block, self._idtype, self._src_first
        other._initializers = {kind: dict(inits) for kind, inits in self._initializers.items()}
        return other

    def _derived(self, src, dst, *, edata=None, num_src=None, num_dst=None, keep_ndata=True) -> "DGLGraph":
        return self._carry(super()._derived(src, dst, edata=edata, num_src=num_src, num_dst=num_dst,
                                            keep_ndata=keep_ndata))

    def to(self, device, **kwargs) -> "DGLGraph":
        """A copy on ``device`` (features and built formats move along)."""
        out = self._carry(super().to(device))
        out._batch_num_nodes, out._batch_num_edges = self._moved_batch(device)
        return out

    def _moved_batch(self, device):
        move = (lambda t: t if t is None or isinstance(t, dict) else t.to(device))   # (dicts stay on the CPU)
        return move(self._batch_num_nodes), move(self._batch_num_edges)

    def _shallow(self) -> "DGLGraph":
        """The same structure and caches with new feature stores holding the same tensors
        (``local_var``; what a message pass writes into before the results are placed)."""
        out = type(self).__new__(type(self))
        out.__dict__ = dict(self.__dict__)
        out.srcdata = self.srcdata.copy()
        out.dstdata = self.dstdata.copy() if self.is_bipartite else out.srcdata
        out.edata = self.edata.copy()
        out._initializers = {kind: dict(inits) for kind, inits in self._initializers.items()}
        return out

    def _restructure(self, src: Tensor, dst: Tensor, num_src: int, num_dst: int, node_rows: dict, edge_rows) -> None:
        """Replace the edges in place (DGL's mutations). Every cached format and guard is dropped
        (the core's initialization runs again); features are re-laid by ``node_rows`` (per store
        name, a function of a tensor and the store's new row count) and ``edge_rows``."""
        stores = {"srcdata": self.srcdata, "dstdata": self.dstdata, "edata": self.edata}
        extras = {k: v for k, v in self.__dict__.items() if k.startswith("_") and k in _EXTRAS}
        CoreGraph._init_unchecked(self, src, dst, num_src, num_dst, self.is_bipartite)
        self.__dict__.update(extras)
        # DGL rebuilds a mutated relation from its COO with every format allowed
        self._formats_allowed, self._formats_made, self._given_format = FORMATS, ("coo",), None
        for name in ("srcdata", "dstdata") if self.is_bipartite else ("srcdata",):
            new = getattr(self, name)
            rows = node_rows.get(name)
            for key, value in stores[name].items():
                new[key] = rows(key, value, new) if rows is not None else value
        for key, value in stores["edata"].items():
            self.edata[key] = edge_rows(key, value)

    # ------------------------------------------------------------------ types
    @property
    def is_block(self) -> bool:
        return self._block

    @property
    def ntypes(self) -> list[str]:
        if self._block:   # DGL lists a block's source type, then its destination type (['_N', '_N'])
            return [self._srctype, self._dsttype]
        if self._srctype == self._dsttype:
            return [self._srctype]
        return [self._srctype, self._dsttype] if self._src_first else sorted([self._srctype, self._dsttype])

    @property
    def srctypes(self) -> list[str]:
        return [self._srctype]

    @property
    def dsttypes(self) -> list[str]:
        return [self._dsttype]

    @property
    def etypes(self) -> list[str]:
        return [self._etype]

    @property
    def canonical_etypes(self) -> list[tuple[str, str, str]]:
        return [(self._srctype, self._etype, self._dsttype)]

    def to_canonical_etype(self, etype: Any) -> tuple[str, str, str]:
        self._check_etype(etype)
        return self.canonical_etypes[0]

    def get_ntype_id(self, ntype: Any) -> int:
        return 0 if ntype is None else self.ntypes.index(self._check_ntype(ntype))

    def get_etype_id(self, etype: Any) -> int:
        self._check_etype(etype)
        return 0

    def _check_ntype(self, ntype: Any) -> str:
        ntype, _ = self._sided(ntype, "node")
        if ntype not in (self._srctype, self._dsttype):
            raise DGLError(f"node type {ntype!r} does not exist; this graph has {self.ntypes}")
        return ntype

    def _sided(self, ntype: Any, side: str) -> tuple[Any, str]:
        """DGL's ``'SRC/t'`` / ``'DST/t'`` names: ``t`` on the source / destination side."""
        if isinstance(ntype, str) and ntype[:4] in ("SRC/", "DST/") and ntype not in (self._srctype, self._dsttype):
            return ntype[4:], ("src" if ntype[:4] == "SRC/" else "dst")
        return ntype, side

    def _check_etype(self, etype: Any) -> None:
        if etype is None or etype == self._etype or etype == self.canonical_etypes[0]:
            return
        raise DGLError(f"edge type {etype!r} does not exist; this graph has {self.canonical_etypes}")

    def __getitem__(self, etype: Any) -> "DGLGraph":
        """The relation ``etype`` names (a name, the canonical triple, or a triple with ``:``
        parts that matches it): this graph itself, as DGL's one-relation slice shares everything."""
        if isinstance(etype, tuple) and len(etype) == 3 and any(isinstance(part, slice) for part in etype):
            if not all(part == slice(None) or part == name for part, name in zip(etype, self.canonical_etypes[0])):
                raise DGLError(f"no relation matches {etype!r}; this graph has {self.canonical_etypes}")
            return self
        return self._relation_of(etype)

    # ------------------------------------------------------------------ typed parts (unigraph.dgl.subgraph)
    def _typed_parts(self) -> TypedParts:
        """This graph as typed parts: its node type(s) with counts and stores, its one relation."""
        (cet,) = self.canonical_etypes
        if not self.is_bipartite:
            return TypedParts({cet[0]: self._num_src}, {cet[0]: self.srcdata}, {cet: self})
        sides = {cet[0]: (self._num_src, self.srcdata), cet[2]: (self._num_dst, self.dstdata)}
        return TypedParts({t: sides[t][0] for t in self.ntypes}, {t: sides[t][1] for t in self.ntypes}, {cet: self})

    def _assembled(self, counts: Mapping[str, int], edges: Mapping) -> "DGLGraph":
        """A graph of this one's types, id type and initializers with the edges of ``edges``
        ({canonical etype: (src, dst)}, valid ids) over ``counts`` nodes per type; no features."""
        ((cet, (src, dst)),) = edges.items()
        return self._carry(DGLGraph._trusted(src, dst, counts[cet[0]], counts[cet[2]], self.is_bipartite))

    def _with_relations(self, cets: list) -> "DGLGraph":
        """The relations ``cets`` sharing this graph's features: its only relation, this graph's twin."""
        out = type(self).__new__(type(self))
        out.__dict__ = dict(self.__dict__)   # the same structure and feature stores
        return out

    def _relation_of(self, etype: Any) -> "DGLGraph":
        """The relation ``etype`` names: this graph (checked)."""
        self._check_etype(etype)
        return self

    def _is_homogeneous(self) -> bool:
        return not self.is_bipartite

    # ------------------------------------------------------------------ ids
    @property
    def idtype(self) -> torch.dtype:
        return self._idtype

    def astype(self, idtype: torch.dtype) -> "DGLGraph":
        """The same graph with ids handed back as ``idtype`` (structure and features shared)."""
        out = self._shallow()
        out._idtype = check_idtype(idtype)
        return out

    def int(self) -> "DGLGraph":
        return self.astype(torch.int32)

    def long(self) -> "DGLGraph":
        return self.astype(torch.int64)

    def _out_ids(self, ids: Tensor) -> Tensor:
        return ids.to(self._idtype)

    # ------------------------------------------------------------------ counts
    def _num_nodes_of(self, ntype: Any, side: str = "node") -> int:
        ntype, side = self._sided(ntype, side)
        if side == "src" or (side == "node" and ntype is not None and ntype == self._srctype and not self._block):
            if ntype is not None and ntype != self._srctype:
                self._check_ntype(ntype)
                raise DGLError(f"{ntype!r} is not a source node type here")
            return self._num_src
        if side == "dst" or (side == "node" and ntype is not None and ntype == self._dsttype and not self._block):
            if ntype is not None and ntype != self._dsttype:
                raise DGLError(f"{ntype!r} is not a destination node type here")
            return self._num_dst
        if ntype is not None:
            self._check_ntype(ntype)
        if not self.is_bipartite:
            return self._num_src
        if self._block and ntype is not None:
            raise DGLError("a block has a source and a destination node set of each type: use num_src_nodes(ntype) "
                           "or num_dst_nodes(ntype)")
        return self._num_src + self._num_dst

    def _num_edges_of(self, etype: Any) -> int:
        self._check_etype(etype)
        return self._src.numel()

    @property
    def num_nodes(self) -> int:
        """Nodes of every type together (``g.num_nodes()``), or of one (``g.num_nodes('user')``)."""
        return _count(self._num_nodes_of(None), self._num_nodes_of)

    @property
    def num_src_nodes(self) -> int:
        return _count(self._num_src, lambda t: self._num_nodes_of(t, "src"))

    @property
    def num_dst_nodes(self) -> int:
        return _count(self._num_dst, lambda t: self._num_nodes_of(t, "dst"))

    @property
    def num_edges(self) -> int:
        return _count(self._src.numel(), self._num_edges_of, "etype")

    def number_of_nodes(self, ntype: Any = None) -> int:
        return self._num_nodes_of(ntype)

    def number_of_edges(self, etype: Any = None) -> int:
        return self._num_edges_of(etype)

    def number_of_src_nodes(self, ntype: Any = None) -> int:
        return self._num_nodes_of(ntype, "src")

    def number_of_dst_nodes(self, ntype: Any = None) -> int:
        return self._num_nodes_of(ntype, "dst")

    # ------------------------------------------------------------------ features
    def _node_store(self, ntype: Any, side: str = "node") -> FeatureStore:
        ntype, side = self._sided(ntype, side)
        if side == "src":
            if ntype is not None and ntype != self._srctype:
                raise DGLError(f"{ntype!r} is not a source node type of this graph ({self._srctype!r})")
            return self.srcdata
        if side == "dst":
            if ntype is not None and ntype != self._dsttype:
                raise DGLError(f"{ntype!r} is not a destination node type of this graph ({self._dsttype!r})")
            return self.dstdata
        if not self.is_bipartite:
            if ntype is not None:
                self._check_ntype(ntype)
            return self.srcdata
        if self._block:
            raise DGLError("a block has source and destination node sets: use srcnodes[...] / dstnodes[...] "
                           "(srcdata / dstdata)")
        if ntype is None:
            raise DGLError(f"node type name must be given: this graph has node types {self.ntypes}")
        return self.srcdata if self._check_ntype(ntype) == self._srctype else self.dstdata

    def _edge_store(self, etype: Any) -> FeatureStore:
        self._check_etype(etype)
        return self.edata

    @property
    def ndata(self):
        """Node features: the store of a homogeneous graph; ``{ntype: tensor}`` per key on a
        bipartite graph between two types (DGL's dict form)."""
        if not self.is_bipartite:
            return self.srcdata
        if self._block:
            raise DGLError("a block keeps node features in srcdata and dstdata, not ndata")
        return TypedData({self._srctype: self.srcdata, self._dsttype: self.dstdata}, "ndata")

    @property
    def edges(self) -> EdgeView:
        return EdgeView(self)

    def set_n_initializer(self, initializer: Callable, field: str | None = None, ntype: Any = None) -> None:
        """What fills node rows that a partial write or a message pass did not reach
        (``initializer(shape, dtype, device, id_range)``; default zeros), for ``field`` or all."""
        if ntype is not None:
            self._check_ntype(ntype)
        self._initializers["node"][field] = initializer

    def set_e_initializer(self, initializer: Callable, field: str | None = None, etype: Any = None) -> None:
        self._check_etype(etype)
        self._initializers["edge"][field] = initializer

    def _initial(self, kind: str, key: str, shape: tuple, dtype: torch.dtype, device: torch.device) -> Tensor:
        inits = self._initializers[kind]
        init = inits.get(key, inits.get(None, zero_initializer))
        value = init(shape, dtype, device, slice(0, shape[0]))
        if not isinstance(value, Tensor) or tuple(value.shape) != tuple(shape):
            raise DGLError(f"the {kind} initializer for {key!r} returned {getattr(value, 'shape', type(value))}, "
                           f"expected shape {tuple(shape)}")
        return value.to(dtype=dtype, device=device)

    def _write_rows(self, store: FeatureStore, key: str, ids: Tensor, value: Tensor, kind: str, num_rows: int) -> None:
        """``store[key][ids] = value`` out of place; a new ``key`` starts from the initializer."""
        if not isinstance(value, Tensor):
            raise DGLError(f"features must be tensors, got {type(value).__name__} for {key!r}")
        if value.dim() == 0 or value.shape[0] != ids.numel():
            raise DGLError(f"{key!r}: {ids.numel()} rows are written but the value has shape {list(value.shape)}")
        if key in store:
            full = store[key]
            if tuple(full.shape[1:]) != tuple(value.shape[1:]):
                raise DGLError(f"{key!r} has rows of shape {list(full.shape[1:])}; cannot write rows of shape "
                               f"{list(value.shape[1:])}")
        else:
            full = self._initial(kind, key, (num_rows,) + tuple(value.shape[1:]), value.dtype, value.device)
        store[key] = full.index_put((ids.to(full.device),), value.to(full.dtype))

    def local_var(self) -> "DGLGraph":
        """A graph sharing this one's structure whose feature changes stay on it (DGL's
        ``local_var``): adding, replacing or writing rows of a feature on the result leaves this
        graph's features as they were."""
        return self._shallow()

    # ------------------------------------------------------------------ structure queries
    def all_edges(self, form: str = "uv", order: str = "eid", etype: Any = None):
        self._check_etype(etype)
        result = graph_compat.edges(self, form, order)
        return tuple(self._out_ids(t) for t in result) if isinstance(result, tuple) else self._out_ids(result)

    def in_degrees(self, v: Any = None, etype: Any = None):
        """In-degree of every destination node, of the nodes ``v``, or of one node (an int)."""
        self._check_etype(etype)
        self._use_format(("csc", "coo"), "in_degrees")
        degrees = super().in_degrees()
        return self._pick(degrees, v, self._num_dst, "v")

    def out_degrees(self, u: Any = None, etype: Any = None):
        self._check_etype(etype)
        self._use_format(("csr", "coo"), "out_degrees")
        degrees = super().out_degrees()
        return self._pick(degrees, u, self._num_src, "u")

    def _pick(self, values: Tensor, ids: Any, size: int, what: str):
        if ids is None or is_all(ids):
            return self._out_ids(values)
        picked = values[as_ids(ids, size, what, self.device)]
        return int(picked[0]) if _is_scalar(ids) else self._out_ids(picked)

    def _pair_index(self) -> tuple[Tensor, Tensor]:
        """Edge keys ``src * num_dst + dst`` sorted (stably, so parallel edges stay in id order)
        and the edge id of each: what edge_ids and has_edges_between search. Kept with
        :meth:`memo`: a function of the structure alone, which only the mutations change, and
        they start the graph's caches afresh."""
        def build():
            if self._num_src * max(self._num_dst, 1) >= 2 ** 62:
                raise DGLError("edge_ids needs num_src_nodes * num_dst_nodes below 2**62")
            src, dst = self._coo()
            keys = src * self._num_dst + dst
            order = torch.sort(keys, stable=True).indices
            return keys[order], order
        return self.memo(("unigraph.dgl", "pair_index"), build)

    def _edge_ids_of(self, u: Any, v: Any, etype: Any, *, strict: bool = True) -> Tensor:
        self._check_etype(etype)
        u, v = _paired(as_ids(u, self._num_src, "u", self.device), as_ids(v, self._num_dst, "v", self.device))
        keys, order = self._pair_index()
        query = u * self._num_dst + v
        if keys.numel() == 0:
            if strict and query.numel():
                raise DGLError(f"the graph has no edge {int(u[0])} -> {int(v[0])}: it has no edges")
            return torch.full_like(query, -1)
        position = torch.searchsorted(keys, query).clamp(max=keys.numel() - 1)
        hit = keys[position] == query
        if strict and not bool(hit.all()):
            missing = int((~hit).nonzero()[0])
            raise DGLError(f"the graph has no edge {int(u[missing])} -> {int(v[missing])}")
        return torch.where(hit, order[position], -1)

    def edge_ids(self, u: Any, v: Any, return_uv: bool = False, etype: Any = None):
        """The id of the edge ``u[i] -> v[i]`` for each ``i`` (the smallest id among parallel
        edges); with ``return_uv``, ``(u, v, eid)`` for every edge between each pair."""
        if return_uv:
            return self._edges_between(u, v, etype)
        eids = self._edge_ids_of(u, v, etype)
        return int(eids[0]) if _is_scalar(u) and _is_scalar(v) else self._out_ids(eids)

    def edge_id(self, u: Any, v: Any, return_uv: bool = False, etype: Any = None):
        return self.edge_ids(u, v, return_uv=return_uv, etype=etype)

    def _edges_between(self, u: Any, v: Any, etype: Any):
        self._check_etype(etype)
        u = as_ids(u, self._num_src, "u", self.device)
        v = as_ids(v, self._num_dst, "v", self.device)
        keys, order = self._pair_index()
        query = u * self._num_dst + v
        start, end = torch.searchsorted(keys, query), torch.searchsorted(keys, query, right=True)
        counts = end - start
        pair = torch.repeat_interleave(torch.arange(query.numel(), device=self.device), counts)
        slots = torch.repeat_interleave(start - torch.cumsum(counts, 0) + counts, counts) + torch.arange(
            int(counts.sum()), device=self.device)
        return self._out_ids(u[pair]), self._out_ids(v[pair]), self._out_ids(order[slots])

    def has_edges_between(self, u: Any, v: Any, etype: Any = None):
        found = self._edge_ids_of(u, v, etype, strict=False) >= 0
        return bool(found[0]) if _is_scalar(u) and _is_scalar(v) else found

    def has_edge_between(self, u: Any, v: Any, etype: Any = None) -> bool:
        return bool(self.has_edges_between(u, v, etype))

    def find_edges(self, eid: Any, etype: Any = None) -> tuple[Tensor, Tensor]:
        ids = as_ids(eid, self._num_edges_of(etype), "edge ids", self.device)
        src, dst = self._coo()
        return self._out_ids(src[ids]), self._out_ids(dst[ids])

    def _adjacent(self, csr: tuple[Tensor, Tensor, Tensor], nodes: Tensor) -> tuple[Tensor, Tensor]:
        """(row of each slot, edge id of each slot) of the CSR rows ``nodes``, in row order."""
        ptr, _, eid = csr
        counts = ptr[nodes + 1] - ptr[nodes]
        row = torch.repeat_interleave(torch.arange(nodes.numel(), device=self.device), counts)
        slots = torch.repeat_interleave(ptr[nodes] - torch.cumsum(counts, 0) + counts, counts) + torch.arange(
            int(counts.sum()), device=self.device)
        return row, eid[slots]

    def in_edges(self, v: Any, form: str = "uv", etype: Any = None):
        self._check_etype(etype)
        self._use_format(("csc", "coo"), "in_edges")
        _, eids = self._adjacent(self.in_csr(), as_ids(v, self._num_dst, "v", self.device))
        return self._edge_form(eids, form)

    def out_edges(self, u: Any, form: str = "uv", etype: Any = None):
        self._check_etype(etype)
        self._use_format(("csr", "coo"), "out_edges")
        _, eids = self._adjacent(self.out_csr(), as_ids(u, self._num_src, "u", self.device))
        return self._edge_form(eids, form)

    def _edge_form(self, eids: Tensor, form: str):
        src, dst = self._coo()
        if form == "eid":
            return self._out_ids(eids)
        if form == "uv":
            return self._out_ids(src[eids]), self._out_ids(dst[eids])
        if form == "all":
            return self._out_ids(src[eids]), self._out_ids(dst[eids]), self._out_ids(eids)
        raise DGLError(f"form must be 'uv', 'eid' or 'all', got {form!r}")

    def successors(self, v: Any, etype: Any = None) -> Tensor:
        return self.out_edges(v, etype=etype)[1]

    def predecessors(self, v: Any, etype: Any = None) -> Tensor:
        return self.in_edges(v, etype=etype)[0]

    @property
    def is_multigraph(self) -> bool:
        """Whether some ordered pair has several edges."""
        keys, _ = self._pair_index()
        return bool((keys[1:] == keys[:-1]).any()) if keys.numel() > 1 else False

    @property
    def is_unibipartite(self) -> bool:
        return self.is_bipartite

    @property
    def is_homogeneous(self) -> bool:
        return not self.is_bipartite

    # ------------------------------------------------------------------ sparse formats (DGL's bookkeeping)
    def formats(self, formats: Any = None):
        """DGL's sparse-format control, kept as DGL's bookkeeping: unigraph builds whatever
        structure a computation needs, but what this reports and refuses follows DGL.

        ``formats()``: ``{'created': [...], 'not created': [...]}``, the allowed formats DGL would
        have made so far (the one the graph was built from, those :meth:`create_formats_` made,
        ``csc`` after an in-degree or in-edge query, ``csr`` after an out-degree or out-edge one).
        ``formats(names)``: a copy sharing structure and features that allows only ``names``
        (keeping the made ones among them, else making the first of coo, csr, csc, as DGL does);
        a degree or edge query that needs a format it does not allow is refused, as in DGL."""
        if formats is None:
            made = [f for f in FORMATS if f in self._formats_made]
            return {"created": made,
                    "not created": [f for f in FORMATS if f in self._formats_allowed and f not in made]}
        allowed = format_names(formats)
        out = type(self).__new__(type(self))
        out.__dict__ = dict(self.__dict__)   # DGL's shallow copy: the same structure and feature stores
        out._formats_allowed = allowed
        out._formats_made = tuple(f for f in allowed if f in self._formats_made) or allowed[:1]
        return out

    def create_formats_(self) -> None:
        """Make every allowed format now (DGL's); unigraph builds both CSRs."""
        self.tensors()
        self._formats_made = self._formats_allowed

    def _use_format(self, options: tuple[str, ...], what: str) -> None:
        """DGL reads the first of ``options`` this graph allows for ``what`` (making it); none: refused."""
        for name in options:
            if name in self._formats_allowed:
                if name not in self._formats_made:
                    self._formats_made = self._formats_made + (name,)
                return
        raise DGLError(f"{what} needs one of the sparse formats {list(options)}, but this graph allows only "
                       f"{list(self._formats_allowed)} (see g.formats)")

    def adj_external(self, transpose: bool = False, ctx: Any = None, scipy_fmt: str | None = None,
                     etype: Any = None):
        """The adjacency, row = source (``transpose``: row = destination), as a torch sparse COO
        tensor or a SciPy matrix (:mod:`unigraph.dgl.adjacency`)."""
        self._check_etype(etype)
        self._use_format((("csc" if transpose else "csr") if scipy_fmt == "csr" else "coo",), "adj_external")
        return adjacency.adj_external(self, transpose, ctx, scipy_fmt)

    def adj_tensors(self, fmt: str, etype: Any = None) -> tuple[Tensor, ...]:
        """The index tensors of the adjacency in ``fmt`` (``coo``, ``csr``, ``csc``; :mod:`unigraph.dgl.adjacency`)."""
        self._check_etype(etype)
        if fmt in FORMATS:
            self._use_format((fmt,), f"adj_tensors({fmt!r})")
        return adjacency.adj_tensors(self, fmt)

    # ------------------------------------------------------------------ mutations (in place, as DGL)
    def _mutated_store(self, ntype: Any, what: str) -> str:
        """The node store a mutation of ``ntype`` changes: ``srcdata``, or ``dstdata`` for the
        destination type of a bipartite graph (which must then be named, as DGL wants it)."""
        if self._block:
            raise DGLError(f"{what} on a block is not supported; change the graph, then make the block")
        if not self.is_bipartite:
            if ntype is not None:
                self._check_ntype(ntype)
            return "srcdata"
        if ntype is None:
            raise DGLError(f"{what}: node type name must be specified; this graph has node types {self.ntypes}")
        return "srcdata" if self._check_ntype(ntype) == self._srctype else "dstdata"

    def _grown_counts(self, store_name: str, num: int) -> tuple[int, int]:
        """(num_src, num_dst) after ``num`` more nodes in ``store_name`` (both sides when homogeneous)."""
        if not self.is_bipartite:
            return self._num_src + num, self._num_dst + num
        return (self._num_src + num, self._num_dst) if store_name == "srcdata" else (self._num_src, self._num_dst + num)

    def add_nodes(self, num: int, data: Mapping[str, Tensor] | None = None, ntype: Any = None) -> None:
        """Append ``num`` nodes (of ``ntype``; a bipartite graph's either type); their features
        come from ``data`` or the initializer. DGL forgets a batch's counts here."""
        store_name = self._mutated_store(ntype, "add_nodes")
        num = int(num)
        if num < 0:
            raise DGLError(f"num must be >= 0, got {num}")
        old = getattr(self, store_name)._num_rows
        new_ids = torch.arange(old, old + num, device=self.device)
        data = dict(data or {})

        def rows(key, value, store):
            tail = data.pop(key) if key in data else self._initial("node", key, (num,) + tuple(value.shape[1:]),
                                                                     value.dtype, value.device)
            return torch.cat([value, tail.to(value.dtype)])

        src, dst = self._coo()
        self._restructure(src, dst, *self._grown_counts(store_name, num), {store_name: rows}, lambda key, value: value)
        for key, value in data.items():  # features only the new nodes have: the old rows are initialized
            self._write_rows(getattr(self, store_name), key, new_ids, value, "node", old + num)
        self._batch_num_nodes = self._batch_num_edges = None

    def add_edges(self, u: Any, v: Any, data: Mapping[str, Tensor] | None = None, etype: Any = None) -> None:
        """Append the edges ``u[i] -> v[i]`` (one id may pair with many); new edges' features come
        from ``data`` or the initializer. Endpoints beyond the node count add nodes, as in DGL
        (of each type on a bipartite graph). DGL forgets a batch's counts here."""
        self._check_etype(etype)
        if self._block:
            raise DGLError("add_edges on a block is not supported; change the graph, then make the block")
        u, v = _paired(*(torch.as_tensor(ids, device=self.device).reshape(-1).to(torch.int64) for ids in (u, v)))
        if u.numel() and (int(u.min()) < 0 or int(v.min()) < 0):
            raise DGLError("node ids must be >= 0")
        grow_src = max(self._num_src, int(u.max()) + 1 if u.numel() else 0) - self._num_src
        grow_dst = max(self._num_dst, int(v.max()) + 1 if v.numel() else 0) - self._num_dst
        if self.is_bipartite:
            if grow_src:
                self.add_nodes(grow_src, ntype=self._srctype)
            if grow_dst:
                self.add_nodes(grow_dst, ntype=self._dsttype)
        elif grow_src or grow_dst:
            self.add_nodes(max(grow_src, grow_dst))
        count, data = u.numel(), dict(data or {})
        old = self._src.numel()

        def edge_rows(key, value):
            tail = data.pop(key) if key in data else self._initial("edge", key, (count,) + tuple(value.shape[1:]),
                                                                     value.dtype, value.device)
            return torch.cat([value, tail.to(value.dtype)])

        src, dst = self._coo()
        self._restructure(torch.cat([src, u]), torch.cat([dst, v]), self._num_src, self._num_dst, {}, edge_rows)
        new_ids = torch.arange(old, old + count, device=self.device)
        for key, value in data.items():
            self._write_rows(self.edata, key, new_ids, value, "edge", old + count)
        self._batch_num_nodes = self._batch_num_edges = None

    def remove_edges(self, eids: Any, etype: Any = None, store_ids: bool = False) -> None:
        """Delete the edges ``eids`` (the remaining edges keep their order); a batch's edge counts
        follow. With ``store_ids``, ``edata[dgl.EID]`` holds the ids the edges had."""
        if self._block:
            raise DGLError("remove_edges on a block is not supported; change the graph, then make the block")
        removed = as_ids(eids, self._num_edges_of(etype), "edge ids", self.device)
        if removed.numel() == 0:
            return   # DGL leaves the graph as it is (no ids stored)
        keep = torch.ones(self._src.numel(), dtype=torch.bool, device=self.device)
        keep[removed] = False
        kept = keep.nonzero().flatten()
        self._keep(kept, None, store_ids)

    def remove_nodes(self, nids: Any, ntype: Any = None, store_ids: bool = False) -> None:
        """Delete the nodes ``nids`` (of ``ntype``) and their edges; the other nodes keep their
        order, the remaining edges are grouped by source (edge id order within), as DGL leaves
        them; a batch's counts follow. With ``store_ids``, ``dgl.NID`` / ``dgl.EID`` hold the old ids."""
        store_name = self._mutated_store(ntype, "remove_nodes")
        count = getattr(self, store_name)._num_rows
        removed = as_ids(nids, count, "node ids", self.device)
        if removed.numel() == 0:
            return
        keep_node = torch.ones(count, dtype=torch.bool, device=self.device)
        keep_node[removed] = False
        self._keep(None, {store_name: keep_node.nonzero().flatten()}, store_ids)

    def _keep(self, kept_edges: Tensor | None, kept_nodes: dict[str, Tensor] | None, store_ids: bool) -> None:
        """Keep the edges ``kept_edges`` (in that order) or, given ``kept_nodes`` ({store name: the
        node ids kept}), the nodes and the edges among them grouped by new source id; features,
        batch counts and (``store_ids``) the old ids follow."""
        src, dst = self._coo()
        kept_nodes = kept_nodes or {}
        sides = {"srcdata": (src, self._num_src), "dstdata": (dst, self._num_dst)}
        if not self.is_bipartite and "srcdata" in kept_nodes:
            kept_nodes["dstdata"] = kept_nodes["srcdata"]
        new_id = {}
        for name, (ends, size) in sides.items():
            nodes = kept_nodes.get(name)
            mapping = torch.arange(size, device=self.device)
            if nodes is not None:
                mapping = torch.full((size,), -1, dtype=torch.int64, device=self.device)
                mapping[nodes] = torch.arange(nodes.numel(), device=self.device)
            new_id[name] = mapping
        if kept_edges is None:
            new_src, new_dst = new_id["srcdata"][src], new_id["dstdata"][dst]
            kept_edges = ((new_src >= 0) & (new_dst >= 0)).nonzero().flatten()
            kept_edges = kept_edges[torch.sort(new_src[kept_edges], stable=True).indices]  # DGL's order
        counts = {name: kept_nodes[name].numel() if name in kept_nodes else size for name, (_, size) in sides.items()}
        node_rows = {name: (lambda key, value, store, ids=ids: value[ids]) for name, ids in kept_nodes.items()
                     if name == "srcdata" or self.is_bipartite}
        self._follow_batch(kept_edges, kept_nodes)
        self._restructure(new_id["srcdata"][src[kept_edges]], new_id["dstdata"][dst[kept_edges]], counts["srcdata"],
                          counts["dstdata"], node_rows, lambda key, value: value[kept_edges])
        if store_ids:
            for name in ("srcdata", "dstdata") if self.is_bipartite else ("srcdata",):
                if kept_nodes:
                    getattr(self, name)[NID] = self._out_ids(kept_nodes.get(name, new_id[name]))
            self.edata[EID] = self._out_ids(kept_edges)

    def _follow_batch(self, kept_edges: Tensor, kept_nodes: dict[str, Tensor]) -> None:
        """A batch's counts after keeping these edges and nodes (DGL keeps them up to date)."""
        def follow(counts, kept):
            return counts if counts is None else kept_per_part(counts, kept).to(counts.device)
        if isinstance(self._batch_num_nodes, dict):   # a bipartite graph: by type
            types = {"srcdata": self._srctype, "dstdata": self._dsttype}
            changed = {types[name]: follow(self._batch_num_nodes[types[name]], ids) for name, ids in kept_nodes.items()}
            self._batch_num_nodes = {**self._batch_num_nodes, **changed}
            self._batch_num_edges = {cet: follow(c, kept_edges) for cet, c in self._batch_num_edges.items()}
            return
        self._batch_num_edges = follow(self._batch_num_edges, kept_edges)
        if "srcdata" in kept_nodes:
            self._batch_num_nodes = follow(self._batch_num_nodes, kept_nodes["srcdata"])

    # ------------------------------------------------------------------ message passing (DGL's names)
    def multi_update_all(self, etype_dict: Mapping[Any, tuple], cross_reducer: str,
                         apply_node_func: Callable | None = None) -> None:
        """DGL's ``multi_update_all`` on this one relation (``{etype: (message_func, reduce_func[,
        apply_func])}``): its ``update_all``, the result combined alone by ``cross_reducer`` (itself;
        ``stack`` adds a relation dimension, ``[N, 1, ...]``), then ``apply_node_func``."""
        if cross_reducer not in CROSS_REDUCERS:
            raise DGLError(f"cross_reducer must be one of {CROSS_REDUCERS}, got {cross_reducer!r}")
        for etype, funcs in etype_dict.items():
            self._check_etype(etype)
            scratch = self._shallow()
            before = dict(scratch.dstdata.items())
            messages.send_and_recv(scratch, None, None, funcs[0], funcs[1], funcs[2] if len(funcs) > 2 else None)
            for key, value in scratch.dstdata.items():
                if before.get(key) is not value:
                    self.dstdata[key] = value.unsqueeze(1) if cross_reducer == "stack" else value
        if apply_node_func is not None and etype_dict:
            messages.apply_nodes(self, self.dstdata, self._num_dst, None, apply_node_func, self._dsttype)

    def update_all(self, message_func: Any, reduce_func: Any, apply_node_func: Callable | None = None,
                   etype: Any = None) -> None:
        """Messages on every edge, reduced into every destination node, then ``apply_node_func``
        (DGL's ``update_all``). Fused where unigraph can (see :mod:`unigraph.dgl.messages`)."""
        self._check_etype(etype)
        messages.send_and_recv(self, None, None, message_func, reduce_func, apply_node_func)

    def send_and_recv(self, edges: Any, message_func: Any, reduce_func: Any, apply_node_func: Callable | None = None,
                      etype: Any = None, inplace: bool = False) -> None:
        """Messages on ``edges`` (ids, or a ``(u, v)`` pair of node ids) only, reduced into their
        destinations, which alone are updated."""
        self._check_etype(etype)
        eids = self._edge_arg(edges)
        receivers = torch.unique(self._coo()[1][eids])
        messages.send_and_recv(self, eids, receivers, message_func, reduce_func, apply_node_func)

    def pull(self, v: Any, message_func: Any, reduce_func: Any, apply_node_func: Callable | None = None,
             etype: Any = None, inplace: bool = False) -> None:
        """Every in-edge of the nodes ``v`` sends; ``v`` (and only ``v``) is updated; a node of
        ``v`` without in-edges gets the initializer's value for a user-defined reducer's output."""
        self._check_etype(etype)
        nodes = torch.unique(as_ids(v, self._num_dst, "v", self.device))
        _, eids = self._adjacent(self.in_csr(), nodes)
        messages.send_and_recv(self, eids, nodes, message_func, reduce_func, apply_node_func)

    def push(self, u: Any, message_func: Any, reduce_func: Any, apply_node_func: Callable | None = None,
             etype: Any = None, inplace: bool = False) -> None:
        """Every out-edge of the nodes ``u`` sends; its destinations are updated."""
        self._check_etype(etype)
        nodes = torch.unique(as_ids(u, self._num_src, "u", self.device))
        _, eids = self._adjacent(self.out_csr(), nodes)
        receivers = torch.unique(self._coo()[1][eids])
        messages.send_and_recv(self, eids, receivers, message_func, reduce_func, apply_node_func)

    def apply_edges(self, func: Any, edges: Any = "__ALL__", etype: Any = None, inplace: bool = False) -> None:
        """Edge features from ``func`` (a built-in or a function of the edge batch) on every edge
        or on ``edges`` (ids or a ``(u, v)`` pair)."""
        self._check_etype(etype)
        eids = None if is_all(edges) else self._edge_arg(edges)
        messages.apply_edges(self, eids, func)

    def apply_nodes(self, func: Callable, v: Any = "__ALL__", ntype: Any = None, inplace: bool = False) -> None:
        """Node features from ``func`` (a function of the node batch) on every node or on ``v``."""
        store = self._node_store(ntype) if not self._block else self.dstdata
        count = self._num_nodes_of(ntype) if not self._block else self._num_dst
        name = self._dsttype if self._block else self._srctype if ntype is None else self._check_ntype(ntype)
        messages.apply_nodes(self, store, count, None if is_all(v) else as_ids(v, count, "v", self.device), func, name)

    def _edge_arg(self, edges: Any) -> Tensor:
        """Edge ids from DGL's edge arguments: ids, or a ``(u, v)`` tuple of node ids."""
        if isinstance(edges, tuple) and len(edges) == 2:
            return self._edge_ids_of(edges[0], edges[1], None)
        if is_all(edges):
            return torch.arange(self._src.numel(), device=self.device)
        return as_ids(edges, self._src.numel(), "edge ids", self.device)

    # ------------------------------------------------------------------ batches
    # A batch's counts: one tensor each on a homogeneous graph; on a bipartite graph (two node
    # types) dicts by node type and by canonical edge type (int64, on the CPU), as a heterograph's.
    @property
    def batch_size(self) -> int:
        counts = self._batch_num_nodes
        if counts is None:
            return 1
        return int(next(iter(counts.values())).numel() if isinstance(counts, dict) else counts.numel())

    def batch_num_nodes(self, ntype: Any = None) -> Tensor:
        """The node count (of ``ntype``) in each graph of the batch (one entry where not batched)."""
        counts = self._batch_num_nodes
        if counts is None:
            return torch.tensor([self._num_nodes_of(ntype)], dtype=self._idtype, device=self.device)
        if isinstance(counts, dict):
            if ntype is None:
                raise DGLError(f"node type name must be given: this graph has node types {self.ntypes}")
            return self._out_ids(counts[self._check_ntype(ntype)].to(self.device))
        if ntype is not None:
            self._check_ntype(ntype)
        return self._out_ids(counts)

    def batch_num_edges(self, etype: Any = None) -> Tensor:
        self._check_etype(etype)
        counts = self._batch_num_edges
        if counts is None:
            return torch.tensor([self._src.numel()], dtype=self._idtype, device=self.device)
        if isinstance(counts, dict):
            return self._out_ids(counts[self.canonical_etypes[0]].to(self.device))
        return self._out_ids(counts)

    def set_batch_num_nodes(self, val: Any) -> None:
        """The node count of each graph of a batch (a tensor, or ``{ntype: counts}``; DGL's)."""
        counts = self._typed_counts(val, self.ntypes if self.is_bipartite else [self._srctype], "nodes")
        for ntype, c in counts.items():
            total = self._num_nodes_of(ntype) if self.is_bipartite else self._num_src
            self._check_counts(c, total, f"nodes of {ntype!r}")
        self._batch_num_nodes = counts if self.is_bipartite else counts[self._srctype].to(self.device)

    def set_batch_num_edges(self, val: Any) -> None:
        """The edge count of each graph of a batch (a tensor, or ``{etype: counts}``)."""
        (cet,) = self.canonical_etypes
        counts = self._typed_counts(val, [cet], "edges")
        self._check_counts(counts[cet], self._src.numel(), "edges")
        self._batch_num_edges = counts if self.is_bipartite else counts[cet].to(self.device)

    def _typed_counts(self, val: Any, types: list, what: str) -> dict:
        """``val`` (a tensor, or a dict keyed by the type names of ``types``) as ``{type: int64 counts}``."""
        if not isinstance(val, Mapping):
            if len(types) != 1:
                raise DGLError(f"batch_num_{what} of a graph with types {types} must be a dict by type")
            val = {types[0]: val}
        named = {}
        for key, counts in val.items():
            name = self.to_canonical_etype(key) if what == "edges" else self._check_ntype(key)
            named[name] = torch.as_tensor(counts).to(torch.int64).reshape(-1).cpu()
        missing = [t for t in types if t not in named]
        if missing:
            raise DGLError(f"batch_num_{what} lacks the types {missing}")
        return named

    @staticmethod
    def _check_counts(counts: Tensor, total: int, what: str) -> None:
        if bool((counts < 0).any()) or int(counts.sum()) != total:
            raise DGLError(f"the batch counts of {what} sum to {int(counts.sum())}, the graph has {total}")

    # (DGL's method forms of its transforms, g.reverse(copy_ndata=...) and g.line_graph(...), are
    # attached by the modules that define the transforms: transforms.py, structure_transforms.py)

    # ------------------------------------------------------------------ misc
    def clone(self) -> "DGLGraph":
        return self._shallow()

    def __repr__(self) -> str:
        def schemes(store) -> str:
            return "{" + ", ".join(f"'{k}': Scheme(shape={tuple(v.shape[1:])}, dtype={v.dtype})"
                                   for k, v in store.items()) + "}"
        if self._block:
            return (f"Block(num_src_nodes={self._num_src}, num_dst_nodes={self._num_dst}, "
                    f"num_edges={self._src.numel()})")
        if self.is_bipartite:
            return (f"Graph(num_nodes={{'{self._srctype}': {self._num_src}, '{self._dsttype}': {self._num_dst}}}, "
                    f"num_edges={{{self.canonical_etypes[0]}: {self._src.numel()}}}, "
                    f"metagraph=[('{self._srctype}', '{self._dsttype}', '{self._etype}')])")
        return (f"Graph(num_nodes={self._num_src}, num_edges={self._src.numel()},\n"
                f"      ndata_schemes={schemes(self.srcdata)}\n      edata_schemes={schemes(self.edata)})")


_EXTRAS = ("_srctype", "_dsttype", "_etype", "_block", "_src_first", "_idtype", "_initializers", "_batch_num_nodes",
           "_batch_num_edges")


def _paired(u: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """Node id lists of equal length (one id pairs with every id of the other list, none with an
    empty one, as in DGL)."""
    if u.numel() == 1 and v.numel() != 1:
        u = u.expand(v.numel())
    if v.numel() == 1 and u.numel() != 1:
        v = v.expand(u.numel())
    if u.numel() != v.numel():
        raise DGLError(f"u and v must have the same length, got {u.numel()} and {v.numel()}")
    return u, v


def _is_scalar(value: Any) -> bool:
    return isinstance(value, int) or (isinstance(value, Tensor) and value.dim() == 0)


def format_names(formats: Any) -> tuple[str, ...]:
    """DGL's format argument (a name or a list of names) as the allowed names, in DGL's order."""
    wanted = [formats] if isinstance(formats, str) else list(formats)
    unknown = [f for f in wanted if f not in FORMATS]
    if unknown or not wanted:
        raise DGLError(f"formats must name some of {list(FORMATS)}, got {formats!r}")
    return tuple(f for f in FORMATS if f in wanted)


def kept_per_part(counts: Tensor, kept: Tensor) -> Tensor:
    """A batch's rows per part after keeping the rows ``kept`` (old row ids) of ``counts`` per part."""
    counts = counts.to(torch.int64).cpu()
    part = torch.repeat_interleave(torch.arange(counts.numel()), counts)
    return torch.bincount(part[kept.cpu()], minlength=counts.numel())
