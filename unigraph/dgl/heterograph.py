"""DGL's heterograph on unigraph: :class:`DGLHeteroGraph`, several relations over typed nodes.

Each relation ``(src_type, etype, dst_type)`` is a :class:`~unigraph.dgl.graph.DGLGraph` whose
``srcdata`` / ``dstdata`` *are* the feature stores of its node types, so ``hg['plays']`` (the
relation graph itself) and ``hg.nodes['user'].data`` read and write the same tensors, and every
per-relation method (``update_all(..., etype=)``, ``apply_edges``, ``edge_ids``, ...) is the
relation graph's. Node types and canonical edge types are kept sorted, as ``dgl.heterograph``
sorts them (that order is the type id order of :func:`~unigraph.dgl.convert.to_homogeneous`);
the few functions whose DGL result keeps another order (``reverse``, ``edge_type_subgraph``,
``block_to_graph``) keep it too.

DGL's mutations (``add_nodes``, ``add_edges``, ``remove_edges``, ``remove_nodes``) change the
graph in place: each changed relation is rebuilt as a new validated relation graph (nothing cached
for the old edges survives), a changed node type gets a new store, batch counts follow removals and
are dropped on additions, as DGL does. ``dgl.to_block`` of a heterograph gives the subclass
:class:`~unigraph.dgl.heteroblock.DGLHeteroBlock`.

A graph with a single relation is a plain :class:`DGLGraph` (``dgl.heterograph`` gives one);
this class always has several relations or node types. When no node type is both a source and a
destination (DGL's unidirectional bipartite graph) ``srctypes`` / ``dsttypes`` split the types and
``srcdata`` / ``dstdata`` / ``num_src_nodes()`` follow them. ``g[src, :, dst]`` slices relations
(several matches flatten into one relation, :func:`flatten_relations`); subgraphs and the rest of
the shared API come from :class:`~unigraph.dgl.common.GraphAPI`.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Mapping, NamedTuple

import torch
from torch import Tensor

from unigraph.dgl import messages
from unigraph.dgl.base import CROSS_REDUCERS, EID, ETYPE, NID, NTYPE, DGLError, is_all
from unigraph.dgl.common import GraphAPI
from unigraph.dgl.graph import FORMATS, DGLGraph, _paired, check_idtype, format_names, kept_per_part
from unigraph.dgl.subgraph import TypedParts
from unigraph.dgl.views import EdgeView, TypedData, as_ids
from unigraph.function import MessageFunction, ReduceFunction
from unigraph.graph import FeatureStore
from unigraph.graph import Graph as CoreGraph

CanonicalEtype = tuple[str, str, str]


class DGLHeteroGraph(GraphAPI):
    """Typed nodes and several relations with DGL's API (see the module docstring). Build it with
    :func:`unigraph.dgl.heterograph`."""

    def __init__(self, relations: Mapping[CanonicalEtype, DGLGraph], num_nodes: Mapping[str, int],
                 idtype: torch.dtype = torch.int64):
        self._num_nodes = {t: int(num_nodes[t]) for t in sorted(num_nodes)}
        self._stores = {t: FeatureStore(n, f"nodes[{t!r}].data", f"nodes of type {t!r}")
                        for t, n in self._num_nodes.items()}
        self._initializers: dict[str, dict[Any, Callable]] = {"node": {}, "edge": {}}
        self._idtype = check_idtype(idtype)
        self._relations: dict[CanonicalEtype, DGLGraph] = {}
        for cet in sorted(relations):
            self._relations[cet] = self._adopt(cet, relations[cet])
        # the parts of a dgl.batch of heterographs: node counts per type, edge counts per relation
        self._batch_num_nodes: dict[str, Tensor] | None = None
        self._batch_num_edges: dict[CanonicalEtype, Tensor] | None = None

    def _adopt(self, cet: CanonicalEtype, graph: DGLGraph) -> DGLGraph:
        """Make ``graph`` this graph's relation ``cet``: typed, sharing the node stores and initializers."""
        src_type, etype, dst_type = cet
        graph._with_types(src_type, etype, dst_type, block=False)
        graph.srcdata = self._stores[src_type]
        graph.dstdata = self._stores[dst_type]
        graph._initializers = self._initializers
        graph._idtype = self._idtype
        return graph

    def _rebuilt(self, relations: Mapping[CanonicalEtype, DGLGraph], stores: Mapping[str, FeatureStore],
                 idtype: torch.dtype) -> "DGLHeteroGraph":
        out = DGLHeteroGraph.__new__(DGLHeteroGraph)
        out._num_nodes = dict(self._num_nodes)
        out._stores = dict(stores)
        out._initializers = {kind: dict(inits) for kind, inits in self._initializers.items()}
        out._idtype = idtype
        out._relations = {cet: out._adopt(cet, graph) for cet, graph in relations.items()}
        out._batch_num_nodes, out._batch_num_edges = self._batch_num_nodes, self._batch_num_edges
        return out

    # ------------------------------------------------------------------ types
    @property
    def ntypes(self) -> list[str]:
        return list(self._num_nodes)

    @property
    def is_unibipartite(self) -> bool:
        """Whether no node type is both a source and a destination of some relation (DGL's
        unidirectional bipartite graph: then ``srctypes`` and ``dsttypes`` split the types)."""
        return not ({cet[0] for cet in self._relations} & {cet[2] for cet in self._relations})

    @property
    def srctypes(self) -> list[str]:
        """The source node types: on a unidirectional bipartite graph every type that is no
        relation's destination (DGL's), else every node type."""
        if not self.is_unibipartite:
            return self.ntypes
        destinations = {cet[2] for cet in self._relations}
        return [t for t in self.ntypes if t not in destinations]

    @property
    def dsttypes(self) -> list[str]:
        if not self.is_unibipartite:
            return self.ntypes
        destinations = {cet[2] for cet in self._relations}
        return [t for t in self.ntypes if t in destinations]

    def _side_types(self, side: str) -> list[str]:
        return {"src": self.srctypes, "dst": self.dsttypes}.get(side, self.ntypes)

    @property
    def is_multigraph(self) -> bool:
        """Whether some relation has several edges between one ordered pair of nodes."""
        return any(relation.is_multigraph for relation in self._relations.values())

    @property
    def canonical_etypes(self) -> list[CanonicalEtype]:
        return list(self._relations)

    @property
    def etypes(self) -> list[str]:
        return [cet[1] for cet in self._relations]

    @property
    def is_block(self) -> bool:
        return False

    @property
    def is_homogeneous(self) -> bool:
        return len(self._num_nodes) == 1 and len(self._relations) == 1

    def to_canonical_etype(self, etype: Any) -> CanonicalEtype:
        if etype is None:
            if len(self._relations) != 1:
                raise DGLError(f"edge type name must be given: this graph has edge types {self.canonical_etypes}")
            return next(iter(self._relations))
        if isinstance(etype, tuple):
            if etype not in self._relations:
                raise DGLError(f"edge type {etype!r} does not exist; this graph has {self.canonical_etypes}")
            return etype
        found = [cet for cet in self._relations if cet[1] == etype]
        if len(found) != 1:
            raise DGLError(f"edge type {etype!r} is " + ("ambiguous: " + str(found) if found else "not in the graph; ")
                           + f" (edge types: {self.canonical_etypes})")
        return found[0]

    def get_ntype_id(self, ntype: Any) -> int:
        return self.ntypes.index(self._check_ntype(ntype))

    def get_ntype_id_from_src(self, ntype: Any) -> int:
        return self.ntypes.index(self._check_ntype(ntype, "src"))

    def get_ntype_id_from_dst(self, ntype: Any) -> int:
        return self.ntypes.index(self._check_ntype(ntype, "dst"))

    def get_etype_id(self, etype: Any) -> int:
        return self.canonical_etypes.index(self.to_canonical_etype(etype))

    def _check_ntype(self, ntype: Any, side: str = "node") -> str:
        """``ntype`` among the types of ``side`` (``node``: all; ``src`` / ``dst``: the source /
        destination types); None where that side has one type; ``'SRC/t'`` / ``'DST/t'`` name
        ``t`` as a source / destination type (DGL's names on a unidirectional bipartite graph)."""
        if isinstance(ntype, str) and ntype[:4] in ("SRC/", "DST/") and ntype not in self._num_nodes:
            side, ntype = ("src" if ntype[:4] == "SRC/" else "dst"), ntype[4:]
        names = self._side_types(side)
        if ntype is None:
            if len(names) != 1:
                raise DGLError(f"node type name must be given: this graph has node types {names}")
            return names[0]
        if ntype not in names:
            kind = {"src": "source node type", "dst": "destination node type"}.get(side, "node type")
            raise DGLError(f"{kind} {ntype!r} does not exist; this graph has {names}")
        return ntype

    def _relation_of(self, etype: Any) -> DGLGraph:
        return self[etype]

    # ------------------------------------------------------------------ typed parts (unigraph.dgl.subgraph)
    def _typed_parts(self) -> TypedParts:
        return TypedParts(dict(self._num_nodes), dict(self._stores), dict(self._relations))

    def _assembled(self, counts: Mapping[str, int], edges: Mapping) -> "DGLHeteroGraph":
        """A heterograph of this one's id type and initializers with the relations ``edges``
        ({canonical etype: (src, dst)}, valid ids) over ``counts`` nodes per type; no features."""
        relations = {cet: _trusted_relation(src, dst, cet, counts) for cet, (src, dst) in edges.items()}
        out = DGLHeteroGraph(relations, counts, self._idtype)
        for kind, inits in self._initializers.items():   # (the relations share this very dict)
            out._initializers[kind].update(inits)
        return out

    def _with_relations(self, cets: list[CanonicalEtype]):
        """The relations ``cets`` (in that order) with every node of the types they join, sharing
        this graph's node and edge stores (DGL's ``edge_type_subgraph``): one relation over at most
        two types is a :class:`DGLGraph`, anything more a heterograph."""
        ntypes = [t for t in self._num_nodes if any(t in (cet[0], cet[2]) for cet in cets)]
        relations = {}
        for cet in cets:   # in the order given, as DGL keeps them
            relation = self._relations[cet]._shallow()
            relation.edata = self._relations[cet].edata   # shared, as DGL shares its edge frames
            relations[cet] = relation
        if len(relations) == 1 and len(ntypes) <= 2:
            ((cet, relation),) = relations.items()
            relation.srcdata, relation.dstdata = self._stores[cet[0]], self._stores[cet[2]]
            return relation
        out = DGLHeteroGraph.__new__(DGLHeteroGraph)
        out._num_nodes = {t: self._num_nodes[t] for t in ntypes}
        out._stores = {t: self._stores[t] for t in ntypes}
        out._initializers = {kind: dict(inits) for kind, inits in self._initializers.items()}
        out._idtype = self._idtype
        out._batch_num_nodes = out._batch_num_edges = None
        out._relations = {cet: out._adopt(cet, relation) for cet, relation in relations.items()}
        return out

    def __getitem__(self, etype: Any) -> DGLGraph:
        """The relation graph of ``etype`` (a name or a canonical triple); it shares this graph's
        node and edge features. A triple with ``:`` parts is DGL's relation slice
        (:func:`unigraph.dgl.subgraph.relation_slice`: several matches are flattened into one)."""
        if isinstance(etype, tuple) and any(isinstance(part, slice) for part in etype):
            return self._relation_slice(etype)
        return self._relations[self.to_canonical_etype(etype)]

    def _relation_slice(self, key: tuple):
        """DGL's ``g[srctype, etype, dsttype]`` where any part may be ``:`` (every type): the one
        relation that matches (the relation graph itself, sharing the features), or the matching
        relations flattened into one (:func:`flatten_relations`)."""
        if len(key) != 3 or any(isinstance(part, slice) and part != slice(None) for part in key):
            raise DGLError(f"invalid relation slice {key!r}: use a type name or ':' for each of "
                           "(srctype, etype, dsttype)")
        chosen = [cet for cet in self._relations
                  if all(isinstance(part, slice) or part == name for part, name in zip(key, cet))]
        if not chosen:
            raise DGLError(f"no relation matches {key!r}; this graph has {self.canonical_etypes}")
        if len(chosen) == 1:
            return self._relations[chosen[0]]
        return flatten_relations(self, chosen)

    # ------------------------------------------------------------------ counts and ids
    @property
    def idtype(self) -> torch.dtype:
        return self._idtype

    @property
    def device(self) -> torch.device:
        for graph in self._relations.values():
            return graph.device
        return torch.device("cpu")

    def _out_ids(self, ids: Tensor) -> Tensor:
        return ids.to(self._idtype)

    def _num_nodes_of(self, ntype: Any, side: str = "node") -> int:
        if ntype is None:
            return sum(self._num_nodes[t] for t in self._side_types(side))
        return self._num_nodes[self._check_ntype(ntype, side)]

    def _num_edges_of(self, etype: Any) -> int:
        if etype is None and len(self._relations) > 1:
            return sum(g.num_edges for g in self._relations.values())
        return int(self[etype].num_edges)

    def num_nodes(self, ntype: Any = None) -> int:
        return self._num_nodes_of(ntype)

    def num_edges(self, etype: Any = None) -> int:
        return self._num_edges_of(etype)

    def num_src_nodes(self, ntype: Any = None) -> int:
        return self._num_nodes_of(ntype, "src")

    def num_dst_nodes(self, ntype: Any = None) -> int:
        return self._num_nodes_of(ntype, "dst")

    number_of_nodes, number_of_src_nodes, number_of_dst_nodes = num_nodes, num_src_nodes, num_dst_nodes
    number_of_edges = num_edges

    # ------------------------------------------------------------------ batches (dgl.batch)
    @property
    def batch_size(self) -> int:
        return 1 if self._batch_num_nodes is None else int(next(iter(self._batch_num_nodes.values())).numel())

    def batch_num_nodes(self, ntype: Any = None) -> Tensor:
        """The node count of ``ntype`` in each graph of the batch (one entry where not batched)."""
        ntype = self._check_ntype(ntype)
        if self._batch_num_nodes is None:
            return torch.tensor([self._num_nodes[ntype]], dtype=self._idtype, device=self.device)
        return self._out_ids(self._batch_num_nodes[ntype].to(self.device))

    def batch_num_edges(self, etype: Any = None) -> Tensor:
        """The edge count of ``etype`` in each graph of the batch (one entry where not batched)."""
        cet = self.to_canonical_etype(etype)
        if self._batch_num_edges is None:
            return torch.tensor([self._relations[cet].num_edges], dtype=self._idtype, device=self.device)
        return self._out_ids(self._batch_num_edges[cet].to(self.device))

    def set_batch_num_nodes(self, val: Mapping[str, Tensor]) -> None:
        """The node count of each type in each graph of a batch (``{ntype: counts}``; DGL's)."""
        self._batch_num_nodes = self._batch_counts(val, self.ntypes, self._num_nodes_of, "nodes")

    def set_batch_num_edges(self, val: Mapping[Any, Tensor]) -> None:
        """The edge count of each relation in each graph of a batch (``{etype: counts}``)."""
        counts = {self.to_canonical_etype(k): v for k, v in self._as_typed(val, "batch_num_edges").items()}
        self._batch_num_edges = self._batch_counts(counts, self.canonical_etypes, self._num_edges_of, "edges")

    def _as_typed(self, val: Any, what: str) -> Mapping:
        """``val`` as a dict by type (a bare value where the graph has one type of that kind)."""
        if isinstance(val, Mapping):
            return val
        types = self.ntypes if "nodes" in what else self.canonical_etypes
        if len(types) != 1:
            raise DGLError(f"{what} of a graph with several types must be a dict by type, got {type(val).__name__}")
        return {types[0]: val}

    def _batch_counts(self, val: Any, types: list, total_of: Callable, what: str) -> dict:
        """Per type, the counts ``val`` gives (int64 on the CPU), checked: one per graph of the
        batch for every type, each type's summing to its total."""
        val = self._as_typed(val, f"batch_num_{what}")
        missing = [t for t in types if t not in val]
        if missing:
            raise DGLError(f"batch_num_{what} lacks the types {missing}")
        out = {t: torch.as_tensor(val[t]).to(torch.int64).reshape(-1).cpu() for t in types}
        sizes = {t: c.numel() for t, c in out.items()}
        if len(set(sizes.values())) > 1:
            raise DGLError(f"batch_num_{what} gives different batch sizes per type: {sizes}")
        for t, c in out.items():
            if bool((c < 0).any()) or int(c.sum()) != total_of(t):
                raise DGLError(f"batch_num_{what}[{t!r}] sums to {int(c.sum())}, the graph has {total_of(t)} {what}")
        return out

    # ------------------------------------------------------------------ features
    def _node_store(self, ntype: Any, side: str = "node") -> FeatureStore:
        return self._stores[self._check_ntype(ntype, side)]

    def _edge_store(self, etype: Any) -> FeatureStore:
        return self[etype].edata

    def _edge_ids_of(self, u: Any, v: Any, etype: Any) -> Tensor:
        return self[etype]._edge_ids_of(u, v, None)

    def _any_relation(self) -> DGLGraph:
        """A relation graph, for the helpers every relation shares (initializers, id dtype)."""
        if not self._relations:
            raise DGLError("this heterograph has no relation")
        return next(iter(self._relations.values()))

    def _write_rows(self, store, key, ids, value, kind, num_rows) -> None:
        self._any_relation()._write_rows(store, key, ids, value, kind, num_rows)

    @property
    def edges(self) -> EdgeView:
        return EdgeView(self)

    def _typed_stores(self, side: str, what: str):
        """The stores of ``side``'s types: the store itself where there is one type, else DGL's dict form."""
        names = self._side_types(side)
        if len(names) == 1:
            return self._stores[names[0]]
        return TypedData({t: self._stores[t] for t in names}, what)

    @property
    def ndata(self):
        return self._typed_stores("node", "ndata")

    @property
    def srcdata(self):
        return self._typed_stores("src", "srcdata")

    @property
    def dstdata(self):
        return self._typed_stores("dst", "dstdata")

    @property
    def edata(self):
        if len(self._relations) == 1:
            return next(iter(self._relations.values())).edata
        return TypedData({cet: g.edata for cet, g in self._relations.items()}, "edata")

    def set_n_initializer(self, initializer: Callable, field: str | None = None, ntype: Any = None) -> None:
        self._initializers["node"][field] = initializer

    def set_e_initializer(self, initializer: Callable, field: str | None = None, etype: Any = None) -> None:
        self._initializers["edge"][field] = initializer

    def local_var(self) -> "DGLHeteroGraph":
        """Structure shared, feature changes kept to the result (see DGLGraph.local_var)."""
        stores = {t: store.copy() for t, store in self._stores.items()}
        relations = {}
        for cet, graph in self._relations.items():
            copy = graph._shallow()
            copy.edata = graph.edata.copy()
            relations[cet] = copy
        return self._rebuilt(relations, stores, self._idtype)

    def _node_stores(self):
        """The node stores as :meth:`_rebuilt` takes them (by type)."""
        return self._stores

    def _all_stores(self) -> list[FeatureStore]:
        """Every feature store: one per node type, one per relation."""
        return list(self._stores.values()) + [g.edata for g in self._relations.values()]

    def local_scope(self):
        from unigraph import graph_compat  # restores every store on exit
        return graph_compat.restore_on_exit(self, self._all_stores())

    # ------------------------------------------------------------------ sparse formats (DGL's bookkeeping)
    def formats(self, formats: Any = None):
        """DGL's sparse-format bookkeeping over every relation (see :meth:`DGLGraph.formats`):
        ``created`` lists a format some relation has made."""
        if formats is None:
            made = [f for f in FORMATS if any(f in r._formats_made for r in self._relations.values())]
            allowed = self._any_relation()._formats_allowed if self._relations else FORMATS
            return {"created": made, "not created": [f for f in allowed if f not in made]}
        format_names(formats)   # checked before any copy
        relations = {cet: relation.formats(formats) for cet, relation in self._relations.items()}
        return self._rebuilt(relations, self._node_stores(), self._idtype)   # features shared, as DGL's copy

    def create_formats_(self) -> None:
        for relation in self._relations.values():
            relation.create_formats_()

    # ------------------------------------------------------------------ structure
    def all_edges(self, form: str = "uv", order: str = "eid", etype: Any = None):
        return self[etype].all_edges(form=form, order=order)

    def in_degrees(self, v: Any = None, etype: Any = None):
        return self[etype].in_degrees(v)

    def out_degrees(self, u: Any = None, etype: Any = None):
        return self[etype].out_degrees(u)

    def adj_external(self, transpose: bool = False, ctx: Any = None, scipy_fmt: str | None = None,
                     etype: Any = None):
        return self[etype].adj_external(transpose, ctx, scipy_fmt)

    def adj_tensors(self, fmt: str, etype: Any = None):
        return self[etype].adj_tensors(fmt)

    def edge_ids(self, u: Any, v: Any, return_uv: bool = False, etype: Any = None):
        return self[etype].edge_ids(u, v, return_uv=return_uv)

    def has_edges_between(self, u: Any, v: Any, etype: Any = None):
        return self[etype].has_edges_between(u, v)

    def find_edges(self, eid: Any, etype: Any = None):
        return self[etype].find_edges(eid)

    def in_edges(self, v: Any, form: str = "uv", etype: Any = None):
        return self[etype].in_edges(v, form=form)

    def out_edges(self, u: Any, form: str = "uv", etype: Any = None):
        return self[etype].out_edges(u, form=form)

    def successors(self, v: Any, etype: Any = None):
        return self[etype].successors(v)

    def predecessors(self, v: Any, etype: Any = None):
        return self[etype].predecessors(v)

    def astype(self, idtype: torch.dtype) -> "DGLHeteroGraph":
        out = self.local_var()
        out._idtype = check_idtype(idtype)
        for graph in out._relations.values():
            graph._idtype = out._idtype
        return out

    def int(self) -> "DGLHeteroGraph":
        return self.astype(torch.int32)

    def long(self) -> "DGLHeteroGraph":
        return self.astype(torch.int64)

    def to(self, device, **kwargs) -> "DGLHeteroGraph":
        stores = {t: FeatureStore(n, f"nodes[{t!r}].data", f"nodes of type {t!r}")
                  for t, n in self._num_nodes.items()}
        for ntype, store in self._stores.items():
            for key, value in store.items():
                stores[ntype][key] = value.to(device)
        return self._rebuilt({cet: g.to(device) for cet, g in self._relations.items()}, stores, self._idtype)

    def clone(self) -> "DGLHeteroGraph":
        return self.local_var()

    def reverse(self, copy_ndata: bool = True, copy_edata: bool = False) -> "DGLHeteroGraph":
        """Every relation ``(u, e, v)`` as ``(v, e, u)`` with its edges flipped (edge ids and the
        relation order kept: DGL's ``dgl.reverse``); node features shared with ``copy_ndata``,
        each relation's edge features with ``copy_edata``."""
        if self.is_block:
            raise DGLError("reverse of a block is not supported (DGL refuses it too)")
        flipped = {(v, e, u): g for (u, e, v), g in self._relations.items()}
        relations = {cet: _trusted_relation(rel._coo()[1], rel._coo()[0], cet, self._num_nodes)
                     for cet, rel in flipped.items()}
        out = DGLHeteroGraph(relations, self._num_nodes, self._idtype)
        out._relations = {cet: out._relations[cet] for cet in flipped}   # DGL keeps the relation order
        for kind, inits in self._initializers.items():
            out._initializers[kind].update(inits)
        if copy_ndata:
            for ntype, store in self._stores.items():
                for key, value in store.items():
                    out._stores[ntype][key] = value
        if copy_edata:
            for cet, relation in flipped.items():
                for key, value in relation.edata.items():
                    out._relations[cet].edata[key] = value
        return out

    # ------------------------------------------------------------------ mutations (in place, as DGL)
    def _set_relation(self, cet: CanonicalEtype, src: Tensor, dst: Tensor, edata: Mapping[str, Tensor]) -> None:
        """Relation ``cet`` becomes the edges ``src -> dst`` (over the current node counts) with
        ``edata``; a new validated structure, so nothing cached for the old edges survives."""
        relation = relation_graph(src, dst, cet, self._num_nodes)
        for key, value in edata.items():
            relation.edata[key] = value
        self._relations[cet] = self._adopt(cet, relation)

    def _grown(self, kind: str, old: Mapping[str, Tensor], old_rows: int, new: Mapping[str, Tensor],
               new_rows: int) -> dict[str, Tensor]:
        """Features of ``old_rows`` rows followed by ``new_rows`` more: the rows of ``new`` where
        it has the key, else the initializer's (also for the old rows of a key only ``new`` has)."""
        relation = self._any_relation()
        for key, value in new.items():
            if not isinstance(value, Tensor) or value.dim() == 0 or value.shape[0] != new_rows:
                raise DGLError(f"data[{key!r}] must be a tensor of {new_rows} rows, got "
                               f"{getattr(value, 'shape', type(value).__name__)}")

        def filler(like: Tensor, rows: int, key: str) -> Tensor:
            return relation._initial(kind, key, (rows,) + tuple(like.shape[1:]), like.dtype, like.device)

        out = {key: torch.cat([value, new[key].to(value.dtype) if key in new else filler(value, new_rows, key)])
               for key, value in old.items()}
        for key, value in new.items():
            if key not in out:
                out[key] = torch.cat([filler(value, old_rows, key), value])
        return out

    def add_nodes(self, num: int, data: Mapping[str, Tensor] | None = None, ntype: Any = None) -> None:
        """Append ``num`` nodes of ``ntype``; their features come from ``data`` or the initializer
        (a key only ``data`` has starts from the initializer for the old nodes)."""
        ntype = self._check_ntype(ntype)
        num = int(num)
        if num < 0:
            raise DGLError(f"num must be >= 0, got {num}")
        if num == 0:
            return
        old = self._num_nodes[ntype]
        features = self._grown("node", self._stores[ntype], old, dict(data or {}), num)
        self._num_nodes[ntype] = old + num
        self._batch_num_nodes = self._batch_num_edges = None  # DGL forgets the batch on additions
        self._stores[ntype] = FeatureStore(old + num, f"nodes[{ntype!r}].data", f"nodes of type {ntype!r}")
        for key, value in features.items():
            self._stores[ntype][key] = value
        for cet, relation in list(self._relations.items()):
            if ntype in (cet[0], cet[2]):  # same edges over the new counts
                self._set_relation(cet, *relation._coo(), dict(relation.edata.items()))

    def add_edges(self, u: Any, v: Any, data: Mapping[str, Tensor] | None = None, etype: Any = None) -> None:
        """Append the edges ``u[i] -> v[i]`` to relation ``etype`` (one id may pair with many);
        endpoints beyond a type's node count add nodes of that type first, as in DGL."""
        cet = self._named_etype(etype)
        u, v = (as_ids(ids, 2 ** 62, name, self.device) for ids, name in ((u, "u"), (v, "v")))
        if u.numel() == 0 or v.numel() == 0:
            return
        u, v = _paired(u, v)
        src_type, _, dst_type = cet
        needed = {src_type: int(u.max()) + 1}
        needed[dst_type] = max(needed.get(dst_type, 0), int(v.max()) + 1)
        for ntype, count in needed.items():
            if count > self._num_nodes[ntype]:
                self.add_nodes(count - self._num_nodes[ntype], ntype=ntype)
        relation = self._relations[cet]
        src, dst = relation._coo()
        edata = self._grown("edge", relation.edata, src.numel(), dict(data or {}), u.numel())
        self._set_relation(cet, torch.cat([src, u]), torch.cat([dst, v]), edata)
        self._batch_num_nodes = self._batch_num_edges = None

    def remove_edges(self, eids: Any, etype: Any = None, store_ids: bool = False) -> None:
        """Delete the edges ``eids`` of relation ``etype``; the others keep their order. With
        ``store_ids``, ``edata[dgl.EID]`` of every relation holds the ids the edges had."""
        cet = self._named_etype(etype)
        relation = self._relations[cet]
        removed = as_ids(eids, relation.num_edges, "edge ids", self.device)
        if removed.numel() == 0:
            return  # DGL leaves the graph as it is (no ids stored)
        keep = torch.ones(relation.num_edges, dtype=torch.bool, device=self.device)
        keep[removed] = False
        kept = keep.nonzero().flatten()
        self._keep_edges({cet: kept}, store_ids)

    def remove_nodes(self, nids: Any, ntype: Any = None, store_ids: bool = False) -> None:
        """Delete the nodes ``nids`` of ``ntype`` and every edge at them; the other nodes keep
        their order; each relation's remaining edges are grouped by source node, in edge id order
        within (the order DGL leaves). With ``store_ids``, ``dgl.NID`` / ``dgl.EID`` of every type
        and relation hold the old ids."""
        ntype = self._check_ntype(ntype)
        removed = as_ids(nids, self._num_nodes[ntype], "node ids", self.device)
        if removed.numel() == 0:
            return
        keep_node = {t: torch.ones(n, dtype=torch.bool, device=self.device) for t, n in self._num_nodes.items()}
        keep_node[ntype][removed] = False
        new_id = {t: torch.cumsum(mask, 0) - 1 for t, mask in keep_node.items()}
        kept = {}
        for cet, relation in self._relations.items():
            src, dst = relation._coo()
            ids = (keep_node[cet[0]][src] & keep_node[cet[2]][dst]).nonzero().flatten()
            kept[cet] = ids[torch.sort(new_id[cet[0]][src[ids]], stable=True).indices]
        nodes = keep_node[ntype].nonzero().flatten()
        if self._batch_num_nodes is not None:  # a new dict: a clone shares the old one
            self._batch_num_nodes = {**self._batch_num_nodes,
                                     ntype: kept_per_part(self._batch_num_nodes[ntype], nodes)}
        self._num_nodes[ntype] = nodes.numel()
        store = FeatureStore(nodes.numel(), f"nodes[{ntype!r}].data", f"nodes of type {ntype!r}")
        for key, value in self._stores[ntype].items():
            store[key] = value[nodes]
        self._stores[ntype] = store
        self._keep_edges(kept, store_ids, new_id)
        if store_ids:
            for t, mask in keep_node.items():
                self._stores[t][NID] = self._out_ids(mask.nonzero().flatten())

    def _keep_edges(self, kept: Mapping[CanonicalEtype, Tensor], store_ids: bool,
                    new_id: Mapping[str, Tensor] | None = None) -> None:
        """Each relation of ``kept`` keeps those edges (in that order), endpoints renumbered by
        ``new_id`` (node type -> new id of each old node) where given; batch counts follow."""
        for cet, ids in kept.items():
            relation = self._relations[cet]
            src, dst = (ends[ids] for ends in relation._coo())
            if new_id is not None:
                src, dst = new_id[cet[0]][src], new_id[cet[2]][dst]
            if self._batch_num_edges is not None:
                self._batch_num_edges = {**self._batch_num_edges, cet: kept_per_part(self._batch_num_edges[cet], ids)}
            self._set_relation(cet, src, dst, {key: value[ids] for key, value in relation.edata.items()})
        if store_ids:
            for cet, relation in self._relations.items():
                ids = kept.get(cet)
                relation.edata[EID] = self._out_ids(ids if ids is not None else
                                                    torch.arange(relation.num_edges, device=self.device))

    def _named_etype(self, etype: Any) -> CanonicalEtype:
        """``etype`` as a canonical triple; DGL's mutations want it named when there are several."""
        if etype is None and len(self._relations) != 1:
            raise DGLError(f"edge type name must be specified: this graph has edge types {self.canonical_etypes}")
        return self.to_canonical_etype(etype)

    # ------------------------------------------------------------------ message passing
    def apply_edges(self, func: Any, edges: Any = "__ALL__", etype: Any = None, inplace: bool = False) -> None:
        """On relation ``etype`` (or the only one). Without ``etype`` on several relations: a
        built-in function on every edge of every relation that has its inputs (DGL's rule; a
        user-defined function must name its relation)."""
        if etype is not None or len(self._relations) == 1:
            self[etype].apply_edges(func, edges)
            return
        if not isinstance(func, MessageFunction):
            raise DGLError("apply_edges with a user-defined function on a graph of several edge types needs etype "
                           "(DGL's rule): call apply_edges(func, etype=...) per relation")
        if not is_all(edges):
            raise DGLError("apply_edges on chosen edges of a graph of several edge types needs etype")
        for relation in self._relations.values():
            if _has_inputs(relation, func):
                relation.apply_edges(func)

    def apply_nodes(self, func: Callable, v: Any = "__ALL__", ntype: Any = None, inplace: bool = False) -> None:
        ntype = self._check_ntype(ntype)
        count = self._num_nodes[ntype]
        ids = None if is_all(v) else as_ids(v, count, "v", self.device)
        messages.apply_nodes(self._any_relation(), self._stores[ntype], count, ids, func, ntype)

    def send_and_recv(self, edges: Any, message_func: Any, reduce_func: Any, apply_node_func: Callable | None = None,
                      etype: Any = None, inplace: bool = False) -> None:
        self[etype].send_and_recv(edges, message_func, reduce_func, apply_node_func)

    def pull(self, v: Any, message_func: Any, reduce_func: Any, apply_node_func: Callable | None = None,
             etype: Any = None, inplace: bool = False) -> None:
        self[etype].pull(v, message_func, reduce_func, apply_node_func)

    def push(self, u: Any, message_func: Any, reduce_func: Any, apply_node_func: Callable | None = None,
             etype: Any = None, inplace: bool = False) -> None:
        self[etype].push(u, message_func, reduce_func, apply_node_func)

    def update_all(self, message_func: Any, reduce_func: Any, apply_node_func: Callable | None = None,
                   etype: Any = None) -> None:
        """On one relation (``etype``, or the only one); on a graph of several relations without
        ``etype``, every relation with built-in functions, the results of one destination type
        combined by the same reducer (DGL's rule; ``mean`` is refused as DGL refuses it)."""
        if etype is not None or len(self._relations) == 1:
            self[etype].update_all(message_func, reduce_func, apply_node_func)
            return
        if not isinstance(message_func, MessageFunction) or not isinstance(reduce_func, ReduceFunction):
            raise DGLError("update_all over several edge types needs built-in message and reduce functions; "
                           "use multi_update_all for user-defined ones")
        if reduce_func.reduce == "mean":
            raise DGLError("update_all over several edge types cannot combine with 'mean'; use multi_update_all")
        self.multi_update_all({cet: (message_func, reduce_func) for cet in self._relations}, reduce_func.reduce,
                              apply_node_func)

    def multi_update_all(self, etype_dict: Mapping[Any, tuple], cross_reducer: str,
                         apply_node_func: Callable | None = None) -> None:
        """``update_all`` on several relations (``{etype: (message_func, reduce_func[, apply_func])}``),
        the results for each destination type combined by ``cross_reducer`` (sum, mean, max, min,
        stack), then ``apply_node_func`` on every destination type that received. With ``max`` /
        ``min`` a relation that sends a node nothing takes no part in its extreme (DGL's rule)."""
        if cross_reducer not in CROSS_REDUCERS:
            raise DGLError(f"cross_reducer must be one of {CROSS_REDUCERS}, got {cross_reducer!r}")
        outputs: dict[str, dict[str, list[Tensor]]] = {}
        for etype, funcs in etype_dict.items():
            cet = self.to_canonical_etype(etype)
            relation = self._relations[cet]
            scratch = relation._shallow()
            before = dict(scratch.dstdata.items())
            messages.send_and_recv(scratch, None, None, funcs[0], funcs[1], funcs[2] if len(funcs) > 2 else None)
            silent = CoreGraph.in_degrees(relation) == 0
            for key, value in scratch.dstdata.items():
                if before.get(key) is not value:
                    if cross_reducer in ("max", "min") and bool(silent.any()):
                        # a node this relation sends nothing leaves the extreme to the other relations
                        extreme = float("-inf") if cross_reducer == "max" else float("inf")
                        value = value.masked_fill(silent.view(-1, *([1] * (value.dim() - 1))), extreme)
                    outputs.setdefault(cet[2], {}).setdefault(key, []).append(value)
        for ntype, fields in outputs.items():
            for key, values in fields.items():
                combined = _cross_reduce(values, cross_reducer)
                if cross_reducer in ("max", "min"):  # no relation sent anything: 0, as update_all gives
                    combined = combined.masked_fill(torch.isinf(combined) & torch.isinf(torch.stack(values)).all(0),
                                                    0.0)
                self._stores[ntype][key] = combined
            if apply_node_func is not None:
                messages.apply_nodes(self._any_relation(), self._stores[ntype], self._num_nodes[ntype], None,
                                     apply_node_func, ntype)

    def __repr__(self) -> str:
        return (f"Graph(num_nodes={self._num_nodes},\n      num_edges="
                f"{ {cet: int(g.num_edges) for cet, g in self._relations.items()} },\n"
                f"      metagraph={[(s, d, e) for s, e, d in self._relations]})")


