r"""DGL's ``GatedGraphConv``: gated graph sequence networks (https://arxiv.org/abs/1511.05493).

.. math::
    h_i^{(0)} = [x_i \,\|\, 0], \qquad
    a_i^{(t)} = \sum_{j \in N(i)} \big(W_{e_{ji}} h_j^{(t)} + b_{e_{ji}}\big), \qquad
    h_i^{(t+1)} = \mathrm{GRU}\big(a_i^{(t)}, h_i^{(t)}\big)

for ``n_steps`` steps, with one linear map per edge type :math:`e_{ji}` (``linears``) and the input
padded with zeros to ``out_feats``. Parameters as DGL's: ``linears`` (Glorot normal, ReLU gain,
zero biases) and ``gru`` (``nn.GRUCell``, its own initialization).

With several edge types, every node is projected by every type's map when that costs no more
than projecting each edge (``N * n_etypes <= E``), and the sum runs as one g-SpMM over a graph
whose sources are the (node, type) pairs; else each edge's source is projected by its own type's
map and the messages summed (DGL's way).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_graph
from unigraph.graph import Graph as CoreGraph


class GatedGraphConv(nn.Module):
    """Args (DGL's): ``in_feats`` (at most ``out_feats``), ``out_feats``, ``n_steps``,
    ``n_etypes``, ``bias`` (the GRU's).

    Shapes: ``feat`` ``[N, in_feats]``, ``etypes`` ``[E]`` (integers in ``[0, n_etypes)``; may be
    omitted with one edge type) -> ``[N, out_feats]``. Homogeneous graphs only.
    """

    def __init__(self, in_feats: int, out_feats: int, n_steps: int, n_etypes: int, bias: bool = True):
        super().__init__()
        if in_feats > out_feats:
            raise DGLError(f"GatedGraphConv: out_feats ({out_feats}) must not be less than in_feats ({in_feats})")
        if n_etypes < 1:
            raise DGLError(f"GatedGraphConv: n_etypes must be at least 1, got {n_etypes}")
        self._in_feats, self._out_feats = in_feats, out_feats
        self._n_steps, self._n_etypes = n_steps, n_etypes
        self.linears = nn.ModuleList([nn.Linear(out_feats, out_feats) for _ in range(n_etypes)])
        self.gru = nn.GRUCell(out_feats, out_feats, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        self.gru.reset_parameters()
        for linear in self.linears:
            nn.init.xavier_normal_(linear.weight, gain=gain)
            nn.init.zeros_(linear.bias)

    def set_allow_zero_in_degree(self, set_value: bool) -> None:
        """DGL's API; this layer has no zero-in-degree check (such a node aggregates 0)."""
        self._allow_zero_in_degree = set_value

    def forward(self, graph, feat: Tensor, etypes: Tensor | None = None) -> Tensor:
        graph = check_graph(graph, "GatedGraphConv")
        if graph.is_bipartite:
            raise DGLError("GatedGraphConv needs a homogeneous graph (its GRU updates the nodes it reads); "
                           "this one is bipartite or a block")
        if feat.dim() != 2 or feat.shape[0] != graph.num_nodes or feat.shape[1] > self._out_feats:
            raise DGLError(f"GatedGraphConv: feat must be [{graph.num_nodes}, at most {self._out_feats}], "
                           f"got {list(feat.shape)}")
        aggregate = self._aggregator(graph, self._checked_etypes(graph, etypes))
        feat = torch.cat([feat, feat.new_zeros((feat.shape[0], self._out_feats - feat.shape[1]))], -1)
        for _ in range(self._n_steps):
            feat = self.gru(aggregate(feat), feat)
        return feat

    def _aggregator(self, graph, etypes: Tensor | None) -> Callable[[Tensor], Tensor]:
        """``h -> a``: each node's sum of its in-edges' typed messages (see the module docstring
        for the two ways), with what every step shares built once."""
        if etypes is None:
            return lambda h: ops.gspmm(graph, "copy_u", "sum", self.linears[0](h))
        if graph.num_nodes * self._n_etypes <= graph.num_edges:
            typed = self._typed_sources(graph, etypes)
            return lambda h: ops.gspmm(typed, "copy_u", "sum", self._project_all(h))
        sources, position = self._sources_by_type(graph, etypes)
        return lambda h: ops.gspmm(graph, "copy_e", "sum", None, self._edge_messages(h, sources, position))

    def _checked_etypes(self, graph, etypes) -> Tensor | None:
        """``etypes`` as int64 (integral floats accepted, as DGL does), checked; None where there is
        one edge type (every edge is of type 0)."""
        if etypes is None:
            if self._n_etypes != 1:
                raise DGLError(f"GatedGraphConv with n_etypes={self._n_etypes} needs etypes, one type per edge")
            return None
        if not isinstance(etypes, Tensor) or etypes.dim() != 1 or etypes.shape[0] != graph.num_edges:
            got = list(etypes.shape) if isinstance(etypes, Tensor) else type(etypes).__name__
            raise DGLError(f"GatedGraphConv: etypes must be a [{graph.num_edges}] tensor, one type per edge, got {got}")
        if etypes.is_floating_point() and not bool((etypes == etypes.trunc()).all()):
            raise DGLError("GatedGraphConv: etypes must hold integer type ids")
        if etypes.numel() and (int(etypes.min()) < 0 or int(etypes.max()) >= self._n_etypes):
            raise DGLError(f"GatedGraphConv: edge type ids must lie in [0, {self._n_etypes}), got "
                           f"[{int(etypes.min())}, {int(etypes.max())}]")
        return None if self._n_etypes == 1 else etypes.to(device=graph.device, dtype=torch.int64)

    def _typed_sources(self, graph, etypes: Tensor) -> CoreGraph:
        """The graph whose sources are (node, type) pairs: an edge ``j -> i`` of type ``t`` joins
        source ``j * n_etypes + t`` to ``i`` (the row of :meth:`_project_all` holding ``W_t h_j + b_t``)."""
        src, dst = graph.src, graph.dst
        return CoreGraph(torch.stack([src * self._n_etypes + etypes, dst]),
                         num_src_nodes=graph.num_nodes * self._n_etypes, num_dst_nodes=graph.num_nodes)

    def _project_all(self, h: Tensor) -> Tensor:
        """``W_t h_j + b_t`` for every node ``j`` and type ``t``, row ``j * n_etypes + t``."""
        return torch.stack([linear(h) for linear in self.linears], 1).view(-1, self._out_feats)

    def _sources_by_type(self, graph, etypes: Tensor) -> tuple[list[Tensor], Tensor]:
        """The source of each edge of each type (edges of a type in id order), and where each
        edge's message lands in their concatenation."""
        order = torch.argsort(etypes, stable=True)
        counts = torch.bincount(etypes, minlength=self._n_etypes).tolist()
        return list(graph.src[order].split(counts)), torch.argsort(order)

    def _edge_messages(self, h: Tensor, sources: list[Tensor], position: Tensor) -> Tensor:
        """``W_t h_j + b_t`` for every edge ``j -> i`` of type ``t``, in edge id order: ``[E, out_feats]``."""
        parts = [linear(h.index_select(0, ids)) for linear, ids in zip(self.linears, sources)]
        return torch.cat(parts).index_select(0, position)
