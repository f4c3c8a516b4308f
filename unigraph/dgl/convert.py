"""DGL's graph constructors on unigraph: ``dgl.graph``, ``dgl.heterograph``, ``dgl.create_block``,
``dgl.from_scipy``, ``dgl.bipartite_from_scipy``, ``dgl.from_networkx``, ``dgl.rand_graph``,
``dgl.rand_bipartite``, ``dgl.to_homogeneous``, ``dgl.to_heterogeneous``.

Every constructor validates its input through :class:`unigraph.Graph`'s checks (integer ids,
in range, counts that agree) before anything is built. Ids may be tensors of any integer dtype,
lists or numpy arrays; ``idtype`` defaults to the dtype of the tensors given (int64 otherwise),
as in DGL.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from unigraph.dgl.base import DEFAULT_ETYPE, DEFAULT_NTYPE, EID, ETYPE, NID, NTYPE, DGLError
from unigraph.dgl.graph import DGLGraph, check_idtype
from unigraph.dgl.heteroblock import DGLHeteroBlock
from unigraph.dgl.heterograph import DGLHeteroGraph, relation_graph


def _ids(value: Any, what: str) -> tuple[Tensor, torch.dtype | None]:
    """A 1-D int64 tensor of ids and the id dtype the input implies (None: not a tensor)."""
    implied = value.dtype if isinstance(value, Tensor) and value.dtype in (torch.int32, torch.int64) else None
    if isinstance(value, Tensor):
        ids = value
    else:
        array = np.asarray(value)
        ids = torch.from_numpy(array.astype(np.int64) if array.size == 0 else array)
    if ids.dtype == torch.bool or ids.is_floating_point() or ids.is_complex():
        raise DGLError(f"{what} must hold integer node ids, got {ids.dtype}")
    return ids.reshape(-1).to(torch.int64), implied


def parse_edges(data: Any) -> tuple[Tensor, Tensor, torch.dtype | None]:
    """``(src, dst, implied idtype)`` from DGL's edge formats: ``(u, v)``, ``('coo', (u, v))``,
    ``('csr', (indptr, indices, eids))`` (rows are sources), ``('csc', (indptr, indices, eids))``
    (rows are destinations), or ``[]`` (no edges)."""
    if isinstance(data, (list, tuple)) and len(data) == 0:
        return torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), None
    if isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], str):
        kind, payload = data
        if kind == "coo":
            return parse_edges(tuple(payload))
        if kind not in ("csr", "csc"):
            raise DGLError(f"unknown sparse format {kind!r}; DGL's are 'coo', 'csr', 'csc'")
        indptr, implied = _ids(payload[0], "indptr")
        indices, _ = _ids(payload[1], "indices")
        rows = torch.repeat_interleave(torch.arange(indptr.numel() - 1), indptr.diff())
        if len(payload) > 2 and payload[2] is not None and len(payload[2]):
            eids, _ = _ids(payload[2], "eids")
            order = torch.empty_like(eids)
            order[eids] = torch.arange(eids.numel())
            rows, indices = rows[order], indices[order]
        return (rows, indices, implied) if kind == "csr" else (indices, rows, implied)
    if isinstance(data, (tuple, list)) and len(data) == 2:
        src, implied = _ids(data[0], "the source ids")
        dst, _ = _ids(data[1], "the destination ids")
        if src.numel() != dst.numel():
            raise DGLError(f"the source and destination ids differ in length ({src.numel()} and {dst.numel()})")
        return src, dst, implied
    raise DGLError(f"graph data must be (src, dst), ('coo'|'csr'|'csc', ...) or [], got {type(data).__name__}")


def _finish(graph, idtype, implied, device):
    graph._idtype = check_idtype(idtype if idtype is not None else (implied or torch.int64))
    return graph if device is None or torch.device(device) == graph.device else graph.to(device)


def graph(data: Any, *, ntype: str = DEFAULT_NTYPE, etype: str = DEFAULT_ETYPE, num_nodes: int | None = None,
          idtype: torch.dtype | None = None, device: Any = None, row_sorted: bool = False, col_sorted: bool = False,
          **unsupported) -> DGLGraph:
    """A homogeneous graph (DGL's ``dgl.graph``); ``num_nodes`` defaults to the largest id + 1.
    ``row_sorted``/``col_sorted`` are DGL's hints about its own formats and change nothing here."""
    if unsupported:
        raise DGLError(f"dgl.graph got arguments unigraph does not support: {sorted(unsupported)}")
    src, dst, implied = parse_edges(data)
    out = DGLGraph(torch.stack([src, dst]), num_nodes=num_nodes)._with_types(ntype, etype, ntype)
    return _finish(out, idtype, implied, device)


def heterograph(data_dict: Mapping[tuple, Any], num_nodes_dict: Mapping[str, int] | None = None,
                idtype: torch.dtype | None = None, device: Any = None):
    """A graph of typed relations (DGL's ``dgl.heterograph``): ``{(src_type, etype, dst_type):
    edges}``. One relation over at most the two types it joins is a :class:`DGLGraph`; anything
    more is a :class:`DGLHeteroGraph`."""
    if not isinstance(data_dict, Mapping):
        raise DGLError(f"data_dict must be a dict {{(src_type, etype, dst_type): edges}}, got {type(data_dict).__name__}")
    parsed, implied = {}, None
    for cet, data in data_dict.items():
        if not (isinstance(cet, tuple) and len(cet) == 3 and all(isinstance(t, str) for t in cet)):
            raise DGLError(f"relation keys must be (src_type, etype, dst_type) string triples, got {cet!r}")
        src, dst, dtype = parse_edges(data)
        parsed[cet] = (src, dst)
        implied = implied or dtype
    counts = {t: int(n) for t, n in (num_nodes_dict or {}).items()}
    for (src_type, _, dst_type), (src, dst) in parsed.items():
        for ntype, ids in ((src_type, src), (dst_type, dst)):
            inferred = int(ids.max()) + 1 if ids.numel() else 0
            if num_nodes_dict is None or ntype not in num_nodes_dict:
                counts[ntype] = max(counts.get(ntype, 0), inferred)
    relations = {cet: relation_graph(src, dst, cet, counts) for cet, (src, dst) in parsed.items()}
    if len(relations) == 1 and set(counts) <= {next(iter(relations))[0], next(iter(relations))[2]}:
        return _finish(next(iter(relations.values())), idtype, implied, device)
    out = DGLHeteroGraph(relations, counts, check_idtype(idtype if idtype is not None else (implied or torch.int64)))
    return out if device is None or torch.device(device) == out.device else out.to(device)


def create_block(data_dict: Any, num_src_nodes: Any = None, num_dst_nodes: Any = None,
                 idtype: torch.dtype | None = None, device: Any = None):
    """A block (DGL's ``dgl.create_block``): the edges ``data`` (or ``{(src_type, etype,
    dst_type): edges}``) from source to destination nodes. Counts default to the largest id + 1
    per source / destination type; given, both as ints (one relation) or both as dicts by type.
    One relation gives a :class:`DGLGraph` block; several (or counts naming more types) a
    :class:`~unigraph.dgl.heteroblock.DGLHeteroBlock`."""
    if (num_src_nodes is None) != (num_dst_nodes is None):
        raise DGLError("create_block: give both num_src_nodes and num_dst_nodes, or neither")
    if not isinstance(data_dict, Mapping):
        if num_src_nodes is not None and (isinstance(num_src_nodes, Mapping) or isinstance(num_dst_nodes, Mapping)):
            raise DGLError("create_block: num_src_nodes / num_dst_nodes must be ints when data_dict is not a dict")
        data_dict = {(DEFAULT_NTYPE, DEFAULT_ETYPE, DEFAULT_NTYPE): data_dict}
        if num_src_nodes is not None:
            num_src_nodes, num_dst_nodes = {DEFAULT_NTYPE: num_src_nodes}, {DEFAULT_NTYPE: num_dst_nodes}
    elif num_src_nodes is not None and not (isinstance(num_src_nodes, Mapping) and isinstance(num_dst_nodes, Mapping)):
        raise DGLError("create_block: num_src_nodes and num_dst_nodes must be dicts by node type when data_dict is one")
    parsed, implied = {}, None
    for cet, data in data_dict.items():
        if not (isinstance(cet, tuple) and len(cet) == 3 and all(isinstance(t, str) for t in cet)):
            raise DGLError(f"relation keys must be (src_type, etype, dst_type) string triples, got {cet!r}")
        src, dst, dtype = parse_edges(data)
        parsed[cet], implied = (src, dst), implied or dtype
    src_counts, dst_counts = _block_counts(parsed, num_src_nodes, num_dst_nodes)
    idtype = check_idtype(idtype if idtype is not None else (implied or torch.int64))
    blocks = {}
    for cet, (src, dst) in sorted(parsed.items()):
        try:
            block = DGLGraph(torch.stack([src, dst]), num_src_nodes=src_counts[cet[0]],
                             num_dst_nodes=dst_counts[cet[2]])
        except (TypeError, ValueError) as err:
            raise DGLError(f"relation {cet}: {err}") from None
        blocks[cet] = block._with_types(cet[0], cet[1], cet[2], block=True)
    if len(blocks) == 1 and len(src_counts) == 1 and len(dst_counts) == 1:
        return _finish(next(iter(blocks.values())), idtype, implied, device)
    out = DGLHeteroBlock(blocks, src_counts, dst_counts, idtype)
    return out if device is None or torch.device(device) == out.device else out.to(device)


def _block_counts(parsed: Mapping, num_src_nodes: Any, num_dst_nodes: Any) -> tuple[dict, dict]:
    """Source and destination node counts by type: as given, or the largest id + 1 (DGL's)."""
    if num_src_nodes is not None:
        src_counts = {t: int(n) for t, n in num_src_nodes.items()}
        dst_counts = {t: int(n) for t, n in num_dst_nodes.items()}
        missing = [cet for cet in parsed if cet[0] not in src_counts or cet[2] not in dst_counts]
        if missing:
            raise DGLError(f"create_block: num_src_nodes / num_dst_nodes lack the node types of {missing}")
        return src_counts, dst_counts
    src_counts, dst_counts = {}, {}
    for (src_type, _, dst_type), (src, dst) in parsed.items():
        src_counts[src_type] = max(src_counts.get(src_type, 0), int(src.max()) + 1 if src.numel() else 0)
        dst_counts[dst_type] = max(dst_counts.get(dst_type, 0), int(dst.max()) + 1 if dst.numel() else 0)
    return src_counts, dst_counts


def from_scipy(sp_mat: Any, eweight_name: str | None = None, idtype: torch.dtype | None = None,
               device: Any = None) -> DGLGraph:
    """Entry ``(i, j)`` of a square scipy matrix is the edge ``i -> j`` (DGL's ``from_scipy``);
    the values go to ``edata[eweight_name]`` when it is given."""
    coo = sp_mat.tocoo()
    if coo.shape[0] != coo.shape[1]:
        raise DGLError(f"from_scipy needs a square matrix, got {coo.shape}; use bipartite_from_scipy")
    out = graph((coo.row, coo.col), num_nodes=coo.shape[0], idtype=idtype, device=device)
    if eweight_name is not None:
        out.edata[eweight_name] = torch.as_tensor(coo.data, device=out.device)
    return out


def bipartite_from_scipy(sp_mat: Any, utype: str, etype: str, vtype: str, eweight_name: str | None = None,
                         idtype: torch.dtype | None = None, device: Any = None) -> DGLGraph:
    coo = sp_mat.tocoo()
    out = heterograph({(utype, etype, vtype): (coo.row, coo.col)}, {utype: coo.shape[0], vtype: coo.shape[1]},
                      idtype=idtype, device=device)
    if eweight_name is not None:
        out.edata[eweight_name] = torch.as_tensor(coo.data, device=out.device)
    return out


def from_networkx(nx_graph: Any, node_attrs: Sequence[str] | None = None, edge_attrs: Sequence[str] | None = None,
                  edge_id_attr_name: str | None = None, idtype: torch.dtype | None = None,
                  device: Any = None) -> DGLGraph:
    """DGL's ``from_networkx``: nodes numbered in ``nx_graph.nodes`` order; an undirected graph
    becomes both directions of every edge (networkx's ``to_directed`` order); the listed node and
    edge attributes become features (``edge_id_attr_name`` orders the edges by that attribute)."""
    if not nx_graph.is_directed():
        nx_graph = nx_graph.to_directed()
    index = {node: i for i, node in enumerate(nx_graph.nodes)}
    edges = list(nx_graph.edges(data=True))
    if edge_id_attr_name is not None:
        edges.sort(key=lambda e: e[2][edge_id_attr_name])
    src = [index[u] for u, _, _ in edges]
    dst = [index[v] for _, v, _ in edges]
    out = graph((torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64)),
                num_nodes=len(index), idtype=idtype or torch.int64, device=device)
    for name in node_attrs or ():
        out.ndata[name] = torch.stack([torch.as_tensor(nx_graph.nodes[n][name]) for n in nx_graph.nodes])
    for name in edge_attrs or ():
        out.edata[name] = torch.stack([torch.as_tensor(attrs[name]) for _, _, attrs in edges])
    return out


