r"""Graphs built from point sets, as DGL builds them: ``knn_graph``, ``segmented_knn_graph``,
``radius_graph`` (DGL's ``dgl.knn_graph`` ... of ``dgl.transforms``) and their modules
``KNNGraph``, ``SegmentedKNNGraph``, ``RadiusGraph`` (``dgl.nn.pytorch.factory``).

k-NN: every point receives an edge from each of its ``k`` nearest points of the same set
(itself included unless ``exclude_self``), in-edges of a node in a row, nodes in order:

.. math::
    \mathcal{N}(i) = \operatorname*{arg\,top\text{-}k}_{j \in S(i)}\; -\lVert x_i - x_j \rVert^2

With ``dist="cosine"`` the points are first divided by (their L2 norm + 1e-5). ``k`` is cut to the
smallest set's size (with a warning). A 3-D ``x`` ``[B, M, D]`` and ``segs`` give a batched graph
(``batch_num_nodes``/``batch_num_edges`` set).

``algorithm``:

* ``"bruteforce-blas"`` (default): DGL's computation exactly, :math:`\lVert x_i\rVert^2 +
  \lVert x_j\rVert^2 - 2 x_i\cdot x_j` by a matrix product and ``torch.topk`` over it, so ties and
  rounding resolve as in DGL (the same edges in the same order; nearest first).
* ``"bruteforce"``, ``"kd-tree"`` (and ``"bruteforce-sharemem"`` on CUDA, refused on CPU as DGL
  does): DGL runs C kernels on the exact distances :math:`\sum_d (x_{id} - x_{jd})^2`; ours
  computes those distances (``torch.cdist`` without the matrix product) and takes the ``k``
  nearest, nearest first, equal distances by lower index. The edge set is DGL's wherever the
  ``k``-th distance is not tied; DGL's ``"bruteforce"`` lists each node's in-edges in its heap's
  order rather than nearest first.
* ``"nn-descent"``: refused. DGL's is a randomised approximation (its neighbours differ from run
  to run and from the exact ones); the exact neighbours it approximates come from the others.

``exclude_self``: ``k + 1`` neighbours, then self-loops removed; where more than ``k + 1`` points
coincide a node may keep ``k + 1`` in-edges without a self-loop, and one is dropped: DGL drops a
random one (all are at distance 0), ours the last.

Radius graph: an edge :math:`j \to i` for every pair with :math:`\lVert x_i - x_j\rVert_p \le r`
(self-loops only with ``self_loop``), edges in row-major order of the distance matrix
(``torch.cdist`` with ``p`` and ``compute_mode``); ``get_distances`` also returns each edge's
distance ``[E, 1]``, differentiable in ``x``.
"""
from __future__ import annotations

import warnings
from typing import Any, Iterable

import torch
from torch import Tensor, nn

from unigraph.dgl.base import DGLError, DGLWarning
from unigraph.dgl.convert import graph as make_graph

ALGORITHMS = ("bruteforce-blas", "bruteforce", "bruteforce-sharemem", "kd-tree", "nn-descent")
DISTANCES = ("euclidean", "cosine")
COMPUTE_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


# ---------------------------------------------------------------------------- k-NN

def _check_knn_args(x: Any, k: Any, algorithm: str, dist: str, what: str) -> None:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"{what}: x must be a floating-point tensor of points, got "
                        + (str(x.dtype) if isinstance(x, Tensor) else type(x).__name__))
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"{what}: k must be an int, got {k!r}")
    if algorithm not in ALGORITHMS:
        raise DGLError(f"{what}: unknown algorithm {algorithm!r}; choose from {ALGORITHMS}")
    if algorithm == "nn-descent":
        raise DGLError(f"{what}: algorithm='nn-descent' (DGL's randomised approximate k-NN) is not offered; "
                       "'bruteforce-blas' or 'kd-tree' give the exact neighbours it approximates")
    if algorithm == "bruteforce-sharemem" and x.device.type != "cuda":
        raise DGLError(f"{what}: algorithm='bruteforce-sharemem' runs on CUDA only (as in DGL); x is on {x.device}")
    if dist not in DISTANCES:
        raise DGLError(f"{what}: dist must be one of {DISTANCES}, got {dist!r}")


def _clamp_k(k: int, smallest: int) -> int:
    if k > smallest:
        warnings.warn(f"k={k} is larger than the smallest point set ({smallest} points); using k={smallest}",
                      DGLWarning, stacklevel=3)
        return smallest
    return k


def _normalise(x: Tensor, dist: str) -> Tensor:
    """DGL's cosine trick: rank the points divided by (their norm + 1e-5) by Euclidean distance."""
    return x / (torch.sqrt((x * x).sum(-1, keepdim=True)) + 1e-5) if dist == "cosine" else x


