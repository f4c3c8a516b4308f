"""Conversions between :class:`unigraph.Graph` and PyG, scipy, networkx and DGL graphs.

Every conversion keeps edge order, multi-edges, self-loops and isolated nodes, and carries node
and edge features along where the other side has a place for them. The ``from_*`` functions build
an instance of ``cls``, which the caller names (``unigraph.Graph.from_pyg`` passes its own class):
this module sits below the classes that offer them as methods, so it names none of them, and it
has no default, so no caller gets a core graph without asking for one.
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np
import torch

from unigraph._optional import require, require_dgl
from unigraph.graph import Graph


# Graph objects from/to which another converter is the right one: (module prefix, class names, converter).
_OTHER_CONVERTERS = (
    ("dgl", ("DGLGraph", "DGLHeteroGraph"), "Graph.from_dgl(g)"),
    ("scipy", None, "Graph.from_scipy(matrix)"),
    ("networkx", None, "Graph.from_networkx(nx_graph)"),
)


def _pyg_graph(data: Any) -> Any:
    """The PyG ``Data`` to convert: ``data`` itself, or the first graph of a PyG dataset.

    A PyG ``InMemoryDataset`` answers ``dataset.edge_index`` with the edges of *all* its graphs
    concatenated, each numbered from 0: converting that would silently overlay every graph, so a
    dataset is recognised before any attribute is read.
    """
    pyg_data = sys.modules.get("torch_geometric.data")  # a PyG object means PyG is imported
    if pyg_data is not None:
        if isinstance(data, pyg_data.HeteroData):
            raise TypeError("from_pyg converts homogeneous graphs; this is a PyG HeteroData (typed nodes and edges). "
                            "Use unigraph.HeteroGraph.from_pyg(data), or data.to_homogeneous() first")
        if isinstance(data, pyg_data.Dataset):
            if len(data) == 0:
                raise ValueError(f"from_pyg got an empty PyG dataset ({type(data).__name__}); it has no graph to convert")
            return data[0]
    for module, names, converter in _OTHER_CONVERTERS:
        kind = type(data)
        if kind.__module__.split(".")[0] == module and (names is None or kind.__name__ in names):
            raise TypeError(f"from_pyg expects a torch_geometric Data/Batch, a PyG dataset or an edge_index tensor; "
                            f"got a {kind.__module__}.{kind.__name__}: use unigraph.{converter}")
    return data


def sparse_entries(adj: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(row, col, value)`` of a torch sparse matrix in its storage order, duplicates kept. The
    values carry their gradient (a COO matrix's ``_values()`` does not: the coalesced one's
    ``values()`` does; an uncoalesced one whose values need gradients is refused)."""
    if adj.layout == torch.sparse_coo:
        row, col = adj._indices()
        if adj.is_coalesced():
            return row, col, adj.values()
        if adj.requires_grad:
            raise ValueError("a sparse COO adjacency whose values need gradients must be coalesced (adj.coalesce()): "
                             "the values of an uncoalesced one do not carry their gradient")
        return row, col, adj._values()
    compressed, plain = ((adj.crow_indices(), adj.col_indices()) if adj.layout == torch.sparse_csr
                         else (adj.ccol_indices(), adj.row_indices()))
    repeated = torch.repeat_interleave(torch.arange(compressed.numel() - 1, device=adj.device), compressed.diff(),
                                       output_size=plain.numel())
    row, col = (repeated, plain) if adj.layout == torch.sparse_csr else (plain, repeated)
    return row, col, adj.values()


def _pyg_edge_index(data: Any) -> torch.Tensor:
    edge_index = getattr(data, "edge_index", None)
    if edge_index is not None:
        return edge_index
    adj_t = getattr(data, "adj_t", None)  # PyG's ToSparseTensor: the transposed adjacency, adj_t[dst, src]
    if adj_t is not None and hasattr(adj_t, "coo"):  # a torch_sparse SparseTensor
        row, col, _ = adj_t.coo()
        return torch.stack([col, row])
    if isinstance(adj_t, torch.Tensor) and adj_t.layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc):
        row, col, _ = sparse_entries(adj_t)  # what ToSparseTensor gives without torch_sparse
        return torch.stack([col, row])
    raise TypeError(f"from_pyg expects a torch_geometric Data with edge_index (or adj_t), a PyG dataset or an "
                    f"edge_index tensor; got {type(data).__name__} without edges")


