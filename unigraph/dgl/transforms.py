"""DGL's graph transforms on unigraph: ``dgl.add_self_loop``, ``remove_self_loop``,
``add_reverse_edges``, ``to_bidirected``, ``reverse``, ``to_simple``, ``node_subgraph``,
``edge_subgraph``, ``in_subgraph``, ``out_subgraph``, ``to_block`` (a heterogeneous block for a
graph of several types or relations, :mod:`unigraph.dgl.heteroblock`), ``batch``/``unbatch``, the
mutations as functions (``add_nodes``, ``add_edges``, ``remove_nodes``, ``remove_edges``: a changed
copy), the ``AddSelfLoop`` and ``AddReverse`` transforms and the feature dtype casts. Each returns
a new graph (features as DGL carries them); the ids a subgraph was taken from are in
``ndata[dgl.NID]`` / ``edata[dgl.EID]``. The self-loop and reverse-edge functions work per relation
on heterographs too, as DGL's.
"""
from __future__ import annotations

import itertools
import sys
import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from unigraph.dgl import function as fn
from unigraph.dgl.base import EID, NID, DGLError, is_all
from unigraph.dgl.transform_base import BaseTransform, Compose  # noqa: F401  (dgl.transforms.Compose)
from unigraph.dgl.convert import heterograph
from unigraph.dgl.graph import DGLGraph
from unigraph.dgl.heteroblock import DGLHeteroBlock
from unigraph.dgl.heterograph import DGLHeteroGraph
from unigraph.dgl.subgraph import (  # noqa: F401  (dgl.transforms' names for them)
    TypedParts, assemble, edge_subgraph, edge_type_subgraph, in_subgraph, khop_in_subgraph, khop_out_subgraph,
    node_subgraph, node_type_subgraph, out_subgraph, typed_parts, with_features)
from unigraph.dgl.views import as_ids, first_appearance
from unigraph.graph import Graph as CoreGraph
from unigraph.graph import unique_pairs
from unigraph.group_reduce import widened, widened_dtype


def add_self_loop(g: Any, edge_feat_names: Sequence[str] | None = None, fill_data: Any = 1.0,
                  etype: Any = None):
    """One more edge ``i -> i`` per node, after the existing edges of relation ``etype`` (also
    where one exists). The new edges' features named in ``edge_feat_names`` (default: all) are
    ``fill_data``, or with ``fill_data`` one of ``'sum'``, ``'mean'``, ``'max'``, ``'min'`` that
    reduction of the node's incoming edges' features (0 without any); the others are the edge
    initializer's (zeros). DGL's ``add_self_loop``; batch information is dropped, as DGL does."""
    cet, relation = _same_type_relation(g, etype, "add_self_loop")
    count = relation._num_src
    names = list(relation.edata) if edge_feat_names is None else list(edge_feat_names)
    unknown = [name for name in names if name not in relation.edata]
    if unknown:
        raise DGLError(f"add_self_loop: edge_feat_names {unknown} are not edge features of {cet} "
                       f"({sorted(relation.edata)})")
    fill = _loop_features(relation, names, fill_data)
    loops = torch.arange(count, device=relation.device)
    src, dst = relation._coo()
    edata = {key: torch.cat([value, fill[key] if key in fill else
                             relation._initial("edge", key, (count,) + tuple(value.shape[1:]), value.dtype,
                                               value.device)])
             for key, value in relation.edata.items()}
    if isinstance(g, DGLHeteroGraph):
        out = g.clone()
        out._set_relation(cet, torch.cat([src, loops]), torch.cat([dst, loops]), edata)
        return out
    return g._derived(torch.cat([src, loops]), torch.cat([dst, loops]), edata=edata)


LOOP_REDUCERS = ("sum", "mean", "max", "min")


def _loop_features(relation: DGLGraph, names: list[str], fill_data: Any) -> dict[str, Tensor]:
    """The self-loops' features ``names``: the constant ``fill_data``, or the reduction it names of
    each node's incoming edge features (DGL's update_all: 0 where a node has no in-edge)."""
    count = relation._num_src
    if isinstance(fill_data, str):
        if fill_data not in LOOP_REDUCERS:
            raise DGLError(f"add_self_loop: fill_data must be a number or one of {LOOP_REDUCERS}, got {fill_data!r}")
        scratch = relation.local_var()
        out = {}
        for name in names:
            scratch.update_all(fn.copy_e(name, "__loop"), getattr(fn, fill_data)("__loop", "__loop"))
            out[name] = scratch.dstdata.pop("__loop")
        return out
    if isinstance(fill_data, bool) or not isinstance(fill_data, (int, float)):
        raise DGLError(f"add_self_loop: fill_data must be an int, a float or a reducer name, got {fill_data!r}")
    out = {}
    for name in names:  # DGL's cast: the constant in the feature's dtype (1.5 is 1 for integer features)
        value = relation.edata[name]
        out[name] = value.new_zeros((count,) + tuple(value.shape[1:])) + torch.tensor([fill_data]).to(value)
    return out


def _same_type_relation(g: Any, etype: Any, what: str) -> tuple[tuple[str, str, str], DGLGraph]:
    """The relation ``etype`` of ``g`` (a graph or a heterograph), which must join one node type."""
    _graph_only(g, what)
    cet = g.to_canonical_etype(etype)
    if cet[0] != cet[2]:
        raise DGLError(f"{what} does not support unidirectional bipartite graphs: {cet} joins two node types")
    return cet, g[cet] if isinstance(g, DGLHeteroGraph) else g


