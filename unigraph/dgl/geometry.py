r"""DGL's ``dgl.geometry``: farthest point sampling and the neighbour matching of edge coarsening.

``farthest_point_sampler(pos, npoints, start_idx=None)``: in each point cloud ``b`` of ``pos``
``[B, N, C]``, from a start point, ``npoints - 1`` times the point farthest from those taken,

.. math::
    s_{k+1} = \operatorname{argmax}_j \; \min_{i \le k} \lVert p_j - p_{s_i} \rVert^2

(the first such ``j`` on ties; squared distances in ``pos``'s dtype): ``[B, npoints]`` indices
within each cloud. Without ``start_idx`` each cloud starts at a uniformly drawn point (torch's
generator; DGL 2.1 draws from ``0..N-2``, never the last point). More points than a cloud has
are refused (DGL asserts).

``neighbor_matching(graph, e_weights=None, relabel_idx=True)``: Metis' and Graclus' greedy
matching on a homogeneous, bidirected graph (self-loops ignored): nodes visited in a uniformly
random order each take one unmatched neighbour, the one of the largest weight where weights are
given (non-negative; the last of the row on ties, as DGL's kernel), else a uniformly drawn one; the
pair is labelled ``min(u, v)``, a node left alone itself. ``relabel_idx`` maps the labels to
``0..k-1`` in their order. Weights follow the graph's edge ids (DGL 2.1's CPU kernel reads them in
its CSR's slot order, another edge's weight wherever those differ). The loops are
``kernels/matching.py``'s, compiled by numba where it is installed.
"""
from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor

from unigraph.dgl.base import DGLError

__all__ = ["farthest_point_sampler", "neighbor_matching"]


def farthest_point_sampler(pos: Tensor, npoints: int, start_idx: int | None = None) -> Tensor:
    """``[B, npoints]`` int64 indices of farthest point samples of each cloud of ``pos`` ``[B, N, C]``
    (module docstring)."""
    if not isinstance(pos, Tensor) or pos.dim() != 3 or not pos.is_floating_point():
        raise DGLError(f"farthest_point_sampler: pos must be a float tensor of shape (B, N, C), got "
                       f"{list(pos.shape) if isinstance(pos, Tensor) else type(pos).__name__}")
    if isinstance(npoints, bool) or not isinstance(npoints, int) or npoints < 1:
        raise DGLError(f"farthest_point_sampler: npoints must be a positive int, got {npoints!r}")
    batch, count, _ = pos.shape
    if npoints > count:
        raise DGLError(f"farthest_point_sampler: npoints={npoints} is more than the {count} points of each cloud")
    if start_idx is None:
        current = torch.randint(0, count, (batch,), device=pos.device)
    else:
        if isinstance(start_idx, bool) or not isinstance(start_idx, int) or not 0 <= start_idx < count:
            raise DGLError(f"farthest_point_sampler: invalid start_idx, expected 0 <= start_idx < {count}, "
                           f"got {start_idx!r}")
        current = torch.full((batch,), start_idx, dtype=torch.int64, device=pos.device)
    pos = pos.detach()
    rows = torch.arange(batch, device=pos.device)
    out = torch.empty((batch, npoints), dtype=torch.int64, device=pos.device)
    out[:, 0] = current
    nearest = None
    for k in range(1, npoints):
        distance = (pos - pos[rows, current].unsqueeze(1)).square().sum(-1)        # [B, N]
        nearest = distance if nearest is None else torch.minimum(nearest, distance)
        current = nearest.argmax(1)    # the first maximum
        out[:, k] = current
    return out


def neighbor_matching(graph: Any, e_weights: Tensor | None = None, relabel_idx: bool = True) -> Tensor:
    """Each node's cluster of the greedy neighbour matching of ``graph`` (module docstring), in the
    graph's id type."""
    if len(graph.ntypes) != 1 or len(graph.canonical_etypes) != 1:
        raise DGLError("neighbor_matching: the graph must be homogeneous (one node type, one edge type)")
    num_nodes, num_edges = graph.num_nodes(), graph.num_edges()
    if e_weights is not None:
        if not isinstance(e_weights, Tensor) or e_weights.numel() != num_edges:
            raise DGLError(f"neighbor_matching: e_weights must hold one weight per edge ({num_edges}), got "
                           f"{list(e_weights.shape) if isinstance(e_weights, Tensor) else type(e_weights).__name__}")
        if not e_weights.is_floating_point():
            raise DGLError(f"neighbor_matching: e_weights must be floats, got {e_weights.dtype}")
    ptr, nbr, eids = (t.cpu() for t in graph.adj_tensors("csr"))
    order = torch.randperm(num_nodes).numpy()
    labels = torch.full((num_nodes,), -1, dtype=torch.int64)
    if e_weights is None:
        _loop("random_neighbour_matching")(ptr.numpy(), nbr.numpy(), torch.rand(num_edges, dtype=torch.float64).numpy(),
                                           order, labels.numpy())
    else:
        slot_weights = e_weights.detach().reshape(-1).cpu().to(torch.float64).index_select(0, eids)
        _loop("heaviest_neighbour_matching")(ptr.numpy(), nbr.numpy(), slot_weights.numpy(), order, labels.numpy())
    if relabel_idx:
        labels = torch.unique(labels, return_inverse=True)[1]
    return labels.to(graph.idtype).to(graph.device)


@functools.lru_cache(maxsize=None)
def _loop(name: str):
    """``kernels/matching.py``'s ``name``, compiled by numba where it runs, else as it is."""
    from unigraph.kernels import matching
    from unigraph.kernels.cpu import numba_status
    function = getattr(matching, name)
    if not numba_status()[0]:
        return function
    import numba
    return numba.njit(cache=True)(function)
