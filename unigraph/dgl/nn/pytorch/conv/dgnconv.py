r"""DGL's ``DGNConv``: directional graph networks (https://arxiv.org/abs/2010.02863), a
:class:`~unigraph.dgl.nn.pytorch.conv.pnaconv.PNAConv` with two more kinds of aggregator.

With :math:`\phi_k` the ``k``-th column of ``eig_vec`` (the ``k``-th smallest non-trivial
Laplacian eigenvector, e.g. from ``dgl.LapPE(k, feat_name="eig")``), each edge :math:`j \to i`
gets the field :math:`F_{ij} = \phi_k(j) - \phi_k(i)` and, over the messages :math:`m_{ji}` of
PNA's message network,

.. math::
    \text{dir}k\text{-av}:\; a_i = \sum_{j \in N(i)} \frac{|F_{ij}|}{\lVert F_{i,:} \rVert_1 + \epsilon}\, m_{ji},
    \qquad
    \text{dir}k\text{-dx}:\; a_i = \Big|\sum_{j \in N(i)} \frac{F_{ij}}{\lVert F_{i,:} \rVert_1 + \epsilon}\, m_{ji}
        - h_i \sum_{j \in N(i)} \frac{F_{ij}}{\lVert F_{i,:} \rVert_1 + \epsilon}\Big|

(:math:`\epsilon = 10^{-30}`, :math:`h_i` the tower's input features of node :math:`i`, the
absolute value elementwise), for ``k`` in 1, 2, 3. Everything else, PNA's aggregators and
scalers, towers, graph-size normalisation, mixing layer and residual, is PNAConv's; each sum is
one g-SpMM over the edges.

Built on ``pnaconv.py`` without editing it: its name check knows only PNA's aggregators, so the
parent is built with a stand-in PNA aggregator in each directional slot (the same widths, hence
the same parameter shapes and the same random draws as DGL, which also builds PNA towers first
and then replaces them), and the towers are then replaced by :class:`DGNConvTower`. The
eigenvectors reach the towers as the node feature ``"eig"`` inside the graph's local scope, as
in DGL. ``eig_vec`` is ignored when no directional aggregator is used (as in DGL).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.conv.pnaconv import (
    AGGREGATORS as PNA_AGGREGATORS, SCALERS, PNAConv, PNAConvTower, _Reductions)
from unigraph.dgl.nn.pytorch.utils import check_graph

DIRECTIONAL = tuple(f"dir{k}-{kind}" for k in (1, 2, 3) for kind in ("av", "dx"))
AGGREGATORS = PNA_AGGREGATORS + DIRECTIONAL
_TINY = 1e-30  # DGL's guard under the field's L1 norm


def _check_names(names, allowed: tuple[str, ...], what: str) -> list[str]:
    if isinstance(names, str) or not names:
        raise DGLError(f"DGNConv: {what} must be a non-empty list of names from {allowed}, got {names!r}")
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise DGLError(f"DGNConv: unknown {what} {unknown}; choose from {allowed}")
    return list(names)


def _eig_column(name: str) -> int:
    """``dir{k}-..`` -> ``k - 1``, the column of ``eig_vec`` it reads."""
    return int(name[3]) - 1


def directional(graph, msg: Tensor, h_in: Tensor, eig_vec: Tensor, name: str) -> Tensor:
    """``[N, F]``: the aggregator ``name`` (``dir{k}-av`` or ``dir{k}-dx``) of the edge messages
    ``msg`` ``[E, F]``; ``h_in`` ``[N, F]`` the destinations' own features (for ``-dx``)."""
    phi = eig_vec[:, _eig_column(name)]
    field = (phi.index_select(0, graph.src) - phi.index_select(0, graph.dst)).unsqueeze(1)   # [E, 1]
    norm = ops.gspmm(graph, "copy_e", "sum", None, field.abs()).index_select(0, graph.dst) + _TINY
    if name.endswith("av"):
        return ops.gspmm(graph, "copy_e", "sum", None, msg * (field.abs() / norm))
    weight = field / norm
    weighted = ops.gspmm(graph, "copy_e", "sum", None, msg * weight)
    return torch.abs(weighted - ops.gspmm(graph, "copy_e", "sum", None, weight) * h_in)