def remove_self_loop(g: Any, etype: Any = None):
    """Every edge ``i -> i`` of relation ``etype`` removed (its features with it), as
    :func:`remove_edges` removes them (batch counts follow)."""
    cet, relation = _same_type_relation(g, etype, "remove_self_loop")
    src, dst = relation._coo()
    return remove_edges(g, (src == dst).nonzero().flatten(), etype=cet)


class AddSelfLoop(BaseTransform):
    """DGL's ``transforms.AddSelfLoop``: on every relation that joins one node type, remove its
    self-loops (unless ``allow_duplicate``), then add one per node (features as
    :func:`add_self_loop` fills them). ``new_etypes``: also a relation ``(t, 'self', t)`` of
    self-loops for every node type ``t`` (without edge features); node and edge features are
    carried over, batch information is not (DGL's)."""

    def __init__(self, allow_duplicate: bool = False, new_etypes: bool = False, edge_feat_names=None,
                 fill_data: Any = 1.0):
        self.allow_duplicate, self.new_etypes = allow_duplicate, new_etypes
        self.edge_feat_names, self.fill_data = edge_feat_names, fill_data

    def __call__(self, g: Any):
        _graph_only(g, "AddSelfLoop")
        for cet in g.canonical_etypes:
            if cet[0] == cet[2]:
                if not self.allow_duplicate:
                    g = remove_self_loop(g, etype=cet)
                g = add_self_loop(g, self.edge_feat_names, self.fill_data, etype=cet)
        if not self.new_etypes:
            return g
        data = {(t, "self", t): (torch.arange(g.num_nodes(t), device=g.device),) * 2 for t in g.ntypes}
        data.update({cet: g.edges(etype=cet) for cet in g.canonical_etypes})
        return _restructured(g, data, copy_edata=True)


class AddReverse(BaseTransform):
    """DGL's ``transforms.AddReverse``: for a relation ``(u, e, v)`` between two node types, a new
    relation ``(v, 'rev_e', u)`` of its edges reversed; a relation within one node type gets the
    reversed edges appended to itself (or, with ``sym_new_etype``, a new ``rev_e`` relation too).
    Edge features of the reversed edges are copies with ``copy_edata``, else zeros where appended
    and absent in a new relation. Node features are carried over, batch information is not."""

    def __init__(self, copy_edata: bool = False, sym_new_etype: bool = False):
        self.copy_edata, self.sym_new_etype = copy_edata, sym_new_etype

    def __call__(self, g: Any):
        _graph_only(g, "AddReverse")
        data, appended = {}, []
        for cet in g.canonical_etypes:
            src, dst = g.edges(etype=cet)
            utype, etype, vtype = cet
            if utype == vtype and not self.sym_new_etype:
                data[cet] = (torch.cat([src, dst]), torch.cat([dst, src]))
                appended.append(cet)
            else:
                data[cet] = (src, dst)
                data[(vtype, f"rev_{etype}", utype)] = (dst, src)
        out = _restructured(g, data, copy_edata=False)
        for cet in g.canonical_etypes:
            utype, etype, vtype = cet
            for key, value in g.edges[cet].data.items():
                if cet in appended:
                    out.edges[cet].data[key] = torch.cat([value, value if self.copy_edata else torch.zeros_like(value)])
                    continue
                out.edges[cet].data[key] = value
                if self.copy_edata:
                    out.edges[(vtype, f"rev_{etype}", utype)].data[key] = value
        return out


def _restructured(g: Any, data: dict, copy_edata: bool):
    """A new graph of ``g``'s node types and counts with the relations ``data`` ({canonical etype:
    (src, dst)}), ``g``'s node features and, with ``copy_edata``, the edge features of the
    relations ``g`` has (DGL's ``update_graph_structure``)."""
    out = heterograph(data, {t: g.num_nodes(t) for t in g.ntypes}, idtype=g.idtype, device=g.device)
    for ntype in g.ntypes:
        for key, value in g.nodes[ntype].data.items():
            out.nodes[ntype].data[key] = value
    if copy_edata:
        for cet in g.canonical_etypes:
            for key, value in g.edges[cet].data.items():
                out.edges[cet].data[key] = value
    return out


def add_reverse_edges(g: Any, readonly: Any = None, copy_ndata: bool = True, copy_edata: bool = False,
                      ignore_bipartite: bool = False, exclude_self: bool = True):
    """Every relation within one node type gets its edges reversed appended (not for self-loops
    with ``exclude_self``); a relation between two types is an error, or kept as it is with
    ``ignore_bipartite`` (DGL's ``add_reverse_edges``). ``copy_ndata``: node features carried
    over; ``copy_edata``: each edge's features (a reversed edge's are its original's) and
    ``edata[dgl.EID]``, the original id of every edge. ``readonly`` is deprecated in DGL and does
    nothing there either."""
    if readonly is not None:
        warnings.warn("add_reverse_edges: readonly is deprecated (DGL ignores it too)", DeprecationWarning,
                      stacklevel=2)
    _graph_only(g, "add_reverse_edges")
    data, origin = {}, {}
    for cet in g.canonical_etypes:
        src, dst = g.edges(etype=cet)
        eids = torch.arange(src.numel(), device=g.device)
        if cet[0] != cet[2]:
            if not ignore_bipartite:
                raise DGLError(f"add_reverse_edges is not well defined for unidirectional bipartite graphs, but "
                               f"{cet} is (pass ignore_bipartite=True to keep it as it is)")
            data[cet], origin[cet] = (src, dst), eids
            continue
        back = (src != dst).nonzero().flatten() if exclude_self else eids
        data[cet] = (torch.cat([src, dst[back]]), torch.cat([dst, src[back]]))
        origin[cet] = torch.cat([eids, back])
    out = _restructured(g, data, copy_edata=False)
    if not copy_ndata:
        for ntype in out.ntypes:
            for key in list(out.nodes[ntype].data):
                del out.nodes[ntype].data[key]
    if copy_edata:
        for cet, eids in origin.items():
            for key, value in g.edges[cet].data.items():
                out.edges[cet].data[key] = value[eids]
            out.edges[cet].data[EID] = g._out_ids(eids)
    return out


