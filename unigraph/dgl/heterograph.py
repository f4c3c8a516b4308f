"""DGL's heterograph on unigraph: :class:`DGLHeteroGraph`, several relations over typed nodes.

Each relation ``(src_type, etype, dst_type)`` is a :class:`~unigraph.dgl.graph.DGLGraph` whose
``srcdata`` / ``dstdata`` *are* the feature stores of its node types, so ``hg['plays']`` (the
relation graph itself) and ``hg.nodes['user'].data`` read and write the same tensors, and every
per-relation method (``update_all(..., etype=)``, ``apply_edges``, ``edge_ids``, ...) is the
relation graph's. Node types and canonical edge types are kept sorted, as DGL keeps them (that
order is the type id order of :func:`~unigraph.dgl.convert.to_homogeneous`).

A graph with a single relation is a plain :class:`DGLGraph` (``dgl.heterograph`` gives one);
this class always has several relations or node types.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
from torch import Tensor

from unigraph.dgl import messages
from unigraph.dgl.base import DGLError, is_all
from unigraph.dgl.graph import DGLGraph, check_idtype
from unigraph.dgl.views import EdgeView, NodeView, TypedData, as_ids
from unigraph.function import MessageFunction, ReduceFunction
from unigraph.graph import FeatureStore
from unigraph.graph import Graph as CoreGraph

CanonicalEtype = tuple[str, str, str]
CROSS_REDUCERS = ("sum", "mean", "max", "min", "stack")


class DGLHeteroGraph:
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
    def srctypes(self) -> list[str]:
        return self.ntypes

    @property
    def dsttypes(self) -> list[str]:
        return self.ntypes

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

    def get_etype_id(self, etype: Any) -> int:
        return self.canonical_etypes.index(self.to_canonical_etype(etype))

    def _check_ntype(self, ntype: Any) -> str:
        if ntype is None:
            if len(self._num_nodes) != 1:
                raise DGLError(f"node type name must be given: this graph has node types {self.ntypes}")
            return self.ntypes[0]
        if ntype not in self._num_nodes:
            raise DGLError(f"node type {ntype!r} does not exist; this graph has {self.ntypes}")
        return ntype

    def __getitem__(self, etype: Any) -> DGLGraph:
        """The relation graph of ``etype`` (a name or a canonical triple); it shares this graph's
        node and edge features."""
        return self._relations[self.to_canonical_etype(etype)]

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
        if ntype is None and len(self._num_nodes) > 1:
            return sum(self._num_nodes.values())
        return self._num_nodes[self._check_ntype(ntype)]

    def _num_edges_of(self, etype: Any) -> int:
        if etype is None and len(self._relations) > 1:
            return sum(g.num_edges for g in self._relations.values())
        return int(self[etype].num_edges)

    def num_nodes(self, ntype: Any = None) -> int:
        return self._num_nodes_of(ntype)

    def num_edges(self, etype: Any = None) -> int:
        return self._num_edges_of(etype)

    num_src_nodes = num_dst_nodes = number_of_nodes = number_of_src_nodes = number_of_dst_nodes = num_nodes
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

    # ------------------------------------------------------------------ features
    def _node_store(self, ntype: Any, side: str = "node") -> FeatureStore:
        return self._stores[self._check_ntype(ntype)]

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
    def nodes(self) -> NodeView:
        return NodeView(self)

    srcnodes = dstnodes = nodes

    @property
    def edges(self) -> EdgeView:
        return EdgeView(self)

    @property
    def ndata(self):
        if len(self._stores) == 1:
            return next(iter(self._stores.values()))
        return TypedData(self._stores, "ndata")

    srcdata = dstdata = ndata

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

    def local_scope(self):
        from unigraph import graph_compat  # restores every store on exit
        stores = list(self._stores.values()) + [g.edata for g in self._relations.values()]
        return graph_compat.restore_on_exit(self, stores)

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

    # ------------------------------------------------------------------ message passing
    def apply_edges(self, func: Any, edges: Any = "__ALL__", etype: Any = None, inplace: bool = False) -> None:
        if etype is None and len(self._relations) > 1:
            for graph in self._relations.values():
                graph.apply_edges(func, edges)
            return
        self[etype].apply_edges(func, edges)

    def apply_nodes(self, func: Callable, v: Any = "__ALL__", ntype: Any = None, inplace: bool = False) -> None:
        ntype = self._check_ntype(ntype)
        count = self._num_nodes[ntype]
        ids = None if is_all(v) else as_ids(v, count, "v", self.device)
        messages.apply_nodes(self._any_relation(), self._stores[ntype], count, ids, func)

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
                                     apply_node_func)

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
