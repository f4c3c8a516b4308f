r"""DGL's diffusion and normalization transforms (``dgl.GCNNorm``, ``dgl.PPR``, ``dgl.HeatKernel``,
``dgl.GDC``, ``dgl.SIGNDiffusion``) on unigraph.dgl graphs.

Throughout, :math:`A` is the weighted adjacency matrix with :math:`A_{vu}` the sum of the weights
of the edges :math:`u \to v` (row = destination; weight 1 when the graph has no
``edata[eweight_name]``), :math:`D` the diagonal of its row sums (weighted in-degrees) and
:math:`I_n` the identity.

``GCNNorm(eweight_name='w')``: the edge weights of GCN's symmetric normalization
:math:`\tilde w_{uv} = w_{uv} / \sqrt{d_u d_v}`, :math:`d` the (weighted) in-degree, an inverse
square root of 0 taken as 0; written **into the input graph** (as DGL does) on every relation whose
source and destination node types agree (other relations are left alone).

``PPR(alpha, ...)``, ``HeatKernel(t, ...)``, ``GDC(coefs, ...)``: a dense diffusion matrix

.. math::
    S_{\mathrm{PPR}} = \alpha \left(I_n - (1 - \alpha) A\right)^{-1}, \qquad
    S_{\mathrm{heat}} = e^{t (A - I_n)}, \qquad
    S_{\mathrm{GDC}} = \sum_{k \ge 0} \theta_k A^k,

then sparsified: a new graph (same nodes and node features, no other edge features) with an edge
:math:`u \to v` for every entry :math:`S_{vu} \ge \epsilon`, ordered by destination then source,
whose weight :math:`S_{vu}` is ``edata[eweight_name]``. :math:`\epsilon` is ``eps`` when given,
else the ``avg_degree * n``-th largest entry (ties are all kept: the graph may have more edges), or
:math:`-\infty` (every entry, zeros included) when ``avg_degree > n``. Homogeneous graphs only. The
matrix is float32 (DGL's dtype), float64 when the weights are float64. Where this differs from
DGL 2.1: parallel edges add up in :math:`A` (DGL's ``mat[dst, src] = w`` keeps one of them, which
one being unspecified); float64 weights are computed (DGL raises a dtype error); the heat kernel
takes the symmetric eigendecomposition only when :math:`A` really is symmetric (DGL takes it when
the edge *structure* is bidirected, reading the upper triangle even where the weights are not
symmetric, which is not :math:`e^{t(A - I_n)}`), else the matrix exponential.

``SIGNDiffusion(k, in_feat_name='feat', out_feat_name='out_feat', eweight_name=None,
diffuse_op='raw', alpha=0.2)``: SIGN's precomputed features :math:`T X, T^2 X, \dots, T^k X` written
**into the input graph** as ``ndata['{out_feat_name}_{i}']``, with :math:`T` by ``diffuse_op``:
``'raw'`` :math:`A`, ``'rw'`` :math:`D^{-1} A`, ``'gcn'`` :math:`D^{-1/2} A D^{-1/2}` (GCNNorm's
weights) and ``'ppr'`` APPNP's step :math:`H^{i} = (1 - \alpha) D^{-1/2} A D^{-1/2} H^{i-1} +
\alpha X`. ``eweight_name`` absent from ``edata`` means unweighted, as in DGL. A node without
in-edges gets 0 under ``'rw'`` also with weights (DGL divides 0 by 0 there: NaN).
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.graph import DGLGraph
from unigraph.dgl.heterograph import DGLHeteroGraph
from unigraph.dgl.transform_base import BaseTransform

__all__ = ["GCNNorm", "PPR", "HeatKernel", "GDC", "SIGNDiffusion"]

SIGN_OPS = ("raw", "rw", "gcn", "ppr")


# ---------------------------------------------------------------------------- argument checks
def _real(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise DGLError(f"{what} must be a finite real number, got {value!r}")
    return float(value)


def _probability(value: Any, what: str) -> float:
    value = _real(value, what)
    if not 0.0 <= value <= 1.0:
        raise DGLError(f"{what} is a restart probability and must lie in [0, 1], got {value!r}")
    return value


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise DGLError(f"{what} must be a feature name (str), got {value!r}")
    return value


def _sparsity(eps: Any, avg_degree: Any, what: str) -> tuple[float | None, int]:
    """``eps`` (a threshold) or, when it is None, ``avg_degree`` (a positive int) decides which
    diffusion entries become edges."""
    if eps is not None:
        return _real(eps, f"{what}: eps"), avg_degree
    if isinstance(avg_degree, bool) or not isinstance(avg_degree, numbers.Integral) or avg_degree < 1:
        raise DGLError(f"{what}: avg_degree must be a positive int when eps is None, got {avg_degree!r}")
    return None, int(avg_degree)


# ---------------------------------------------------------------------------- graph access
def _checked_graph(g: Any, what: str) -> None:
    if not isinstance(g, (DGLGraph, DGLHeteroGraph)):
        raise DGLError(f"{what} expects a graph from unigraph.dgl, got {type(g).__name__}")
    if g.is_block:
        raise DGLError(f"{what} on a block is not supported (DGL's does not take one either)")


def _homogeneous(g: Any, what: str) -> DGLGraph:
    """``g`` when it has one node type and one relation (what DGL's diffusions read: ``g.edges()``
    over ``g.num_nodes()`` nodes)."""
    _checked_graph(g, what)
    if isinstance(g, DGLHeteroGraph) or g.is_bipartite:
        raise DGLError(f"{what} works on homogeneous graphs only (one node type, one edge type); got node "
                       f"types {g.ntypes} and edge types {g.canonical_etypes}")
    return g


def _edge_weights(relation: DGLGraph, name: str | None, what: str, scalar: bool) -> Tensor | None:
    """``relation.edata[name]`` checked (None when absent: unweighted), ``[E]`` with ``scalar``."""
    if name is None or name not in relation.edata:
        return None
    w = relation.edata[name]
    if w.is_complex():
        raise DGLError(f"{what}: edge weights edata[{name!r}] must be real, got {w.dtype}")
    if scalar and w.dim() != 1:
        raise DGLError(f"{what}: edge weights edata[{name!r}] must have shape [num_edges] = "
                       f"[{relation.num_edges()}], got {list(w.shape)}")
    return w if w.is_floating_point() else w.to(torch.get_default_dtype())   # integer weights: as float


def _gcn_weights(relation: DGLGraph, w: Tensor | None) -> Tensor:
    """:math:`w_{uv} / \\sqrt{d_u d_v}` per edge, :math:`d` the (weighted) in-degrees, 1/sqrt(0) = 0."""
    src, dst = relation._coo()
    if w is None:
        deg = torch.bincount(dst, minlength=relation.num_nodes()).to(torch.float32)
    else:
        deg = ops.gspmm(relation, "copy_e", "sum", e=w)
    norm = 1.0 / torch.sqrt(deg)
    norm = norm.masked_fill(torch.isinf(norm), 0.0)   # nodes without in-edges (or with zero weight)
    return norm[src] * norm[dst] if w is None else norm[src] * w * norm[dst]


# ---------------------------------------------------------------------------- GCNNorm
class GCNNorm(BaseTransform):
    r"""GCN's symmetric edge normalization :math:`w_{uv} / \sqrt{d_u d_v}` stored as
    ``edata[eweight_name]`` (see the module docstring): ``d`` counts in-edges, or sums the
    incoming ``edata[eweight_name]`` when the relation has them. On a heterograph every relation
    whose two node types agree is normalized, the others are left as they are. The input graph is
    changed in place and returned, as DGL's."""

    def __init__(self, eweight_name: str = "w"):
        self.eweight_name = _name(eweight_name, "GCNNorm: eweight_name")

    def __call__(self, g: Any):
        _checked_graph(g, "GCNNorm")
        results = {}
        for cet in g.canonical_etypes:   # every relation first, so a bad one changes nothing
            if cet[0] == cet[2]:
                relation = g[cet]
                weights = _edge_weights(relation, self.eweight_name, f"GCNNorm on {cet}", scalar=False)
                results[cet] = _gcn_weights(relation, weights)
        for cet, value in results.items():
            g.edges[cet].data[self.eweight_name] = value
        return g

    def __repr__(self) -> str:
        return f"{type(self).__name__}(eweight_name={self.eweight_name!r})"