def one_relation(g: Any, what: str, kind: type = CoreGraph):
    """``g`` itself when it is one relation of class ``kind`` (a unigraph graph by default); the
    one rule for what DGL's single-relation functions and layers accept."""
    if isinstance(g, DGLHeteroGraph):
        raise DGLError(f"{what} on a graph of several relations is not supported; apply it per relation (g[etype])")
    if not isinstance(g, kind):
        raise DGLError(f"{what} expects a graph from unigraph.dgl" + (" (or a unigraph.Graph)" if kind is CoreGraph
                                                                       else "") + f", got {type(g).__name__}")
    return g


def _cross_reduce(values: list[Tensor], how: str) -> Tensor:
    if len(values) == 1 and how != "stack":
        return values[0]
    stacked = torch.stack(values, 1)
    if how == "stack":
        return stacked
    if how == "sum":
        return stacked.sum(1)
    if how == "mean":
        return stacked.mean(1)
    return stacked.amax(1) if how == "max" else stacked.amin(1)


def relation_graph(src: Tensor, dst: Tensor, cet, counts: Mapping[str, int]) -> DGLGraph:
    """The relation ``cet`` = (src_type, etype, dst_type) of edges ``src -> dst`` over the node
    counts ``counts`` (by type) as a typed :class:`DGLGraph` (bipartite where the types differ)."""
    src_type, etype, dst_type = cet
    try:
        if src_type == dst_type:
            rel = DGLGraph(torch.stack([src, dst]), num_nodes=counts[src_type])
        else:
            rel = DGLGraph(torch.stack([src, dst]), num_src_nodes=counts[src_type], num_dst_nodes=counts[dst_type])
    except (TypeError, ValueError) as err:
        raise DGLError(f"relation {cet}: {err}") from None
    return rel._with_types(src_type, etype, dst_type, block=False)