def _random_pairs(num_rows: int, num_cols: int, num_edges: int) -> tuple[Tensor, Tensor]:
    """``num_edges`` distinct ``(row, col)`` pairs, uniformly (numpy's global generator, which
    ``dgl.seed`` seeds, as DGL's generators use it)."""
    total = num_rows * num_cols
    if num_edges > total:
        raise DGLError(f"cannot draw {num_edges} distinct edges among {total} node pairs")
    flat = np.random.choice(total, num_edges, replace=False) if total <= 50_000_000 else _sparse_choice(total, num_edges)
    flat = torch.from_numpy(np.asarray(flat, dtype=np.int64))
    return flat // num_cols, flat % num_cols


def _sparse_choice(total: int, count: int) -> np.ndarray:
    chosen: set[int] = set()
    while len(chosen) < count:
        chosen.update(np.random.randint(0, total, count - len(chosen)).tolist())
    return np.fromiter(chosen, dtype=np.int64, count=count)


def rand_graph(num_nodes: int, num_edges: int, idtype: torch.dtype = torch.int64, device: Any = None) -> DGLGraph:
    """``num_edges`` distinct random edges among ``num_nodes`` nodes (DGL's ``rand_graph``)."""
    src, dst = _random_pairs(num_nodes, num_nodes, num_edges)
    return graph((src, dst), num_nodes=num_nodes, idtype=idtype, device=device)


