r"""DGL's ``HGTConv``: the heterogeneous graph transformer (https://arxiv.org/abs/2003.01332) in
DGL's homogeneous form, on a graph whose nodes carry a type id and whose edges a relation id.

For an edge :math:`e = (s \to t)` of relation :math:`r = \phi(e)`, per head :math:`h` of width
:math:`d`:

.. math::
    k_s^h, q_t^h, v_s^h = \big(x_s W^K_{\tau(s)}\big)^h, \big(x_t W^Q_{\tau(t)}\big)^h,
    \big(x_s W^V_{\tau(s)}\big)^h, \qquad
    a_e^h = \frac{\mu_r^h}{\sqrt{d}}\, \big(k_s^h W^{att}_{r,h}\big) \cdot q_t^h

.. math::
    \tilde h_t = \Big\Vert_h \sum_{e = (s \to t)} \operatorname{softmax}_{e \in in(t)}(a_e^h)\,
    v_s^h W^{msg}_{r,h}, \qquad
    h_t' = \sigma(\beta_{\tau(t)})\, \mathrm{drop}\big(\tilde h_t W^A_{\tau(t)}\big)
    + \big(1 - \sigma(\beta_{\tau(t)})\big)\, x_t\, (W^{res})

followed by an optional layer norm. As DGL computes it, no activation acts on :math:`\tilde h`
(the paper's :math:`\sigma` is not applied), and :math:`W^{res}` exists only when ``in_size !=
head_size * num_heads``. This is not PyG's ``HGTConv`` (:mod:`unigraph.nn.hgt_conv`: GELU, biases,
per-type widths, dictionaries of node types).

How it runs: the per-type projections are :class:`~unigraph.dgl.nn.TypedLinear` calls; the per-
relation, per-head matrices of all heads are stacked into ``[R, H, d, d]`` and applied to every
edge's key and value rows in one block-diagonal grouped product
(:func:`unigraph.hetero.block_segment_matmul`, edges grouped by relation); the scores are one
g-SDDMM (dot with the destinations' queries), then one edge softmax and one g-SpMM. Parameters as
DGL's: ``linear_k/q/v/a`` (TypedLinear ``W``), ``relation_pri.{h}`` ``[R]`` (ones),
``relation_att.{h}`` / ``relation_msg.{h}`` (TypedLinear ``[R, d, d]``), ``skip`` ``[T]`` (ones),
``residual_w`` ``[in, H * d]`` (Glorot uniform), ``norm`` (a LayerNorm, with ``use_norm``).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from unigraph import ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.linear import TypedLinear
from unigraph.dgl.nn.pytorch.utils import check_feature_widths, check_graph
from unigraph.hetero import block_segment_matmul


class HGTConv(nn.Module):
    """Args (DGL's): ``in_size``, ``head_size``, ``num_heads``, ``num_ntypes``, ``num_etypes``,
    ``dropout`` (on the output of ``linear_a``), ``use_norm`` (a layer norm on the output).

    Shapes: ``x`` ``[N_src, in_size]``, ``ntype`` ``[N_src]`` type ids in ``[0, num_ntypes)``,
    ``etype`` ``[E]`` relation ids in ``[0, num_etypes)`` -> ``[N_dst, head_size * num_heads]``.
    On a block the destinations are the first ``num_dst_nodes`` rows of ``x`` and ``ntype``.
    ``presorted=True`` promises ``ntype`` and ``etype`` are sorted (as ``dgl.to_homogeneous``
    leaves them): the rows are then multiplied without regrouping (unsorted ids are refused).
    """

    def __init__(self, in_size: int, head_size: int, num_heads: int, num_ntypes: int, num_etypes: int,
                 dropout: float = 0.2, use_norm: bool = False):
        super().__init__()
        self.in_size, self.head_size, self.num_heads = in_size, head_size, num_heads
        self.num_ntypes, self.num_etypes = num_ntypes, num_etypes
        self.sqrt_d = math.sqrt(head_size)
        self.use_norm = use_norm
        width = head_size * num_heads
        self.linear_k = TypedLinear(in_size, width, num_ntypes)
        self.linear_q = TypedLinear(in_size, width, num_ntypes)
        self.linear_v = TypedLinear(in_size, width, num_ntypes)
        self.linear_a = TypedLinear(width, width, num_ntypes)
        # one entry per head, as DGL lays them out (its state_dict loads as is)
        self.relation_pri = nn.ParameterList([nn.Parameter(torch.ones(num_etypes)) for _ in range(num_heads)])
        self.relation_att = nn.ModuleList([TypedLinear(head_size, head_size, num_etypes) for _ in range(num_heads)])
        self.relation_msg = nn.ModuleList([TypedLinear(head_size, head_size, num_etypes) for _ in range(num_heads)])
        self.skip = nn.Parameter(torch.ones(num_ntypes))
        self.drop = nn.Dropout(dropout)
        if use_norm:
            self.norm = nn.LayerNorm(width)
        if in_size != width:
            self.residual_w = nn.Parameter(torch.empty(in_size, width))
            nn.init.xavier_uniform_(self.residual_w)

    def forward(self, g, x: Tensor, ntype, etype, *, presorted: bool = False) -> Tensor:
        graph = check_graph(g, "HGTConv")
        if graph.is_bipartite and not graph.is_block:
            raise DGLError("HGTConv takes a graph with one node set or a block (destinations first among the "
                           "sources); got a bipartite graph of two node types")
        check_feature_widths("HGTConv", x, x, self.in_size, self.in_size)
        if x.dim() != 2 or x.shape[0] != graph.num_src_nodes:
            raise DGLError(f"HGTConv: x must be [{graph.num_src_nodes}, {self.in_size}] (one row per source node), "
                           f"got {list(x.shape)}")
        ntype = self._type_ids(ntype, graph.num_src_nodes, self.num_ntypes, "ntype", "source node", x.device)
        etype = self._type_ids(etype, graph.num_edges, self.num_etypes, "etype", "edge", x.device)
        if presorted and bool((etype[1:] < etype[:-1]).any()):
            raise DGLError("HGTConv: presorted=True but etype is not sorted (non-decreasing)")
        num_dst = graph.num_dst_nodes
        x_dst, dst_ntype = x[:num_dst], ntype[:num_dst]
        heads, d = self.num_heads, self.head_size
        k = self.linear_k(x, ntype, presorted)
        q = self.linear_q(x_dst, dst_ntype, presorted).view(-1, heads, d)
        v = self.linear_v(x, ntype, presorted)

        key_rel, msg = self._relation_products(graph, k, v, etype, presorted)       # [E, H, d] each
        prior = torch.stack(list(self.relation_pri), 1).index_select(0, etype)      # [E, H]
        scores = ops.gsddmm(graph, "dot", key_rel, q, "e", "v").squeeze(-1) * prior / self.sqrt_d
        attention = ops.edge_softmax(graph, scores)                                 # [E, H]
        h = ops.gspmm(graph, "copy_e", "sum", None, msg * attention.unsqueeze(-1)).reshape(num_dst, heads * d)

        h = self.drop(self.linear_a(h, dst_ntype, presorted))
        alpha = torch.sigmoid(self.skip[dst_ntype]).unsqueeze(-1)
        residual = x_dst @ self.residual_w if hasattr(self, "residual_w") else x_dst
        h = h * alpha + residual * (1 - alpha)
        return self.norm(h) if self.use_norm else h

    def _relation_products(self, graph, k: Tensor, v: Tensor, etype: Tensor, presorted: bool):
        """Every edge's source key and value through its relation's per-head matrices
        (``W^att`` and ``W^msg``), as ``[E, H, d]`` in edge order: one grouped product each over the
        edges grouped by relation."""
        src = graph.src.to(k.device)
        counts = torch.bincount(etype, minlength=self.num_etypes).tolist()
        order = None if presorted else torch.argsort(etype, stable=True)
        rows = src if order is None else src.index_select(0, order)
        att = torch.stack([m.get_weight() for m in self.relation_att], 1)            # [R, H, d, d]
        msg = torch.stack([m.get_weight() for m in self.relation_msg], 1)
        out = []
        for features, weight in ((k, att), (v, msg)):
            grouped = block_segment_matmul(features.index_select(0, rows), counts, weight)
            if order is not None:  # back to edge order
                grouped = torch.empty_like(grouped).index_copy(0, order, grouped)
            out.append(grouped.view(-1, self.num_heads, self.head_size))
        return out

    @staticmethod
    def _type_ids(ids, count: int, num_types: int, name: str, rows: str, device) -> Tensor:
        """``ids`` as an int64 tensor of ``count`` type ids in ``[0, num_types)``, or a clear error."""
        ids = torch.as_tensor(ids, device=device)
        if ids.dim() != 1 or ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise DGLError(f"HGTConv: {name} must be a 1-D integer tensor, got {ids.dtype} {list(ids.shape)}")
        if ids.numel() != count:
            raise DGLError(f"HGTConv: {name} has {ids.numel()} entries; it needs one per {rows} ({count})")
        ids = ids.to(torch.int64)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_types):
            raise DGLError(f"HGTConv: {name} holds ids outside 0..{num_types - 1}")
        return ids