def _nearest(points: Tensor, k: int, algorithm: str) -> Tensor:
    """``[..., M, k]``: for each point of each set ``points`` ``[..., M, D]``, the local ids of its
    ``k`` nearest points (itself included), nearest first."""
    if algorithm == "bruteforce-blas":   # DGL's own formula and selection, operation for operation
        squared = (points * points).sum(-1, keepdim=True)
        distance = squared + squared.transpose(-1, -2) - 2 * points @ points.transpose(-1, -2)
        return torch.topk(distance, k, -1, largest=False)[1]
    distance = torch.cdist(points, points, compute_mode="donot_use_mm_for_euclid_dist")
    return torch.sort(distance, dim=-1, stable=True)[1][..., :k]


def _drop_self(src: Tensor, dst: Tensor, per_node: int) -> tuple[Tensor, Tensor]:
    """The edges without self-loops; where a node still has more than ``per_node`` in-edges (its
    self-loop was not among its nearest, as with many coincident points), its last in-edge too.
    In-edges of a node are contiguous, as the builders lay them out."""
    keep = src != dst
    src, dst = src[keep], dst[keep]
    if dst.numel():
        degree = torch.bincount(dst)
        last = torch.ones_like(dst, dtype=torch.bool)
        last[:-1] = dst[1:] != dst[:-1]
        extra = last & (degree.index_select(0, dst) > per_node)
        src, dst = src[~extra], dst[~extra]
    return src, dst


def _build(src: Tensor, dst: Tensor, counts: list[int] | None, device) -> Any:
    """The graph over ``sum(counts)`` nodes, batched by ``counts`` (None: one point set)."""
    total = int(sum(counts)) if counts is not None else None
    g = make_graph((src, dst), num_nodes=total, device=device)
    if counts is not None:
        sizes = torch.tensor(counts, dtype=torch.int64, device=device)
        owner = torch.repeat_interleave(torch.arange(len(counts), device=device), sizes)
        g.set_batch_num_nodes(sizes)
        g.set_batch_num_edges(torch.bincount(owner.index_select(0, dst), minlength=len(counts)))
    return g


def _knn_edges(neighbours: Tensor, offsets: Tensor) -> tuple[Tensor, Tensor]:
    """``(src, dst)`` of ``[S, M, k]`` local neighbour ids of ``S`` sets starting at ``offsets``."""
    sets, points, k = neighbours.shape
    src = (neighbours + offsets.view(-1, 1, 1)).reshape(-1)
    dst = (torch.arange(points, device=neighbours.device).view(1, -1, 1) + offsets.view(-1, 1, 1))
    return src, dst.expand(sets, points, k).reshape(-1)


def knn_graph(x: Tensor, k: int, algorithm: str = "bruteforce-blas", dist: str = "euclidean",
              exclude_self: bool = False):
    """DGL's ``dgl.knn_graph``: ``x`` ``[M, D]`` (one point set) or ``[B, M, D]`` (a batch of
    ``B`` sets of ``M`` points; point ``j`` of set ``b`` is node ``b * M + j``)."""
    _check_knn_args(x, k, algorithm, dist, "knn_graph")
    if x.dim() not in (2, 3):
        raise DGLError(f"knn_graph: x must be [num_points, D] or [num_sets, num_points, D], got {list(x.shape)}")
    k = k + 1 if exclude_self else k
    if k <= 0:
        raise DGLError(f"knn_graph: k must be > 0, got {k}")
    if x.shape[0] == 0 or x.shape[-2] == 0:
        raise DGLError("knn_graph: the point set is empty")
    points = x if x.dim() == 3 else x.unsqueeze(0)
    k = _clamp_k(k, points.shape[1])
    with torch.no_grad():
        neighbours = _nearest(_normalise(points, dist), k, algorithm)
    offsets = torch.arange(points.shape[0], device=x.device) * points.shape[1]
    src, dst = _knn_edges(neighbours, offsets)
    if exclude_self:
        src, dst = _drop_self(src, dst, k - 1)
    return _build(src, dst, [points.shape[1]] * points.shape[0] if x.dim() == 3 else None, x.device)


def _check_segs(segs: Any, rows: int) -> list[int]:
    try:
        counts = [int(s) for s in (segs.tolist() if isinstance(segs, Tensor) else segs)]
    except (TypeError, ValueError):
        raise DGLError(f"segmented_knn_graph: segs must be an iterable of point-set sizes, got {segs!r}") from None
    if not counts or min(counts) < 1 or sum(counts) != rows:
        raise DGLError(f"segmented_knn_graph: segs must be positive sizes summing to the {rows} points of x, "
                       f"got {counts}")
    return counts