def rand_bipartite(utype: str, etype: str, vtype: str, num_src_nodes: int, num_dst_nodes: int, num_edges: int,
                   idtype: torch.dtype = torch.int64, device: Any = None) -> DGLGraph:
    src, dst = _random_pairs(num_src_nodes, num_dst_nodes, num_edges)
    return heterograph({(utype, etype, vtype): (src, dst)}, {utype: num_src_nodes, vtype: num_dst_nodes},
                       idtype=idtype, device=device)


def _relations_of(g) -> list[tuple[tuple[str, str, str], DGLGraph]]:
    if isinstance(g, DGLHeteroGraph):
        return list(g._relations.items())
    return [(g.canonical_etypes[0], g)]


def to_homogeneous(G: Any, ndata: Sequence[str] | None = None, edata: Sequence[str] | None = None,
                   store_type: bool = True, return_count: bool = False):
    """One graph over every node (type after type, in ``G.ntypes`` order) and every edge (relation
    after relation, in ``G.canonical_etypes`` order), with ``ndata[dgl.NTYPE]``/``ndata[dgl.NID]``
    and ``edata[dgl.ETYPE]``/``edata[dgl.EID]``; the features named in ``ndata``/``edata`` are
    concatenated over the types (DGL's ``to_homogeneous``)."""
    if G.is_block:
        raise DGLError("to_homogeneous needs a graph, not a block")
    ntypes = G.ntypes
    counts = [G.num_nodes(t) for t in ntypes]
    offset = dict(zip(ntypes, np.cumsum([0] + counts[:-1]).tolist()))
    srcs, dsts, etype_ids, eids, edge_counts = [], [], [], [], []
    relations = _relations_of(G)
    for type_id, ((src_type, _, dst_type), rel) in enumerate(relations):
        src, dst = rel._coo()
        srcs.append(src + offset[src_type])
        dsts.append(dst + offset[dst_type])
        etype_ids.append(torch.full_like(src, type_id))
        eids.append(torch.arange(src.numel(), device=src.device))
        edge_counts.append(src.numel())
    device = G.device
    cat = (lambda parts: torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64, device=device))
    out = DGLGraph(torch.stack([cat(srcs), cat(dsts)]), num_nodes=sum(counts))
    out._idtype = G.idtype
    node_type = torch.repeat_interleave(torch.arange(len(ntypes), device=device), torch.tensor(counts, device=device))
    if store_type:
        out.ndata[NTYPE] = node_type
        out.edata[ETYPE] = cat(etype_ids)
    out.ndata[NID] = torch.cat([torch.arange(n, device=device) for n in counts]) if counts else node_type
    out.edata[EID] = cat(eids)
    for name in ndata or ():
        out.ndata[name] = torch.cat([G.nodes[t].data[name] if len(ntypes) > 1 else G.ndata[name] for t in ntypes])
    for name in edata or ():
        out.edata[name] = torch.cat([rel.edata[name] for _, rel in relations])
    return (out, counts, edge_counts) if return_count else out


