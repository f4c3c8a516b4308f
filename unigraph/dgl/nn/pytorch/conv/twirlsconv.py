r"""DGL's ``TWIRLSConv`` and ``TWIRLSUnfoldingAndAttention``: graph neural networks from unfolded
iterative algorithms (TWIRLS, https://arxiv.org/abs/2103.06064).

``TWIRLSUnfoldingAndAttention`` runs ``prop_step`` steps of gradient descent on
:math:`\lVert Y - X \rVert^2 + \lambda\, \mathrm{tr}(Y^\top L Y)` over edge weights :math:`w`
(all 1 at first). With ``precond`` (the preconditioned, reparameterised step, eq. 28), writing
:math:`\tilde D = \lambda D + (1 - \lambda) I` and :math:`D` the weighted in-degrees:

.. math::
    Y^{(k+1)} = (1 - \alpha) Y^{(k)} + \alpha \lambda\, \tilde D^{-1/2} A_w \tilde D^{-1/2} Y^{(k)}
    + \alpha\, \tilde D^{-1} X

and without it (eq. 30, the normalised adjacency):

.. math::
    Y^{(k+1)} = (1 - \alpha\lambda - \alpha) Y^{(k)} + \alpha\lambda\, D^{-1/2} A_w D^{-1/2} Y^{(k)}
    + \alpha X

with :math:`\alpha` = ``alp`` (:math:`1 / (\lambda + 1)` when ``alp <= 0``). The attention
(before the first step with ``init_att``, after step ``attn_aft``) reweights every edge from the
distance of its ends, :math:`z_{uv} = \lVert \eta \circ y_u \rVert^2 + \lVert \eta \circ y_v
\rVert^2 - 2 (\eta \circ y_u) \cdot (\eta \circ y_v)` (:math:`\eta` = ``etas`` with ``use_eta``):

.. math::
    w_{uv} = 1 / \operatorname{thr}\big((\max(z_{uv}, 0) + 10^{-7})^{1 - p/2}\big) + 10^{-9}

where thr raises values below :math:`\tau` to :math:`\tau` and sends values above :math:`T`
(when :math:`T > 0`) to :math:`\infty`; :math:`D` becomes the sum of the new weights over each
node's in-edges, then attention dropout acts on :math:`w`.

``TWIRLSConv`` = an MLP (``mlp_bef``), the unfolding on the graph with its self-loops replaced
by one per node, and an MLP (``mlp_aft``; a leading norm/ReLU/dropout when both MLPs have
layers). Each message pass is one g-SpMM (``copy_u`` or ``u_mul_e`` with the weights), the
distances two g-SDDMMs. Unlike DGL, nothing is written into the graph's ``ndata``/``edata``, and
the result that DGL caches after the first call (no MLP before the unfolding, no attention, no
input dropout) is kept per graph and feature tensor: a new graph or changed features recompute it.
Parameters as DGL's: ``mlp_bef`` / ``mlp_aft`` (``layers.{i}``: Glorot normal weights, zero
biases; ``norms.{i}``), ``unfolding.etas`` ``[d]`` (ones, with ``use_eta``).
"""
from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_homogeneous
from unigraph.graph import Graph as CoreGraph

NORMS = ("none", "batch", "layer")


