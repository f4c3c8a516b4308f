"""ClusterGCNConv: the graph convolution of Cluster-GCN (Chiang et al.)."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.group_reduce import widened_dtype
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_positive, glorot_
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.layer_inputs import SquareCall, propagate_nodes, size_lazy, square_call
from unigraph.self_loops import with_self_loops


class ClusterGCNConv(MessagePassing):
    r"""The graph convolution from the `"Cluster-GCN: An Efficient Algorithm for Training Deep and
    Large Graph Convolutional Networks" <https://arxiv.org/abs/1905.07953>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \left( \mathbf{\hat{A}} + \lambda \cdot
        \textrm{diag}(\mathbf{\hat{A}}) \right) \mathbf{X} \mathbf{W}_1 +
        \mathbf{X} \mathbf{W}_2, \qquad
        \mathbf{\hat{A}} = {(\mathbf{D} + \mathbf{I})}^{-1} (\mathbf{A} + \mathbf{I}),

    per edge :math:`j \to i`: :math:`\hat{a}_{ij} = 1 / \max(1, d_i)` (times :math:`1 + \lambda` on
    the self-loop), :math:`d_i` the in-degree counted with the self-loops (with
    ``flow="target_to_source"`` PyG still counts and weighs by ``edge_index[1]``, then the source
    of each message: so does this layer). As in PyG, the graph's
    own self-loops give way to one per node (``add_self_loops``), and a ``SparseTensor``'s values
    (its loops set to 1) are summed for :math:`d_i` where it has values (the other forms count
    edges; no form uses the values as weights). One g-SpMM.

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each output sample.
        diag_lambda (float, optional): the diagonal enhancement :math:`\lambda`. (default: ``0.``)
        add_self_loops (bool, optional): add self-loops (one per node). (default: ``True``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, ``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (any of its adjacency forms) or ``(g, x)``; node
          features :math:`(*, |\mathcal{V}|, F_{in})`
        - **output:** node features :math:`(*, |\mathcal{V}|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, diag_lambda: float = 0., add_self_loops: bool = True,
                 bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        if isinstance(diag_lambda, bool) or not isinstance(diag_lambda, (int, float)):
            raise ValueError(f"ClusterGCNConv diag_lambda must be a number, got {diag_lambda!r}")
        self.in_channels = in_channels if in_channels == LAZY else check_positive(in_channels, "in_channels",
                                                                                   "ClusterGCNConv")
        self.out_channels = check_positive(out_channels, "out_channels", "ClusterGCNConv")
        self.diag_lambda, self.add_self_loops = diag_lambda, add_self_loops
        self._widths, self._lazy = (in_channels, in_channels), in_channels == LAZY
        self.lin_out = make_linear(in_channels, out_channels, bias=bias)
        self.lin_root = make_linear(in_channels, out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin_out, self.lin_root):
            lin.reset_parameters()   # (the bias: uniform in +-1/sqrt(in_channels), as PyG's Linear)
            glorot_(lin.weight)

    def forward(self, x: Tensor | Any, edge_index: Any) -> Tensor:
        call = square_call(self, x, edge_index)
        size_lazy(self, call.x, (self.lin_out, self.lin_root))
        g, weights = self._normalized(call)
        out = propagate_nodes(self, g, call.x, edge_weight=weights)
        return self.lin_out(out) + self.lin_root(call.x)

    def _normalized(self, call: SquareCall) -> tuple[Graph, Tensor]:
        """The graph to propagate on and its weights. Without summed values they depend on the
        structure alone: kept on the graph (not while compiling, as GCNConv)."""
        summed = call.edge_weight if call.form == "sparse_tensor" else None   # (see the class docstring)
        if summed is None and not torch.compiler.is_compiling():
            key = ("unigraph.nn", "cluster_gcn_norm", self.add_self_loops, float(self.diag_lambda), call.x.dtype)
            def build() -> tuple[Graph, Tensor]:
                with torch.inference_mode(False):  # kept on the graph: a normal tensor whatever mode asked first
                    return self._normalize(call.graph, None, call.x.dtype)
            return call.graph.memo(key, build)
        return self._normalize(call.graph, summed, call.x.dtype)

    def _normalize(self, g: Graph, summed: Tensor | None, dtype: torch.dtype) -> tuple[Graph, Tensor]:
        if self.add_self_loops:
            looped = with_self_loops(g)
            if summed is not None:
                summed = looped.edge_values(summed, summed.new_ones(looped.num_loops))
            g = looped.graph
        # summed and divided in float32 at least, rounded to dtype once (a half-precision sum of a
        # hub's weights stops growing at 256 or 2,048)
        wide = widened_dtype(dtype)
        summed = summed.to(wide) if summed is not None else torch.ones(g.num_edges, dtype=wide, device=g.device)
        # PyG counts edge_index[1] whichever the flow: the destination, or on a reversed graph the source
        side = g.dst if self.flow == "source_to_target" else g.src
        inverse = 1. / summed.new_zeros(g.num_dst_nodes).index_add(0, side, summed).clamp(min=1.)
        weights = inverse.index_select(0, side)
        return g, torch.where(g.src == g.dst, weights + self.diag_lambda * weights, weights).to(dtype)

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, diag_lambda={self.diag_lambda})"
