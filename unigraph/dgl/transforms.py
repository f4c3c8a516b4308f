"""DGL's graph transforms on unigraph: ``dgl.add_self_loop``, ``remove_self_loop``,
``to_bidirected``, ``reverse``, ``to_simple``, ``node_subgraph``, ``edge_subgraph``,
``in_subgraph``, ``out_subgraph``, ``to_block``, ``batch``/``unbatch``, the ``AddSelfLoop``
transform and the feature dtype casts. Each returns a new graph (features as DGL carries them);
the ids a subgraph was taken from are in ``ndata[dgl.NID]`` / ``edata[dgl.EID]``.
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import torch
from torch import Tensor

from unigraph.dgl.base import EID, NID, DGLError, is_all
from unigraph.dgl.graph import DGLGraph
from unigraph.dgl.heterograph import DGLHeteroGraph, one_relation, relation_graph
from unigraph.dgl.views import first_appearance
from unigraph.graph import Graph as CoreGraph
from unigraph.graph import unique_pairs


def _homogeneous(g: Any, what: str) -> DGLGraph:
    return one_relation(g, what, DGLGraph)


def add_self_loop(g: Any, edge_feat_names: Sequence[str] | None = None, fill_data: float = 1.0,
                  etype: Any = None) -> DGLGraph:
    """One more edge ``i -> i`` per node, after the existing edges (also where one exists); the
    new edges' features are ``fill_data`` (DGL's ``add_self_loop``)."""
    g = _homogeneous(g, "add_self_loop")
    if g.is_bipartite:
        raise DGLError("add_self_loop needs a homogeneous graph (source and destination types equal)")
    src, dst = g._coo()
    loops = torch.arange(g._num_src, device=g.device)
    names = set(g.edata) if edge_feat_names is None else set(edge_feat_names)
    edata = {key: torch.cat([value, value.new_full((g._num_src,) + tuple(value.shape[1:]), fill_data)])
             for key, value in g.edata.items() if key in names}
    return g._derived(torch.cat([src, loops]), torch.cat([dst, loops]), edata=edata)


def remove_self_loop(g: Any, etype: Any = None) -> DGLGraph:
    """Every edge ``i -> i`` removed (its features with it)."""
    g = _homogeneous(g, "remove_self_loop")
    src, dst = g._coo()
    keep = (src != dst).nonzero().flatten()
    return g._derived(src[keep], dst[keep], edata={key: value[keep] for key, value in g.edata.items()})


class AddSelfLoop:
    """DGL's ``transforms.AddSelfLoop``: remove self-loops, then add one per node (with
    ``allow_duplicate=True``, add without removing)."""

    def __init__(self, allow_duplicate: bool = False, new_etypes: bool = False, edge_feat_names=None,
                 fill_data: float = 1.0):
        if new_etypes:
            raise DGLError("AddSelfLoop(new_etypes=True) (heterographs) is not supported")
        self.allow_duplicate, self.edge_feat_names, self.fill_data = allow_duplicate, edge_feat_names, fill_data

    def __call__(self, g: Any) -> DGLGraph:
        if not self.allow_duplicate:
            g = remove_self_loop(g)
        return add_self_loop(g, self.edge_feat_names, self.fill_data)


def to_bidirected(g: Any, copy_ndata: bool = False, readonly: Any = None) -> DGLGraph:
    """Every edge in both directions, without repeats: one edge per ordered pair, sorted by
    (source, destination). Edge features are dropped, node features kept with ``copy_ndata``."""
    g = _homogeneous(g, "to_bidirected")
    src, dst = g._coo()
    pair_src, pair_dst, _ = unique_pairs(torch.cat([src, dst]), torch.cat([dst, src]))
    return g._derived(pair_src, pair_dst, keep_ndata=copy_ndata)


def to_simple(g: Any, return_counts: str = "count", writeback_mapping: bool = False, copy_ndata: bool = True,
              copy_edata: bool = False):
    """One edge per ordered pair, sorted by (source, destination); ``edata[return_counts]`` holds
    how many edges each replaced."""
    g = _homogeneous(g, "to_simple")
    src, dst = g._coo()
    pair_src, pair_dst, inverse = unique_pairs(src, dst)
    out = g._derived(pair_src, pair_dst, keep_ndata=copy_ndata)
    if return_counts:
        out.edata[return_counts] = torch.bincount(inverse, minlength=pair_src.numel()).to(g.idtype)
    if copy_edata:
        first = torch.full((pair_src.numel(),), src.numel(), dtype=torch.int64, device=g.device)
        first = first.scatter_reduce(0, inverse, torch.arange(src.numel(), device=g.device), "amin")
        for key, value in g.edata.items():
            out.edata[key] = value[first]
    return (out, g._out_ids(inverse)) if writeback_mapping else out


def reverse(g: Any, copy_ndata: bool = True, copy_edata: bool = False, **kwargs) -> DGLGraph:
    """Every edge flipped (edge ids keep their order)."""
    g = _homogeneous(g, "reverse")
    out = g._carry(CoreGraph.reverse(g))  # the core's: features along, built formats swapped
    out._srctype, out._dsttype = g._dsttype, g._srctype
    for store in ((out.srcdata, out.dstdata) if not copy_ndata else ()) + ((out.edata,) if not copy_edata else ()):
        for key in list(store):
            del store[key]
    return out


# ---------------------------------------------------------------------- subgraphs
def node_subgraph(g: Any, nodes: Any, *, relabel_nodes: bool = True, store_ids: bool = True, **kwargs) -> DGLGraph:
    """``g.subgraph(nodes)`` (see :meth:`DGLGraph.subgraph`)."""
    return _homogeneous(g, "node_subgraph").subgraph(nodes, relabel_nodes=relabel_nodes, store_ids=store_ids)


def edge_subgraph(g: Any, edges: Any, *, relabel_nodes: bool = True, store_ids: bool = True, **kwargs) -> DGLGraph:
    return _homogeneous(g, "edge_subgraph").edge_subgraph(edges, relabel_nodes=relabel_nodes, store_ids=store_ids)


def in_subgraph(g: Any, nodes: Any, *, relabel_nodes: bool = False, store_ids: bool = True, **kwargs) -> DGLGraph:
    return _homogeneous(g, "in_subgraph").in_subgraph(nodes, relabel_nodes=relabel_nodes, store_ids=store_ids)


def out_subgraph(g: Any, nodes: Any, *, relabel_nodes: bool = False, store_ids: bool = True, **kwargs) -> DGLGraph:
    return _homogeneous(g, "out_subgraph").out_subgraph(nodes, relabel_nodes=relabel_nodes, store_ids=store_ids)


def to_block(g: Any, dst_nodes: Any = None, include_dst_in_src: bool = True, src_nodes: Any = None) -> DGLGraph:
    """A block for the in-edges of ``dst_nodes`` (default: every node with an in-edge, in id
    order), in edge id order: its destinations are ``dst_nodes``; its sources the destinations
    (with ``include_dst_in_src``) then the other sources in order of first appearance. ``srcdata`` /
    ``dstdata`` / ``edata`` hold the original ids (``dgl.NID`` / ``dgl.EID``) and features."""
    g = _homogeneous(g, "to_block")
    if g.is_bipartite:
        raise DGLError("to_block needs a homogeneous graph")
    if src_nodes is not None:
        raise DGLError("to_block(src_nodes=...) is not supported")
    if dst_nodes is None:
        dst = (g.in_degrees().to(torch.int64) > 0).nonzero().flatten()
    else:
        dst = g._node_ids(dst_nodes, g._num_dst)
    position = torch.full((g._num_dst,), -1, dtype=torch.int64, device=g.device)
    position[dst] = torch.arange(dst.numel(), device=g.device)
    eids = (position[g._coo()[1]] >= 0).nonzero().flatten()  # every in-edge of dst, in edge id order (DGL's)
    rows = position[g._coo()[1][eids]]
    src_of_edge = g._coo()[0][eids]
    local = torch.full((g._num_src,), -1, dtype=torch.int64, device=g.device)
    if include_dst_in_src:
        local[dst] = torch.arange(dst.numel(), device=g.device)
    fresh = src_of_edge[local[src_of_edge] < 0]
    others = first_appearance(fresh) if fresh.numel() else dst[:0]
    local[others] = torch.arange(others.numel(), device=g.device) + (dst.numel() if include_dst_in_src else 0)
    src = torch.cat([dst, others]) if include_dst_in_src else others
    block = DGLGraph._trusted(local[src_of_edge], rows, src.numel(), dst.numel(), True)
    block = g._carry(block)._with_types(g._srctype, g._etype, g._dsttype, block=True)
    for key, value in g.ndata.items():
        block.srcdata[key] = value[src]
        block.dstdata[key] = value[dst]
    block.srcdata[NID] = g._out_ids(src)
    block.dstdata[NID] = g._out_ids(dst)
    for key, value in g.edata.items():
        block.edata[key] = value[eids]
    block.edata[EID] = g._out_ids(eids)
    return block


# ---------------------------------------------------------------------- batches
def batch(graphs: Sequence[Any], ndata: Any = "__ALL__", edata: Any = "__ALL__") -> DGLGraph | DGLHeteroGraph:
    """One graph holding ``graphs`` side by side (node ids offset), features concatenated (those
    every graph has, or those named); ``batch_num_nodes()``/``batch_num_edges()`` remember the parts.
    Heterographs of one schema batch per node type and relation (:func:`_batch_typed`)."""
    graphs = list(graphs)
    if any(isinstance(g, DGLHeteroGraph) for g in graphs):
        return _batch_typed(graphs, ndata, edata)
    graphs = [_homogeneous(g, "batch") for g in graphs]
    if not graphs:
        raise DGLError("batch needs at least one graph")
    if any(g.is_bipartite for g in graphs):
        raise DGLError("batch of bipartite graphs or blocks is not supported")
    counts = [g._num_src for g in graphs]
    offsets = torch.tensor([0] + counts[:-1], device=graphs[0].device).cumsum(0)
    src = torch.cat([g._coo()[0] + int(o) for g, o in zip(graphs, offsets)])
    dst = torch.cat([g._coo()[1] + int(o) for g, o in zip(graphs, offsets)])
    out = graphs[0]._carry(DGLGraph._trusted(src, dst, sum(counts), sum(counts), False))
    _concatenated(out.ndata, [g.ndata for g in graphs], ndata)
    _concatenated(out.edata, [g.edata for g in graphs], edata)
    out._batch_num_nodes = torch.cat([g.batch_num_nodes().to(torch.int64) for g in graphs])
    out._batch_num_edges = torch.cat([g.batch_num_edges().to(torch.int64) for g in graphs])
    return out


def _batch_typed(graphs: list, ndata: Any, edata: Any) -> DGLHeteroGraph:
    """:func:`batch` of heterographs with the same node types and relations: each type's nodes
    side by side (ids offset per type), each relation's edges side by side, features concatenated
    per type and per relation (those every graph has, or those named)."""
    if not all(isinstance(g, DGLHeteroGraph) for g in graphs):
        raise DGLError("batch takes heterographs of one schema or homogeneous graphs, not a mix")
    first = graphs[0]
    if any(g.ntypes != first.ntypes or g.canonical_etypes != first.canonical_etypes for g in graphs):
        raise DGLError(f"batch needs heterographs of one schema (node types {first.ntypes}, relations "
                       f"{first.canonical_etypes}); got {[(g.ntypes, g.canonical_etypes) for g in graphs]}")
    counts = {t: [g.num_nodes(t) for g in graphs] for t in first.ntypes}
    offsets = {t: _starts(c) for t, c in counts.items()}
    totals = {t: sum(c) for t, c in counts.items()}
    relations = {}
    for cet in first.canonical_etypes:
        src_type, _, dst_type = cet
        src = torch.cat([g[cet]._coo()[0] + offsets[src_type][i] for i, g in enumerate(graphs)])
        dst = torch.cat([g[cet]._coo()[1] + offsets[dst_type][i] for i, g in enumerate(graphs)])
        relations[cet] = relation_graph(src, dst, cet, totals)
    out = DGLHeteroGraph(relations, totals, first.idtype)
    for ntype in first.ntypes:
        _concatenated(out.nodes[ntype].data, [g.nodes[ntype].data for g in graphs], ndata)
    for cet in first.canonical_etypes:
        _concatenated(out.edges[cet].data, [g.edges[cet].data for g in graphs], edata)
    out._batch_num_nodes = {t: torch.cat([g.batch_num_nodes(t).to(torch.int64).cpu() for g in graphs])
                            for t in first.ntypes}
    out._batch_num_edges = {cet: torch.cat([g.batch_num_edges(cet).to(torch.int64).cpu() for g in graphs])
                            for cet in first.canonical_etypes}
    return out


def _starts(counts: list[int]) -> list[int]:
    """Where each part begins when parts of ``counts`` rows are laid one after another."""
    return [0, *itertools.accumulate(counts)][:-1]


def _concatenated(target, stores: list, keys: Any) -> None:
    """``target[key]`` = the stores' ``key`` rows one after another, for the keys every store has
    (``keys`` "__ALL__") or those named."""
    names = set.intersection(*(set(store) for store in stores)) if is_all(keys) else set(keys or ())
    for key in sorted(names):
        target[key] = torch.cat([store[key] for store in stores])


def unbatch(g: Any, node_split: Any = None, edge_split: Any = None) -> list[DGLGraph]:
    """The graphs of a :func:`batch` (or the parts ``node_split``/``edge_split`` name)."""
    if isinstance(g, DGLHeteroGraph):
        if node_split is not None or edge_split is not None:
            raise DGLError("unbatch of a heterograph takes its own batch_num_nodes/batch_num_edges (no splits)")
        return _unbatch_typed(g)
    g = _homogeneous(g, "unbatch")
    nodes = torch.as_tensor(node_split if node_split is not None else g.batch_num_nodes()).to(torch.int64).tolist()
    edges = torch.as_tensor(edge_split if edge_split is not None else g.batch_num_edges()).to(torch.int64).tolist()
    src, dst = g._coo()
    parts, node_start, edge_start = [], 0, 0
    for n, e in zip(nodes, edges):
        part_src, part_dst = src[edge_start:edge_start + e] - node_start, dst[edge_start:edge_start + e] - node_start
        if e and (int(part_src.min()) < 0 or int(part_dst.max()) >= n or int(part_src.max()) >= n
                  or int(part_dst.min()) < 0):
            raise DGLError("the node and edge splits do not cut the graph into separate parts")
        part = g._carry(DGLGraph._trusted(part_src, part_dst, n, n, False))
        for key, value in g.ndata.items():
            part.ndata[key] = value[node_start:node_start + n]
        for key, value in g.edata.items():
            part.edata[key] = value[edge_start:edge_start + e]
        parts.append(part)
        node_start, edge_start = node_start + n, edge_start + e
    return parts


def _unbatch_typed(g: DGLHeteroGraph) -> list[DGLHeteroGraph]:
    """The heterographs of a :func:`batch` of heterographs: each type's nodes and each relation's
    edges cut at their batch counts, ids and features with them."""
    nodes = {t: g.batch_num_nodes(t).to(torch.int64).tolist() for t in g.ntypes}
    edges = {cet: g.batch_num_edges(cet).to(torch.int64).tolist() for cet in g.canonical_etypes}
    starts = {t: _starts(c) for t, c in nodes.items()}
    edge_starts = {cet: _starts(c) for cet, c in edges.items()}
    parts = []
    for i in range(g.batch_size):
        counts, relations = {t: c[i] for t, c in nodes.items()}, {}
        for cet in g.canonical_etypes:
            src_type, _, dst_type = cet
            first, count = edge_starts[cet][i], edges[cet][i]
            src, dst = (ids[first:first + count] for ids in g[cet]._coo())
            relations[cet] = relation_graph(src - starts[src_type][i], dst - starts[dst_type][i], cet, counts)
        part = DGLHeteroGraph(relations, counts, g.idtype)
        for ntype in g.ntypes:
            for key, value in g.nodes[ntype].data.items():
                part.nodes[ntype].data[key] = value[starts[ntype][i]:starts[ntype][i] + nodes[ntype][i]]
        for cet in g.canonical_etypes:
            for key, value in g.edges[cet].data.items():
                part.edges[cet].data[key] = value[edge_starts[cet][i]:edge_starts[cet][i] + edges[cet][i]]
        parts.append(part)
    return parts


# ---------------------------------------------------------------------- feature dtypes
def _cast(g: Any, dtype: torch.dtype):
    out = g.local_var()
    stores = [out.srcdata, out.edata] + ([out.dstdata] if getattr(out, "is_bipartite", False) else [])
    if isinstance(out, DGLHeteroGraph):
        stores = list(out._stores.values()) + [r.edata for r in out._relations.values()]
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