def segmented_knn_graph(x: Tensor, k: int, segs: Iterable[int], algorithm: str = "bruteforce-blas",
                        dist: str = "euclidean", exclude_self: bool = False):
    """DGL's ``dgl.segmented_knn_graph``: ``x`` ``[M, D]`` holds point sets of sizes ``segs``
    one after another; returns their batched k-NN graphs."""
    _check_knn_args(x, k, algorithm, dist, "segmented_knn_graph")
    if x.dim() != 2:
        raise DGLError(f"segmented_knn_graph: x must be [num_points, D], got {list(x.shape)}")
    k = k + 1 if exclude_self else k
    if k <= 0:
        raise DGLError(f"segmented_knn_graph: k must be > 0, got {k}")
    if x.shape[0] == 0:
        raise DGLError("segmented_knn_graph: the point set is empty")
    counts = _check_segs(segs, x.shape[0])
    k = _clamp_k(k, min(counts))
    starts = torch.tensor([0] + counts[:-1], device=x.device).cumsum(0)
    with torch.no_grad():
        # one matrix per point set, as DGL computes them (a padded batch could round differently)
        local = [_nearest(part, k, algorithm) for part in torch.split(_normalise(x, dist), counts)]
    src = torch.cat([ids.reshape(-1) + start for ids, start in zip(local, starts)])
    dst = torch.arange(x.shape[0], device=x.device).repeat_interleave(k)
    if exclude_self:
        src, dst = _drop_self(src, dst, k - 1)
    return _build(src, dst, counts, x.device)


# ---------------------------------------------------------------------------- radius

def radius_graph(x: Tensor, r: float, p: float = 2, self_loop: bool = False,
                 compute_mode: str = "donot_use_mm_for_euclid_dist", get_distances: bool = False):
    """DGL's ``dgl.radius_graph``: ``x`` ``[N, D]`` -> the graph (and with ``get_distances`` the
    distances ``[E, 1]``)."""
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.dim() != 2:
        raise DGLError("radius_graph: x must be a floating-point tensor [num_points, D], got "
                       + (f"{x.dtype} {list(x.shape)}" if isinstance(x, Tensor) else type(x).__name__))
    if not r > 0:
        raise DGLError(f"radius_graph: r must be > 0, got {r}")
    if not p >= 0:
        raise DGLError(f"radius_graph: p must be >= 0, got {p}")
    if compute_mode not in COMPUTE_MODES:
        raise DGLError(f"radius_graph: compute_mode must be one of {COMPUTE_MODES}, got {compute_mode!r}")
    if x.shape[0] == 0:
        raise DGLError("radius_graph: the point set is empty")
    distances = torch.cdist(x, x, p=p, compute_mode=compute_mode)
    if not self_loop:   # out of place (DGL fills the diagonal in place, which cdist's backward forbids)
        eye = torch.eye(x.shape[0], dtype=torch.bool, device=x.device)
        distances = distances.masked_fill(eye, r + 1)
    src, dst = torch.nonzero(distances <= r, as_tuple=True)   # row = source, as DGL reads it
    g = make_graph((src, dst), num_nodes=x.shape[0], device=x.device)
    if get_distances:
        return g, distances[src, dst].unsqueeze(-1)
    return g


# ---------------------------------------------------------------------------- modules

class KNNGraph(nn.Module):
    """DGL's module form of :func:`knn_graph`. Args: ``k``.

    Shapes: ``x`` ``[M, D]`` or ``[B, M, D]`` -> a graph of ``M`` (``B * M``) nodes and ``M * k``
    edges (fewer with ``exclude_self``)."""

    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, x: Tensor, algorithm: str = "bruteforce-blas", dist: str = "euclidean",
                exclude_self: bool = False):
        return knn_graph(x, self.k, algorithm=algorithm, dist=dist, exclude_self=exclude_self)


class SegmentedKNNGraph(nn.Module):
    """DGL's module form of :func:`segmented_knn_graph`. Args: ``k``.

    Shapes: ``x`` ``[M, D]``, ``segs`` sizes summing to ``M`` -> a batched graph of ``M`` nodes."""

    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, x: Tensor, segs: Iterable[int], algorithm: str = "bruteforce-blas", dist: str = "euclidean",
                exclude_self: bool = False):
        return segmented_knn_graph(x, self.k, segs, algorithm=algorithm, dist=dist, exclude_self=exclude_self)


class RadiusGraph(nn.Module):
    """DGL's module form of :func:`radius_graph`. Args: ``r``, ``p`` (Minkowski power),
    ``self_loop``, ``compute_mode`` (``torch.cdist``'s).

    Shapes: ``x`` ``[N, D]`` -> a graph of ``N`` nodes (and ``[E, 1]`` distances)."""

    def __init__(self, r: float, p: float = 2, self_loop: bool = False,
                 compute_mode: str = "donot_use_mm_for_euclid_dist"):
        super().__init__()
        self.r, self.p, self.self_loop, self.compute_mode = r, p, self_loop, compute_mode

    def forward(self, x: Tensor, get_distances: bool = False):
        return radius_graph(x, self.r, self.p, self.self_loop, self.compute_mode, get_distances)