def metapath_reachable_graph(g: Any, metapath: Sequence[Any]):
    """The graph joining each node of the first relation's source type to every node of the last
    relation's destination type that a walk along the relations ``metapath`` reaches (DGL's
    ``metapath_reachable_graph``): one edge per reachable pair, sorted by (source, destination),
    relation ``'_E'``; the node features of both types come along."""
    _graph_only(g, "metapath_reachable_graph")
    chain = [g.to_canonical_etype(etype) for etype in metapath]
    if not chain:
        raise DGLError("metapath_reachable_graph needs at least one edge type")
    for before, after in zip(chain, chain[1:]):
        if before[2] != after[0]:
            raise DGLError(f"metapath: {before} ends at {before[2]!r} but {after} starts at {after[0]!r}")
    import scipy.sparse
    reach = None
    for cet in chain:
        relation = g[cet] if isinstance(g, DGLHeteroGraph) else g
        src, dst = (ids.cpu().numpy() for ids in relation._coo())
        step = scipy.sparse.csr_matrix((np.ones(src.size, dtype=np.int64), (src, dst)),
                                       shape=(relation._num_src, relation._num_dst))
        reach = step if reach is None else reach @ step
        reach = (reach != 0).astype(np.int64)   # reachability only: path counts would overflow
    src_type, dst_type = chain[0][0], chain[-1][2]
    rows, cols = (torch.from_numpy(ids.astype(np.int64)) for ids in reach.nonzero())   # sorted by (row, column)
    out = heterograph({(src_type, "_E", dst_type): (rows, cols)},
                      {src_type: reach.shape[0], dst_type: reach.shape[1]}, idtype=g.idtype, device=g.device)
    for ntype in dict.fromkeys((src_type, dst_type)):
        for key, value in g.nodes[ntype].data.items():
            out.nodes[ntype].data[key] = value
    return out


# ---------------------------------------------------------------------- mutations as functions
def add_nodes(g: Any, num: int, data: Any = None, ntype: Any = None):
    """A copy of ``g`` with ``num`` more nodes (DGL's ``dgl.add_nodes``; see ``g.add_nodes``)."""
    out = _mutable_copy(g, "add_nodes")
    out.add_nodes(num, data=data, ntype=ntype)
    return out


def add_edges(g: Any, u: Any, v: Any, data: Any = None, etype: Any = None):
    """A copy of ``g`` with the edges ``u -> v`` appended (DGL's ``dgl.add_edges``)."""
    out = _mutable_copy(g, "add_edges")
    out.add_edges(u, v, data=data, etype=etype)
    return out


def remove_nodes(g: Any, nids: Any, ntype: Any = None, store_ids: bool = False):
    """A copy of ``g`` without the nodes ``nids`` and their edges (DGL's ``dgl.remove_nodes``)."""
    out = _mutable_copy(g, "remove_nodes")
    out.remove_nodes(nids, ntype=ntype, store_ids=store_ids)
    return out


def remove_edges(g: Any, eids: Any, etype: Any = None, store_ids: bool = False):
    """A copy of ``g`` without the edges ``eids`` of relation ``etype`` (DGL's
    ``dgl.remove_edges``): the other edges keep their order and features; a batched graph's edge
    counts follow; with ``store_ids``, ``edata[dgl.EID]`` holds the ids they had."""
    out = _mutable_copy(g, "remove_edges")
    out.remove_edges(eids, etype=etype, store_ids=store_ids)
    return out


def _mutable_copy(g: Any, what: str):
    return _graph_only(g, what).clone()


def _graph_only(g: Any, what: str):
    """``g`` when it is a unigraph.dgl graph or heterograph (a block is refused: DGL's transforms
    and mutations do not take one either)."""
    if getattr(g, "is_block", False):
        raise DGLError(f"{what} on a block is not supported (DGL's does not take one either)")
    if not isinstance(g, (DGLGraph, DGLHeteroGraph)):
        raise DGLError(f"{what} expects a graph from unigraph.dgl, got {type(g).__name__}")
    return g


