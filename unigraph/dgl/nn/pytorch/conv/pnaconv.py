r"""DGL's ``PNAConv``: principal neighbourhood aggregation (https://arxiv.org/abs/2004.05718).

Each of ``num_towers`` towers reads its slice :math:`h^{(t)}` of the node features (all edge
features) and computes

.. math::
    m_{ji} = M\big(h_j \,\Vert\, h_i \,\Vert\, e_{ji}\big), \qquad
    a_i = \big\Vert_{s \in \text{scalers}} \big\Vert_{a \in \text{aggregators}}
          s(d_i)\, a_{j \in N(i)}(m_{ji}), \qquad
    t_i = \mathrm{Dropout}\Big(\mathrm{BN}\big(U(h_i \Vert a_i) / \sqrt{|V_{G(i)}|}\big)\Big)

with :math:`d_i` the in-degree and :math:`|V_{G(i)}|` the node count of :math:`i`'s graph in the
batch; then :math:`h_i' = \mathrm{LeakyReLU}(W [t^{(1)}_i \Vert \dots] + b)\ (+\ h_i)`.

Aggregators (over the messages :math:`m` of a destination): ``mean``, ``sum``, ``max``, ``min``,
``var`` :math:`\mathrm{ReLU}(E[m^2] - E[m]^2)`, ``std`` :math:`\sqrt{\mathrm{var} + 10^{-30}}`,
``moment3``/``4``/``5`` :math:`\mathrm{sign}(\mu_n) (|\mu_n| + 10^{-30})^{1/n}` with
:math:`\mu_n = E[(m - E[m])^n]`. Scalers: ``identity``, ``amplification``
:math:`\log(d+1)/\delta`, ``attenuation`` :math:`\delta/\log(d+1)`. A node without in-edges gets
zero aggregations (DGL's reduce never visits it). Each reduction is one g-SpMM over the edge
messages (``copy_e``), so no mailbox is built. An odd moment of two messages is 0 in exact
arithmetic; like DGL's, ours is then rounding noise raised to :math:`1/n` (~1e-6), so the two
agree there only to that. Unlike DGL, edge features given to a layer built with
``edge_feat_size=0`` are refused (DGL ignores them).

Parameters as DGL's: ``towers[t].M``, ``towers[t].U``, ``towers[t].batchnorm``,
``mixing_layer[0]``; PyTorch's default initialisation, drawn in DGL's order.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_graph

AGGREGATORS = ("mean", "sum", "max", "min", "std", "var", "moment3", "moment4", "moment5")
SCALERS = ("identity", "amplification", "attenuation")
_TINY = 1e-30  # DGL's guard inside the square and n-th roots


def _check_names(names, allowed: tuple[str, ...], what: str) -> list[str]:
    if isinstance(names, str) or not names:
        raise DGLError(f"PNAConv: {what} must be a non-empty list of names from {allowed}, got {names!r}")
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise DGLError(f"PNAConv: unknown {what} {unknown}; choose from {allowed}")
    return list(names)


class _Reductions:
    """The per-destination reductions of the edge messages of one graph, each computed once
    however many aggregators read it."""

    def __init__(self, graph, msg: Tensor):
        self.graph, self.msg, self._done = graph, msg, {}

    def _memo(self, key, compute):
        if key not in self._done:
            self._done[key] = compute()
        return self._done[key]

    def reduce(self, how: str) -> Tensor:
        return self._memo(how, lambda: ops.gspmm(self.graph, "copy_e", how, None, self.msg))

    def var(self) -> Tensor:
        def compute():
            mean_sq = ops.gspmm(self.graph, "copy_e", "mean", None, self.msg * self.msg)
            mean = self.reduce("mean")
            return torch.relu(mean_sq - mean * mean)
        return self._memo("var", compute)

    def moment(self, n: int) -> Tensor:
        centred = self._memo("centred", lambda: self.msg - self.reduce("mean").index_select(0, self.graph.dst))
        mu = ops.gspmm(self.graph, "copy_e", "mean", None, torch.pow(centred, n))
        return torch.sign(mu) * torch.pow(mu.abs() + _TINY, 1.0 / n)

    def aggregate(self, name: str) -> Tensor:
        if name in ("mean", "sum", "max", "min"):
            return self.reduce(name)
        if name == "var":
            return self.var()
        if name == "std":
            return torch.sqrt(self.var() + _TINY)
        return self.moment(int(name[len("moment"):]))


def _scale_factors(degrees: Tensor, delta: float, dtype: torch.dtype) -> dict[str, Tensor]:
    """``[N, 1]`` amplification and attenuation factors, computed in float64 as DGL does (numpy
    scalars) then cast; degree 0 is replaced by 1 here (those rows are zeroed afterwards), so no
    infinity reaches the backward pass."""
    log_d = torch.log(degrees.clamp(min=1).to(torch.float64) + 1).unsqueeze(1)
    return {"amplification": (log_d / delta).to(dtype), "attenuation": (delta / log_d).to(dtype)}


class PNAConvTower(nn.Module):
    """One tower: message network ``M``, update network ``U``, ``batchnorm``, ``dropout``.

    Shapes: ``node_feat`` ``[N, in_size]``, ``edge_feat`` ``[E, edge_feat_size]``, ``snorm``
    ``[N, 1]`` -> ``[N, out_size]``.
    """

    def __init__(self, in_size: int, out_size: int, aggregators: list[str], scalers: list[str], delta: float,
                 dropout: float = 0.0, edge_feat_size: int = 0):
        super().__init__()
        self.in_size, self.out_size, self.delta, self.edge_feat_size = in_size, out_size, delta, edge_feat_size
        self.aggregators, self.scalers = aggregators, scalers
        self.M = nn.Linear(2 * in_size + edge_feat_size, in_size)
        self.U = nn.Linear((len(aggregators) * len(scalers) + 1) * in_size, out_size)
        self.dropout = nn.Dropout(dropout)
        self.batchnorm = nn.BatchNorm1d(out_size)

    def neighbourhood(self, graph, msg: Tensor, node_feat: Tensor | None = None) -> Tensor:
        """``[N, len(scalers) * len(aggregators) * F]``: every scaler of every aggregation, in
        DGL's order (scalers outer, aggregators inner); zero for nodes without in-edges."""
        h = torch.cat(self._aggregations(graph, msg, node_feat), dim=1)
        degrees = graph.in_degrees()
        factors = _scale_factors(degrees, self.delta, h.dtype)
        h = torch.cat([h if name == "identity" else h * factors[name] for name in self.scalers], dim=1)
        return torch.where((degrees > 0).unsqueeze(1), h, torch.zeros((), dtype=h.dtype, device=h.device))

    def forward(self, graph, node_feat: Tensor, edge_feat: Tensor | None, snorm: Tensor) -> Tensor:
        parts = [node_feat.index_select(0, graph.src), node_feat.index_select(0, graph.dst)]
        if self.edge_feat_size > 0:
            parts.append(edge_feat)
        msg = self.M(torch.cat(parts, dim=-1))
        h = self.U(torch.cat([node_feat, self.neighbourhood(graph, msg, node_feat)], dim=-1)) * snorm
        return self.dropout(self.batchnorm(h))

    def _aggregations(self, graph, msg: Tensor, node_feat: Tensor | None) -> list[Tensor]:
        """``[N, F]`` per aggregator, in order (``node_feat``: the destinations' own features, for
        aggregators that read them: DGNConv's)."""
        reductions = _Reductions(graph, msg)
        return [reductions.aggregate(name) for name in self.aggregators]


