"""HGTConv: the heterogeneous graph transformer operator."""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from unigraph import ops
from unigraph.hetero.graph import HeteroGraph, Relation, check_relation, check_type_name
from unigraph.hetero.grouped import block_segment_matmul
from unigraph.hetero.inputs import TypedInputs, relation_positions
from unigraph.hetero.linear import TypedLinear
from unigraph.hetero.relational import hetero_layout
from unigraph.nn import hetero_forms
from unigraph.nn.checks import check_positive


class HGTConv(torch.nn.Module):
    r"""The heterogeneous graph transformer operator from the `"Heterogeneous Graph Transformer"
    <https://arxiv.org/abs/2003.01332>`_ paper, with PyG's ``HGTConv`` semantics.

    For a node :math:`i` of type :math:`\tau(i)` and an edge :math:`j \to i` of relation
    :math:`r`, per head :math:`h` (width :math:`d = F / H`):

    .. math::
        \mathbf{k}_j, \mathbf{q}_j, \mathbf{v}_j = \text{split}(\mathbf{W}^{KQV}_{\tau(j)} \mathbf{x}_j
        + \mathbf{b}^{KQV}_{\tau(j)}), \qquad
        s_{ji}^h = \frac{\mu_r^h}{\sqrt{d}} \big(\mathbf{k}_j^h \mathbf{W}^{att}_{r,h}\big) \cdot \mathbf{q}_i^h

    .. math::
        \alpha_{ji}^h = \operatorname{softmax}_{j \to i \text{ over all relations}}(s_{ji}^h), \qquad
        \mathbf{m}_i = \big\Vert_h \sum_{j \to i} \alpha_{ji}^h\, \mathbf{v}_j^h \mathbf{W}^{msg}_{r,h}

    .. math::
        \mathbf{a}_i = \mathbf{W}^{out}_{\tau(i)} \operatorname{GELU}(\mathbf{m}_i) + \mathbf{b}^{out}_{\tau(i)},
        \qquad \mathbf{x}_i^{\prime} = \sigma(s_{\tau(i)})\, \mathbf{a}_i + (1 - \sigma(s_{\tau(i)}))\, \mathbf{x}_i

    where the skip term applies when the input width of :math:`\tau(i)` equals ``out_channels``
    (else :math:`\mathbf{x}_i^{\prime} = \mathbf{a}_i`). The softmax runs over all in-edges of
    :math:`i`, whatever their relation.

    How it runs: the per-type projections are grouped products (:class:`~unigraph.hetero.TypedLinear`),
    the per-relation, per-head matrices one block-diagonal grouped product over every relation's
    source rows, and the attention one g-SDDMM (dot), one edge softmax and one g-SpMM over the
    *scatter graph* of all relations (:mod:`unigraph.hetero.relational`), with the prior
    :math:`\mu_r^h / \sqrt{d}` folded into the keys.

    Args:
        in_channels (int or dict): input width of every node type, or ``{type: width}``; ``-1``
            infers it on the first call (:class:`~unigraph.hetero.TypedLinear`).
        out_channels (int): output width (divisible by ``heads``).
        metadata (tuple): ``(node_types, relations)`` (:meth:`HeteroGraph.metadata`).
        heads (int, optional): attention heads. (default: ``1``)

    Shapes:
        - **input:** a :class:`~unigraph.HeteroGraph` (or typed block) whose relations are among
          ``metadata``'s, and ``{node_type: [N_t, in_t]}``
        - **output:** ``{node_type: [N_dst_t, out_channels]}`` for every node type in ``x_dict``
          that is the destination of one of ``metadata``'s relations (PyG's rule; a type without
          in-edges in this graph gets the update of an empty message)
    """

    def __init__(self, in_channels: int | Mapping[str, int], out_channels: int,
                 metadata: tuple[Sequence[str], Sequence[Relation]], heads: int = 1):
        super().__init__()
        who = "HGTConv"
        if not isinstance(metadata, (tuple, list)) or len(metadata) != 2:
            raise TypeError(f"{who} metadata must be (node_types, relations), got {metadata!r}")
        self.node_types = [check_type_name(t, "a node type") for t in metadata[0]]
        self.relations = [check_relation(r) for r in metadata[1]]
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.heads = check_positive(heads, "heads", who)
        if out_channels % heads:
            raise ValueError(f"{who} out_channels ({out_channels}) must be divisible by heads ({heads})")
        widths = dict(in_channels) if isinstance(in_channels, Mapping) else {t: in_channels for t in self.node_types}
        if list(widths) != self.node_types:
            widths = {t: widths[t] for t in self.node_types if t in widths}
            if len(widths) != len(self.node_types):
                raise ValueError(f"{who} in_channels must give a width for every node type {self.node_types}")
        self._dst_types = {r[2] for r in self.relations}
        dim = out_channels // heads
        self.kqv_lin = TypedLinear(widths, 3 * out_channels)
        self.in_channels = self.kqv_lin.in_channels  # one dict: lazy widths filled in by the first call
        self.out_lin = TypedLinear(out_channels, out_channels, types=self.node_types)
        self.k_rel = Parameter(torch.empty(len(self.relations), heads, dim, dim))
        self.v_rel = Parameter(torch.empty(len(self.relations), heads, dim, dim))
        self.skip = Parameter(torch.empty(len(self.node_types)))
        self.p_rel = Parameter(torch.empty(len(self.relations), heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.kqv_lin.reset_parameters()
        self.out_lin.reset_parameters()
        bound = 1.0 / math.sqrt(self.out_channels // self.heads)
        with torch.no_grad():
            self.k_rel.uniform_(-bound, bound)
            self.v_rel.uniform_(-bound, bound)
            self.skip.fill_(1.0)
            self.p_rel.fill_(1.0)

    def forward(self, hg: HeteroGraph | Any, x_dict: Any) -> dict[str, Tensor]:
        """``conv(hg, x_dict)``, or PyG's ``conv(x_dict, edge_index_dict)`` (converted to a
        :class:`~unigraph.HeteroGraph` once per set of adjacencies: :mod:`unigraph.call_forms`)."""
        who = "HGTConv"
        if hetero_forms.hetero_form(who, hg, x_dict) == "dicts":
            hg, x_dict = hetero_forms.hetero_graph(who, hg, x_dict), hg
        unknown = [t for t in hg.node_types if t not in self.in_channels]
        if unknown:
            raise ValueError(f"{who} has no weights for node types {unknown}; its metadata has {self.node_types}")
        if isinstance(x_dict, Mapping):
            self.kqv_lin.infer_widths(x_dict)
        inputs = TypedInputs(hg, x_dict, who, width=self.in_channels)
        index = relation_positions(hg, self.relations, who, self.k_rel.device)
        heads, width = self.heads, self.out_channels
        dim = width // heads

        kqv = self.kqv_lin(inputs.src)
        keys = {t: p[:, :width] for t, p in kqv.items()}
        values = {t: p[:, 2 * width:] for t, p in kqv.items()}
        queries = {t: p[: hg.num_dst_nodes(t), width:2 * width] for t, p in kqv.items()}

        layout = hetero_layout(hg)
        rows = layout.src_row_nodes()
        k_rows = block_segment_matmul(inputs.stacked("src", keys, width).index_select(0, rows),
                                      layout.src_row_counts, self.k_rel[index])
        v_rows = block_segment_matmul(inputs.stacked("src", values, width).index_select(0, rows),
                                      layout.src_row_counts, self.v_rel[index])
        prior = self.p_rel[index][layout.src_row_relations()] / math.sqrt(dim)          # [rows, H]
        k_rows = k_rows.view(-1, heads, dim) * prior.unsqueeze(-1)
        q_all = inputs.stacked("dst", queries, width).view(-1, heads, dim)

        graph = layout.scatter_graph()
        scores = ops.gsddmm(graph, "dot", k_rows, q_all, "u", "v")                       # [E, H, 1]
        alpha = ops.edge_softmax(graph, scores)
        messages = ops.gspmm(graph, "u_mul_e", "sum", v_rows.view(-1, heads, dim), alpha)  # [N_dst, H, d]
        per_type = inputs.split(messages.reshape(-1, width))

        destinations = [t for t in hg.node_types if t in self._dst_types and t in inputs.src]
        out = self.out_lin({t: F.gelu(per_type[t]) for t in destinations})
        for t in destinations:
            x_dst = inputs.dst[t]
            if x_dst.shape[1] == width:
                gate = torch.sigmoid(self.skip[self.node_types.index(t)])
                out[t] = gate * out[t] + (1 - gate) * x_dst
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(-1, {self.out_channels}, heads={self.heads})"  # PyG's form