def to_bidirected(g: Any, copy_ndata: bool = False, readonly: Any = None):
    """Every edge in both directions, without repeats: per relation (each must join one node
    type, as DGL requires), one edge per ordered pair, sorted by (source, destination). Edge
    features are dropped, node features kept (shared) with ``copy_ndata``; batch information is
    dropped, as DGL does. ``readonly`` is deprecated in DGL and does nothing there either."""
    if readonly is not None:
        warnings.warn("to_bidirected: readonly is deprecated (DGL ignores it too)", DeprecationWarning, stacklevel=2)
    _graph_only(g, "to_bidirected")
    parts = typed_parts(g)
    between = [cet for cet in parts.relations if cet[0] != cet[2]]
    if between:
        raise DGLError(f"to_bidirected is not well defined for unidirectional bipartite graphs, but {between} join "
                       "two node types")
    edges = {}
    for cet, relation in parts.relations.items():
        src, dst = relation._coo()
        pair_src, pair_dst, _ = unique_pairs(torch.cat([src, dst]), torch.cat([dst, src]))
        edges[cet] = (pair_src, pair_dst)
    return _with_nodes_of(g, assemble(g, parts.counts, edges), copy_ndata)


def _with_nodes_of(g: Any, out: Any, copy_ndata: bool):
    """``out`` (assembled from ``g``, the same node counts) with ``g``'s node features shared
    when ``copy_ndata``."""
    return with_features(g, out, {t: None for t in typed_parts(g).counts} if copy_ndata else {}, {}, False)


SIMPLE_AGGREGATORS = ("arbitrary", "sum", "mean")


def to_simple(g: Any, return_counts: str | None = "count", writeback_mapping: bool = False, copy_ndata: bool = True,
              copy_edata: bool = False, aggregator: str = "arbitrary"):
    r"""One edge per ordered pair of each relation, sorted by (source, destination) (DGL's
    ``dgl.to_simple``, graphs and heterographs). ``copy_ndata``: node features shared.
    ``copy_edata``: the merged edges' features combined by ``aggregator``:

    * ``'arbitrary'``: the first (lowest id) edge's, and ``edata[dgl.EID]`` that edge's id
      (int64, as DGL stores it);
    * ``'sum'`` / ``'mean'``: :math:`\sum_{e \to (u, v)} x_e` / that divided by the count. DGL 2.1
      fails on integer features; here ``'sum'`` keeps their dtype and ``'mean'`` of integers is
      in torch's default float dtype.

    ``edata[return_counts]`` (after the copied features, replacing one of that name): how many
    edges each replaced, in the id type. ``writeback_mapping``: also each input edge's new id
    (``{canonical etype: ids}`` on a graph of several relations). Batch information is dropped."""
    if aggregator not in SIMPLE_AGGREGATORS:
        raise DGLError(f"to_simple: aggregator must be one of {SIMPLE_AGGREGATORS}, got {aggregator!r}")
    _graph_only(g, "to_simple")
    parts = typed_parts(g)
    edges, inverses = {}, {}
    for cet, relation in parts.relations.items():
        src, dst = relation._coo()
        pair_src, pair_dst, inverses[cet] = unique_pairs(src, dst)
        edges[cet] = (pair_src, pair_dst)
    out = _with_nodes_of(g, assemble(g, parts.counts, edges), copy_ndata)
    out_parts = typed_parts(out)
    for cet, relation in parts.relations.items():
        inverse, size = inverses[cet], edges[cet][0].numel()
        store = out_parts.relations[cet].edata
        counts = torch.bincount(inverse, minlength=size)
        if copy_edata:
            for key, value in _merged_edge_features(relation.edata, inverse, counts, aggregator).items():
                store[key] = value
        if return_counts:
            store[return_counts] = counts.to(g.idtype)
    if not writeback_mapping:
        return out
    mapping = {cet: g._out_ids(inverse) for cet, inverse in inverses.items()}
    return out, (next(iter(mapping.values())) if len(mapping) == 1 else mapping)


def _merged_edge_features(edata: Any, inverse: Tensor, counts: Tensor, aggregator: str) -> dict[str, Tensor]:
    """The features of the merged edges (``inverse``: each old edge's new id; ``counts``: old
    edges per new one) by ``aggregator`` (see :func:`to_simple`)."""
    size = counts.numel()
    if aggregator == "arbitrary":
        first = torch.full((size,), inverse.numel(), dtype=torch.int64, device=inverse.device)
        first = first.scatter_reduce(0, inverse, torch.arange(inverse.numel(), device=inverse.device), "amin")
        out = {key: value[first] for key, value in edata.items()}
        out[EID] = first
        return out
    out = {}
    for key, value in edata.items():
        wide = widened(value)   # half precision summed in float32, rounded once (a sum of many repeats)
        total = wide.new_zeros((size,) + tuple(value.shape[1:])).index_add_(0, inverse, wide)
        if aggregator == "mean":
            dtype = value.dtype if value.is_floating_point() else torch.get_default_dtype()
            total = total.to(widened_dtype(dtype)) / counts.to(widened_dtype(dtype)).reshape(
                (size,) + (1,) * (value.dim() - 1))
            out[key] = total.to(dtype)
        else:
            out[key] = total.to(value.dtype)
    return out


def _reverse_method(self, *args: Any, **kwargs: Any):
    """``DGLGraph.reverse``: with arguments, DGL's ``g.reverse(copy_ndata=True, copy_edata=False)``
    (:func:`reverse`); without any, the core :meth:`unigraph.Graph.reverse` as before (every feature
    along and the built formats swapped, which unigraph's own kernels rely on), where DGL would drop
    the edge features."""
    if not args and not kwargs:
        return CoreGraph.reverse(self)
    return reverse(self, *args, **kwargs)


