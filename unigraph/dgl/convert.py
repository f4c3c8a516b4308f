"""DGL's graph constructors on unigraph: ``dgl.graph``, ``dgl.heterograph``, ``dgl.create_block``,
``dgl.from_scipy``, ``dgl.bipartite_from_scipy``, ``dgl.from_networkx``, ``dgl.rand_graph``,
``dgl.rand_bipartite``, ``dgl.to_homogeneous``, ``dgl.to_heterogeneous``.

Every constructor validates its input through :class:`unigraph.Graph`'s checks (integer ids,
in range, counts that agree) before anything is built. Ids may be tensors of any integer dtype,
lists or numpy arrays; ``idtype`` defaults to the dtype of the tensors given (int64 otherwise),
as in DGL.
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np
import torch
from torch import Tensor

from unigraph.dgl.base import DEFAULT_ETYPE, DEFAULT_NTYPE, EID, ETYPE, NID, NTYPE, DGLError
from unigraph.dgl.graph import DGLGraph, check_idtype
from unigraph.dgl.heteroblock import DGLHeteroBlock
from unigraph.dgl.heterograph import DGLHeteroGraph, relation_graph
from unigraph.dgl.networkx_io import networkx as _networkx
from unigraph.dgl.networkx_io import to_networkx  # noqa: F401  (dgl.to_networkx)


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


class EdgeData(NamedTuple):
    """Edges parsed from one of DGL's forms: int64 ``src``/``dst``; the id dtype the input implies
    (None: not given by a tensor); the node counts the form fixes (a CSR's row count: ``indptr``
    has one more entry than there are rows), else None; the compressed format the edges came in
    with edge ids in slot order (``'csr'``/``'csc'``, for ``adj_tensors``), else None."""
    src: Tensor
    dst: Tensor
    implied: torch.dtype | None = None
    fixed_src: int | None = None
    fixed_dst: int | None = None
    given_format: str | None = None

    def counts(self) -> tuple[int, int]:
        """The smallest source and destination counts the edges allow (a fixed count as it is)."""
        def need(ids: Tensor, fixed: int | None) -> int:
            return fixed if fixed is not None else (int(ids.max()) + 1 if ids.numel() else 0)
        return need(self.src, self.fixed_src), need(self.dst, self.fixed_dst)


def parse_edges(data: Any) -> EdgeData:
    """DGL's edge forms: ``(u, v)``, ``('coo', (u, v))``, ``('csr', (indptr, indices, eids))``
    (rows are sources), ``('csc', (indptr, indices, eids))`` (rows are destinations; ``eids``
    empty: slot order), or a list of ``(u, v)`` pairs (``[]``: no edges), checked."""
    if isinstance(data, list):   # DGL's edge list (a tuple is (u_ids, v_ids))
        pairs = np.asarray(data) if len(data) else np.zeros((0, 2), dtype=np.int64)
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            raise DGLError(f"a list of edges must hold (u, v) pairs, got an array of shape {pairs.shape}; "
                           "give (u_ids, v_ids) as a tuple")
        return EdgeData(_ids(pairs[:, 0], "the source ids")[0], _ids(pairs[:, 1], "the destination ids")[0])
    if isinstance(data, tuple) and len(data) == 2 and isinstance(data[0], str):
        kind, payload = data
        if kind == "coo":
            return parse_edges(tuple(payload))
        if kind not in ("csr", "csc"):
            raise DGLError(f"unknown sparse format {kind!r}; DGL's are 'coo', 'csr', 'csc'")
        return _parse_compressed(kind, payload)
    if isinstance(data, tuple) and len(data) == 2:
        src, implied = _ids(data[0], "the source ids")
        dst, _ = _ids(data[1], "the destination ids")
        if src.numel() != dst.numel():
            raise DGLError(f"the source and destination ids differ in length ({src.numel()} and {dst.numel()})")
        return EdgeData(src, dst, implied)
    raise DGLError(f"graph data must be (src, dst), ('coo'|'csr'|'csc', ...) or a list of (u, v) pairs, got "
                   f"{type(data).__name__}")


def _parse_compressed(kind: str, payload: Any) -> EdgeData:
    """``('csr'|'csc', (indptr, indices[, eids]))``: the rows of ``indptr`` are sources (csr) or
    destinations (csc); ``eids[k]`` is the id of the edge in slot ``k`` (empty: slot order)."""
    if not isinstance(payload, (tuple, list)) or len(payload) not in (2, 3):
        raise DGLError(f"{kind} data must be (indptr, indices, eids), got {type(payload).__name__}")
    indptr, implied = _ids(payload[0], "indptr")
    indices, _ = _ids(payload[1], "indices")
    counts = indptr.diff()
    if indptr.numel() == 0 or int(indptr[0]) != 0 or bool((counts < 0).any()) or int(indptr[-1]) != indices.numel():
        raise DGLError(f"{kind} indptr must start at 0, never decrease and end at len(indices) = {indices.numel()}")
    rows = torch.repeat_interleave(torch.arange(counts.numel()), counts)
    given = kind
    if len(payload) > 2 and payload[2] is not None and len(payload[2]):
        eids, _ = _ids(payload[2], "eids")
        if eids.numel() != indices.numel() or not bool((torch.bincount(eids.clamp(min=0), minlength=eids.numel())
                                                        == 1).all()) or int(eids.min()) < 0:
            raise DGLError(f"{kind} eids must be a permutation of 0..{indices.numel() - 1}")
        order = torch.empty_like(eids)
        order[eids] = torch.arange(eids.numel())
        rows, indices, given = rows[order], indices[order], None
    if kind == "csr":
        return EdgeData(rows, indices, implied, fixed_src=counts.numel(), given_format=given)
    return EdgeData(indices, rows, implied, fixed_dst=counts.numel(), given_format=given)


def _finish(graph, idtype, implied, device):
    graph._idtype = check_idtype(idtype if idtype is not None else (implied or torch.int64))
    return graph if device is None or torch.device(device) == graph.device else graph.to(device)


def _refused_source(data: Any, what: str) -> None:
    """DGL 2's constructors take edges only: a SciPy matrix or a networkx graph has its own."""
    if hasattr(data, "tocoo") and hasattr(data, "nnz"):
        raise DGLError(f"{what} does not take a SciPy sparse matrix; use dgl.from_scipy")
    if hasattr(data, "is_directed") and hasattr(data, "nodes"):
        raise DGLError(f"{what} does not take a networkx graph; use dgl.from_networkx")


