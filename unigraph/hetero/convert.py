"""Conversions between :class:`HeteroGraph` and PyG's ``HeteroData`` / DGL heterographs.

Node types, their counts (also of types without edges), relations with their edges in order, and
every tensor with one row per node / edge come along both ways. PyG keeps node and edge types in
insertion order; DGL sorts them by name, so a round trip through DGL may reorder types and
relations (never their nodes or edges).

This module sits below :class:`~unigraph.hetero.HeteroGraph` (whose ``from_pyg``/``to_pyg``/
``from_dgl``/``to_dgl`` methods call it), so it names no class: ``from_*`` build the ``cls`` they
are given, ``to_*`` read the graph they are given.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph._optional import require, require_dgl


def _rows(value: Any, rows: int) -> bool:
    return isinstance(value, Tensor) and value.dim() > 0 and value.shape[0] == rows


def from_pyg(data: Any, *, cls: type) -> Any:
    if not hasattr(data, "node_types") or not hasattr(data, "edge_types"):
        raise TypeError(f"HeteroGraph.from_pyg expects a torch_geometric HeteroData, got {type(data).__name__} "
                        "(for a homogeneous Data use Graph.from_pyg)")
    num_nodes = {nt: data[nt].num_nodes for nt in data.node_types if data[nt].num_nodes is not None}
    edges = {}
    for relation in data.edge_types:
        store = data[relation]
        if "edge_index" not in store:
            raise TypeError(f"HeteroGraph.from_pyg: relation {relation} has no edge_index (only "
                            f"{list(store.keys())}); convert a SparseTensor adj_t to edge_index first")
        edges[relation] = store["edge_index"]
    hg = cls(edges, num_nodes)
    for nt in data.node_types:
        n = hg.num_nodes(nt)
        for key, value in data[nt].items():
            if _rows(value, n):
                hg.ndata[nt][key] = value
    for relation in data.edge_types:
        e = hg.num_edges(relation)
        for key, value in data[relation].items():
            if key != "edge_index" and _rows(value, e):
                hg.edata[relation][key] = value
    return hg


def to_pyg(hg: Any) -> Any:
    pyg_data = require("torch_geometric.data", "HeteroGraph.to_pyg", "pip install torch_geometric")
    if hg.is_block:
        raise ValueError("HeteroGraph.to_pyg converts a whole graph; a sampled block has separate source and "
                         "destination node sets, which HeteroData cannot hold")
    data = pyg_data.HeteroData()
    for nt in hg.node_types:
        data[nt].num_nodes = hg.num_nodes(nt)
        for key, value in hg.ndata[nt].items():
            data[nt][key] = value
    for relation, graph in hg.items():
        data[relation].edge_index = graph.edge_index
        for key, value in graph.edata.items():
            if key == "edge_index":
                raise ValueError(f"relation {relation} has an edge feature named 'edge_index', which PyG reserves")
            data[relation][key] = value
    return data


def from_dgl(dgl_graph: Any, *, cls: type) -> Any:
    if not hasattr(dgl_graph, "canonical_etypes") or not hasattr(dgl_graph, "ntypes"):
        raise TypeError(f"HeteroGraph.from_dgl expects a DGLGraph, got {type(dgl_graph).__name__}")
    if dgl_graph.is_block:
        raise ValueError("HeteroGraph.from_dgl converts a whole heterograph, not a DGL block (blocks have separate "
                         "source and destination node sets; sample with unigraph.hetero.HeteroNeighborSampler)")
    num_nodes = {nt: int(dgl_graph.num_nodes(nt)) for nt in dgl_graph.ntypes}
    edges = {}
    for relation in dgl_graph.canonical_etypes:
        src, dst = dgl_graph.edges(etype=relation, order="eid")
        edges[tuple(relation)] = (src.to(torch.int64), dst.to(torch.int64))
    hg = cls(edges, num_nodes)
    for nt in dgl_graph.ntypes:
        for key, value in dgl_graph.nodes[nt].data.items():
            hg.ndata[nt][key] = value
    for relation in dgl_graph.canonical_etypes:
        for key, value in dgl_graph.edges[relation].data.items():
            hg.edata[tuple(relation)][key] = value
    return hg


def to_dgl(hg: Any) -> Any:
    dgl = require_dgl("HeteroGraph.to_dgl")
    if hg.is_block:
        raise ValueError("HeteroGraph.to_dgl converts a whole graph, not a sampled block")
    if not hg.relations:
        raise ValueError("DGL cannot build a heterograph without relations; this HeteroGraph has none")
    data = {relation: (graph.src, graph.dst) for relation, graph in hg.items()}
    out = dgl.heterograph(data, num_nodes_dict=hg.num_nodes_dict, device=hg.device)
    for nt in hg.node_types:
        for key, value in hg.ndata[nt].items():
            out.nodes[nt].data[key] = value
    for relation, graph in hg.items():
        for key, value in graph.edata.items():
            out.edges[relation].data[key] = value
    return out