def reverse(g: Any, copy_ndata: bool = True, copy_edata: bool = False, *, share_ndata: Any = None,
            share_edata: Any = None):
    """Every edge flipped, edge ids kept (DGL's ``dgl.reverse``; a relation ``(u, e, v)`` of a
    heterograph becomes ``(v, e, u)``); node features shared with ``copy_ndata``, edge features
    with ``copy_edata`` (``share_ndata`` / ``share_edata``: DGL's old names for them)."""
    if share_ndata is not None:
        warnings.warn("reverse: share_ndata is now copy_ndata", DeprecationWarning, stacklevel=2)
        copy_ndata = share_ndata
    if share_edata is not None:
        warnings.warn("reverse: share_edata is now copy_edata", DeprecationWarning, stacklevel=2)
        copy_edata = share_edata
    _graph_only(g, "reverse")
    if isinstance(g, DGLHeteroGraph):
        return g.reverse(copy_ndata=copy_ndata, copy_edata=copy_edata)
    out = g._carry(CoreGraph.reverse(g))  # the core's: features along, built formats swapped
    out._srctype, out._dsttype = g._dsttype, g._srctype
    for store in ((out.srcdata, out.dstdata) if not copy_ndata else ()) + ((out.edata,) if not copy_edata else ()):
        for key in list(store):
            del store[key]
    return out


def to_block(g: Any, dst_nodes: Any = None, include_dst_in_src: bool = True, src_nodes: Any = None):
    """A block for the in-edges of ``dst_nodes``, in edge id order (DGL's ``to_block``).

    ``dst_nodes``: ids, or ``{node type: ids}`` (a type left out has no destination node);
    default: every node with an in-edge, in id order per type. The source nodes of each type are
    its destination nodes (with ``include_dst_in_src``) then the other sources in order of first
    appearance, relation after relation in ``canonical_etypes`` order (DGL's order); or exactly
    ``src_nodes`` when given (every source of a kept edge among them, the destination nodes first
    with ``include_dst_in_src``). ``srcdata`` / ``dstdata`` / ``edata`` hold the original ids
    (``dgl.NID`` / ``dgl.EID``) and features.

    A graph of one node type and one relation gives a :class:`DGLGraph` block; any other graph a
    :class:`~unigraph.dgl.heteroblock.DGLHeteroBlock` whose ``g[etype]`` are such blocks. DGL 2.1
    expects ``dst_nodes`` to hold every destination of the relations into their types (it
    computes invalid ids otherwise); here the other edges are left out.
    """
    if getattr(g, "is_block", False):
        raise DGLError("to_block needs a graph, not a block")
    if not isinstance(g, (DGLGraph, DGLHeteroGraph)):
        raise DGLError(f"to_block expects a graph from unigraph.dgl, got {type(g).__name__}")
    relations = dict(g._relations) if isinstance(g, DGLHeteroGraph) else {g.canonical_etypes[0]: g}
    counts = {t: g.num_nodes(t) for t in g.ntypes}
    dst = _typed_ids(g, counts, dst_nodes, "dst_nodes") if dst_nodes is not None else _destinations(relations, counts)
    given = None if src_nodes is None else _typed_ids(g, counts, src_nodes, "src_nodes")
    src, edges = _block_layout(relations, counts, dst, include_dst_in_src, given)
    if isinstance(g, DGLGraph) and not g.is_bipartite:
        (cet, (eids, block_src, block_dst)), = edges.items()
        block = DGLGraph._trusted(block_src, block_dst, src[cet[0]].numel(), dst[cet[2]].numel(), True)
        block = g._carry(block)._with_types(*cet, block=True)
        stores = {"src": {cet[0]: block.srcdata}, "dst": {cet[2]: block.dstdata}}
    else:
        blocks = {cet: DGLGraph._trusted(block_src, block_dst, src[cet[0]].numel(), dst[cet[2]].numel(), True)
                  for cet, (_, block_src, block_dst) in edges.items()}
        block = DGLHeteroBlock(blocks, {t: ids.numel() for t, ids in src.items()},
                               {t: ids.numel() for t, ids in dst.items()}, g.idtype)
        block._initializers.update({kind: dict(inits) for kind, inits in _any(g)._initializers.items()})
        stores = {"src": block._src_stores, "dst": block._stores}
    for side, ids_of in (("src", src), ("dst", dst)):
        for ntype, store in stores[side].items():
            ids = ids_of[ntype]
            for key, value in g.nodes[ntype].data.items():
                store[key] = value[ids]
            store[NID] = g._out_ids(ids)
    for cet, (eids, _, _) in edges.items():
        target = block.edata if isinstance(block, DGLGraph) else block.edges[cet].data
        for key, value in relations[cet].edata.items():
            target[key] = value[eids]
        target[EID] = g._out_ids(eids)
    return block


def _any(g: Any) -> DGLGraph:
    return g._any_relation() if isinstance(g, DGLHeteroGraph) else g


def _typed_ids(g: Any, counts: dict[str, int], nodes: Any, what: str) -> dict[str, Tensor]:
    """``{node type: int64 ids}`` for every type of ``g`` from DGL's forms: a dict by type (a type
    left out has none) or, on a graph of one node type, the ids themselves."""
    if not isinstance(nodes, Mapping):
        if len(counts) != 1:
            raise DGLError(f"the graph has node types {list(counts)}: give {what} as a dict {{node type: ids}}")
        nodes = {next(iter(counts)): nodes}
    unknown = [t for t in nodes if t not in counts]
    if unknown:
        raise DGLError(f"{what} names node types {unknown} the graph does not have ({list(counts)})")
    return {t: _ids_or_mask(nodes[t], n, f"{what}[{t!r}]", g.device) if t in nodes
            else torch.zeros(0, dtype=torch.int64, device=g.device) for t, n in counts.items()}