def graph(data: Any, *, ntype: str = DEFAULT_NTYPE, etype: str = DEFAULT_ETYPE, num_nodes: int | None = None,
          idtype: torch.dtype | None = None, device: Any = None, row_sorted: bool = False, col_sorted: bool = False,
          **unsupported) -> DGLGraph:
    """A homogeneous graph (DGL's ``dgl.graph``); ``num_nodes`` defaults to the largest id + 1
    (for CSR/CSC data, the larger of that and the row count, which a given ``num_nodes`` must
    equal, as DGL checks). ``row_sorted``/``col_sorted`` are DGL's hints about its own formats and
    change nothing here."""
    if unsupported:
        raise DGLError(f"dgl.graph got arguments unigraph does not support: {sorted(unsupported)}")
    _refused_source(data, "dgl.graph")
    edges = parse_edges(data)
    fixed = edges.fixed_src if edges.fixed_src is not None else edges.fixed_dst
    if num_nodes is not None and fixed is not None and int(num_nodes) != fixed:
        raise DGLError(f"num_nodes={num_nodes} but the {edges.given_format or 'compressed'} data has {fixed} rows")
    if num_nodes is None:
        num_nodes = max(edges.counts())
    try:
        out = DGLGraph(torch.stack([edges.src, edges.dst]), num_nodes=num_nodes)
    except (TypeError, ValueError) as err:
        raise DGLError(str(err)) from None
    out._with_types(ntype, etype, ntype)
    _mark_given_format(out, edges)
    return _finish(out, idtype, edges.implied, device)


def _mark_given_format(graph: DGLGraph, edges: EdgeData) -> None:
    """The format the edges came in is what DGL made first (and keeps without edge ids)."""
    if edges.given_format is not None:
        graph._given_format = edges.given_format
        graph._formats_made = (edges.given_format,)