def to_heterogeneous(G: DGLGraph, ntypes: Sequence[str], etypes: Sequence[Any], ntype_field: str = NTYPE,
                     etype_field: str = ETYPE, metagraph: Any = None):
    """The inverse of :func:`to_homogeneous`: nodes split by ``G.ndata[ntype_field]``, edges by
    ``G.edata[etype_field]``; within a type, nodes and edges keep their order in ``G``. Every other
    node and edge feature is split along."""
    node_type, edge_type = G.ndata[ntype_field].to(torch.int64), G.edata[etype_field].to(torch.int64)
    local = torch.empty_like(node_type)
    node_lists = []
    for type_id in range(len(ntypes)):
        members = (node_type == type_id).nonzero().flatten()
        local[members] = torch.arange(members.numel(), device=members.device)
        node_lists.append(members)
    src, dst = G._coo()
    data, per_relation = {}, {}
    for type_id, name in enumerate(etypes):
        members = (edge_type == type_id).nonzero().flatten()
        if isinstance(name, tuple):
            cet = name
        elif members.numel():
            cet = (ntypes[int(node_type[src[members[0]]])], name, ntypes[int(node_type[dst[members[0]]])])
        else:
            raise DGLError(f"edge type {name!r} has no edges, so its node types are unknown: pass canonical etypes")
        data[cet] = (local[src[members]], local[dst[members]])
        per_relation[cet] = members
    out = heterograph(data, {t: int(m.numel()) for t, m in zip(ntypes, node_lists)}, idtype=G.idtype)
    for key, value in G.ndata.items():
        if key in (ntype_field, NID):
            continue
        for ntype, members in zip(ntypes, node_lists):
            out.nodes[ntype].data[key] = value[members]
    for key, value in G.edata.items():
        if key in (etype_field, EID):
            continue
        for cet, members in per_relation.items():
            out.edges[cet].data[key] = value[members]
    return out
