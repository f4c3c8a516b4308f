r"""DGL's ``EGATConv``: graph attention that also updates the edge features (Rossmann-toolbox,
https://pubmed.ncbi.nlm.nih.gov/34571541/, supplementary data).

.. math::
    f_{ij}' = \mathrm{LeakyReLU}\big(W_{ni} h_j + W_{nj} h_i + W_f f_{ij} + b\big), \qquad
    \alpha_{ij}^h = \operatorname{softmax}_{j \in N(i)}\big(a^h \cdot f_{ij}'^h\big), \qquad
    h_i'^h = \sum_{j \in N(i)} w_{ij}\, \alpha_{ij}^h\, W_n^h h_j

per head ``h`` (``f'`` is viewed ``[E, H, out_edge_feats]``), LeakyReLU with torch's default slope
0.01, ``w_{ij}`` the optional ``edge_weight`` (1 without). Returns the new node features and the
new edge features ``f'``. As DGL's layer it always refuses destinations without in-edges.
Parameters as DGL's: ``fc_node_src`` (``W_n``), ``fc_ni``, ``fc_nj``, ``fc_fij``, ``attn``
``[1, H, out_edge_feats]``, ``bias`` ``[H * out_edge_feats]``; Glorot normal with the ReLU gain, zero
bias. (DGL's own layer fails to build with ``bias=False``; here it builds without the bias.)
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_feature_widths, check_graph, expand_as_pair


class EGATConv(nn.Module):
    """Args (DGL's): ``in_node_feats`` (an int or a ``(src, dst)`` pair), ``in_edge_feats``,
    ``out_node_feats``, ``out_edge_feats``, ``num_heads``, ``bias``.

    Shapes: ``nfeats`` ``[N_src, in_node_feats]`` (or a pair), ``efeats`` ``[E, in_edge_feats]``,
    ``edge_weight`` ``[E]`` -> ``([N_dst, H, out_node_feats], [E, H, out_edge_feats])``, plus the
    attention ``[E, H, 1]`` (times ``edge_weight``) with ``get_attention=True``.
    """

    def __init__(self, in_node_feats, in_edge_feats: int, out_node_feats: int, out_edge_feats: int, num_heads: int,
                 bias: bool = True):
        super().__init__()
        self._num_heads = num_heads
        pair = isinstance(in_node_feats, tuple)
        self._in_src_node_feats, self._in_dst_node_feats = in_node_feats if pair else (in_node_feats, in_node_feats)
        self._in_edge_feats = in_edge_feats
        self._out_node_feats, self._out_edge_feats = out_node_feats, out_edge_feats
        edge_width = out_edge_feats * num_heads
        self.fc_node_src = nn.Linear(self._in_src_node_feats, out_node_feats * num_heads, bias=False)
        self.fc_ni = nn.Linear(self._in_src_node_feats, edge_width, bias=False)
        self.fc_nj = nn.Linear(self._in_dst_node_feats, edge_width, bias=False)
        self.fc_fij = nn.Linear(in_edge_feats, edge_width, bias=False)
        self.attn = nn.Parameter(torch.empty(1, num_heads, out_edge_feats))
        if bias:
            self.bias = nn.Parameter(torch.empty(edge_width))
        else:
            self.register_buffer("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        for weight in (self.fc_node_src.weight, self.fc_ni.weight, self.fc_fij.weight, self.fc_nj.weight, self.attn):
            nn.init.xavier_normal_(weight, gain=gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, graph, nfeats, efeats: Tensor, edge_weight: Tensor | None = None, get_attention: bool = False):
        graph = check_graph(graph, "EGATConv")
        h_src, h_dst = expand_as_pair(nfeats, graph)
        check_feature_widths("EGATConv", h_src, h_dst, self._in_src_node_feats, self._in_dst_node_feats)
        self._check_edge_inputs(graph, efeats, edge_weight)
        if graph.num_dst_nodes and bool((graph.in_degrees() == 0).any()):
            raise DGLError("EGATConv: there are 0-in-degree nodes in the graph; their output would be invalid. "
                           "Add self-loops (dgl.add_self_loop); EGATConv, as DGL's, has no allow_zero_in_degree")
        heads = self._num_heads
        edge_out = ops.gsddmm(graph, "add", self.fc_ni(h_src), self.fc_nj(h_dst), "u", "v") + self.fc_fij(efeats)
        if self.bias is not None:
            edge_out = edge_out + self.bias
        edge_out = F.leaky_relu(edge_out).view(-1, heads, self._out_edge_feats)       # [E, H, F_e]
        attention = ops.edge_softmax(graph, (edge_out * self.attn).sum(-1, keepdim=True))
        if edge_weight is not None:
            attention = attention * edge_weight.reshape(-1, 1, 1)
        messages = self.fc_node_src(h_src).view(-1, heads, self._out_node_feats)
        node_out = ops.gspmm(graph, "u_mul_e", "sum", messages, attention)
        return (node_out, edge_out, attention) if get_attention else (node_out, edge_out)

    def _check_edge_inputs(self, graph, efeats, edge_weight) -> None:
        edges = graph.num_edges
        if not isinstance(efeats, Tensor) or efeats.shape != (edges, self._in_edge_feats):
            raise DGLError(f"EGATConv: efeats must be [num_edges, in_edge_feats] = [{edges}, "
                           f"{self._in_edge_feats}], got {_describe(efeats)}")
        # DGL takes one weight per edge, [E]; [E, 1] is read the same
        if edge_weight is not None and (not isinstance(edge_weight, Tensor)
                                        or edge_weight.shape not in ((edges,), (edges, 1))):
            raise DGLError(f"EGATConv: edge_weight must be [num_edges] = [{edges}], got {_describe(edge_weight)}")


def _describe(value) -> str:
    return str(tuple(value.shape)) if isinstance(value, Tensor) else type(value).__name__