def heterograph(data_dict: Mapping[tuple, Any], num_nodes_dict: Mapping[str, int] | None = None,
                idtype: torch.dtype | None = None, device: Any = None):
    """A graph of typed relations (DGL's ``dgl.heterograph``): ``{(src_type, etype, dst_type):
    edges}``. A type's count defaults to the largest id + 1 over its relations (a CSR's row
    count fixes it). One relation over at most the two types it joins is a :class:`DGLGraph`;
    anything more is a :class:`DGLHeteroGraph`."""
    if not isinstance(data_dict, Mapping):
        raise DGLError(f"data_dict must be a dict {{(src_type, etype, dst_type): edges}}, got {type(data_dict).__name__}")
    parsed, implied = {}, None
    for cet, data in data_dict.items():
        if not (isinstance(cet, tuple) and len(cet) == 3 and all(isinstance(t, str) for t in cet)):
            raise DGLError(f"relation keys must be (src_type, etype, dst_type) string triples, got {cet!r}")
        _refused_source(data, "dgl.heterograph")
        parsed[cet] = parse_edges(data)
        implied = implied or parsed[cet].implied
    counts = {t: int(n) for t, n in (num_nodes_dict or {}).items()}
    for (src_type, _, dst_type), edges in parsed.items():
        for ntype, need in zip((src_type, dst_type), edges.counts()):
            if num_nodes_dict is None or ntype not in num_nodes_dict:
                counts[ntype] = max(counts.get(ntype, 0), need)
    relations = {}
    for cet, edges in parsed.items():
        relations[cet] = relation_graph(edges.src, edges.dst, cet, counts)
        _mark_given_format(relations[cet], edges)
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
        edges = parse_edges(data)
        parsed[cet], implied = (edges.src, edges.dst), implied or edges.implied
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


def block_to_graph(block: Any):
    """A block as a graph (DGL's ``block_to_graph``): its source types renamed ``t_src``, its
    destination types ``t_dst`` (listed in that order), the same edges, and the same feature
    tensors (not copies)."""
    if not getattr(block, "is_block", False):
        raise DGLError(f"block_to_graph expects a block, got {type(block).__name__}")
    src_name, dst_name = (lambda t: f"{t}_src"), (lambda t: f"{t}_dst")
    if isinstance(block, DGLGraph):
        src, dst = block._coo()
        (cet,) = block.canonical_etypes
        out = block._carry(DGLGraph._trusted(src, dst, block._num_src, block._num_dst, True))
        out._with_types(src_name(cet[0]), cet[1], dst_name(cet[2]), block=False)
        out._src_first = True
        _share(block.srcdata, out.srcdata)
        _share(block.dstdata, out.dstdata)
        _share(block.edata, out.edata)
        return out
    counts = {**{src_name(t): block.num_src_nodes(t) for t in block.srctypes},
              **{dst_name(t): block.num_dst_nodes(t) for t in block.dsttypes}}
    relations = {(src_name(s), e, dst_name(d)): relation_graph(*block[(s, e, d)]._coo(), (src_name(s), e, dst_name(d)),
                                                              counts)
                 for s, e, d in block.canonical_etypes}
    out = DGLHeteroGraph(relations, counts, block.idtype)
    out._num_nodes = {t: counts[t] for t in counts}   # DGL lists the source types, then the destination types
    out._stores = {t: out._stores[t] for t in counts}
    for t in block.srctypes:
        _share(block.srcnodes[t].data, out.nodes[src_name(t)].data)
    for t in block.dsttypes:
        _share(block.dstnodes[t].data, out.nodes[dst_name(t)].data)
    for s, e, d in block.canonical_etypes:
        _share(block.edges[(s, e, d)].data, out.edges[(src_name(s), e, dst_name(d))].data)
    return out


def _share(source, target) -> None:
    for key, value in source.items():
        target[key] = value


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
    out._src_first = utype != vtype   # DGL lists utype, then vtype
    if eweight_name is not None:
        out.edata[eweight_name] = torch.as_tensor(coo.data, device=out.device)
    return out


# ---------------------------------------------------------------------- networkx
def _stacked(values: list) -> Tensor:
    """Per-node or per-edge attribute values as one tensor, a row each (DGL's batching rule)."""
    if isinstance(values[0], Tensor):
        return torch.stack(values)
    return torch.as_tensor(np.array(values) if isinstance(values[0], np.ndarray) else values)


