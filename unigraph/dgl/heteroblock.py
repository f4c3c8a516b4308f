"""DGL's heterogeneous block on unigraph: :class:`DGLHeteroBlock`, what ``dgl.to_block`` gives
for a graph of several node types or relations.

A block has a set of *source* nodes of each source type and a set of *destination* nodes of
each destination type (after ``to_block`` both are the graph's node types; ``create_block`` may
give different ones), each with its own feature store, and its relations. Each relation ``g[etype]`` is a one-relation
block (a :class:`~unigraph.dgl.graph.DGLGraph` with ``is_block`` True) whose ``srcdata`` /
``dstdata`` *are* the source store of its source type and the destination store of its
destination type, so every layer written for a block runs on it unchanged and writes land in the
block's stores (``HeteroGraphConv`` calls its modules on these relation blocks).

The class reuses :class:`~unigraph.dgl.heterograph.DGLHeteroGraph`: its ``_num_nodes`` /
``_stores`` are the *destination* side (where a message pass writes, so ``update_all`` and
``multi_update_all`` work as they are); ``_num_src_nodes`` / ``_src_stores`` add the source side.
DGL's conventions for a block: ``ntypes`` lists the source types then the destination types;
``num_nodes(ntype)`` and ``nodes[ntype]`` name the source nodes of a type that is a source type
(else its destination nodes), ``ndata`` the source side; ``num_nodes()`` is every source and
destination node together.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch

from unigraph.dgl import messages
from unigraph.dgl.base import DGLError, is_all
from unigraph.dgl.graph import DGLGraph, check_idtype
from unigraph.dgl.heterograph import CanonicalEtype, DGLHeteroGraph
from unigraph.dgl.views import TypedData, as_ids
from unigraph.graph import FeatureStore

SIDES = ("src", "dst")


def _new_stores(counts: Mapping[str, int], side: str) -> dict[str, FeatureStore]:
    return {t: FeatureStore(n, f"{side}nodes[{t!r}].data", f"{side} nodes of type {t!r}") for t, n in counts.items()}


class DGLHeteroBlock(DGLHeteroGraph):
    """Source and destination nodes of every node type and one block per relation (see the
    module docstring). Built by :func:`unigraph.dgl.to_block`.

    Args: ``relations`` ``{(src_type, etype, dst_type): block}`` (bipartite :class:`DGLGraph`
    blocks whose counts agree with the next two), ``num_src_nodes`` / ``num_dst_nodes``
    ``{node type: count}`` of the source and of the destination types, ``idtype``.
    """

    def __init__(self, relations: Mapping[CanonicalEtype, DGLGraph], num_src_nodes: Mapping[str, int],
                 num_dst_nodes: Mapping[str, int], idtype: torch.dtype = torch.int64):
        self._num_src_nodes = {t: int(num_src_nodes[t]) for t in sorted(num_src_nodes)}
        self._num_nodes = {t: int(num_dst_nodes[t]) for t in sorted(num_dst_nodes)}
        self._src_stores = _new_stores(self._num_src_nodes, "src")
        self._stores = _new_stores(self._num_nodes, "dst")
        self._initializers = {"node": {}, "edge": {}}
        self._idtype = check_idtype(idtype)
        self._batch_num_nodes = self._batch_num_edges = None
        self._relations = {}
        for cet in sorted(relations):
            self._check_relation(cet, relations[cet])
            self._relations[cet] = self._adopt(cet, relations[cet])

    def _check_relation(self, cet: CanonicalEtype, graph: DGLGraph) -> None:
        src_type, _, dst_type = cet
        if src_type not in self._num_src_nodes or dst_type not in self._num_nodes:
            raise DGLError(f"relation {cet} joins node types the block does not have (source types {self.srctypes}, "
                           f"destination types {self.dsttypes})")
        expected = (self._num_src_nodes[src_type], self._num_nodes[dst_type])
        if not graph.is_bipartite or (graph._num_src, graph._num_dst) != expected:
            raise DGLError(f"relation {cet} must be a block of {expected[0]} source and {expected[1]} destination "
                           f"nodes, got {graph._num_src} and {graph._num_dst}")

    def _adopt(self, cet: CanonicalEtype, graph: DGLGraph) -> DGLGraph:
        """Make ``graph`` the block's relation ``cet``: a typed block on the block's stores."""
        src_type, etype, dst_type = cet
        graph._with_types(src_type, etype, dst_type, block=True)
        graph.srcdata = self._src_stores[src_type]
        graph.dstdata = self._stores[dst_type]
        graph._initializers = self._initializers
        graph._idtype = self._idtype
        return graph

    def _rebuilt(self, relations: Mapping[CanonicalEtype, DGLGraph], stores: Mapping[str, Mapping[str, FeatureStore]],
                 idtype: torch.dtype) -> "DGLHeteroBlock":
        """A block with ``relations`` over the stores ``{'src': {...}, 'dst': {...}}``."""
        out = DGLHeteroBlock.__new__(DGLHeteroBlock)
        out._num_src_nodes, out._num_nodes = dict(self._num_src_nodes), dict(self._num_nodes)
        out._src_stores, out._stores = dict(stores["src"]), dict(stores["dst"])
        out._initializers = {kind: dict(inits) for kind, inits in self._initializers.items()}
        out._idtype = idtype
        out._batch_num_nodes = out._batch_num_edges = None
        out._relations = {cet: out._adopt(cet, graph) for cet, graph in relations.items()}
        return out

    # ------------------------------------------------------------------ types
    @property
    def ntypes(self) -> list[str]:
        return self.srctypes + self.dsttypes  # DGL's listing for a block

    @property
    def srctypes(self) -> list[str]:
        return list(self._num_src_nodes)

    @property
    def dsttypes(self) -> list[str]:
        return list(self._num_nodes)

    @property
    def is_block(self) -> bool:
        return True

    @property
    def is_unibipartite(self) -> bool:
        return True   # source and destination node sets apart, whatever the relations join

    @property
    def is_homogeneous(self) -> bool:
        return False

    def _check_ntype(self, ntype: Any, side: str = "node") -> str:
        names = {"src": self.srctypes, "dst": self.dsttypes, "node": list(dict.fromkeys(self.ntypes))}[side]
        if ntype is None:
            if len(names) != 1:
                raise DGLError(f"node type name must be given: this block has node types {names}")
            return names[0]
        if ntype not in names:
            kind = {"src": "source node type", "dst": "destination node type", "node": "node type"}[side]
            raise DGLError(f"{kind} {ntype!r} does not exist; this block has {names}")
        return ntype

    def _side_of(self, ntype: str, side: str) -> str:
        """Which node set a type names: the one asked, else its source set where it has one (DGL)."""
        return side if side != "node" else "src" if ntype in self._num_src_nodes else "dst"

    # ------------------------------------------------------------------ counts
    def _counts(self, side: str) -> dict[str, int]:
        return self._num_src_nodes if side == "src" else self._num_nodes

    def _num_nodes_of(self, ntype: Any, side: str = "node") -> int:
        if ntype is None and side == "node":
            return sum(self._num_src_nodes.values()) + sum(self._num_nodes.values())
        if ntype is None:
            return sum(self._counts(side).values())
        ntype = self._check_ntype(ntype, side)
        return self._counts(self._side_of(ntype, side))[ntype]

    def batch_num_nodes(self, ntype: Any = None) -> torch.Tensor:
        """``[num_src_nodes(ntype)]``: a block is one graph, counted by its source nodes (DGL's)."""
        return torch.tensor([self._num_nodes_of(self._check_ntype(ntype))], dtype=self._idtype, device=self.device)

    # ------------------------------------------------------------------ features
    def _side_stores(self, side: str) -> dict[str, FeatureStore]:
        return self._stores if side == "dst" else self._src_stores

    def _node_store(self, ntype: Any, side: str = "node") -> FeatureStore:
        ntype = self._check_ntype(ntype, side)
        return self._side_stores(self._side_of(ntype, side))[ntype]

    @staticmethod
    def _typed(stores: dict[str, FeatureStore], what: str):
        return next(iter(stores.values())) if len(stores) == 1 else TypedData(stores, what)

    @property
    def srcdata(self):
        return self._typed(self._src_stores, "srcdata")

    @property
    def dstdata(self):
        return self._typed(self._stores, "dstdata")

    ndata = srcdata  # DGL: a block's ndata is its source side

    def _node_stores(self) -> dict[str, dict[str, FeatureStore]]:
        return {"src": self._src_stores, "dst": self._stores}

    def _all_stores(self) -> list[FeatureStore]:
        return [*self._src_stores.values(), *self._stores.values(), *(g.edata for g in self._relations.values())]

    def local_var(self) -> "DGLHeteroBlock":
        """Structure shared, feature changes kept to the result (see DGLGraph.local_var)."""
        relations = {}
        for cet, graph in self._relations.items():
            copy = graph._shallow()
            copy.edata = graph.edata.copy()
            relations[cet] = copy
        stores = {side: {t: s.copy() for t, s in self._side_stores(side).items()} for side in SIDES}
        return self._rebuilt(relations, stores, self._idtype)

    def to(self, device, **kwargs) -> "DGLHeteroBlock":
        stores = {side: _new_stores(self._counts(side), side) for side in SIDES}
        for side in SIDES:
            for ntype, store in self._side_stores(side).items():
                for key, value in store.items():
                    stores[side][ntype][key] = value.to(device)
        return self._rebuilt({cet: g.to(device) for cet, g in self._relations.items()}, stores, self._idtype)

    def apply_nodes(self, func, v: Any = "__ALL__", ntype: Any = None, inplace: bool = False) -> None:
        """On the nodes ``ntype`` names (its source nodes where it is a source type: DGL's choice)."""
        ntype = self._check_ntype(ntype)
        count = self._num_nodes_of(ntype)
        ids = None if is_all(v) else as_ids(v, count, "v", self.device)
        messages.apply_nodes(self._any_relation(), self._node_store(ntype), count, ids, func, ntype)

    def __repr__(self) -> str:
        return (f"Block(num_src_nodes={self._num_src_nodes},\n      num_dst_nodes={self._num_nodes},\n"
                f"      num_edges={ {cet: int(g.num_edges) for cet, g in self._relations.items()} },\n"
                f"      metagraph={[(s, d, e) for s, e, d in self._relations]})")

    # ------------------------------------------------------------------ what a block does not do
    def remove_edges(self, *args, **kwargs):
        raise DGLError("remove_edges on a block is not supported (DGL has none either); edit the graph, then to_block")

    def add_edges(self, *args, **kwargs):
        raise DGLError("add_edges on a block is not supported; edit the graph, then to_block")

    def add_nodes(self, *args, **kwargs):
        raise DGLError("add_nodes on a block is not supported; edit the graph, then to_block")
