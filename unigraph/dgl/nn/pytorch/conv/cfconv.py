r"""DGL's ``CFConv``: SchNet's continuous-filter convolution (https://arxiv.org/abs/1706.08566).

.. math::
    h_i' = \mathrm{SSP}\Big(W_{out} \sum_{j \in N(i)} (W_{node} h_j + b_{node}) \odot g(e_{ji}) + b_{out}\Big),
    \qquad g = \mathrm{SSP} \circ \mathrm{Linear} \circ \mathrm{SSP} \circ \mathrm{Linear}

with the shifted softplus :math:`\mathrm{SSP}(x) = \mathrm{softplus}(x) - \ln 2`. Modules as DGL's
(their names make a DGL ``state_dict`` load): ``project_node``, ``project_edge`` (the filter
network :math:`g`), ``project_out``, each with torch's default ``nn.Linear`` initialization. The
sum is one g-SpMM ``u_mul_e``. Only the source features of a ``(src, dst)`` pair are read.
"""
from __future__ import annotations

import math

import torch.nn.functional as F
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_graph


class ShiftedSoftplus(nn.Module):
    r""":math:`\frac{1}{\beta}\ln(1 + e^{\beta x}) - \ln(\mathrm{shift})` (linear above
    ``threshold``, as ``nn.Softplus``); DGL's defaults make it 0 at 0."""

    def __init__(self, beta: float = 1, shift: float = 2, threshold: float = 20):
        super().__init__()
        self.beta, self.shift, self.threshold = beta, shift, threshold

    def forward(self, inputs: Tensor) -> Tensor:
        return F.softplus(inputs, beta=self.beta, threshold=self.threshold) - math.log(float(self.shift))

    def extra_repr(self) -> str:
        return f"beta={self.beta}, shift={self.shift}, threshold={self.threshold}"


class CFConv(nn.Module):
    """Args (DGL's): ``node_in_feats``, ``edge_in_feats``, ``hidden_feats``, ``out_feats``.

    Shapes: ``node_feats`` ``[N_src, node_in_feats]`` (or a ``(src, dst)`` pair),
    ``edge_feats`` ``[E, edge_in_feats]`` -> ``[N_dst, out_feats]``.
    """

    def __init__(self, node_in_feats: int, edge_in_feats: int, hidden_feats: int, out_feats: int):
        super().__init__()
        self.project_edge = nn.Sequential(nn.Linear(edge_in_feats, hidden_feats), ShiftedSoftplus(),
                                          nn.Linear(hidden_feats, hidden_feats), ShiftedSoftplus())
        self.project_node = nn.Linear(node_in_feats, hidden_feats)
        self.project_out = nn.Sequential(nn.Linear(hidden_feats, out_feats), ShiftedSoftplus())

    def forward(self, g, node_feats, edge_feats: Tensor) -> Tensor:
        graph = check_graph(g, "CFConv")
        node_feats_src = node_feats[0] if isinstance(node_feats, tuple) else node_feats
        if node_feats_src.shape[0] != graph.num_src_nodes:
            raise DGLError(f"CFConv: node_feats have {node_feats_src.shape[0]} rows for {graph.num_src_nodes} "
                           "source nodes")
        if not isinstance(edge_feats, Tensor) or edge_feats.dim() == 0 or edge_feats.shape[0] != graph.num_edges:
            got = list(edge_feats.shape) if isinstance(edge_feats, Tensor) else type(edge_feats).__name__
            raise DGLError(f"CFConv: edge_feats must have one row per edge ({graph.num_edges}), got {got}")
        messages = ops.gspmm(graph, "u_mul_e", "sum", self.project_node(node_feats_src), self.project_edge(edge_feats))
        return self.project_out(messages)
