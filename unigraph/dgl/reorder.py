"""DGL's ``reorder_graph``: the same graph with its nodes and edges renumbered (for locality, or
edges grouped by relation type as ``RelGraphConv(presorted=True)`` wants), features moved with them.

Nodes: ``node_permute_algo`` None (kept), ``"rcmk"`` (reverse Cuthill-McKee of the adjacency, rows
= sources: SciPy's ``reverse_cuthill_mckee``), ``"custom"`` (``permute_config["nodes_perm"]``: new
node ``i`` is old node ``nodes_perm[i]``). ``"metis"`` is refused (no METIS here). Then edges:
``edge_permute_algo`` ``"src"`` / ``"dst"`` (sorted by the new source / destination id with NumPy's
default sort, whose order of ties is DGL's) or
``"custom"`` (``permute_config["edges_perm"]``: new edge ``k`` is the edge with *original* id
``edges_perm[k]``). With ``store_ids`` ``ndata[dgl.NID]`` / ``edata[dgl.EID]`` hold the original
ids. Permutations are checked to be permutations: a repeated or missing id is refused (it would
drop or duplicate nodes or edges silently).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from unigraph.dgl.base import EID, NID, DGLError
from unigraph.dgl.graph import DGLGraph

NODE_ALGOS = (None, "rcmk", "metis", "custom")
EDGE_ALGOS = ("src", "dst", "custom")


def reorder_graph(g: Any, node_permute_algo: str | None = None, edge_permute_algo: str = "src",
                  store_ids: bool = True, permute_config: dict | None = None) -> DGLGraph:
    if not isinstance(g, DGLGraph) or g.is_bipartite:
        raise DGLError(f"reorder_graph takes a homogeneous graph of unigraph.dgl, got {type(g).__name__}"
                       + (" (bipartite)" if isinstance(g, DGLGraph) else ""))
    if node_permute_algo not in NODE_ALGOS:
        raise DGLError(f"reorder_graph: node_permute_algo must be one of {NODE_ALGOS}, got {node_permute_algo!r}")
    if edge_permute_algo not in EDGE_ALGOS:
        raise DGLError(f"reorder_graph: edge_permute_algo must be one of {EDGE_ALGOS}, got {edge_permute_algo!r}")
    if node_permute_algo == "metis":
        raise DGLError("reorder_graph: node_permute_algo='metis' is not supported (unigraph.dgl has no METIS "
                       "binding); use 'rcmk' or 'custom' (e.g. a permutation from unigraph's partitioner)")
    config = permute_config or {}
    nodes = _node_order(g, node_permute_algo, config)
    if nodes is None:
        rg, original_edges = g.clone(), torch.arange(g.num_edges(), device=g.device)
    else:
        rg = g.subgraph(nodes, relabel_nodes=True, store_ids=True)
        original_edges = rg.edata.pop(EID).to(torch.int64)
        rg.ndata.pop(NID)
    order = _edge_order(rg, edge_permute_algo, config, original_edges)
    out = rg.edge_subgraph(order, relabel_nodes=False, store_ids=False)
    if store_ids:
        kept = nodes if nodes is not None else torch.arange(g.num_nodes(), device=g.device)
        out.ndata[NID] = kept.to(g.idtype)
        out.edata[EID] = original_edges[order].to(g.idtype)
    return out


def _node_order(g: DGLGraph, algo: str | None, config: dict) -> Tensor | None:
    if algo is None:
        return None
    if algo == "rcmk":
        from scipy.sparse.csgraph import reverse_cuthill_mckee
        return torch.from_numpy(reverse_cuthill_mckee(g.adj_external(scipy_fmt="csr")).copy()).to(
            device=g.device, dtype=torch.int64)
    if "nodes_perm" not in config:
        raise DGLError("reorder_graph: node_permute_algo='custom' needs permute_config={'nodes_perm': ...}")
    return _permutation(config["nodes_perm"], g.num_nodes(), "nodes_perm", g.device)


def _edge_order(rg: DGLGraph, algo: str, config: dict, original_edges: Tensor) -> Tensor:
    if algo in ("src", "dst"):
        src, dst = rg._coo()
        # NumPy's default (unstable) argsort, as DGL sorts: the same order of ties as DGL's
        return torch.from_numpy(np.argsort((src if algo == "src" else dst).cpu().numpy())).to(rg.device)
    if "edges_perm" not in config:
        raise DGLError("reorder_graph: edge_permute_algo='custom' needs permute_config={'edges_perm': ...}")
    perm = _permutation(config["edges_perm"], rg.num_edges(), "edges_perm", rg.device)
    # edges_perm names original edge ids; find where each sits after the node reordering
    position = torch.empty_like(original_edges)
    position[original_edges] = torch.arange(original_edges.numel(), device=original_edges.device)
    return position[perm]


def _permutation(value: Any, size: int, name: str, device: torch.device) -> Tensor:
    perm = torch.as_tensor(value, device=device)
    if perm.dim() != 1 or perm.is_floating_point() or perm.numel() != size:
        raise DGLError(f"reorder_graph: {name} must be a 1-D integer permutation of {size} ids, got "
                       f"{list(perm.shape)} {perm.dtype}")
    perm = perm.to(torch.int64)
    if size and (int(perm.min()) < 0 or int(perm.max()) >= size or
                 not bool(torch.bincount(perm, minlength=size).eq(1).all())):
        raise DGLError(f"reorder_graph: {name} is not a permutation of 0..{size - 1} (an id repeated, missing or "
                       "out of range)")
    return perm