def from_pyg(data: Any, num_nodes: int | None = None, *, cls: type[Graph]) -> Graph:
    if isinstance(data, torch.Tensor):
        return cls(data, num_nodes=num_nodes)
    data = _pyg_graph(data)
    edge_index = _pyg_edge_index(data)
    n = num_nodes if num_nodes is not None else data.num_nodes
    graph = cls(edge_index, num_nodes=n)
    for key in data.keys():
        value = data[key]
        if key == "edge_index" or not isinstance(value, torch.Tensor) or value.dim() == 0:
            continue
        if data.is_edge_attr(key) and value.shape[0] == graph.num_edges:
            graph.edata[key] = value
        elif data.is_node_attr(key) and value.shape[0] == graph.num_src_nodes:
            graph.ndata[key] = value
    return graph


def to_pyg(graph: Graph) -> Any:
    pyg_data = require("torch_geometric.data", "Graph.to_pyg", "pip install torch_geometric")
    if graph.is_bipartite:
        raise ValueError("a PyG Data holds one node set; for this bipartite graph use g.edge_index with "
                         f"size=({graph.num_src_nodes}, {graph.num_dst_nodes}) as PyG's propagate expects")
    clash = set(graph.ndata) & set(graph.edata)
    if clash:
        raise ValueError(f"ndata and edata both hold {sorted(clash)}; PyG's Data has one namespace, rename one")
    return pyg_data.Data(edge_index=graph.edge_index, num_nodes=graph.num_nodes,
                         **dict(graph.ndata.items()), **dict(graph.edata.items()))


def from_scipy(matrix: Any, *, cls: type[Graph]) -> Graph:
    if not hasattr(matrix, "tocoo"):
        raise TypeError(f"from_scipy expects a scipy sparse matrix or array, got {type(matrix).__name__}")
    coo = matrix.tocoo()
    edge_index = torch.from_numpy(np.stack([coo.row, coo.col]).astype(np.int64))
    rows, cols = coo.shape
    graph = (cls(edge_index, num_nodes=rows) if rows == cols
             else cls(edge_index, num_src_nodes=rows, num_dst_nodes=cols))
    graph.edata["weight"] = torch.from_numpy(np.asarray(coo.data))
    return graph


def to_scipy(graph: Graph, fmt: str = "coo", weight: str | None = None) -> Any:
    sparse = require("scipy.sparse", "Graph.to_scipy", "pip install scipy")
    if fmt not in ("coo", "csr", "csc"):
        raise ValueError(f"fmt must be 'coo', 'csr' or 'csc', got {fmt!r}")
    if weight is None:
        values = np.ones(graph.num_edges, dtype=np.float32)
    else:
        values = graph.edata[weight].detach().cpu().numpy()
        if values.ndim != 1:
            raise ValueError(f"edata[{weight!r}] must be 1-D to become matrix values, got shape {values.shape}")
    src, dst = graph.src.cpu().numpy(), graph.dst.cpu().numpy()
    matrix = sparse.coo_matrix((values, (src, dst)), shape=(graph.num_src_nodes, graph.num_dst_nodes))
    return matrix.asformat(fmt)


def _common_attributes(items: list[dict]) -> list[str]:
    if not items:
        return []
    keys = set(items[0])
    for attrs in items[1:]:
        keys &= set(attrs)
    return sorted(k for k in keys if all(isinstance(a[k], (int, float, bool, list, tuple, np.ndarray, torch.Tensor))
                                         for a in items))


def from_networkx(nx_graph: Any, *, cls: type[Graph]) -> Graph:
    if not hasattr(nx_graph, "nodes") or not hasattr(nx_graph, "edges"):
        raise TypeError(f"from_networkx expects a networkx graph, got {type(nx_graph).__name__}")
    nodes = list(nx_graph.nodes)
    index = {node: i for i, node in enumerate(nodes)}
    edges = list(nx_graph.edges(data=True))
    src = [index[u] for u, _, _ in edges]
    dst = [index[v] for _, v, _ in edges]
    edge_attrs = [attrs for _, _, attrs in edges]
    if not nx_graph.is_directed():  # both directions; a self-loop only once
        back = [(d, s, a) for s, d, a in zip(src, dst, edge_attrs) if s != d]
        src += [b[0] for b in back]
        dst += [b[1] for b in back]
        edge_attrs += [b[2] for b in back]
    graph = cls(torch.tensor([src, dst], dtype=torch.int64).reshape(2, len(src)), num_nodes=len(nodes))
    node_attrs = [nx_graph.nodes[n] for n in nodes]
    for key in _common_attributes(node_attrs):
        graph.ndata[key] = torch.as_tensor(np.asarray([a[key] for a in node_attrs]))
    for key in _common_attributes(edge_attrs):
        graph.edata[key] = torch.as_tensor(np.asarray([a[key] for a in edge_attrs]))
    return graph