def _ids_or_mask(nodes: Any, size: int, what: str, device: torch.device) -> Tensor:
    if isinstance(nodes, Tensor) and nodes.dtype == torch.bool:
        if nodes.numel() != size:
            raise DGLError(f"{what}: a node mask must have {size} entries, got {nodes.numel()}")
        return nodes.nonzero().flatten().to(device)
    return as_ids(nodes, size, what, device)


def _destinations(relations: dict, counts: dict[str, int]) -> dict[str, Tensor]:
    """Every node of each type that some relation reaches, in id order (DGL's default dst_nodes)."""
    device = next(iter(relations.values())).device
    reached = {t: torch.zeros(n, dtype=torch.bool, device=device) for t, n in counts.items()}
    for (_, _, dst_type), relation in relations.items():
        reached[dst_type][relation._coo()[1]] = True
    return {t: mask.nonzero().flatten() for t, mask in reached.items()}


def _block_layout(relations: dict, counts: dict[str, int], dst: dict[str, Tensor], include_dst_in_src: bool,
                  given: dict[str, Tensor] | None) -> tuple[dict[str, Tensor], dict]:
    """The source nodes of each type and, per relation, ``(edge ids, block sources, block
    destinations)``: the in-edges of ``dst`` in edge id order, renumbered into the block."""
    device = next(iter(relations.values())).device
    row = {t: _positions(ids, counts[t], device) for t, ids in dst.items()}  # old id -> destination row, else -1
    kept = {}
    for cet, relation in relations.items():
        src_ids, dst_ids = relation._coo()
        eids = (row[cet[2]][dst_ids] >= 0).nonzero().flatten()
        kept[cet] = (eids, src_ids[eids], row[cet[2]][dst_ids[eids]])
    if given is not None:
        src = _checked_sources(given, dst, include_dst_in_src, counts, device)
    else:
        src = {}
        for ntype, n in counts.items():
            seeds = dst[ntype] if include_dst_in_src else dst[ntype][:0]
            local = _positions(seeds, n, device)
            sources = [kept[cet][1] for cet in relations if cet[0] == ntype]
            fresh = torch.cat(sources) if sources else seeds[:0]
            fresh = fresh[local[fresh] < 0]
            src[ntype] = torch.cat([seeds, first_appearance(fresh) if fresh.numel() else seeds[:0]])
    local = {t: _positions(ids, counts[t], device) for t, ids in src.items()}
    edges = {}
    for cet, (eids, old_src, rows) in kept.items():
        block_src = local[cet[0]][old_src]
        if bool((block_src < 0).any()):
            missing = int(old_src[block_src < 0][0])
            raise DGLError(f"src_nodes[{cet[0]!r}] lacks node {missing}, the source of an edge {cet} into dst_nodes")
        edges[cet] = (eids, block_src, rows)
    return src, edges


def _positions(ids: Tensor, size: int, device: torch.device) -> Tensor:
    """For each of ``size`` old ids, its position in ``ids`` (the last one where repeated), else -1."""
    out = torch.full((size,), -1, dtype=torch.int64, device=device)
    out[ids] = torch.arange(ids.numel(), device=device)
    return out


def _checked_sources(given: dict[str, Tensor], dst: dict[str, Tensor], include_dst_in_src: bool,
                     counts: dict[str, int], device: torch.device) -> dict[str, Tensor]:
    """``src_nodes`` as given, checked: no repeated id, the destination nodes first with
    ``include_dst_in_src`` (a block reads its destinations' rows at the head of its sources)."""
    for ntype, ids in given.items():
        if torch.unique(ids).numel() != ids.numel():
            raise DGLError(f"src_nodes[{ntype!r}] repeats a node id")
        head = ids[:dst[ntype].numel()]
        if include_dst_in_src and (head.numel() != dst[ntype].numel() or not torch.equal(head, dst[ntype])):
            raise DGLError(f"src_nodes[{ntype!r}] must start with dst_nodes[{ntype!r}] (include_dst_in_src=True)")
    return given


