r"""DGL's structural graph transforms on unigraph: the line graph, :math:`k`-hop graphs, graph
compaction, the Laplacian's largest eigenvalue, the in-degree edge norm, and the module forms
``RemoveSelfLoop``, ``ToSimple``, ``LineGraph``, ``KHopGraph``, ``AddMetaPaths``.

* :func:`line_graph`: :math:`L(G)` has a node per edge of :math:`G` and an edge
  :math:`e_1 \to e_2` for every pair :math:`e_1 = (u, v)`, :math:`e_2 = (v, w)` with
  :math:`e_1 \ne e_2`; without ``backtracking`` also :math:`w \ne u`.
* :func:`khop_adj` / :func:`khop_graph`: :math:`A^k` with :math:`A_{uv}` the number of edges
  :math:`u \to v`; the graph has :math:`(A^k)_{uv}` parallel edges :math:`u \to v` (one per walk
  of length :math:`k`), so one message pass over it is :math:`k` passes over :math:`G`.
* :func:`compact_graphs`: the nodes no edge of any given graph touches are dropped (ids
  renumbered alike in every graph).
* :func:`laplacian_lambda_max`: the largest-magnitude eigenvalue of
  :math:`L = I - D^{-1/2} A^\top D^{-1/2}`, :math:`D` the in-degrees (at least 1), per graph of
  a batch.
* :func:`norm_by_dst`: :math:`1 / d_{\mathrm{in}}(v)` for every edge :math:`u \to v`.

Every function builds a new graph (features shared where DGL shares them) and drops batch
information, as DGL's do.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from unigraph.dgl.base import NID, DGLError
from unigraph.dgl.graph import DGLGraph
from unigraph.dgl.heterograph import DGLHeteroGraph
from unigraph.dgl.subgraph import assemble, typed_parts
from unigraph.dgl.transform_base import BaseTransform
from unigraph.dgl.transforms import (
    _graph_only, _restructured, _typed_ids, metapath_reachable_graph, remove_self_loop, to_simple, unbatch)
from unigraph.dgl.views import first_appearance

__all__ = [
    "line_graph", "khop_adj", "khop_graph", "compact_graphs", "laplacian_lambda_max", "norm_by_dst",
    "RemoveSelfLoop", "ToSimple", "LineGraph", "KHopGraph", "AddMetaPaths",
]


def _one_type_relation(g: Any, what: str) -> DGLGraph:
    """``g`` when it is one relation within one node type (DGL's ``is_homogeneous``)."""
    _graph_only(g, what)
    if isinstance(g, DGLHeteroGraph) or g.is_bipartite:
        raise DGLError(f"{what} needs a homogeneous graph (one node type, one edge type); this one has node types "
                       f"{g.ntypes} and relations {g.canonical_etypes}")
    return g


def _new_graph(src: Tensor, dst: Tensor, num_nodes: int, like: DGLGraph) -> DGLGraph:
    """A plain DGL graph (types ``_N`` / ``_E``) of these valid edges with ``like``'s id type."""
    out = DGLGraph._trusted(src, dst, num_nodes, num_nodes, False)
    out._idtype = like.idtype
    return out


def _hop_count(k: Any, what: str) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise DGLError(f"{what}: k must be an int >= 0, got {k!r}")
    return int(k)


# ---------------------------------------------------------------------- line graph
def line_graph(g: Any, backtracking: bool = True, shared: bool = False) -> DGLGraph:
    """The line graph of a homogeneous graph (DGL's ``dgl.line_graph``): node ``i`` is edge ``i``
    of ``g``; edge ``i -> j`` wherever edge ``j`` leaves the node edge ``i`` enters, ``j != i``
    (an edge never follows itself, a self-loop included); ``backtracking=False`` also leaves out
    ``j`` that returns to ``i``'s source. Edges are ordered by ``i``, then ``j``; types ``_N`` /
    ``_E``, ``g``'s id type and device. ``shared``: the node features are ``g``'s edge features
    (the same tensors)."""
    g = _one_type_relation(g, "line_graph")
    src, dst = g._coo()
    count = src.numel()
    device = src.device
    # CSR by source: each node's out-edges in id order
    by_src = torch.sort(src, stable=True).indices
    ptr = torch.zeros(g._num_src + 1, dtype=torch.int64, device=device)
    ptr[1:] = torch.cumsum(torch.bincount(src, minlength=g._num_src), 0)
    # for edge i, every out-edge of dst[i]: the pairs (i, slot) enumerated without a loop
    fan = ptr[dst + 1] - ptr[dst]
    first = torch.repeat_interleave(torch.arange(count, device=device), fan)
    offset = torch.arange(first.numel(), device=device) - torch.repeat_interleave(torch.cumsum(fan, 0) - fan, fan)
    second = by_src[ptr[dst[first]] + offset]
    keep = second != first
    if not backtracking:
        keep &= dst[second] != src[first]
    out = _new_graph(first[keep], second[keep], count, g)
    if shared:
        for key, value in g.edata.items():
            out.ndata[key] = value
    return out


class LineGraph(BaseTransform):
    """DGL's ``transforms.LineGraph``: :func:`line_graph` with the edge features carried over as
    node features (``shared=True``)."""

    def __init__(self, backtracking: bool = True):
        self.backtracking = backtracking

    def __call__(self, g: Any):
        return line_graph(g, backtracking=self.backtracking, shared=True)


# ---------------------------------------------------------------------- k-hop
def _adjacency_power(g: DGLGraph, k: int):
    """:math:`A^k` as SciPy computes it from the adjacency in the format ``g`` made first (COO or
    CSR; the entry order of the product, and so of :func:`khop_graph`'s edges, is DGL's)."""
    import scipy.sparse
    fmt = next((f for f in g.formats()["created"] if f in ("coo", "csr")), "coo")
    src, dst = (ids.cpu().numpy() for ids in g._coo())
    n = g._num_src
    ones = np.ones(src.size, dtype=np.int64)   # int64 walk counts: they outgrow int32 long before memory
    if fmt == "coo":
        adj = scipy.sparse.coo_matrix((ones, (src, dst)), shape=(n, n))
    else:   # the graph's CSR: a row's entries in edge-id order, parallel edges apart
        ptr, indices, _ = g.out_csr()
        adj = scipy.sparse.csr_matrix((ones, indices.cpu().numpy(), ptr.cpu().numpy()), shape=(n, n))
    return adj ** k   # (a sparse *matrix*: the matrix power)


def khop_adj(g: Any, k: int) -> Tensor:
    r"""The dense :math:`A^k` (float32, on the CPU) of a homogeneous graph, :math:`A_{uv}` the
    number of edges :math:`u \to v` (DGL's ``dgl.khop_adj``; ``k = 0`` is the identity)."""
    g = _one_type_relation(g, "khop_adj")
    k = _hop_count(k, "khop_adj")
    return torch.from_numpy(np.asarray(_adjacency_power(g, k).todense()).astype(np.float32))


def khop_graph(g: Any, k: int, copy_ndata: bool = True) -> DGLGraph:
    r"""The graph of :math:`A^k` (DGL's ``dgl.khop_graph``): :math:`(A^k)_{uv}` parallel edges
    :math:`u \to v`, one per walk of length :math:`k` (``k = 0``: a self-loop per node), in the
    order SciPy's sparse product holds the entries (DGL's); types ``_N`` / ``_E``, ``g``'s id type
    and device; node features shared with ``copy_ndata``."""
    g = _one_type_relation(g, "khop_graph")
    k = _hop_count(k, "khop_graph")
    power = _adjacency_power(g, k).tocoo()
    counts = torch.from_numpy(power.data.astype(np.int64))
    src = torch.repeat_interleave(torch.from_numpy(power.row.astype(np.int64)), counts)
    dst = torch.repeat_interleave(torch.from_numpy(power.col.astype(np.int64)), counts)
    out = _new_graph(src.to(g.device), dst.to(g.device), g._num_src, g)
    if copy_ndata:
        for key, value in g.ndata.items():
            out.ndata[key] = value
    return out


class KHopGraph(BaseTransform):
    """DGL's ``transforms.KHopGraph``: :func:`khop_graph` with node features."""

    def __init__(self, k: int):
        self.k = _hop_count(k, "KHopGraph")

    def __call__(self, g: Any):
        return khop_graph(g, self.k)


# ---------------------------------------------------------------------- compaction
def compact_graphs(graphs: Any, always_preserve: Any = None, copy_ndata: bool = True, copy_edata: bool = True):
    """``graphs`` (one graph or a list; the same node types, counts, id type and device) without
    the nodes that no edge of any of them touches, unless ``always_preserve`` keeps them (ids, or
    ``{node type: ids}``); DGL's ``dgl.compact_graphs``.

    The kept nodes of each type are, in this order, the ``always_preserve`` ids, then for each
    graph and each of its relations the sources, then the destinations, in edge order, each node
    at its first appearance (DGL's order); every graph's edges keep their order. ``copy_ndata``:
    the kept nodes' features and ``ndata[dgl.NID]``, their ids in the input; ``copy_edata``: the
    edge features (shared). As in DGL 2.1, ``dgl.NID`` is not stored without ``copy_ndata``."""
    single = isinstance(graphs, (DGLGraph, DGLHeteroGraph))
    graphs = [graphs] if single else list(graphs)
    if not graphs:
        return []
    for g in graphs:
        if getattr(g, "is_block", False):
            raise DGLError("compact_graphs: compacting a block is not supported (DGL refuses it too)")
        _graph_only(g, "compact_graphs")
    first = graphs[0]
    counts = typed_parts(first).counts
    for i, g in enumerate(graphs[1:], 1):
        if g.ntypes != first.ntypes or typed_parts(g).counts != counts:
            raise DGLError(f"compact_graphs: every graph must have the same node types and counts; graph 0 has "
                           f"{counts}, graph {i} {typed_parts(g).counts}")
        if g.idtype != first.idtype or g.device != first.device:
            raise DGLError(f"compact_graphs: every graph must have one id type and device; graph 0 has "
                           f"{first.idtype} on {first.device}, graph {i} {g.idtype} on {g.device}")
    device = first.device
    seen = {t: [ids] for t, ids in _preserved(first, counts, always_preserve).items()}
    for g in graphs:
        for cet, relation in typed_parts(g).relations.items():
            src, dst = relation._coo()
            seen[cet[0]].append(src)
            seen[cet[2]].append(dst)
    kept = {t: first_appearance(torch.cat(parts)) for t, parts in seen.items()}
    new_id = {}
    for ntype, ids in kept.items():
        mapping = torch.full((counts[ntype],), -1, dtype=torch.int64, device=device)
        mapping[ids] = torch.arange(ids.numel(), device=device)
        new_id[ntype] = mapping
    out = []
    for g in graphs:
        parts = typed_parts(g)
        edges = {cet: (new_id[cet[0]][rel._coo()[0]], new_id[cet[2]][rel._coo()[1]])
                 for cet, rel in parts.relations.items()}
        new = assemble(g, {t: ids.numel() for t, ids in kept.items()}, edges)
        new_parts = typed_parts(new)
        if copy_ndata:
            for ntype, ids in kept.items():
                store = new_parts.stores[ntype]
                for key, value in parts.stores[ntype].items():
                    store[key] = value[ids]
                store[NID] = g._out_ids(ids)
        if copy_edata:
            for cet, relation in parts.relations.items():
                for key, value in relation.edata.items():
                    new_parts.relations[cet].edata[key] = value
        out.append(new)
    return out[0] if single else out


def _preserved(g: Any, counts: dict[str, int], always_preserve: Any) -> dict[str, Tensor]:
    """``always_preserve`` as int64 ids per node type (none for a type left out)."""
    return _typed_ids(g, counts, {} if always_preserve is None else always_preserve, "always_preserve")


# ---------------------------------------------------------------------- spectra and norms
def laplacian_lambda_max(g: Any) -> list[float]:
    r"""For each graph of the batch ``g`` (one graph: a list of one), the real part of the
    largest-magnitude eigenvalue of :math:`L = I - D^{-1/2} A^\top D^{-1/2}`, :math:`A^\top_{vu}`
    the number of edges :math:`u \to v`, :math:`D` the in-degrees clipped to at least 1 (DGL's
    ``dgl.laplacian_lambda_max``; at most 2 for a bidirected graph). ARPACK computes it, as in
    DGL; a graph of fewer than 3 nodes, where ARPACK cannot run (DGL 2.1 fails there), is solved
    densely. A part without nodes is refused."""
    g = _one_type_relation(g, "laplacian_lambda_max")
    import scipy.sparse
    import scipy.sparse.linalg
    out = []
    for i, part in enumerate(unbatch(g)):
        n = part.num_nodes()
        if n == 0:
            raise DGLError(f"laplacian_lambda_max: graph {i} of the batch has no nodes (no eigenvalue)")
        src, dst = (ids.cpu().numpy() for ids in part._coo())
        adj = scipy.sparse.coo_matrix((np.ones(src.size), (dst, src)), shape=(n, n)).tocsr()
        degree = np.bincount(dst, minlength=n).clip(1).astype(float)
        norm = scipy.sparse.diags(degree ** -0.5)
        laplacian = scipy.sparse.eye(n) - norm @ adj @ norm
        if n < 3:
            values = np.linalg.eigvals(laplacian.toarray())
            value = values[np.argmax(np.abs(values))]
        else:
            value = scipy.sparse.linalg.eigs(laplacian, 1, which="LM", return_eigenvectors=False)[0]
        out.append(float(np.real(value)))
    return out


def norm_by_dst(g: Any, etype: Any = None) -> Tensor:
    r"""For every edge :math:`u \to v` of relation ``etype``, :math:`1 / d_{\mathrm{in}}(v)`
    (float32, edge-id order, on the graph's device; DGL's ``dgl.norm_by_dst``)."""
    if not isinstance(g, (DGLGraph, DGLHeteroGraph)):
        raise DGLError(f"norm_by_dst expects a graph from unigraph.dgl, got {type(g).__name__}")
    relation = g._relation_of(etype)
    dst = relation._coo()[1]
    degree = torch.bincount(dst, minlength=relation._num_dst)
    return 1.0 / degree[dst].to(torch.float32)


# ---------------------------------------------------------------------- module forms
class RemoveSelfLoop(BaseTransform):
    """DGL's ``transforms.RemoveSelfLoop``: :func:`~unigraph.dgl.transforms.remove_self_loop` on
    every relation within one node type (relations between two types are left as they are);
    features follow their edges."""

    def __call__(self, g: Any):
        _graph_only(g, "RemoveSelfLoop")
        for cet in g.canonical_etypes:
            if cet[0] == cet[2]:
                g = remove_self_loop(g, etype=cet)
        return g


class ToSimple(BaseTransform):
    """DGL's ``transforms.ToSimple``: :func:`~unigraph.dgl.transforms.to_simple` keeping the edge
    features, merged edges' combined by ``aggregator`` (``'arbitrary'``: the first edge's,
    ``'sum'``, ``'mean'``), and each edge's multiplicity in ``edata[return_counts]``."""

    def __init__(self, return_counts: str = "count", aggregator: str = "arbitrary"):
        self.return_counts, self.aggregator = return_counts, aggregator

    def __call__(self, g: Any):
        return to_simple(g, return_counts=self.return_counts, copy_edata=True, aggregator=self.aggregator)


class AddMetaPaths(BaseTransform):
    """DGL's ``transforms.AddMetaPaths``: for each ``name: metapath`` of ``metapaths`` (a
    sequence of relations, each starting where the previous ends; names or canonical triples:
    DGL 2.1 takes only triples, reading a name's first letter as a node type), a relation ``(first source
    type, name, last destination type)`` joining each node to every node a walk along the
    metapath reaches (:func:`~unigraph.dgl.transforms.metapath_reachable_graph`). With
    ``keep_orig_edges`` the graph's own relations and their edge features stay (one of them with
    the same canonical type replaces a metapath's); node features are carried over."""

    def __init__(self, metapaths: Mapping[str, Sequence[Any]], keep_orig_edges: bool = True):
        if not isinstance(metapaths, Mapping):
            raise DGLError(f"AddMetaPaths: metapaths must be a dict {{edge type name: metapath}}, got "
                           f"{type(metapaths).__name__}")
        self.metapaths, self.keep_orig_edges = metapaths, keep_orig_edges

    def __call__(self, g: Any):
        _graph_only(g, "AddMetaPaths")
        data = {}
        for name, metapath in self.metapaths.items():
            reach = metapath_reachable_graph(g, metapath)   # (checks the metapath)
            start, end = g.to_canonical_etype(metapath[0])[0], g.to_canonical_etype(metapath[-1])[2]
            data[(start, name, end)] = reach.edges()
        if self.keep_orig_edges:
            for cet in g.canonical_etypes:
                data[cet] = g.edges(etype=cet)
        return _restructured(g, data, copy_edata=self.keep_orig_edges)


def _line_graph_method(self, backtracking: bool = True, shared: bool = False):
    """``DGLGraph.line_graph``: DGL's method form of :func:`line_graph`."""
    return line_graph(self, backtracking=backtracking, shared=shared)


DGLGraph.line_graph = _line_graph_method   # (defined here: graph.py sits below this module)
