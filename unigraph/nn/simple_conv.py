"""SimpleConv: non-trainable message passing, an aggregation of (weighted) neighbour features."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.call_forms import resolve
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.checks import edge_input, node_inputs
from unigraph.nn.gcn_conv import loop_weights
from unigraph.nn.layer_inputs import propagate_nodes
from unigraph.nn.static_graph import is_static
from unigraph.self_loops import with_self_loops

COMBINE_ROOT = ("sum", "cat", "self_loop", None)


class SimpleConv(MessagePassing):
    r"""A non-trainable message passing layer:

    .. math::
        \mathbf{x}^{\prime}_i = \bigoplus_{j \in \mathcal{N}(i)} e_{j,i} \cdot \mathbf{x}_j

    with :math:`\bigoplus` the aggregation (a name, a list of names or an aggregation module, as
    PyG's ``aggr``) and :math:`e_{j,i}` the edge weight (1 without weights). ``combine_root`` then
    adds the node's own features: ``"sum"`` (:math:`+ \mathbf{x}_i`), ``"cat"``
    (:math:`[\mathbf{x}_i \Vert \cdot]`) or ``"self_loop"`` (a self-loop of weight 1 for every node
    before aggregating: appended to an ``edge_index`` beside any existing one, replacing a
    ``SparseTensor``'s, added to a torch sparse adjacency's, as PyG's helpers do per form).

    Args:
        aggr (str or list or Aggregation, optional): the aggregation. (default: ``"sum"``)
        combine_root (str, optional): ``"sum"``, ``"cat"``, ``"self_loop"`` or ``None``. (default: ``None``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (any of its adjacency forms; a sparse adjacency's
          values are the edge weights) with ``size``, or ``(g, x)``; node features
          :math:`(|\mathcal{V}|, F)`, a pair :math:`((|\mathcal{V}_s|, F), (|\mathcal{V}_t|, F))` or
          :math:`(B, |\mathcal{V}|, F)` (a static graph; basic aggregations), edge weights
          :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, aggr: Any = "sum", combine_root: str | None = None, **kwargs: Any):
        if combine_root not in COMBINE_ROOT:
            raise ValueError(f"SimpleConv combine_root must be 'sum', 'cat', 'self_loop' or None, got {combine_root!r}")
        super().__init__(aggr, **kwargs)
        self.combine_root = combine_root

    def reset_parameters(self) -> None:
        if self.aggr_module is not None and hasattr(self.aggr_module, "reset_parameters"):
            self.aggr_module.reset_parameters()

    def forward(self, x: Any, edge_index: Any, edge_weight: Tensor | None = None, size: Any = None) -> Tensor:
        if is_static(x):  # [B, N, F]: B feature sets over one square graph
            if self.aggr_module is not None:
                raise ValueError("SimpleConv takes static graphs (x of shape [B, N, F]) with the aggregations 'sum', "
                                 "'mean', 'max' and 'min'; with an aggregation module pass [N, F] features")
            g, weights, form, _ = self._read(x.movedim(-2, 0), edge_index, edge_weight, size)
            if g.is_bipartite:
                raise ValueError("SimpleConv takes static graphs (x of shape [B, N, F]) on a square graph only")
            x_src = x_dst = x
        else:
            g, weights, form, features = self._read(x, edge_index, edge_weight, size)
            g, x_src, x_dst = node_inputs(g, features, "SimpleConv")
        weights = edge_input(g, weights, "SimpleConv", "edge_weight", vector=True)
        if self.combine_root == "self_loop":
            if g.is_bipartite:
                raise ValueError("SimpleConv(combine_root='self_loop') cannot run bipartite message passing (a "
                                 "(source, destination) pair, a size or an adjacency that is not square), as in PyG")
            g, weights = _self_looped(g, weights, form)
        out = propagate_nodes(self, g, x_src, edge_weight=weights)
        if x_dst is None or self.combine_root in (None, "self_loop"):
            return out
        if self.combine_root == "sum":
            if out.shape[-1] != x_dst.shape[-1]:
                raise ValueError(f"SimpleConv(combine_root='sum') adds the destination features ({x_dst.shape[-1]} "
                                 f"wide) to the aggregation ({out.shape[-1]} wide): they must be as wide; use "
                                 "combine_root='cat' with several aggregations")
            return out + x_dst
        return torch.cat([x_dst, out], dim=-1)

    def _read(self, x: Any, edge_index: Any, edge_weight: Tensor | None, size: Any) -> tuple[Graph, Any, str, Any]:
        """The graph (oriented), the edge weights, the call's form and the node features. A sparse
        adjacency's duplicate entries are read as PyG reads them (a mean or max counts each entry):
        apart in a ``SparseTensor`` or a torch CSR, summed into one where PyG coalesces them (a
        torch COO, which it converts to CSR; any torch sparse adjacency given self-loops)."""
        torch_sparse = isinstance(edge_index, Tensor) and edge_index.layout in (torch.sparse_coo, torch.sparse_csr,
                                                                                torch.sparse_csc)
        merged = torch_sparse and (self.combine_root == "self_loop" or edge_index.layout == torch.sparse_coo)
        call = resolve("SimpleConv", x, edge_index, size=size, edge_weight=edge_weight,
                       values="edge_weight" if merged else "edge_attr")
        weights = call.edge_weight
        if call.edge_attr is not None:
            if edge_weight is not None:
                raise ValueError("SimpleConv got edge weights twice: as edge_weight and as the values of the sparse "
                                 "adjacency; pass one")
            weights = call.edge_attr
        return oriented(call.graph, self.flow, "SimpleConv"), weights, call.form, call.x

    def message(self, x_j: Tensor, edge_weight: Tensor | None) -> Tensor:
        return x_j if edge_weight is None else edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _self_looped(g: Graph, weights: Tensor | None, form: str) -> tuple[Graph, Tensor | None]:
    """``g`` with a self-loop of weight 1 per node, as PyG's helper of the call form adds it: appended
    beside any existing loop (``add_self_loops`` on an ``edge_index``), or one loop per node whose
    weight replaces (``SparseTensor.set_diag``) or adds to (torch sparse, coalesced) an existing one."""
    if form in ("sparse_tensor", "torch_sparse"):
        looped = with_self_loops(g)
        if weights is not None:
            weights = looped.edge_values(weights, loop_weights(looped, weights, form))
        return looped.graph, weights
    appended = g.memo(("unigraph.nn", "appended_self_loops"), g.add_self_loops)
    if weights is not None:
        weights = torch.cat([weights, weights.new_ones(g.num_dst_nodes)])
    return appended, weights