# ---------------------------------------------------------------------- batches
def batch(graphs: Sequence[Any], ndata: Any = "__ALL__", edata: Any = "__ALL__"):
    """One graph holding ``graphs`` side by side (DGL's ``dgl.batch``): graphs of one kind and
    schema (homogeneous, bipartite or heterographs with the same node types and relations), ids
    offset per node type, each relation's edges one graph after another. Features are
    concatenated per type over the graphs that have rows of it (all of them where none has):
    every feature (``ndata`` / ``edata`` ``dgl.ALL``; those graphs must then hold the same
    features, shapes and dtypes, as DGL checks), the ones named (a list), or none (None).
    ``batch_num_nodes(ntype)`` / ``batch_num_edges(etype)`` remember the parts."""
    graphs = list(graphs)
    if not graphs:
        raise DGLError("batch needs at least one graph")
    for keys, what in ((ndata, "ndata"), (edata, "edata")):
        if not (is_all(keys) or keys is None or isinstance(keys, (list, tuple))):
            raise DGLError(f"batch: {what} must be dgl.ALL, a list of feature names or None, got {type(keys).__name__}")
    parts = [_batchable(g, graphs[0]) for g in graphs]
    first = parts[0]
    starts = {t: _starts([p.counts[t] for p in parts]) for t in first.counts}
    edges = {}
    for cet in first.relations:
        ends = [(p.relations[cet]._coo(), starts[cet[0]][i], starts[cet[2]][i]) for i, p in enumerate(parts)]
        edges[cet] = (torch.cat([src + a for (src, _), a, _ in ends]), torch.cat([dst + b for (_, dst), _, b in ends]))
    out = assemble(graphs[0], {t: sum(p.counts[t] for p in parts) for t in first.counts}, edges)
    merged = typed_parts(out)
    if ndata is not None:
        for ntype, store in merged.stores.items():
            _batch_features(store, [(p.stores[ntype], p.counts[ntype]) for p in parts], ndata, f"nodes[{ntype!r}]")
    if edata is not None:
        for cet, relation in merged.relations.items():
            _batch_features(relation.edata, [(p.relations[cet].edata, p.relations[cet]._src.numel()) for p in parts],
                            edata, f"edges[{cet}]")
    node_counts = {t: torch.cat([g.batch_num_nodes(t).to(torch.int64).cpu() for g in graphs]) for t in first.counts}
    edge_counts = {cet: torch.cat([g.batch_num_edges(cet).to(torch.int64).cpu() for g in graphs])
                   for cet in first.relations}
    _set_batch(out, node_counts, edge_counts)
    return out


def _batchable(g: Any, first: Any) -> TypedParts:
    """``g``'s typed parts, checked to batch with ``first`` (one kind and schema, no block)."""
    if isinstance(g, DGLHeteroGraph) != isinstance(first, DGLHeteroGraph) or not isinstance(g, (DGLGraph,
                                                                                               DGLHeteroGraph)):
        raise DGLError(f"batch takes unigraph.dgl graphs of one kind, got {type(first).__name__} and "
                       f"{type(g).__name__}")
    if g.is_block:
        raise DGLError("batch of blocks is not supported (DGL refuses it too)")
    if g.ntypes != first.ntypes or g.canonical_etypes != first.canonical_etypes:
        raise DGLError(f"batch needs graphs of one schema (node types {first.ntypes}, relations "
                       f"{first.canonical_etypes}); got {g.ntypes} and {g.canonical_etypes}")
    return typed_parts(g)


def _batch_features(target, stores: list[tuple[Any, int]], keys: Any, what: str) -> None:
    """``target[key]`` = the stores' ``key`` one after another, over the stores with rows (all
    of them where none has), for every key (``dgl.ALL``: they must all hold the same features) or
    the keys named; shapes and dtypes must agree (DGL's checks)."""
    used = [store for store, rows in stores if rows > 0] or [store for store, _ in stores]
    schemes = [{k: (tuple(v.shape[1:]), v.dtype) for k, v in store.items()} for store in used]
    names = list(schemes[0]) if is_all(keys) else list(keys)
    for i, scheme in enumerate(schemes):
        if is_all(keys) and scheme != schemes[0]:
            raise DGLError(f"batch: every graph must hold the same features on {what}; graph {i} has {scheme}, "
                           f"the first {schemes[0]}")
        missing = [k for k in names if k not in scheme]
        if missing:
            raise DGLError(f"batch: graph {i} lacks the features {missing} on {what}")
        if any(scheme[k] != schemes[0][k] for k in names):
            raise DGLError(f"batch: the features {names} on {what} differ in shape or dtype between the graphs")
    for key in names:
        target[key] = torch.cat([store[key] for store in used])


def _set_batch(g: Any, node_counts: dict, edge_counts: dict) -> None:
    """Record a batch's parts: per node type and relation on a heterograph or a bipartite
    graph, one tensor each (on the graph's device) on a homogeneous graph."""
    if isinstance(g, DGLHeteroGraph) or g.is_bipartite:
        g._batch_num_nodes, g._batch_num_edges = node_counts, edge_counts
    else:
        g._batch_num_nodes = next(iter(node_counts.values())).to(g.device)
        g._batch_num_edges = next(iter(edge_counts.values())).to(g.device)


def _starts(counts: list[int]) -> list[int]:
    """Where each part begins when parts of ``counts`` rows are laid one after another."""
    return [0, *itertools.accumulate(counts)][:-1]


def _split_sizes(g: Any, given: Any, types: list, of: Any, what: str) -> dict[Any, list[int]]:
    """Per type, the sizes of the parts (``given``: a dict by type, or the sizes themselves where
    the graph has one type of that kind; None: the graph's batch counts)."""
    if given is None:
        return {t: of(t).to(torch.int64).tolist() for t in types}
    if not isinstance(given, Mapping):
        if len(types) != 1:
            raise DGLError(f"unbatch: {what} of a graph with several types must be a dict by type")
        given = {types[0]: given}
    if what == "edge_split":
        given = {g.to_canonical_etype(k): v for k, v in given.items()}
    missing = [t for t in types if t not in given]
    if missing:
        raise DGLError(f"unbatch: {what} lacks the types {missing}")
    return {t: torch.as_tensor(given[t]).to(torch.int64).reshape(-1).tolist() for t in types}