# ---------------------------------------------------------------------------- dense diffusions
class _DenseDiffusion(BaseTransform):
    """The shared part of PPR, HeatKernel and GDC: the dense ``A``, the threshold and the new graph."""

    def _setup(self, eweight_name: str, eps: Any, avg_degree: Any) -> None:
        what = type(self).__name__
        self.eweight_name = _name(eweight_name, f"{what}: eweight_name")
        self.eps, self.avg_degree = _sparsity(eps, avg_degree, what)

    def _diffuse(self, adj: Tensor) -> Tensor:
        raise NotImplementedError

    def __call__(self, g: Any):
        what = type(self).__name__
        g = _homogeneous(g, what)
        n = g.num_nodes()
        w = _edge_weights(g, self.eweight_name, what, scalar=True)
        dtype = torch.float64 if w is not None and w.dtype == torch.float64 else torch.float32
        src, dst = g._coo()
        adj = torch.zeros((n, n), dtype=dtype, device=g.device)
        ones = torch.ones(src.numel(), dtype=dtype, device=g.device)
        adj.index_put_((dst, src), ones if w is None else w.to(dtype), accumulate=True)   # parallel edges add up
        diff = self._diffuse(adj)
        keep_dst, keep_src = (diff >= self._threshold(diff)).nonzero(as_tuple=True)   # row-major: by dst, then src
        out = g._derived(keep_src, keep_dst, keep_ndata=True)
        out.edata[self.eweight_name] = diff[keep_dst, keep_src]
        return out

    def _threshold(self, diff: Tensor) -> float | Tensor:
        if self.eps is not None:
            return self.eps
        n = diff.shape[0]
        if self.avg_degree > n:
            return float("-inf")
        return torch.topk(diff.flatten(), self.avg_degree * n).values[-1]   # the (avg_degree * n)-th largest


