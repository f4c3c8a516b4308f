"""DGL's graph class on unigraph: :class:`DGLGraph`, one relation (a homogeneous graph, a
bipartite graph between two node types, or a sampled block).

A ``DGLGraph`` *is* a :class:`unigraph.Graph` (a subclass): every unigraph op, layer and sampler
takes it as it is, with its cached formats. What it adds is DGL's API over the same structure:
type names, ``idtype``, the views ``g.nodes[ids].data`` / ``g.edges[u, v].data`` with DGL's
initializers, the structure queries (``edge_ids``, ``in_edges``, ``successors``, ...), the
mutations DGL performs in place (``add_nodes``, ``add_edges``, ``remove_edges``, ``remove_nodes``:
they rebuild the validated structure and drop every cached format, so nothing computed for the old
edges survives) and DGL's message passing entry points (:mod:`unigraph.dgl.messages`). Several
relations are a :class:`~unigraph.dgl.heterograph.DGLHeteroGraph`.

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
from unigraph.dgl.base import DEFAULT_ETYPE, DEFAULT_NTYPE, EID, NID, DGLError, is_all
from unigraph.dgl.init import zero_initializer
from unigraph.dgl.views import EdgeView, NodeView, TypedCount, TypedData, as_ids, first_appearance
from unigraph.graph import FeatureStore
from unigraph.graph import Graph as CoreGraph
from unigraph.user_graph import Graph

IDTYPES = (torch.int32, torch.int64)
FORMATS = ("coo", "csr", "csc")


def check_idtype(idtype: Any) -> torch.dtype:
    if idtype not in IDTYPES:
        raise DGLError(f"idtype must be torch.int32 or torch.int64, got {idtype!r}")
    return idtype


def _count(value: int, of: Callable[[Any], int]) -> int:
    return value if torch.compiler.is_compiling() else TypedCount(value, of)


class DGLGraph(Graph):
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
        self._idtype = torch.int64
        self._initializers: dict[str, dict[Any, Callable]] = {"node": {}, "edge": {}}
        self._batch_num_nodes: Tensor | None = None
        self._batch_num_edges: Tensor | None = None

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
        other._block, other._idtype = self._block, self._idtype
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
        move = (lambda t: None if t is None else t.to(device))
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
        if self._block:   # DGL lists a block's source types, then its destination types (['_N', '_N'])
            return [self._srctype, self._dsttype]
        if self._srctype == self._dsttype:
            return [self._srctype]
        return sorted([self._srctype, self._dsttype])

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
        if ntype not in (self._srctype, self._dsttype):
            raise DGLError(f"node type {ntype!r} does not exist; this graph has {self.ntypes}")
        return ntype

    def _check_etype(self, etype: Any) -> None:
        if etype is None or etype == self._etype or etype == self.canonical_etypes[0]:
            return
        raise DGLError(f"edge type {etype!r} does not exist; this graph has {self.canonical_etypes}")

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
        return _count(self._src.numel(), self._num_edges_of)

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
    def nodes(self) -> NodeView:
        return NodeView(self)

    @property
    def srcnodes(self) -> NodeView:
        return NodeView(self, "src")

    @property
    def dstnodes(self) -> NodeView:
        return NodeView(self, "dst")

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
        degrees = super().in_degrees()
        return self._pick(degrees, v, self._num_dst, "v")

    def out_degrees(self, u: Any = None, etype: Any = None):
        self._check_etype(etype)
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

    def has_nodes(self, vid: Any, ntype: Any = None):
        ids = torch.as_tensor(vid).reshape(-1).to(torch.int64)
        found = (ids >= 0) & (ids < self._num_nodes_of(ntype))
        return bool(found[0]) if _is_scalar(vid) else found

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
        _, eids = self._adjacent(self.in_csr(), as_ids(v, self._num_dst, "v", self.device))
        return self._edge_form(eids, form)

    def out_edges(self, u: Any, form: str = "uv", etype: Any = None):
        self._check_etype(etype)
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

    def formats(self, formats: Any = None):
        """DGL's sparse-format control. unigraph builds COO, in-CSR and out-CSR on demand and keeps
        them, so every format is always available: without an argument this says so; with one it
        returns the graph itself (a format restriction changes nothing computed)."""
        if formats is None:
            return {"created": [f for f, key in zip(FORMATS, (None, "out_csr", "in_csr"))
                                if key is None or self.has_memo(key)], "not created": []}
        wanted = [formats] if isinstance(formats, str) else list(formats)
        unknown = [f for f in wanted if f not in FORMATS]
        if unknown:
            raise DGLError(f"unknown sparse formats {unknown}; DGL's are {list(FORMATS)}")
        return self

    def create_formats_(self) -> None:
        self.tensors()

    def adj_external(self, transpose: bool = False, ctx: Any = None, scipy_fmt: str | None = None,
                     etype: Any = None):
        """The adjacency, row = source (``transpose``: row = destination), as a torch sparse COO
        tensor or a SciPy matrix (:mod:`unigraph.dgl.adjacency`)."""
        self._check_etype(etype)
        return adjacency.adj_external(self, transpose, ctx, scipy_fmt)

    def adj_tensors(self, fmt: str, etype: Any = None) -> tuple[Tensor, ...]:
        """The index tensors of the adjacency in ``fmt`` (``coo``, ``csr``, ``csc``; :mod:`unigraph.dgl.adjacency`)."""
        self._check_etype(etype)
        return adjacency.adj_tensors(self, fmt)

    # ------------------------------------------------------------------ subgraphs
    def _node_ids(self, nodes: Any, size: int) -> Tensor:
        if isinstance(nodes, Tensor) and nodes.dtype == torch.bool:
            if nodes.numel() != size:
                raise DGLError(f"a node mask must have {size} entries, got {nodes.numel()}")
            return nodes.nonzero().flatten().to(self.device)
        return as_ids(nodes, size, "nodes", self.device)

    def _subgraph(self, eids: Tensor, nodes: Tensor | None, store_ids: bool) -> "DGLGraph":
        """The edges ``eids``; with ``nodes``, renumbered so node ``nodes[i]`` becomes ``i``."""
        src, dst = self._coo()
        src, dst = src[eids], dst[eids]
        if nodes is None:
            out = self._derived(src, dst)
        else:
            new_id = torch.full((self._num_src,), -1, dtype=torch.int64, device=self.device)
            new_id[nodes] = torch.arange(nodes.numel(), device=self.device)
            out = self._carry(DGLGraph._trusted(new_id[src], new_id[dst], nodes.numel(), nodes.numel(), False))
            for key, value in self.ndata.items():
                out.ndata[key] = value[nodes]
            if store_ids:
                out.ndata[NID] = self._out_ids(nodes)
        for key, value in self.edata.items():
            out.edata[key] = value[eids]
        if store_ids:
            out.edata[EID] = self._out_ids(eids)
        return out

    def _homogeneous_only(self, what: str) -> None:
        if self.is_bipartite:
            raise DGLError(f"{what} needs a homogeneous graph")

    def subgraph(self, nodes: Any, *, relabel_nodes: bool = True, store_ids: bool = True, **kwargs) -> "DGLGraph":
        """The subgraph induced by ``nodes`` (ids in the order given, or a bool mask; DGL's
        ``node_subgraph``): every edge with both ends among them, grouped by new source id, in edge
        id order within (DGL's order). ``ndata[dgl.NID]`` / ``edata[dgl.EID]`` hold the original ids."""
        self._homogeneous_only("subgraph")
        nodes = self._node_ids(nodes, self._num_src)
        member = torch.zeros(self._num_src, dtype=torch.bool, device=self.device)
        member[nodes] = True
        src, dst = self._coo()
        eids = (member[src] & member[dst]).nonzero().flatten()
        if relabel_nodes:
            new_id = torch.empty(self._num_src, dtype=torch.int64, device=self.device)
            new_id[nodes] = torch.arange(nodes.numel(), device=self.device)
            eids = eids[torch.sort(new_id[src[eids]], stable=True).indices]
        return self._subgraph(eids, nodes if relabel_nodes else None, store_ids)

    def edge_subgraph(self, edges: Any, *, relabel_nodes: bool = True, store_ids: bool = True, **kwargs) -> "DGLGraph":
        """The edges ``edges`` (ids or a bool mask, kept in that order) with their end nodes,
        numbered in order of first appearance among the sources, then the destinations (DGL's)."""
        self._homogeneous_only("edge_subgraph")
        if isinstance(edges, Tensor) and edges.dtype == torch.bool:
            eids = edges.nonzero().flatten().to(self.device)
        else:
            eids = as_ids(edges, self._src.numel(), "edges", self.device)
        return self._relabelled(eids, relabel_nodes, store_ids)

    def in_subgraph(self, nodes: Any, *, relabel_nodes: bool = False, store_ids: bool = True, **kwargs) -> "DGLGraph":
        """Every in-edge of ``nodes`` (node by node in the order given, edge id order within: DGL's
        order); all nodes kept unless ``relabel_nodes``."""
        eids = self._adjacent(self.in_csr(), self._node_ids(nodes, self._num_dst))[1]
        return self._relabelled(eids, relabel_nodes, store_ids)

    def out_subgraph(self, nodes: Any, *, relabel_nodes: bool = False, store_ids: bool = True, **kwargs) -> "DGLGraph":
        """Every out-edge of ``nodes`` (ordered as :meth:`in_subgraph`'s)."""
        eids = self._adjacent(self.out_csr(), self._node_ids(nodes, self._num_src))[1]
        return self._relabelled(eids, relabel_nodes, store_ids)

    def _relabelled(self, eids: Tensor, relabel_nodes: bool, store_ids: bool) -> "DGLGraph":
        if not relabel_nodes:
            return self._subgraph(eids, None, store_ids)
        self._homogeneous_only("relabel_nodes=True")
        src, dst = self._coo()
        nodes = first_appearance(torch.cat([src[eids], dst[eids]])) if eids.numel() else eids[:0]
        return self._subgraph(eids, nodes, store_ids)

    # ------------------------------------------------------------------ mutations (in place, as DGL)
    def add_nodes(self, num: int, data: Mapping[str, Tensor] | None = None, ntype: Any = None) -> None:
        """Append ``num`` nodes; their features come from ``data`` or the initializer."""
        if self.is_bipartite:
            raise DGLError("add_nodes on a bipartite graph or block is not supported; build a new graph")
        if ntype is not None:
            self._check_ntype(ntype)
        num = int(num)
        if num < 0:
            raise DGLError(f"num must be >= 0, got {num}")
        old = self._num_src
        new_ids = torch.arange(old, old + num, device=self.device)
        data = dict(data or {})

        def rows(key, value, store):
            tail = data.pop(key) if key in data else self._initial("node", key, (num,) + tuple(value.shape[1:]),
                                                                     value.dtype, value.device)
            return torch.cat([value, tail.to(value.dtype)])

        src, dst = self._coo()
        self._restructure(src, dst, old + num, old + num, {"srcdata": rows}, lambda key, value: value)
        for key, value in data.items():  # features only the new nodes have: the old rows are initialized
            self._write_rows(self.srcdata, key, new_ids, value, "node", old + num)

    def add_edges(self, u: Any, v: Any, data: Mapping[str, Tensor] | None = None, etype: Any = None) -> None:
        """Append the edges ``u[i] -> v[i]`` (one id may pair with many); new edges' features come
        from ``data`` or the initializer. Endpoints beyond the node count add nodes, as in DGL."""
        self._check_etype(etype)
        u, v = _paired(*(torch.as_tensor(ids, device=self.device).reshape(-1).to(torch.int64) for ids in (u, v)))
        if u.numel() and (int(u.min()) < 0 or int(v.min()) < 0):
            raise DGLError("node ids must be >= 0")
        grow_src = max(self._num_src, int(u.max()) + 1 if u.numel() else 0) - self._num_src
        grow_dst = max(self._num_dst, int(v.max()) + 1 if v.numel() else 0) - self._num_dst
        if (grow_src or grow_dst) and self.is_bipartite:
            raise DGLError("edge endpoints beyond the node count of a bipartite graph; add the nodes first")
        if grow_src or grow_dst:
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

    def remove_edges(self, eids: Any, etype: Any = None, store_ids: bool = False) -> None:
        """Delete the edges ``eids`` (the remaining edges are renumbered in order)."""
        removed = as_ids(eids, self._num_edges_of(etype), "edge ids", self.device)
        keep = torch.ones(self._src.numel(), dtype=torch.bool, device=self.device)
        keep[removed] = False
        src, dst = self._coo()
        kept = keep.nonzero().flatten()
        self._restructure(src[kept], dst[kept], self._num_src, self._num_dst, {}, lambda key, value: value[kept])
        if store_ids:
            self.edata[EID] = kept

    def remove_nodes(self, nids: Any, ntype: Any = None, store_ids: bool = False) -> None:
        """Delete the nodes ``nids`` and their edges; the other nodes keep their order, the
        remaining edges are grouped by source (edge id order within), as DGL leaves them."""
        if self.is_bipartite:
            raise DGLError("remove_nodes on a bipartite graph or block is not supported; build a new graph")
        removed = as_ids(nids, self._num_nodes_of(ntype), "node ids", self.device)
        keep_node = torch.ones(self._num_src, dtype=torch.bool, device=self.device)
        keep_node[removed] = False
        new_id = torch.cumsum(keep_node, 0) - 1
        src, dst = self._coo()
        kept = (keep_node[src] & keep_node[dst]).nonzero().flatten()
        kept = kept[torch.sort(new_id[src[kept]], stable=True).indices]  # DGL's order: by new source id
        nodes = keep_node.nonzero().flatten()
        count = nodes.numel()
        self._restructure(new_id[src[kept]], new_id[dst[kept]], count, count,
                          {"srcdata": lambda key, value, store: value[nodes]}, lambda key, value: value[kept])
        if store_ids:
            self.ndata[NID] = nodes
            self.edata[EID] = kept

    # ------------------------------------------------------------------ message passing (DGL's names)
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
        messages.apply_nodes(self, store, count, None if is_all(v) else as_ids(v, count, "v", self.device), func)

    def _edge_arg(self, edges: Any) -> Tensor:
        """Edge ids from DGL's edge arguments: ids, or a ``(u, v)`` tuple of node ids."""
        if isinstance(edges, tuple) and len(edges) == 2:
            return self._edge_ids_of(edges[0], edges[1], None)
        if is_all(edges):
            return torch.arange(self._src.numel(), device=self.device)
        return as_ids(edges, self._src.numel(), "edge ids", self.device)

    # ------------------------------------------------------------------ batches
    @property
    def batch_size(self) -> int:
        return 1 if self._batch_num_nodes is None else int(self._batch_num_nodes.numel())

    def batch_num_nodes(self, ntype: Any = None) -> Tensor:
        if self._batch_num_nodes is None:
            return torch.tensor([self._num_nodes_of(ntype)], dtype=self._idtype, device=self.device)
        return self._out_ids(self._batch_num_nodes)

    def batch_num_edges(self, etype: Any = None) -> Tensor:
        if self._batch_num_edges is None:
            return torch.tensor([self._num_edges_of(etype)], dtype=self._idtype, device=self.device)
        return self._out_ids(self._batch_num_edges)

    def set_batch_num_nodes(self, val: Tensor) -> None:
        val = torch.as_tensor(val, device=self.device).to(torch.int64)
        if int(val.sum()) != self._num_nodes_of(None):
            raise DGLError(f"batch_num_nodes sum to {int(val.sum())}, the graph has {self._num_nodes_of(None)} nodes")
        self._batch_num_nodes = val

    def set_batch_num_edges(self, val: Tensor) -> None:
        val = torch.as_tensor(val, device=self.device).to(torch.int64)
        if int(val.sum()) != self._src.numel():
            raise DGLError(f"batch_num_edges sum to {int(val.sum())}, the graph has {self._src.numel()} edges")
        self._batch_num_edges = val

    # ------------------------------------------------------------------ misc
    def clone(self) -> "DGLGraph":
        return self._shallow()

    # page-locked structure for GPU sampling (UVA) is not offered: nothing is ever pinned
    def is_pinned(self) -> bool:
        return False

    def pin_memory_(self):
        raise DGLError("pin_memory_: unigraph does not pin a graph's structure (no UVA sampling); move the graph "
                       "to the GPU with g.to('cuda') instead")

    def unpin_memory_(self) -> "DGLGraph":
        return self   # (DGL: a no-op on a graph that is not pinned)

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


_EXTRAS = ("_srctype", "_dsttype", "_etype", "_block", "_idtype", "_initializers", "_batch_num_nodes",
           "_batch_num_edges")


def _paired(u: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """Node id lists of equal length (one id pairs with every id of the other list, as in DGL)."""
    if u.numel() == 1 and v.numel() > 1:
        u = u.expand(v.numel())
    if v.numel() == 1 and u.numel() > 1:
        v = v.expand(u.numel())
    if u.numel() != v.numel():
        raise DGLError(f"u and v must have the same length, got {u.numel()} and {v.numel()}")
    return u, v


def _is_scalar(value: Any) -> bool:
    return isinstance(value, int) or (isinstance(value, Tensor) and value.dim() == 0)