def unbatch(g: Any, node_split: Any = None, edge_split: Any = None) -> list:
    """The graphs of a :func:`batch` (DGL's ``dgl.unbatch``), or the parts ``node_split`` /
    ``edge_split`` name (both or neither; per type for a graph of several): each type's nodes and
    each relation's edges cut in order, ids and features with them; a part's edges must stay
    within its nodes."""
    if (node_split is None) != (edge_split is None):
        raise DGLError("unbatch: give both node_split and edge_split, or neither")
    parts = _batchable(g, g)
    nodes = _split_sizes(g, node_split, list(parts.counts), g.batch_num_nodes, "node_split")
    edges = _split_sizes(g, edge_split, list(parts.relations), g.batch_num_edges, "edge_split")
    sizes = {len(c) for c in (*nodes.values(), *edges.values())}
    if len(sizes) != 1:
        raise DGLError(f"unbatch: the splits give different numbers of graphs per type: {sorted(sizes)}")
    for t, c in (*nodes.items(), *edges.items()):
        total = parts.counts[t] if t in parts.counts else parts.relations[t]._src.numel()
        if sum(c) != total or min(c, default=0) < 0:
            raise DGLError(f"unbatch: the sizes for {t!r} sum to {sum(c)}, the graph has {total}")
    return [_part(g, parts, nodes, edges, i, store_ids=False) for i in range(sizes.pop())]


def slice_batch(g: Any, gid: int, store_ids: bool = False):
    """Graph ``gid`` of a batch (DGL's ``dgl.slice_batch``); with ``store_ids``, ``dgl.NID`` /
    ``dgl.EID`` hold its ids in the batch."""
    parts = _batchable(g, g)
    nodes = _split_sizes(g, None, list(parts.counts), g.batch_num_nodes, "node_split")
    edges = _split_sizes(g, None, list(parts.relations), g.batch_num_edges, "edge_split")
    size = len(next(iter(nodes.values())))
    if isinstance(gid, bool) or not isinstance(gid, int) or not 0 <= gid < size:
        raise DGLError(f"slice_batch: gid must be an int in 0..{size - 1}, got {gid!r}")
    return _part(g, parts, nodes, edges, gid, store_ids)


def _part(g: Any, parts: TypedParts, nodes: dict, edges: dict, i: int, store_ids: bool):
    """Part ``i`` of ``g`` cut at the sizes ``nodes`` (per type) and ``edges`` (per relation)."""
    first = {t: _starts(c)[i] for t, c in nodes.items()}
    first_edge = {cet: _starts(c)[i] for cet, c in edges.items()}
    counts = {t: c[i] for t, c in nodes.items()}
    ends, rows = {}, {}
    for cet, relation in parts.relations.items():
        lo, count = first_edge[cet], edges[cet][i]
        src, dst = (ids[lo:lo + count] for ids in relation._coo())
        src, dst = src - first[cet[0]], dst - first[cet[2]]
        if count and (int(src.min()) < 0 or int(src.max()) >= counts[cet[0]] or int(dst.min()) < 0
                      or int(dst.max()) >= counts[cet[2]]):
            raise DGLError(f"unbatch: the node and edge splits do not cut {cet} into separate graphs")
        ends[cet], rows[cet] = (src, dst), torch.arange(lo, lo + count, device=g.device)
    out = assemble(g, counts, ends)
    node_rows = {t: torch.arange(first[t], first[t] + counts[t], device=g.device) for t in counts}
    return with_features(g, out, node_rows, rows, store_ids)


# ---------------------------------------------------------------------- feature dtypes
def _cast(g: Any, dtype: torch.dtype):
    out = g.local_var()
    stores = [out.srcdata, out.edata] + ([out.dstdata] if getattr(out, "is_bipartite", False) else [])
    if isinstance(out, DGLHeteroGraph):
        stores = out._all_stores()
    for store in stores:
        for key, value in list(store.items()):
            if value.is_floating_point():
                store[key] = value.to(dtype)
    return out


def to_bfloat16(g: Any):
    return _cast(g, torch.bfloat16)


def to_half(g: Any):
    return _cast(g, torch.float16)


def to_float(g: Any):
    return _cast(g, torch.float32)


def to_double(g: Any):
    return _cast(g, torch.float64)


# DGL keeps these functions in the module dgl.transforms.functional: here it is this module
functional = sys.modules[__name__]


DGLGraph.reverse = _reverse_method   # DGL's method form (defined here: graph.py sits below this module)

# dgl.transforms' names that live in modules importing this one (each loaded on first use here;
# ``unigraph.dgl`` imports them at once)
_ELSEWHERE = {
    **dict.fromkeys(("line_graph", "khop_adj", "khop_graph", "compact_graphs", "laplacian_lambda_max", "norm_by_dst",
                     "RemoveSelfLoop", "ToSimple", "LineGraph", "KHopGraph", "AddMetaPaths"),
                    "unigraph.dgl.structure_transforms"),
    **dict.fromkeys(("GCNNorm", "PPR", "HeatKernel", "GDC", "SIGNDiffusion"), "unigraph.dgl.diffusion_transforms"),
    **dict.fromkeys(("NodeShuffle", "DropNode", "DropEdge", "AddEdge", "FeatMask", "RowFeatNormalizer", "RandomWalkPE",
                     "SVDPE", "ToLevi", "random_walk_pe", "svd_pe"), "unigraph.dgl.augment_transforms"),
    **dict.fromkeys(("LapPE", "lap_pe"), "unigraph.dgl.positional"),
}


def __getattr__(name: str):
    module = _ELSEWHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'unigraph.dgl.transforms' has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(module), name)