class PPR(_DenseDiffusion):
    r"""Personalized PageRank diffusion :math:`\alpha (I_n - (1 - \alpha) A)^{-1}`, sparsified into a
    new graph (see the module docstring). ``alpha``: restart probability in [0, 1]."""

    def __init__(self, alpha: float = 0.15, eweight_name: str = "w", eps: float | None = None,
                 avg_degree: int = 5):
        self.alpha = _probability(alpha, "PPR: alpha")
        self._setup(eweight_name, eps, avg_degree)

    def _diffuse(self, adj: Tensor) -> Tensor:
        system = (self.alpha - 1.0) * adj
        system.diagonal().add_(1.0)
        try:
            return self.alpha * torch.linalg.inv(system)
        except torch.linalg.LinAlgError as err:
            raise DGLError(f"PPR: I - (1 - alpha) A is singular for alpha={self.alpha}; "
                           "no personalized PageRank matrix exists for this graph") from err

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(alpha={self.alpha}, eweight_name={self.eweight_name!r}, "
                f"eps={self.eps}, avg_degree={self.avg_degree})")


class HeatKernel(_DenseDiffusion):
    r"""Heat kernel diffusion :math:`e^{t (A - I_n)}`, sparsified into a new graph (see the module
    docstring). ``t``: diffusion time."""

    def __init__(self, t: float = 2.0, eweight_name: str = "w", eps: float | None = None,
                 avg_degree: int = 5):
        self.t = _real(t, "HeatKernel: t")
        self._setup(eweight_name, eps, avg_degree)

    def _diffuse(self, adj: Tensor) -> Tensor:
        generator = self.t * adj
        generator.diagonal().sub_(self.t)
        if torch.equal(generator, generator.T):   # symmetric: exp through the eigendecomposition, as DGL
            values, vectors = torch.linalg.eigh(generator, UPLO="U")
            return vectors @ torch.diag(values.exp()) @ vectors.T
        return torch.linalg.matrix_exp(generator)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(t={self.t}, eweight_name={self.eweight_name!r}, "
                f"eps={self.eps}, avg_degree={self.avg_degree})")


class GDC(_DenseDiffusion):
    r"""Graph diffusion convolution's polynomial :math:`\sum_k \theta_k A^k` (``coefs`` =
    :math:`[\theta_0, \theta_1, \dots]`), sparsified into a new graph (see the module docstring)."""

    def __init__(self, coefs: Sequence[float], eweight_name: str = "w", eps: float | None = None,
                 avg_degree: int = 5):
        if isinstance(coefs, (Tensor, np.ndarray)) and coefs.ndim == 1:
            coefs = coefs.tolist()
        if not isinstance(coefs, (list, tuple)) or len(coefs) == 0:
            raise DGLError(f"GDC: coefs must be a non-empty list of numbers (theta_0, theta_1, ...), got {coefs!r}")
        self.coefs = [_real(c, f"GDC: coefs[{i}]") for i, c in enumerate(coefs)]
        self._setup(eweight_name, eps, avg_degree)

    def _diffuse(self, adj: Tensor) -> Tensor:
        power = torch.eye(adj.shape[0], dtype=adj.dtype, device=adj.device)
        diff = self.coefs[0] * power
        for coef in self.coefs[1:]:
            power = power @ adj
            diff += coef * power
        return diff

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(coefs={self.coefs}, eweight_name={self.eweight_name!r}, "
                f"eps={self.eps}, avg_degree={self.avg_degree})")