def to_networkx(graph: Graph) -> Any:
    nx = require("networkx", "Graph.to_networkx", "pip install networkx")
    out = nx.MultiDiGraph()
    if graph.is_bipartite:  # networkx's bipartite convention: a `bipartite` node attribute of 0 or 1
        out.add_nodes_from((("src", i) for i in range(graph.num_src_nodes)), bipartite=0)
        out.add_nodes_from((("dst", i) for i in range(graph.num_dst_nodes)), bipartite=1)
        pairs = [(("src", s), ("dst", d)) for s, d in zip(graph.src.tolist(), graph.dst.tolist())]
    else:
        out.add_nodes_from(range(graph.num_nodes))
        pairs = list(zip(graph.src.tolist(), graph.dst.tolist()))
    edge_features = {key: value.detach().cpu() for key, value in graph.edata.items()}
    for eid, (u, v) in enumerate(pairs):
        out.add_edge(u, v, key=eid, **{k: f[eid].tolist() for k, f in edge_features.items()})
    if not graph.is_bipartite:
        for key, value in graph.ndata.items():
            for node, row in enumerate(value.detach().cpu().tolist()):
                out.nodes[node][key] = row
    return out


def from_dgl(dgl_graph: Any, *, cls: type[Graph]) -> Graph:
    """One relation of DGL: a homogeneous graph, a block, or a bipartite graph between two node
    types (``('user', 'plays', 'game')``, not a block), which becomes a bipartite Graph. A graph
    restricted to CSR/CSC formats (``g.formats('csc')``) is read through a copy that allows COO."""
    if not hasattr(dgl_graph, "edges") or not hasattr(dgl_graph, "num_src_nodes"):
        raise TypeError(f"from_dgl expects a DGLGraph, got {type(dgl_graph).__name__}")
    if len(dgl_graph.canonical_etypes) != 1:
        # a Graph has one id space: merging typed ids into it would join unrelated nodes
        raise ValueError(f"Graph.from_dgl converts a graph with one edge type; this one has edge types "
                         f"{dgl_graph.canonical_etypes}. Convert it with unigraph.HeteroGraph.from_dgl, which keeps "
                         "each type's own ids")
    (src_type, _, dst_type), = dgl_graph.canonical_etypes
    others = [] if dgl_graph.is_block else sorted(set(dgl_graph.ntypes) - {src_type, dst_type})
    if others:  # their nodes have no place in a Graph: converting would drop them silently
        raise ValueError(f"Graph.from_dgl converts one relation and its node types; this graph also has the node "
                         f"types {others}. Convert it with unigraph.HeteroGraph.from_dgl")
    formats = dgl_graph.formats()
    if "coo" not in formats["created"] + formats["not created"]:  # COO not allowed: edges() would fail
        dgl_graph = dgl_graph.formats(formats["created"] + formats["not created"] + ["coo"])
    src, dst = dgl_graph.edges(order="eid")
    edge_index = torch.stack([src, dst]).to(torch.int64)
    if dgl_graph.is_block or src_type != dst_type:
        graph = cls(edge_index, num_src_nodes=dgl_graph.num_src_nodes(), num_dst_nodes=dgl_graph.num_dst_nodes())
        for key, value in dgl_graph.srcdata.items():
            graph.srcdata[key] = value
        for key, value in dgl_graph.dstdata.items():
            graph.dstdata[key] = value
    else:
        graph = cls(edge_index, num_nodes=dgl_graph.num_nodes())
        for key, value in dgl_graph.ndata.items():
            graph.ndata[key] = value
    for key, value in dgl_graph.edata.items():
        graph.edata[key] = value
    return graph


def to_dgl(graph: Graph) -> Any:
    dgl = require_dgl("Graph.to_dgl")
    if graph.is_bipartite:
        out = dgl.create_block((graph.src, graph.dst), num_src_nodes=graph.num_src_nodes,
                               num_dst_nodes=graph.num_dst_nodes, device=graph.device)
        for key, value in graph.srcdata.items():
            out.srcdata[key] = value
        for key, value in graph.dstdata.items():
            out.dstdata[key] = value
    else:
        out = dgl.graph((graph.src, graph.dst), num_nodes=graph.num_nodes, device=graph.device)
        for key, value in graph.ndata.items():
            out.ndata[key] = value
    for key, value in graph.edata.items():
        out.edata[key] = value
    return out
