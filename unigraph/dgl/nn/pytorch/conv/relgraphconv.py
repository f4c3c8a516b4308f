r"""DGL's ``RelGraphConv``: the relational graph convolution of R-GCN
(https://arxiv.org/abs/1703.06103), on a graph whose edges carry a relation id.

.. math::
    h_i' = \sigma\Big(\mathrm{LN}\Big(\sum_{(j, i) \in E} c_{ji}\, h_j W_{r_{ji}}\Big) + b
    + h_i W_{\text{loop}}\Big)

followed by dropout. :math:`W_r` comes from a :class:`~unigraph.dgl.nn.TypedLinear` (``linear_r``;
'basis' or 'bdd' regularized, ``num_bases`` defaulting to ``num_rels``), :math:`c_{ji}` is the
optional ``norm`` of the edge (1 without it), LN the optional layer norm. Each edge's message is its
source row through its relation's weight (one grouped product over all edges), summed into the
destinations by one g-SpMM. On a block the self-loop term reads the first ``num_dst_nodes`` rows.
Parameters as DGL's: ``linear_r.W`` (``linear_r.coeff``), ``h_bias`` ``[out]`` (zeros),
``loop_weight`` ``[in, out]`` (Glorot uniform, ReLU gain), ``layer_norm_weight`` (a LayerNorm).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.linear import TypedLinear
from unigraph.dgl.nn.pytorch.utils import check_graph


class RelGraphConv(nn.Module):
    """Args (DGL's): ``in_feat``, ``out_feat``, ``num_rels``, ``regularizer`` (``None``,
    ``'basis'``, ``'bdd'``), ``num_bases``, ``bias``, ``activation``, ``self_loop``, ``dropout``,
    ``layer_norm``.

    Shapes: ``feat`` ``[N_src, in_feat]``, ``etypes`` ``[E]`` relation ids in ``[0, num_rels)``,
    ``norm`` ``[E]`` or ``[E, 1]`` (or ``[E, out_feat]``) -> ``[N_dst, out_feat]``.
    ``presorted=True`` promises the edges are sorted by relation id (as ``dgl.to_homogeneous``
    leaves them): the messages are then multiplied without regrouping.
    """

    def __init__(self, in_feat: int, out_feat: int, num_rels: int, regularizer: str | None = None,
                 num_bases: int | None = None, bias: bool = True, activation: Callable | None = None,
                 self_loop: bool = True, dropout: float = 0.0, layer_norm: bool = False):
        super().__init__()
        if regularizer is not None and num_bases is None:
            num_bases = num_rels
        self.linear_r = TypedLinear(in_feat, out_feat, num_rels, regularizer, num_bases)
        self.bias, self.activation = bias, activation
        self.self_loop, self.layer_norm = self_loop, layer_norm
        self.presorted = False
        if bias:
            self.h_bias = nn.Parameter(torch.zeros(out_feat))
        if layer_norm:
            self.layer_norm_weight = nn.LayerNorm(out_feat, elementwise_affine=True)
        if self_loop:
            self.loop_weight = nn.Parameter(torch.empty(in_feat, out_feat))
            nn.init.xavier_uniform_(self.loop_weight, gain=nn.init.calculate_gain("relu"))
        self.dropout = nn.Dropout(dropout)

    def forward(self, g, feat: Tensor, etypes, norm: Tensor | None = None, *, presorted: bool = False) -> Tensor:
        graph = check_graph(g, "RelGraphConv")
        if not isinstance(feat, Tensor):
            raise DGLError(f"RelGraphConv takes one feature tensor [N_src, in_feat], got {type(feat).__name__}")
        if feat.shape[0] != graph.num_src_nodes:
            raise DGLError(f"RelGraphConv: feat has {feat.shape[0]} rows for {graph.num_src_nodes} source nodes")
        etypes = torch.as_tensor(etypes, device=feat.device)
        if etypes.dim() != 1 or etypes.numel() != graph.num_edges:
            raise DGLError(f"RelGraphConv: etypes must hold one relation id per edge ({graph.num_edges}), got "
                           f"shape {list(etypes.shape)}")
        norm = self._edge_norm(norm, graph.num_edges)
        self.presorted = presorted
        messages = self.linear_r(feat.index_select(0, graph.src.to(feat.device)), etypes, presorted)
        if norm is not None:
            messages = messages * norm
        h = ops.gspmm(graph, "copy_e", "sum", None, messages)
        if self.layer_norm:
            h = self.layer_norm_weight(h)
        if self.bias:
            h = h + self.h_bias
        if self.self_loop:
            h = h + feat[: graph.num_dst_nodes] @ self.loop_weight
        if self.activation:
            h = self.activation(h)
        return self.dropout(h)

    @staticmethod
    def _edge_norm(norm: Tensor | None, num_edges: int) -> Tensor | None:
        """``norm`` as a column per edge (a 1-D ``[E]`` weighs each edge's whole message)."""
        if norm is None:
            return None
        if not isinstance(norm, Tensor) or norm.dim() == 0 or norm.shape[0] != num_edges:
            raise DGLError(f"RelGraphConv: norm must have one row per edge ({num_edges}), got "
                           f"{list(norm.shape) if isinstance(norm, Tensor) else type(norm).__name__}")
        return norm.view(-1, 1) if norm.dim() == 1 else norm