def _has_inputs(relation: DGLGraph, func: MessageFunction) -> bool:
    """Whether ``relation`` holds the fields the built-in ``func`` reads."""
    stores = {"u": relation.srcdata, "v": relation.dstdata, "e": relation.edata}
    needed = [(func.lhs_target, func.lhs_field)] + ([] if func.op == "copy" else [(func.rhs_target, func.rhs_field)])
    return all(field in stores[target] for target, field in needed)


def _trusted_relation(src: Tensor, dst: Tensor, cet: CanonicalEtype, counts: Mapping[str, int]) -> DGLGraph:
    """:func:`relation_graph` for ids already known valid (no check)."""
    graph = DGLGraph._trusted(src, dst, counts[cet[0]], counts[cet[2]], cet[0] != cet[2])
    return graph._with_types(*cet, block=False)


# ---------------------------------------------------------------------- relation slices (g[src, :, dst])
def flatten_relations(graph: DGLHeteroGraph, chosen: list[CanonicalEtype]) -> DGLGraph:
    """The relations ``chosen`` as one relation (DGL's flattening): the source types' nodes laid
    one type after another (type id order) as one source type named ``'+'``-joined, the
    destination types likewise (one node type when both sets are equal), every edge relation after
    relation. ``ndata[dgl.NTYPE]`` / ``[dgl.NID]`` hold each node's type id and id within it
    (int64), ``edata[dgl.ETYPE]`` / ``[dgl.EID]`` each edge's (the id type); the features every
    type with rows has are concatenated (DGL's frame combination)."""
    type_id = {t: i for i, t in enumerate(graph.ntypes)}
    relation_id = {cet: i for i, cet in enumerate(graph.canonical_etypes)}
    src_types = sorted({cet[0] for cet in chosen}, key=type_id.get)
    dst_types = sorted({cet[2] for cet in chosen}, key=type_id.get)
    homogeneous = src_types == dst_types
    src_side, dst_side = _laid_out(graph, src_types, type_id), _laid_out(graph, dst_types, type_id)
    device = graph.device
    srcs, dsts, etype_ids, eids = [], [], [], []
    for cet in chosen:
        src, dst = graph._relations[cet]._coo()
        srcs.append(src + src_side.offset[cet[0]])
        dsts.append(dst + dst_side.offset[cet[2]])
        etype_ids.append(torch.full_like(src, relation_id[cet]))
        eids.append(torch.arange(src.numel(), device=device))
    name = (lambda types: "+".join(sorted(types)))
    out = DGLGraph._trusted(torch.cat(srcs), torch.cat(dsts), src_side.count, dst_side.count, not homogeneous)
    out._with_types(name(src_types), name(cet[1] for cet in chosen), name(dst_types), block=False)
    out._src_first, out._idtype = True, graph.idtype
    out._initializers = {kind: dict(inits) for kind, inits in graph._initializers.items()}
    sides = [(out.srcdata, src_types, src_side)] + ([] if homogeneous else [(out.dstdata, dst_types, dst_side)])
    for store, types, side in sides:
        _common_columns(store, [(graph._stores[t], graph._num_nodes[t]) for t in types])
        store[NTYPE] = side.type_ids
        store[NID] = side.local_ids
    _common_columns(out.edata, [(graph._relations[cet].edata, graph._relations[cet]._src.numel()) for cet in chosen])
    out.edata[ETYPE] = graph._out_ids(torch.cat(etype_ids))
    out.edata[EID] = graph._out_ids(torch.cat(eids))
    return out