class DGNConvTower(PNAConvTower):
    """A PNA tower whose aggregators may also be directional; reads ``graph.ndata["eig"]`` when
    one is. Shapes as :class:`PNAConvTower`."""

    def _aggregations(self, graph, msg: Tensor, node_feat: Tensor | None) -> list[Tensor]:
        """PNA's aggregations with the directional aggregators in their slots."""
        reductions = _Reductions(graph, msg)
        eig_vec = graph.ndata["eig"] if any(name in DIRECTIONAL for name in self.aggregators) else None
        return [directional(graph, msg, node_feat, eig_vec, name) if name in DIRECTIONAL
                else reductions.aggregate(name) for name in self.aggregators]


class DGNConv(PNAConv):
    """Args (DGL's): as :class:`PNAConv` (``in_size``, ``out_size``, ``aggregators``, ``scalers``,
    ``delta``, ``dropout``, ``num_towers``, ``edge_feat_size``, ``residual``), the aggregators
    also from ``dir1-av`` ... ``dir3-dx``.

    Shapes: ``node_feat`` ``[N, in_size]``, ``edge_feat`` ``[E, edge_feat_size]``, ``eig_vec``
    ``[N, K]`` (``K`` at least the largest ``k`` of a ``dir{k}`` aggregator; needed only with
    one) -> ``[N, out_size]``. One node set, as PNAConv.
    """

    def __init__(self, in_size: int, out_size: int, aggregators: list[str], scalers: list[str], delta: float,
                 dropout: float = 0.0, num_towers: int = 1, edge_feat_size: int = 0, residual: bool = True):
        aggregators = _check_names(aggregators, AGGREGATORS, "aggregators")
        stand_ins = ["mean" if name in DIRECTIONAL else name for name in aggregators]
        super().__init__(in_size, out_size, stand_ins, scalers, delta, dropout, num_towers, edge_feat_size, residual)
        self.towers = nn.ModuleList(
            DGNConvTower(self.tower_in_size, self.tower_out_size, aggregators, list(scalers), delta, dropout=dropout,
                         edge_feat_size=edge_feat_size)
            for _ in range(num_towers))
        self.use_eig_vec = any(name in DIRECTIONAL for name in aggregators)
        self._eig_columns = max((_eig_column(name) + 1 for name in aggregators if name in DIRECTIONAL), default=0)

    def _check_eig(self, graph, eig_vec) -> Tensor:
        if eig_vec is None:
            raise DGLError("DGNConv with directional aggregators needs eig_vec, the Laplacian eigenvectors [N, K] "
                           "(e.g. dgl.LapPE(k, feat_name='eig'))")
        if not isinstance(eig_vec, Tensor) or not eig_vec.is_floating_point() or eig_vec.dim() != 2:
            raise DGLError("DGNConv: eig_vec must be a floating-point tensor [num_nodes, K], got "
                           + (f"{eig_vec.dtype} {list(eig_vec.shape)}" if isinstance(eig_vec, Tensor)
                              else type(eig_vec).__name__))
        if eig_vec.shape[0] != graph.num_nodes or eig_vec.shape[1] < self._eig_columns:
            raise DGLError(f"DGNConv: eig_vec must be [num_nodes={graph.num_nodes}, K >= {self._eig_columns}] for "
                           f"its aggregators, got {list(eig_vec.shape)}")
        return eig_vec

    def forward(self, graph, node_feat: Tensor, edge_feat: Tensor | None = None,
                eig_vec: Tensor | None = None) -> Tensor:
        if not self.use_eig_vec:
            return super().forward(graph, node_feat, edge_feat)
        graph = check_graph(graph, "DGNConv")
        if graph.is_bipartite:
            raise DGLError("DGNConv needs a graph whose sources and destinations are the same nodes (a block or "
                           "a bipartite graph is not supported, as in DGL)")
        eig_vec = self._check_eig(graph, eig_vec)
        with graph.local_scope():
            graph.ndata["eig"] = eig_vec
            return super().forward(graph, node_feat, edge_feat)


__all__ = ["DGNConv", "DGNConvTower", "AGGREGATORS", "SCALERS", "directional"]
