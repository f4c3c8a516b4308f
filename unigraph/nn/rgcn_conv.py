"""RGCNConv: the relational graph convolution (R-GCN)."""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor
from torch.nn import Parameter

from unigraph import ops
from unigraph.graph import Graph
from unigraph.hetero.graph import HeteroGraph, Relation, check_relation
from unigraph.hetero.grouped import block_segment_matmul, segment_matmul
from unigraph.hetero.inputs import TypedInputs, relation_positions
from unigraph.hetero.relational import RelationLayout, hetero_layout, typed_layout
from unigraph.message_passing.base import normalize_aggr
from unigraph.message_passing.inputs import check_graph, split_pair
from unigraph import call_forms
from unigraph.nn.static_graph import refuse_static
from unigraph.nn.checks import channels_pair, check_positive, check_width, glorot_


class RGCNConv(torch.nn.Module):
    r"""The relational graph convolution from the `"Modeling Relational Data with Graph
    Convolutional Networks" <https://arxiv.org/abs/1703.06103>`_ paper.

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{\Theta}_{\textrm{root}} \cdot \mathbf{x}_i +
        \sum_{r \in \mathcal{R}} \bigoplus_{j \in \mathcal{N}_r(i)} \mathbf{\Theta}_r \cdot \mathbf{x}_j
        + \mathbf{b}

    with :math:`\bigoplus` the mean (R-GCN's :math:`\frac{1}{|\mathcal{N}_r(i)|}\sum`), sum, max or
    min over the in-neighbours of :math:`i` *by relation* :math:`r`. For max and min the
    aggregation comes before the weight (:math:`\mathbf{\Theta}_r \bigoplus_j \mathbf{x}_j`, as
    PyG's ``RGCNConv``). Weights are regularized by

    * basis decomposition (``num_bases``): :math:`\mathbf{\Theta}_r = \sum_b a_{rb} \mathbf{V}_b`;
    * block-diagonal decomposition (``num_blocks``): :math:`\mathbf{\Theta}_r =
      \operatorname{diag}(\mathbf{Q}_{r1}, \dots, \mathbf{Q}_{rB})`.

    Parameters have PyG's names and shapes (``weight``, ``comp``, ``root``, ``bias``), so
    ``load_state_dict`` of a PyG ``RGCNConv``/``FastRGCNConv`` gives the same function.

    How it runs: every relation at once. One g-SpMM over the *gather graph*
    (:mod:`unigraph.hetero.relational`) aggregates each relation's neighbours separately, one
    grouped product applies each relation's weight to its rows, and one g-SpMM sums the relations
    into each node. For sum and mean with ``in_channels > out_channels`` the weights come first
    instead (one grouped product over each relation's source rows, then one g-SpMM with the
    :math:`1/|\mathcal{N}_r(i)|` edge weights), so aggregation runs on the narrower width: the
    same function. No Python loop over relations or node types.

    Args:
        in_channels (int or tuple): input width, or (source, destination) widths.
        out_channels (int): output width.
        num_relations (int or list): the number of relations, or the relations themselves
            (``(src_type, name, dst_type)`` triples): then a :class:`~unigraph.HeteroGraph` input
            may hold any of them in any order (weights are matched by relation).
        num_bases (int, optional): basis decomposition with this many bases.
        num_blocks (int, optional): block-diagonal decomposition with this many blocks (must divide
            both widths).
        aggr (str, optional): ``"mean"``, ``"sum"`` (``"add"``), ``"max"`` or ``"min"``. (default: ``"mean"``)
        root_weight (bool, optional): add :math:`\mathbf{\Theta}_{\textrm{root}} \mathbf{x}_i`. (default: ``True``)
        bias (bool, optional): learn :math:`\mathbf{b}`. (default: ``True``)

    Inputs (either):
        - ``(g, x, edge_type)``: a :class:`~unigraph.Graph` (or block, DGL graph, PyG ``Data``),
          features ``[N, F_in]`` (or a (source, destination) pair) and the relation id of each edge
          ``[E]``; returns ``[N_dst, F_out]``.
        - PyG's ``(x, edge_index, edge_type)`` with ``edge_index`` ``[2, E]``, or ``(x, adj_t)`` with
          the relation ids as the values of a ``SparseTensor`` or torch sparse ``adj_t[dst, src]``
          (:mod:`unigraph.call_forms`).
        - Featureless, as PyG: ``x`` ``None`` stands for the node ids ``0..in_channels - 1``; ``x``
          (or each side of a pair) an integer tensor of node ids reads row ``x_j`` of each weight
          (the product with a one-hot input): :math:`\bigoplus_j \mathbf{\Theta}_r[x_j]` and
          :math:`\mathbf{\Theta}_{\textrm{root}}[x_i]`, for every aggregation (not with ``num_blocks``).
        - ``(hg, x_dict)``: a :class:`~unigraph.HeteroGraph` (or typed block) and ``{node_type:
          [N_t, F_in]}`` (every type taking part in a relation); relation ``r`` is
          ``hg.relations[r]`` unless the layer was given its relations. Returns ``{node_type:
          [N_dst_t, F_out]}`` for every type in ``x_dict``.
    """

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, num_relations: int | Sequence[Relation],
                 num_bases: int | None = None, num_blocks: int | None = None, aggr: str = "mean",
                 root_weight: bool = True, bias: bool = True):
        super().__init__()
        who = "RGCNConv"
        self.in_channels = in_channels
        self._widths = channels_pair(in_channels, who)
        self.out_channels = check_positive(out_channels, "out_channels", who)
        if isinstance(num_relations, int) and not isinstance(num_relations, bool):
            self.relations: list[Relation] | None = None
            self.num_relations = check_positive(num_relations, "num_relations", who)
        elif isinstance(num_relations, Sequence) and not isinstance(num_relations, str):
            self.relations = [check_relation(r) for r in num_relations]
            if not self.relations or len(set(self.relations)) != len(self.relations):
                raise ValueError(f"{who} relations must be a non-empty list without repeats, got {self.relations}")
            self.num_relations = len(self.relations)
        else:
            raise TypeError(f"{who} num_relations must be a positive int or a list of relations, got {num_relations!r}")
        if num_bases is not None and num_blocks is not None:
            raise ValueError(f"{who} takes num_bases or num_blocks, not both (got {num_bases} and {num_blocks})")
        self.num_bases = check_positive(num_bases, "num_bases", who) if num_bases is not None else None
        self.num_blocks = check_positive(num_blocks, "num_blocks", who) if num_blocks is not None else None
        self.aggr = normalize_aggr(aggr)
        width_in = self._widths[0]
        if self.num_blocks is not None and (width_in % self.num_blocks or out_channels % self.num_blocks):
            raise ValueError(f"{who} num_blocks={self.num_blocks} must divide in_channels={width_in} and "
                             f"out_channels={out_channels}")
        if self.num_bases is not None:
            self.weight = Parameter(torch.empty(self.num_bases, width_in, out_channels))
            self.comp = Parameter(torch.empty(self.num_relations, self.num_bases))
        elif self.num_blocks is not None:
            b = self.num_blocks
            self.weight = Parameter(torch.empty(self.num_relations, b, width_in // b, out_channels // b))
            self.register_parameter("comp", None)
        else:
            self.weight = Parameter(torch.empty(self.num_relations, width_in, out_channels))
            self.register_parameter("comp", None)
        self.root = Parameter(torch.empty(self._widths[1], out_channels)) if root_weight else None
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for param in (self.weight, self.comp, self.root):
            if param is not None:
                glorot_(param)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    # ------------------------------------------------------------------ forward
    def forward(self, x: Any, edge_index: Any, edge_type: Tensor | None = None):
        who = type(self).__name__
        if isinstance(x, HeteroGraph):  # (hg, x_dict)
            if edge_type is not None:
                raise ValueError(f"{who} on a HeteroGraph takes its relations from the graph; do not pass edge_type")
            return self._forward_hetero(x, edge_index)
        if call_forms.is_graph_object(x):  # (g, x, edge_type)
            graph, x, edge_type = call_forms.resolve_typed(who, x, self._featureless_ids(edge_index), edge_type)
        else:  # PyG's form: (x, edge_index or adj_t, edge_type)
            refuse_static(who, x)
            graph, x, edge_type = call_forms.resolve_typed(who, self._featureless_ids(x), edge_index, edge_type)
        return self._forward_typed(graph, x, edge_type)

    def _featureless_ids(self, x: Any) -> Any:
        """PyG's featureless input: ``None`` (alone or as the source side) is the ids ``0..in_channels - 1``."""
        ids = lambda: torch.arange(self._widths[0], device=self.weight.device)  # noqa: E731
        if x is None:
            return ids()
        if isinstance(x, (tuple, list)) and len(x) == 2 and x[0] is None:
            return ids(), x[1]
        return x

    def _forward_typed(self, g: Graph, x: Any, edge_type: Tensor | None) -> Tensor:
        who = "RGCNConv"
        check_graph(g, who)
        x_src, x_dst = split_pair(g, x)
        featureless = isinstance(x_src, Tensor) and not x_src.is_floating_point()
        if featureless:
            self._check_ids(x_src, x_dst)
        else:
            if x_dst is not None and not x_dst.is_floating_point():
                raise TypeError(f"{who}: x is a pair of features and node ids ({x_src.dtype}, {x_dst.dtype}); pass "
                                "features on both sides or node ids on both sides")
            check_width(x_src, self._widths[0], who, "x (source features)" if g.is_bipartite else "x")
            check_width(x_dst, self._widths[1], who, "x (destination features)")
        edge_type = self._check_edge_type(g, edge_type)
        layout = typed_layout(g, edge_type, self.num_relations)
        out = self._propagate_ids(layout, x_src) if featureless else self._propagate(layout, x_src, None)
        return self._add_root(out, x_dst)

    def _check_ids(self, ids_src: Tensor, ids_dst: Tensor | None) -> None:
        """Node ids of the featureless form: integer, 1-D, rows of the weights (in range)."""
        who = "RGCNConv"
        if self.num_blocks is not None:
            raise ValueError(f"{who}: block-diagonal weights (num_blocks) need node features; got node ids "
                             "(featureless input), as PyG refuses too")
        for name, ids, rows in (("x (source node ids)", ids_src, self._widths[0]),
                                ("x (destination node ids)", ids_dst, self._widths[1])):
            if ids is None:
                continue
            if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool or ids.dim() != 1:
                raise TypeError(f"{who}: {name} must be a 1-D integer tensor of node ids (featureless input) or both "
                                f"sides features, got shape {list(ids.shape)}, {ids.dtype}")
            if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= rows):
                bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
                raise ValueError(f"{who}: {name} holds id {bad}, outside 0..{rows - 1} (the rows of the weights: "
                                 f"in_channels={self.in_channels})")

    def _forward_hetero(self, hg: HeteroGraph, x_dict: Any) -> dict[str, Tensor]:
        if self._widths[0] != self._widths[1]:
            raise ValueError(f"RGCNConv on a HeteroGraph takes one input width for every node type; this one was "
                             f"built with in_channels={self.in_channels}")
        inputs = TypedInputs(hg, x_dict, "RGCNConv", width=None)
        for ntype, x in inputs.src.items():
            check_width(x, self._widths[0], "RGCNConv", f"x_dict[{ntype!r}]")
        weight_index = self._weight_index(hg)
        layout = hetero_layout(hg)
        out = self._propagate(layout, inputs.stacked("src", width=self._widths[0]), weight_index)
        out_dict = {t: o for t, o in inputs.split(out).items() if t in inputs.src}
        return {t: self._add_root(o, inputs.dst[t]) for t, o in out_dict.items()}

    def _check_edge_type(self, g: Graph, edge_type: Any) -> Tensor:
        if not isinstance(edge_type, Tensor):
            raise TypeError(f"RGCNConv on a Graph needs edge_type, a tensor with the relation id of each edge; got "
                            f"{type(edge_type).__name__}")
        if edge_type.dtype == torch.bool or edge_type.is_floating_point() or edge_type.is_complex():
            raise TypeError(f"edge_type must hold integer relation ids, got {edge_type.dtype}")
        if edge_type.shape != (g.num_edges,):
            raise ValueError(f"edge_type must have shape [{g.num_edges}] (one id per edge), got {list(edge_type.shape)}")
        if edge_type.device != g.device:
            raise ValueError(f"edge_type is on {edge_type.device} but the graph is on {g.device}")
        edge_type = edge_type.to(torch.int64)
        if edge_type.numel():
            low, high = int(edge_type.min()), int(edge_type.max())
            if low < 0 or high >= self.num_relations:
                raise ValueError(f"edge_type holds relation id {low if low < 0 else high}, outside 0.."
                                 f"{self.num_relations - 1} (num_relations={self.num_relations})")
        return edge_type

    def _weight_index(self, hg: HeteroGraph) -> Tensor | None:
        """Which weight each of ``hg``'s relations uses (``None``: the graph's own order)."""
        if self.relations is None:
            if len(hg.relations) != self.num_relations:
                raise ValueError(f"RGCNConv was built for {self.num_relations} relations but the graph has "
                                 f"{len(hg.relations)} ({hg.relations}); build it with the graph's relations "
                                 "(RGCNConv(..., hg.relations)) to match them by name")
            return None
        index = relation_positions(hg, self.relations, "RGCNConv", self.weight.device)
        return None if hg.relations == self.relations else index

    # ------------------------------------------------------------------ the computation
    def _relation_weights(self, index: Tensor | None) -> Tensor:
        """Each relation's weight: ``[R, in, out]``, or ``[R, blocks, in/b, out/b]`` for blocks."""
        if self.num_bases is not None:
            comp = self.comp if index is None else self.comp[index]
            width_in = self._widths[0]
            return (comp @ self.weight.view(self.num_bases, -1)).view(-1, width_in, self.out_channels)
        return self.weight if index is None else self.weight[index]

    def _relation_matmul(self, rows: Tensor, counts: list[int], weight: Tensor) -> Tensor:
        if self.num_blocks is not None:
            return block_segment_matmul(rows, counts, weight)
        return segment_matmul(rows, counts, weight)

    def transforms_first(self) -> bool:
        """Whether the weights apply before the aggregation (sum/mean into a narrower output)."""
        return self.aggr in ("sum", "mean") and self.out_channels < self._widths[0]

    def _propagate(self, layout: RelationLayout, x_src: Tensor, index: Tensor | None) -> Tensor:
        weight = self._relation_weights(index)
        if self.transforms_first():
            rows = x_src.index_select(0, layout.src_row_nodes())
            return self._aggregate_rows(layout, self._relation_matmul(rows, layout.src_row_counts, weight))
        aggregated = ops.gspmm(layout.gather_graph(), "copy_u", self.aggr, x_src)
        per_relation = self._relation_matmul(aggregated, layout.dst_row_counts, weight)
        return ops.gspmm(layout.combine_graph(), "copy_u", "sum", per_relation)

    def _propagate_ids(self, layout: RelationLayout, ids: Tensor) -> Tensor:
        """Featureless: the message of source ``u`` under relation ``r`` is ``Theta_r[ids[u]]`` (its
        one-hot input times the weight, without building the one-hot matrix)."""
        weight = self._relation_weights(None)
        messages = weight[layout.src_row_relations(), ids[layout.src_row_nodes()]]
        return self._aggregate_rows(layout, messages)

    def _aggregate_rows(self, layout: RelationLayout, messages: Tensor) -> Tensor:
        """Per-relation messages of the source rows ``(r, u)`` aggregated per relation and summed over
        the relations into each destination."""
        if self.aggr == "mean":
            norm = layout.mean_norm(messages.dtype).unsqueeze(-1)
            return ops.gspmm(layout.scatter_graph(), "u_mul_e", "sum", messages, norm)
        if self.aggr == "sum":
            return ops.gspmm(layout.scatter_graph(), "copy_u", "sum", messages)
        per_relation = ops.gspmm(layout.row_graph(), "copy_u", self.aggr, messages)
        return ops.gspmm(layout.combine_graph(), "copy_u", "sum", per_relation)

    def _add_root(self, out: Tensor, x_dst: Tensor | None) -> Tensor:
        if self.root is not None and x_dst is not None:
            out = out + (self.root[x_dst] if not x_dst.is_floating_point() else x_dst @ self.root)
        if self.bias is not None:
            out = out + self.bias
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, num_relations={self.num_relations})"


class FastRGCNConv(RGCNConv):
    r"""PyG's name for the same relational convolution (:class:`RGCNConv`: arguments, parameters
    and function are identical). PyG's ``FastRGCNConv`` trades memory for speed by building each
    edge's weight matrix; unigraph's :class:`RGCNConv` already runs every relation at once with
    grouped products and builds no per-edge weights, so both names run that path.
    """