class _Side(NamedTuple):
    count: int
    offset: dict[str, int]
    type_ids: Tensor
    local_ids: Tensor


def _laid_out(graph: DGLHeteroGraph, types: list[str], type_id: Mapping[str, int]) -> _Side:
    """The nodes of ``types`` one type after another: each type's first id, and each node's type
    id and id within its type (int64)."""
    counts = [graph._num_nodes[t] for t in types]
    offsets = dict(zip(types, [0, *itertools.accumulate(counts)][:-1]))
    device = graph.device
    sizes = torch.tensor(counts, dtype=torch.int64, device=device)
    type_ids = torch.repeat_interleave(torch.tensor([type_id[t] for t in types], device=device), sizes)
    local = torch.cat([torch.arange(n, device=device) for n in counts])
    return _Side(sum(counts), offsets, type_ids, local)


def _common_columns(target: FeatureStore, stores: list[tuple[FeatureStore, int]]) -> None:
    """``target[key]`` = the stores' ``key`` one after another, for the keys every store with rows
    has (DGL's frame combination; shapes and dtypes must agree)."""
    stores = [store for store, rows in stores if rows > 0]
    if not stores:
        return
    for key in [k for k in stores[0] if all(k in store for store in stores)]:
        parts = [store[key] for store in stores]
        if len({(tuple(p.shape[1:]), p.dtype) for p in parts}) > 1:
            raise DGLError(f"cannot concatenate the feature {key!r}: its shapes or dtypes differ across the types")
        target[key] = torch.cat(parts)