class TWIRLSUnfoldingAndAttention(nn.Module):
    """Args (DGL's): ``d`` (the feature width; the size of ``etas``), ``alp``, ``lam``,
    ``prop_step``, ``attn_aft`` (the attention follows step ``attn_aft``; ``-1``: none), ``tau``,
    ``T`` (``<= 0``: no upper threshold), ``p``, ``use_eta``, ``init_att`` (an attention before the
    first step), ``attn_dropout``, ``precond``.

    Shapes: ``X`` ``[N, d]`` on a graph with one node set (add its self-loops first, as
    ``TWIRLSConv`` does) -> ``[N, d]``.
    """

    def __init__(self, d: int, alp: float, lam: float, prop_step: int, attn_aft: int = -1, tau: float = 0.2,
                 T: float = -1, p: float = 1, use_eta: bool = False, init_att: bool = False,
                 attn_dropout: float = 0, precond: bool = True):
        super().__init__()
        self.d = d
        self.alp = alp if alp > 0 else 1 / (lam + 1)
        self.lam, self.tau, self.T, self.p = lam, tau, T, p
        self.prop_step, self.attn_aft = prop_step, attn_aft
        self.use_eta, self.init_att = use_eta, init_att
        self.attn_dropout, self.precond = attn_dropout, precond
        self.etas = nn.Parameter(torch.ones(d)) if use_eta else None

    def forward(self, g, X: Tensor) -> Tensor:
        graph = check_homogeneous(g, X, "TWIRLSUnfoldingAndAttention", max_dim=2)
        if self.etas is not None and X.shape[1] != self.d:
            raise DGLError(f"TWIRLSUnfoldingAndAttention: X has {X.shape[1]} features but etas (use_eta) has "
                           f"d={self.d}")
        weights, degrees = None, graph.in_degrees().to(X)  # weights None: every edge weighs 1
        if self.init_att:
            weights, degrees = self._attention(graph, X)
        Y = X
        for k in range(self.prop_step):
            Y = self._step(graph, Y, X, weights, degrees)
            if k == self.attn_aft - 1:
                weights, degrees = self._attention(graph, Y)
        return Y

    def _step(self, graph, Y: Tensor, X: Tensor, weights: Tensor | None, degrees: Tensor) -> Tensor:
        alp, lam = self.alp, self.lam
        if self.precond:
            scaled = (lam * degrees + (1 - lam)).view(-1, 1)
            norm = scaled.pow(-0.5)
            smoothed = _propagate(graph, Y * norm, weights) * norm
            return (1 - alp) * Y + alp * lam * smoothed + alp * (X * scaled.pow(-1))
        norm = degrees.pow(-0.5).view(-1, 1)
        smoothed = _propagate(graph, Y * norm, weights) * norm
        return (1 - alp * lam - alp) * Y + alp * lam * smoothed + alp * X

    def _attention(self, graph, Y: Tensor) -> tuple[Tensor, Tensor]:
        """The edge weights ``[E, 1]`` from the distances of each edge's ends, and the weighted
        in-degrees ``[N]`` (taken before the attention dropout, as DGL)."""
        if self.etas is not None:
            Y = Y * self.etas.view(-1)
        squares = (Y ** 2).sum(-1, keepdim=True)
        # the distance expanded as DGL computes it (its rounding, and relu below, match)
        dist = ops.gsddmm(graph, "add", squares, squares, "u", "v") - 2 * ops.gsddmm(graph, "dot", Y, Y, "u", "v")
        w = torch.pow(F.relu(dist.view(-1)) + 1e-7, 1 - 0.5 * self.p)
        w = torch.where(w < self.tau, torch.full_like(w, self.tau), w)
        if self.T > 0:
            w = torch.where(w > self.T, torch.full_like(w, float("inf")), w)
        w = (1 / w + 1e-9).view(-1, 1)
        degrees = ops.gspmm(graph, "copy_e", "sum", None, w).view(-1)
        if self.attn_dropout > 0:
            w = F.dropout(w, self.attn_dropout, training=self.training)
        return w, degrees


def _propagate(graph, Y: Tensor, weights: Tensor | None) -> Tensor:
    """``A_w Y``: each node sums its in-neighbours' rows, weighted by the edge weights if any."""
    if weights is None:
        return ops.gspmm(graph, "copy_u", "sum", Y)
    return ops.gspmm(graph, "u_mul_e", "sum", Y, weights)


class _MLP(nn.Module):
    """DGL's TWIRLS MLP: ``num_layers`` linear layers (in -> hidden -> ... -> out; none: the
    identity), each but the last followed by norm, ReLU and dropout, and with ``init_activate``
    the same before the first. ``norm``: ``'none'``, ``'batch'`` or ``'layer'``."""

    def __init__(self, input_d: int, hidden_d: int, output_d: int, num_layers: int, dropout: float, norm: str,
                 init_activate: bool):
        super().__init__()
        self.init_activate, self.norm, self.dropout = init_activate, norm, dropout
        widths = [input_d] + [hidden_d] * (num_layers - 1) + [output_d] if num_layers > 0 else []
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.norm_cnt = num_layers - 1 + int(init_activate)
        if norm == "batch":
            self.norms = nn.ModuleList(nn.BatchNorm1d(hidden_d) for _ in range(self.norm_cnt))
        elif norm == "layer":
            self.norms = nn.ModuleList(nn.LayerNorm(hidden_d) for _ in range(self.norm_cnt))
        self.reset_params()

    def reset_params(self) -> None:
        for layer in self.layers:
            nn.init.xavier_normal_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x: Tensor) -> Tensor:
        activations = iter(range(self.norm_cnt))
        if self.init_activate:
            x = self._activate(x, next(activations))
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = self._activate(x, next(activations))
        return x

    def _activate(self, x: Tensor, index: int) -> Tensor:
        if self.norm != "none":
            x = self.norms[index](x)
        return F.dropout(F.relu(x), self.dropout, training=self.training)