def _edge_order(edges: list, edge_id_attr_name: str | None) -> list:
    """The networkx edges ``(u, v, attrs)`` in edge id order: as listed, or placed by the
    attribute ``edge_id_attr_name`` (a permutation of 0..E-1, checked)."""
    if edge_id_attr_name is None:
        return edges
    if edges and edge_id_attr_name not in edges[0][2]:
        raise DGLError(f"the networkx edges have no attribute {edge_id_attr_name!r} (edge_id_attr_name)")
    placed = [None] * len(edges)
    for edge in edges:
        value = np.asarray(edge[2][edge_id_attr_name])
        if value.size != 1 or not np.issubdtype(value.dtype, np.integer):
            raise DGLError(f"edge id {edge[2][edge_id_attr_name]!r} ({edge_id_attr_name!r}) must be one integer")
        eid = int(value.reshape(()))
        if not 0 <= eid < len(edges) or placed[eid] is not None:
            raise DGLError(f"edge ids in {edge_id_attr_name!r} must be a permutation of 0..{len(edges) - 1}; "
                           f"got {eid} (repeated or out of range)")
        placed[eid] = edge
    return placed


def _attributes(store, rows: list, names: Sequence[str] | None, what: str) -> None:
    """``store[name]`` = the attribute ``name`` of every row (a networkx attribute dict)."""
    for name in names or ():
        missing = [i for i, attrs in enumerate(rows) if name not in attrs]
        if missing:
            raise DGLError(f"not every {what} has the attribute {name!r} (the first without: #{missing[0]})")
        if rows:
            store[name] = _stacked([attrs[name] for attrs in rows])


def from_networkx(nx_graph: Any, node_attrs: Sequence[str] | None = None, edge_attrs: Sequence[str] | None = None,
                  edge_id_attr_name: str | None = None, idtype: torch.dtype | None = None,
                  device: Any = None) -> DGLGraph:
    """DGL's ``from_networkx``: nodes numbered in sorted label order; an undirected graph becomes
    both directions of every edge (networkx's ``to_directed``), edges in networkx's order or by
    ``edge_id_attr_name``; the listed node and edge attributes become features."""
    nx = _networkx()
    if not nx_graph.is_directed() and (edge_id_attr_name is not None or edge_attrs is not None):
        raise DGLError("an undirected networkx graph takes no edge_id_attr_name or edge_attrs (DGL's rule)")
    nx_graph = nx.convert_node_labels_to_integers(nx_graph, ordering="sorted")
    if not nx_graph.is_directed():
        nx_graph = nx_graph.to_directed()
    edges = _edge_order(list(nx_graph.edges(data=True)), edge_id_attr_name)
    src = torch.tensor([u for u, _, _ in edges], dtype=torch.int64)
    dst = torch.tensor([v for _, v, _ in edges], dtype=torch.int64)
    out = graph((src, dst), num_nodes=nx_graph.number_of_nodes(), idtype=idtype or torch.int64)
    _attributes(out.ndata, [nx_graph.nodes[n] for n in range(nx_graph.number_of_nodes())], node_attrs, "node")
    _attributes(out.edata, [attrs for _, _, attrs in edges], edge_attrs, "edge")
    return out if device is None else out.to(device)