class PNAConv(nn.Module):
    """Args (DGL's): ``in_size``, ``out_size`` (both divisible by ``num_towers``),
    ``aggregators`` and ``scalers`` (lists of the names above), ``delta`` (the training set's
    mean of :math:`\\log(d+1)`), ``dropout``, ``num_towers``, ``edge_feat_size`` (0: no edge
    features), ``residual`` (only when ``in_size == out_size``).

    Shapes: ``node_feat`` ``[N, in_size]``, ``edge_feat`` ``[E, edge_feat_size]`` -> ``[N,
    out_size]``. The graph has one node set (not a block; DGL's PNAConv refuses those too), and
    may be a batch (the normalisation is per graph).
    """

    def __init__(self, in_size: int, out_size: int, aggregators: list[str], scalers: list[str], delta: float,
                 dropout: float = 0.0, num_towers: int = 1, edge_feat_size: int = 0, residual: bool = True):
        super().__init__()
        aggregators = _check_names(aggregators, AGGREGATORS, "aggregators")
        scalers = _check_names(scalers, SCALERS, "scalers")
        if num_towers < 1 or in_size % num_towers or out_size % num_towers:
            raise DGLError(f"PNAConv: in_size={in_size} and out_size={out_size} must be divisible by "
                           f"num_towers={num_towers}")
        if edge_feat_size < 0:
            raise DGLError(f"PNAConv: edge_feat_size must be >= 0, got {edge_feat_size}")
        self.in_size, self.out_size, self.edge_feat_size = in_size, out_size, edge_feat_size
        self.tower_in_size, self.tower_out_size = in_size // num_towers, out_size // num_towers
        self.residual = residual and in_size == out_size   # DGL drops the residual when widths differ
        self.towers = nn.ModuleList(
            PNAConvTower(self.tower_in_size, self.tower_out_size, aggregators, scalers, delta, dropout=dropout,
                         edge_feat_size=edge_feat_size)
            for _ in range(num_towers))
        self.mixing_layer = nn.Sequential(nn.Linear(out_size, out_size), nn.LeakyReLU())

    def _check_inputs(self, graph, node_feat: Tensor, edge_feat: Tensor | None) -> None:
        if graph.is_bipartite:
            raise DGLError("PNAConv needs a graph whose sources and destinations are the same nodes (a block "
                           "or a bipartite graph is not supported, as in DGL)")
        if node_feat.dim() != 2 or node_feat.shape != (graph.num_dst_nodes, self.in_size):
            raise DGLError(f"PNAConv: node_feat must be [num_nodes={graph.num_dst_nodes}, in_size={self.in_size}], "
                           f"got {list(node_feat.shape)}")
        if self.edge_feat_size > 0:
            if edge_feat is None:
                raise DGLError(f"PNAConv was built with edge_feat_size={self.edge_feat_size}: pass edge_feat")
            if edge_feat.dim() != 2 or edge_feat.shape != (graph.num_edges, self.edge_feat_size):
                raise DGLError(f"PNAConv: edge_feat must be [num_edges={graph.num_edges}, edge_feat_size="
                               f"{self.edge_feat_size}], got {list(edge_feat.shape)}")
        elif edge_feat is not None and edge_feat.numel() > 0:
            raise DGLError("PNAConv got edge_feat but was built with edge_feat_size=0; pass edge_feat_size")

    @staticmethod
    def _graph_norm(graph, like: Tensor) -> Tensor:
        """``[N, 1]``: :math:`1/\\sqrt{|V_G|}` of each node's graph in the batch."""
        counts = graph.batch_num_nodes() if hasattr(graph, "batch_num_nodes") else None
        if counts is None:
            counts = torch.tensor([graph.num_dst_nodes])
        counts = counts.to(device=like.device)
        per_graph = (1.0 / counts.to(like.dtype)).sqrt()
        return per_graph.repeat_interleave(counts).unsqueeze(1)

    def forward(self, graph, node_feat: Tensor, edge_feat: Tensor | None = None) -> Tensor:
        graph = check_graph(graph, "PNAConv")
        self._check_inputs(graph, node_feat, edge_feat)
        snorm = self._graph_norm(graph, node_feat)
        width = self.tower_in_size
        h = torch.cat([tower(graph, node_feat[:, t * width:(t + 1) * width], edge_feat, snorm)
                       for t, tower in enumerate(self.towers)], dim=1)
        h = self.mixing_layer(h)
        return h + node_feat if self.residual else h
