"""Structural encodings of a graph's nodes, as DGL computes them for graph transformers:
``dgl.shortest_dist`` (hop distances and the shortest paths as edge ids) and ``dgl.lap_pe`` /
``dgl.LapPE`` (Laplacian eigenvectors as positional encodings).

``shortest_dist(g, root=None, return_paths=False)``: unweighted, directed hop counts ``[N, N]``
(``[N]`` from one ``root``), -1 where unreachable; with ``return_paths`` also each shortest path as
its edge ids ``[N, N, L]`` (``[N, L]``), ``L`` the longest distance, padded with -1. The paths
follow SciPy's breadth-first predecessors on the graph's CSR (the matrix DGL hands SciPy, so ties
between equally short paths resolve as in DGL), each hop the smallest edge id between its two nodes.

``lap_pe(g, k, padding=False, return_eigval=False)``: the ``k`` eigenvectors of
:math:`L = I - D^{-1/2} A D^{-1/2}` (``D`` the in-degrees, at least 1; ``A`` row = source) after
the first, in increasing eigenvalue, each multiplied by a random sign drawn from NumPy's global
generator (``dgl.seed``); ``padding`` adds zero columns (NaN eigenvalues) when the graph has at
most ``k`` nodes, which is refused without it. Computed exactly (a dense eigendecomposition; DGL
runs an iterative solver with tolerance 1e-2 on large graphs): the eigenvalues agree with DGL's to
that tolerance, the vectors up to sign (and to the basis chosen within a repeated eigenvalue).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from unigraph.dgl.base import DGLError
from unigraph.dgl.graph import DGLGraph

DENSE_NODES = 20_000   # lap_pe's dense eigendecomposition holds an N x N matrix (3.2 GB at this size)


def _homogeneous(g: Any, what: str) -> DGLGraph:
    if not isinstance(g, DGLGraph) or g.is_bipartite:
        raise DGLError(f"{what} takes a homogeneous graph of unigraph.dgl, got {type(g).__name__}"
                       + (" (bipartite)" if isinstance(g, DGLGraph) else ""))
    return g


def shortest_dist(g: Any, root: int | None = None, return_paths: bool = False):
    from scipy.sparse import csgraph
    g = _homogeneous(g, "shortest_dist")
    n = g.num_nodes()
    if root is not None and not 0 <= int(root) < n:
        raise DGLError(f"shortest_dist: root {root} is not a node of this graph of {n} nodes")
    csr = g.adj_external(scipy_fmt="csr")
    if root is None:
        dist, pred = csgraph.shortest_path(csr, return_predecessors=True, unweighted=True, directed=True)
    else:
        dist, pred = csgraph.dijkstra(csr, directed=True, indices=int(root), return_predecessors=True, unweighted=True)
    reachable = ~np.isinf(dist)
    hops = np.where(reachable, dist, -1).astype(np.int64)
    if not return_paths:
        return torch.from_numpy(hops).to(g.device)
    paths = _paths(g, hops.reshape(-1, n), pred.reshape(-1, n), root)
    if root is not None:
        return torch.from_numpy(hops).to(g.device), paths[0]
    return torch.from_numpy(hops).to(g.device), paths


def _paths(g: DGLGraph, hops: np.ndarray, pred: np.ndarray, root: int | None) -> Tensor:
    """``[R, N, L]`` edge ids of the path from each root to each node: walked back from the target
    through the predecessors, one hop for every pair at a time."""
    roots, n = hops.shape
    longest = int(hops.max()) if hops.size else 0
    paths = np.full((roots, n, longest), -1, dtype=np.int64)
    r, target = np.nonzero(hops > 0)
    length, current = hops[r, target], target.copy()
    for step in range(longest):   # hop ``length - 1 - step`` of every path at least that long
        alive = length > step
        if not alive.any():
            break
        rows, cur = r[alive], current[alive]
        prev = pred[rows, cur]
        eids = g.edge_ids(torch.from_numpy(prev), torch.from_numpy(cur)).to(torch.int64).numpy()
        paths[rows, target[alive], length[alive] - 1 - step] = eids
        current[alive] = prev
    return torch.from_numpy(paths).to(g.device)


def lap_pe(g: Any, k: int, padding: bool = False, return_eigval: bool = False):
    g = _homogeneous(g, "lap_pe")
    n = g.num_nodes()
    if n <= k and not padding:
        raise DGLError(f"lap_pe: k ({k}) must be smaller than the number of nodes ({n}), or pass padding=True")
    if n > DENSE_NODES:
        raise DGLError(f"lap_pe computes the eigenvectors exactly (an N x N matrix): {n} nodes is above its "
                       f"{DENSE_NODES:,}-node limit")
    a = g.adj_external(scipy_fmt="csr").toarray().astype(np.float64)
    scale = np.clip(g.in_degrees().cpu().numpy(), 1, None) ** -0.5
    laplacian = np.eye(n) - scale[:, None] * a * scale[None, :]
    values, vectors = np.linalg.eig(laplacian)
    kept = min(k, n - 1)
    order = np.argsort(values.real, kind="stable")[1:kept + 1]
    eigval = torch.tensor(values.real[order], dtype=torch.float32)
    signs = 2 * (np.random.rand(kept) > 0.5) - 1.0
    pe = torch.tensor(signs * vectors.real[:, order], dtype=torch.float32)
    if n <= k:
        pe = torch.cat([pe, torch.zeros(n, k - kept, dtype=torch.float32)], 1)
        eigval = torch.cat([eigval, torch.full((k - kept,), float("nan"))])
    pe = pe.to(g.device)
    return (pe, eigval) if return_eigval else pe


class LapPE:
    """DGL's ``transforms.LapPE``: writes :func:`lap_pe` into ``g.ndata[feat_name]`` (and, with
    ``eigval_name``, the eigenvalues repeated on every node's row) and returns ``g``."""

    def __init__(self, k: int, feat_name: str = "PE", eigval_name: str | None = None, padding: bool = False):
        self.k, self.feat_name, self.eigval_name, self.padding = k, feat_name, eigval_name, padding

    def __call__(self, g: Any):
        if self.eigval_name:
            pe, eigval = lap_pe(g, self.k, self.padding, return_eigval=True)
            g.ndata[self.eigval_name] = eigval.view(1, -1).repeat(g.num_nodes(), 1).to(g.device)
        else:
            pe = lap_pe(g, self.k, self.padding)
        g.ndata[self.feat_name] = pe
        return g