def bipartite_from_networkx(nx_graph: Any, utype: str, etype: str, vtype: str, u_attrs: Sequence[str] | None = None,
                            e_attrs: Sequence[str] | None = None, v_attrs: Sequence[str] | None = None,
                            edge_id_attr_name: str | None = None, idtype: torch.dtype | None = None,
                            device: Any = None) -> DGLGraph:
    """DGL's ``bipartite_from_networkx``: the nodes with ``bipartite=0`` are the ``utype`` nodes,
    those with ``bipartite=1`` the ``vtype`` nodes, each numbered in sorted label order; every
    edge must go from the first set to the second (a directed networkx graph)."""
    if not nx_graph.is_directed():
        raise DGLError("bipartite_from_networkx needs a directed networkx graph")
    sides: dict[int, list] = {0: [], 1: []}
    for node, attrs in nx_graph.nodes(data=True):
        if attrs.get("bipartite") not in (0, 1):
            raise DGLError(f"node {node!r} needs the attribute bipartite = 0 or 1, got {attrs.get('bipartite')!r}")
        sides[attrs["bipartite"]].append(node)
    top, bottom = ({node: i for i, node in enumerate(sorted(nodes))} for nodes in (sides[0], sides[1]))
    edges = _edge_order(list(nx_graph.edges(data=True)), edge_id_attr_name)
    for u, v, _ in edges:
        if u not in top or v not in bottom:
            raise DGLError(f"edge {(u, v)} must go from a bipartite=0 node to a bipartite=1 node")
    src = torch.tensor([top[u] for u, _, _ in edges], dtype=torch.int64)
    dst = torch.tensor([bottom[v] for _, v, _ in edges], dtype=torch.int64)
    out = heterograph({(utype, etype, vtype): (src, dst)}, {utype: len(top), vtype: len(bottom)},
                      idtype=idtype or torch.int64)
    out._src_first = utype != vtype   # DGL lists utype, then vtype
    _attributes(out.srcdata, [nx_graph.nodes[n] for n in top], u_attrs, "source node")
    _attributes(out.dstdata, [nx_graph.nodes[n] for n in bottom], v_attrs, "destination node")
    _attributes(out.edata, [attrs for _, _, attrs in edges], e_attrs, "edge")
    return out if device is None else out.to(device)


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
    after relation, in ``G.canonical_etypes`` order), with ``ndata[dgl.NID]`` / ``edata[dgl.EID]``
    (the ids within the type, in ``G.idtype``) and, with ``store_type``, ``ndata[dgl.NTYPE]`` /
    ``edata[dgl.ETYPE]`` (int64 type ids); the features named in ``ndata`` / ``edata`` are
    concatenated over the types (DGL's ``to_homogeneous``; a type without nodes or a relation
    without edges adds nothing, a type with some that lacks a named feature is refused)."""
    if G.is_block:
        raise DGLError("to_homogeneous needs a graph, not a block")
    ntypes = G.ntypes
    counts = [G.num_nodes(t) for t in ntypes]
    offset = dict(zip(ntypes, np.cumsum([0] + counts[:-1]).tolist()))
    relations = _relations_of(G)
    device = G.device
    srcs, dsts, edge_counts = [], [], []
    for (src_type, _, dst_type), rel in relations:
        src, dst = rel._coo()
        srcs.append(src + offset[src_type])
        dsts.append(dst + offset[dst_type])
        edge_counts.append(src.numel())
    cat = (lambda parts: torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64, device=device))
    out = DGLGraph(torch.stack([cat(srcs), cat(dsts)]), num_nodes=sum(counts))
    out._idtype = G.idtype
    for name in ndata or ():
        out.ndata[name] = _combined([(t, G.nodes[t].data) for t in ntypes], counts, name, "node type")
    for name in edata or ():
        out.edata[name] = _combined([(cet, rel.edata) for cet, rel in relations], edge_counts, name, "edge type")
    per_type = (lambda sizes: torch.repeat_interleave(torch.arange(len(sizes), device=device),
                                                      torch.tensor(sizes, dtype=torch.int64, device=device)))
    out.ndata[NID] = G._out_ids(cat([torch.arange(n, device=device) for n in counts]))
    out.edata[EID] = G._out_ids(cat([torch.arange(n, device=device) for n in edge_counts]))
    if store_type:
        out.ndata[NTYPE] = per_type(counts)
        out.edata[ETYPE] = per_type(edge_counts)
    return (out, counts, edge_counts) if return_count else out


def _combined(stores: list, rows: list[int], name: str, what: str) -> Tensor:
    """The feature ``name`` of every type with rows, concatenated (shapes and dtypes checked)."""
    parts = []
    for (type_name, store), count in zip(stores, rows):
        if count == 0:
            continue
        if name not in store:
            raise DGLError(f"to_homogeneous: {what} {type_name!r} has no feature {name!r}")
        parts.append(store[name])
    if not parts:
        raise DGLError(f"to_homogeneous: no {what} has rows of {name!r}")
    shapes = {(tuple(p.shape[1:]), p.dtype) for p in parts}
    if len(shapes) > 1:
        raise DGLError(f"to_homogeneous: {name!r} has different shapes or dtypes across the types: "
                       f"{sorted(map(str, shapes))}")
    return torch.cat(parts)


def to_heterogeneous(G: DGLGraph, ntypes: Sequence[str], etypes: Sequence[Any], ntype_field: str = NTYPE,
                     etype_field: str = ETYPE, metagraph: Any = None):
    """The inverse of :func:`to_homogeneous` (DGL's ``to_heterogeneous``): nodes split by
    ``G.ndata[ntype_field]`` (ids into ``ntypes``), edges by ``G.edata[etype_field]`` (ids into
    ``etypes``) and the types of their ends: one relation per distinct ``(source type, edge type,
    destination type)`` (in order of first appearance, or the edges of ``metagraph``, a networkx
    MultiDiGraph of ``(src_type, dst_type, etype)``, which may add relations without edges).
    Within a type, nodes and edges keep their order in ``G``; ``dgl.NID`` / ``dgl.EID`` hold their
    ids in ``G`` (int64), every other feature is split along."""
    if len(G.ntypes) > 1 or len(G.etypes) > 1:
        raise DGLError("to_heterogeneous needs a graph with one node type and one edge type")
    node_type = G.ndata[ntype_field].to(torch.int64)
    edge_type = G.edata[etype_field].to(torch.int64)
    _check_type_ids(node_type, len(ntypes), "node", ntype_field)
    _check_type_ids(edge_type, len(etypes), "edge", etype_field)
    device = G.device
    local = torch.empty_like(node_type)
    node_groups = []
    for type_id in range(len(ntypes)):
        members = (node_type == type_id).nonzero().flatten()
        local[members] = torch.arange(members.numel(), device=device)
        node_groups.append(members)
    src, dst = G._coo()
    triples = torch.stack([node_type[src], edge_type, node_type[dst]], 1)
    if metagraph is None:
        relation_ids = [tuple(t) for t in first_rows(triples).tolist()]
    else:
        nt, et = {t: i for i, t in enumerate(ntypes)}, {t: i for i, t in enumerate(etypes)}
        relation_ids = [(nt[s], et[e], nt[d]) for s, d, e in metagraph.edges(keys=True)]
    edge_groups, data = {}, {}
    for stid, etid, dtid in relation_ids:
        members = (triples == torch.tensor([stid, etid, dtid], device=device)).all(1).nonzero().flatten()
        cet = (ntypes[stid], etypes[etid], ntypes[dtid])
        edge_groups[cet] = members
        data[cet] = (local[src[members]], local[dst[members]])
    covered = sum(m.numel() for m in edge_groups.values())
    if covered != src.numel():
        raise DGLError(f"to_heterogeneous: {src.numel() - covered} edges are of no relation of the metagraph")
    out = heterograph(data, {t: int(m.numel()) for t, m in zip(ntypes, node_groups)}, idtype=G.idtype)
    for key, value in G.ndata.items():
        if key not in (ntype_field, NID):
            for ntype, members in zip(ntypes, node_groups):
                out.nodes[ntype].data[key] = value[members]
    for key, value in G.edata.items():
        if key not in (etype_field, EID):
            for cet, members in edge_groups.items():
                out.edges[cet].data[key] = value[members]
    for ntype, members in zip(ntypes, node_groups):
        out.nodes[ntype].data[NID] = members
    for cet, members in edge_groups.items():
        out.edges[cet].data[EID] = members
    return out


def _check_type_ids(type_ids: Tensor, count: int, what: str, field: str) -> None:
    if type_ids.numel() and (int(type_ids.min()) < 0 or int(type_ids.max()) >= count):
        raise DGLError(f"to_heterogeneous: {field} holds {what} type ids outside 0..{count - 1}")


def first_rows(rows: Tensor) -> Tensor:
    """The distinct rows of ``rows`` in order of first appearance."""
    if rows.shape[0] == 0:
        return rows
    unique, inverse = torch.unique(rows, dim=0, return_inverse=True)
    first = torch.full((unique.shape[0],), rows.shape[0], dtype=torch.int64, device=rows.device)
    first = first.scatter_reduce(0, inverse, torch.arange(rows.shape[0], device=rows.device), "amin")
    return unique[torch.argsort(first)]