# ---------------------------------------------------------------------------- SIGN
def _broadcasts(weight_shape: torch.Size, feat_shape: torch.Size) -> bool:
    """Whether per-edge weights of shape ``weight_shape`` scale features of ``feat_shape`` rows
    without changing that shape (right-aligned broadcast)."""
    if len(weight_shape) > len(feat_shape):
        return False
    return all(a in (1, b) for a, b in zip(reversed(weight_shape), reversed(feat_shape)))


def _aligned(t: Tensor, rank: int) -> Tensor:
    """``t`` ([rows, *s]) with 1-dims after the first so that it has ``rank`` dims: DGL's
    broadcast, which aligns feature shapes from the right."""
    return t.reshape(t.shape[:1] + (1,) * (rank - t.dim()) + t.shape[1:])


class SIGNDiffusion(BaseTransform):
    r"""SIGN's diffused features :math:`T^i X` for :math:`i = 1..k` into
    ``ndata['{out_feat_name}_{i}']`` of the input graph, changed in place and returned (see the
    module docstring for the four ``diffuse_op`` choices of :math:`T`). ``edata[eweight_name]``
    (``[E]`` or shaped to broadcast against the features) weighs :math:`A` when present."""

    def __init__(self, k: int, in_feat_name: str = "feat", out_feat_name: str = "out_feat",
                 eweight_name: str | None = None, diffuse_op: str = "raw", alpha: float = 0.2):
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
            raise DGLError(f"SIGNDiffusion: k (the number of diffusion steps) must be an int >= 0, got {k!r}")
        if diffuse_op not in SIGN_OPS:
            raise DGLError(f"SIGNDiffusion: diffuse_op must be one of {list(SIGN_OPS)}, got {diffuse_op!r}")
        self.k = int(k)
        self.in_feat_name = _name(in_feat_name, "SIGNDiffusion: in_feat_name")
        self.out_feat_name = _name(out_feat_name, "SIGNDiffusion: out_feat_name")
        self.eweight_name = None if eweight_name is None else _name(eweight_name, "SIGNDiffusion: eweight_name")
        self.diffuse_op = diffuse_op
        self.alpha = _probability(alpha, "SIGNDiffusion: alpha") if diffuse_op == "ppr" else alpha

    def __call__(self, g: Any):
        g = _homogeneous(g, "SIGNDiffusion")
        if self.in_feat_name not in g.ndata:
            raise DGLError(f"SIGNDiffusion: no node feature ndata[{self.in_feat_name!r}] "
                           f"(node features: {sorted(g.ndata)})")
        x = g.ndata[self.in_feat_name]
        if not x.is_floating_point():
            raise DGLError(f"SIGNDiffusion: ndata[{self.in_feat_name!r}] must be floating point, got {x.dtype}")
        w = _edge_weights(g, self.eweight_name, "SIGNDiffusion", scalar=False)
        if w is not None:
            if not _broadcasts(w.shape[1:], x.shape[1:]):
                raise DGLError(f"SIGNDiffusion: edge weights of shape {list(w.shape)} do not broadcast to the "
                               f"features' shape {list(x.shape)} (per-row shapes aligned from the right)")
            w = w.to(x.dtype)
        outputs = self._diffused(g, x, w)
        for i, value in enumerate(outputs, start=1):
            g.ndata[f"{self.out_feat_name}_{i}"] = value
        return g

    def _diffused(self, g: DGLGraph, x: Tensor, w: Tensor | None) -> list[Tensor]:
        op = self.diffuse_op
        if op in ("gcn", "ppr"):
            w = _gcn_weights(g, w).to(x.dtype)
        degree = None
        if op == "rw" and w is not None:   # D of the weighted A, aligned to divide the features' rows
            degree = _aligned(ops.gspmm(g, "copy_e", "sum", e=w), x.dim())
        outputs, h = [], x
        for _ in range(self.k):
            if w is None:   # unweighted 'rw' is the mean over in-edges (0 without any)
                h = ops.gspmm(g, "copy_u", "mean" if op == "rw" else "sum", u=h)
            else:
                h = ops.gspmm(g, "u_mul_e", "sum", u=h, e=w)
            if degree is not None:   # D^-1 A: 0 where a node's in-edges weigh 0 in all
                h = torch.where(degree == 0, 0.0, h / degree.masked_fill(degree == 0, 1.0))
            if op == "ppr":
                h = (1.0 - self.alpha) * h + self.alpha * x
            outputs.append(h)
        return outputs

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(k={self.k}, in_feat_name={self.in_feat_name!r}, "
                f"out_feat_name={self.out_feat_name!r}, eweight_name={self.eweight_name!r}, "
                f"diffuse_op={self.diffuse_op!r}, alpha={self.alpha})")