class TWIRLSConv(nn.Module):
    """Args (DGL's): ``input_d``, ``output_d``, ``hidden_d``, ``prop_step``, ``num_mlp_before``,
    ``num_mlp_after``, ``norm`` (``'none'``, ``'batch'``, ``'layer'``), ``precond``, ``alp``,
    ``lam``, ``attention`` (an attention after step ``prop_step // 2``), ``tau``, ``T``, ``p``,
    ``use_eta``, ``attn_bef`` (an attention before the first step), ``dropout`` (in the MLPs),
    ``attn_dropout``, ``inp_dropout`` (on the input features).

    Shapes: ``feat`` ``[N, input_d]`` on a graph with one node set -> ``[N, output_d]``. The
    unfolding runs at width ``hidden_d`` (``input_d`` without an MLP before it, ``output_d``
    without one after it; ``use_eta`` needs that width to be ``hidden_d``).
    """

    def __init__(self, input_d: int, output_d: int, hidden_d: int, prop_step: int, num_mlp_before: int = 1,
                 num_mlp_after: int = 1, norm: str = "none", precond: bool = True, alp: float = 0, lam: float = 1,
                 attention: bool = False, tau: float = 0.2, T: float = -1, p: float = 1, use_eta: bool = False,
                 attn_bef: bool = False, dropout: float = 0.0, attn_dropout: float = 0.0, inp_dropout: float = 0.0):
        super().__init__()
        if norm not in NORMS:
            raise ValueError(f"TWIRLSConv: norm must be one of {NORMS}, got {norm!r}")
        if num_mlp_before < 0 or num_mlp_after < 0 or prop_step < 0:
            raise ValueError(f"TWIRLSConv: num_mlp_before ({num_mlp_before}), num_mlp_after ({num_mlp_after}) and "
                             f"prop_step ({prop_step}) must be >= 0")
        self.input_d, self.output_d, self.hidden_d, self.prop_step = input_d, output_d, hidden_d, prop_step
        self.num_mlp_before, self.num_mlp_after = num_mlp_before, num_mlp_after
        self.norm, self.precond, self.attention = norm, precond, attention
        self.alp, self.lam, self.tau, self.T, self.p = alp, lam, tau, T, p
        self.use_eta, self.init_att = use_eta, attn_bef
        self.dropout, self.attn_dropout, self.inp_dropout = dropout, attn_dropout, inp_dropout
        self.attn_aft = prop_step // 2 if attention else -1
        # nothing learnt acts before the unfolding: its result can be kept (see the module docstring)
        self.cacheable = not attention and num_mlp_before == 0 and inp_dropout <= 0
        self.cached_unfolding = None
        self._cache_key: tuple | None = None
        self.size_bef_unf = output_d if num_mlp_after == 0 else hidden_d
        self.size_aft_unf = input_d if num_mlp_before == 0 else hidden_d
        self.mlp_bef = _MLP(input_d, hidden_d, self.size_bef_unf, num_mlp_before, dropout, norm, init_activate=False)
        self.unfolding = TWIRLSUnfoldingAndAttention(hidden_d, alp, lam, prop_step, self.attn_aft, tau, T, p,
                                                     use_eta, attn_bef, attn_dropout, precond)
        self.mlp_aft = _MLP(self.size_aft_unf, hidden_d, output_d, num_mlp_after, dropout, norm,
                            init_activate=num_mlp_before > 0 and num_mlp_after > 0)

    def forward(self, graph, feat: Tensor) -> Tensor:
        graph = check_homogeneous(graph, feat, "TWIRLSConv", max_dim=2)
        if feat.shape[1] != self.input_d:
            raise DGLError(f"TWIRLSConv: feat has {feat.shape[1]} features; the layer was built for "
                           f"input_d={self.input_d}")
        graph = graph.memo(("unigraph.dgl.nn", "twirls", "one_self_loop_per_node"), lambda: _one_self_loop(graph))
        if self.cacheable:
            x = self._cached(graph, feat)
        else:
            x = F.dropout(feat, self.inp_dropout, training=self.training) if self.inp_dropout > 0 else feat
            x = self.unfolding(graph, self.mlp_bef(x))
        return self.mlp_aft(x)

    def _cached(self, graph, feat: Tensor) -> Tensor:
        """The unfolding of ``feat`` on ``graph``, kept while the graph, the features (object and
        in-place version) and ``etas`` stay the same; a result that needs gradients, or a random
        one (attention dropout in training), is recomputed every call."""
        etas = self.unfolding.etas
        key = (feat._version, None if etas is None else etas._version, self.training)
        cached = self._cache_key
        if (cached is not None and cached[0]() is graph and cached[1]() is feat and cached[2:] == key):
            return self.cached_unfolding
        out = self.unfolding(graph, feat)
        random = self.training and self.unfolding.attn_dropout > 0 and self.unfolding.init_att
        if not out.requires_grad and not random:
            self.cached_unfolding, self._cache_key = out, (weakref.ref(graph), weakref.ref(feat)) + key
        return out


def _one_self_loop(graph) -> CoreGraph:
    """``graph`` without its self-loops, then with one per node (DGL's remove_self_loop then
    add_self_loop; the loops come last), as a plain structure (no features)."""
    src, dst = graph.src, graph.dst
    keep = src != dst
    loops = torch.arange(graph.num_nodes, device=src.device, dtype=src.dtype)
    edges = torch.stack([torch.cat([src[keep], loops]), torch.cat([dst[keep], loops])])
    return CoreGraph(edges, num_nodes=graph.num_nodes)
