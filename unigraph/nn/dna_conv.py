"""DNAConv: dynamic neighbourhood aggregation (Fey), attention over each neighbour's layer history."""
from __future__ import annotations

import math
import weakref
from typing import Any

import torch
from torch import Tensor
from torch.nn import Parameter

from unigraph import ops
from unigraph.call_forms import resolve
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.checks import check_positive, check_probability, edge_input
from unigraph.nn.dropout import dropout
from unigraph.self_loops import with_self_loops

SPARSE_FORMS = ("sparse_tensor", "torch_sparse")


class GroupedLinear(torch.nn.Module):
    r""":math:`\mathbf{y} = \mathbf{x} \mathbf{W} + \mathbf{b}` with a block-diagonal
    :math:`\mathbf{W}`: the features are cut into ``groups`` equal slices, each projected by its
    own ``[in / groups, out / groups]`` block (``weight`` is ``[groups, in / groups, out /
    groups]``, PyG's layout). Kaiming-uniform blocks (fan = ``in / groups``), bias uniform in
    :math:`\pm 1/\sqrt{\text{in} / \text{groups}}`, as PyG's."""

    def __init__(self, in_channels: int, out_channels: int, groups: int = 1, bias: bool = True):
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by "
                             f"groups ({groups})")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.weight = Parameter(torch.empty(groups, in_channels // groups, out_channels // groups))
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        fan = self.weight.shape[1]
        with torch.no_grad():
            self.weight.uniform_(-1.0 / math.sqrt(fan), 1.0 / math.sqrt(fan))   # kaiming_uniform, a = sqrt(5)
            if self.bias is not None:
                self.bias.uniform_(-1.0 / math.sqrt(fan), 1.0 / math.sqrt(fan))

    def forward(self, x: Tensor) -> Tensor:
        if self.groups == 1:
            out = x @ self.weight[0]
        else:
            sliced = x.reshape(-1, self.groups, self.in_channels // self.groups)
            out = torch.einsum("ngi,gio->ngo", sliced, self.weight).reshape(x.shape[:-1] + (self.out_channels,))
        return out + self.bias if self.bias is not None else out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, groups={self.groups})"


class MultiHead(torch.nn.Module):
    """The query, key and value projections of :class:`DNAConv` (PyG's ``multi_head`` submodule,
    so a PyG state_dict loads); the attention itself runs on the graph in :class:`DNAConv`."""

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, groups: int = 1, dropout: float = 0.0,
                 bias: bool = True):
        super().__init__()
        who = "DNAConv"
        if in_channels % heads or out_channels % heads:
            raise ValueError(f"{who} channels ({in_channels}) must be divisible by heads ({heads})")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{who} channels ({in_channels}) must be divisible by groups ({groups})")
        if max(groups, heads) % min(groups, heads):
            raise ValueError(f"{who} needs one of heads ({heads}) and groups ({groups}) to divide the other")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.heads, self.groups, self.dropout, self.bias = heads, groups, dropout, bias
        self.lin_q = GroupedLinear(in_channels, out_channels, groups, bias)
        self.lin_k = GroupedLinear(in_channels, out_channels, groups, bias)
        self.lin_v = GroupedLinear(in_channels, out_channels, groups, bias)

    def reset_parameters(self) -> None:
        for lin in (self.lin_q, self.lin_k, self.lin_v):
            lin.reset_parameters()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads}, "
                f"groups={self.groups}, dropout={self.dropout}, bias={self.bias})")


class DNAConv(MessagePassing):
    r"""The dynamic neighborhood aggregation operator from the `"Just Jump: Towards Dynamic
    Neighborhood Aggregation in Graph Neural Networks" <https://arxiv.org/abs/1904.04849>`_ paper.

    Each node carries its representations from all earlier layers, :math:`\mathbf{x}_v \in
    \mathbb{R}^{L \times F}`. A node attends, per head and per edge, from its latest
    representation over the whole history of each neighbour, and a GCN-normalized sum combines
    the neighbours:

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i) \cup \{ i \}} \hat{a}_{ji}\,
        \Big\Vert_{h=1}^{H} \sum_{l=1}^{L} \alpha^{(h)}_{ji,l}\, \mathbf{v}^{(h)}_{j,l},
        \qquad \hat{a}_{ji} = \frac{e_{j,i}}{\sqrt{\hat{d}_j \hat{d}_i}}

    .. math::
        \alpha^{(h)}_{ji,l} = \frac{\exp(s_l - m)}{\exp(-m) + \sum_{l'} \exp(s_{l'} - m)}, \quad
        s_l = \frac{\mathbf{q}^{(h)}_{i} \cdot \mathbf{k}^{(h)}_{j,l}}{\sqrt{F / H}}, \quad
        m = \max(0, \max_{l} s_l)

    with :math:`\mathbf{q}_i = \mathbf{x}_{i,L} \mathbf{\Theta}_Q`, :math:`\mathbf{k}_{j,l} =
    \mathbf{x}_{j,l} \mathbf{\Theta}_K`, :math:`\mathbf{v}_{j,l} = \mathbf{x}_{j,l}
    \mathbf{\Theta}_V` (grouped projections with bias, :class:`GroupedLinear`) and the softmax
    "restricted" by an implicit zero score (PyG's ``restricted_softmax``). :math:`\hat{a}_{ji}`
    is GCN's normalization with self-loops (``normalize``), else the edge weight as given.

    How it runs: the projections are per node; the scores are one ``dot`` g-SDDMM over the
    ``[N, L, H, F / H]`` keys and ``[N, 1, H, F / H]`` queries (``[E, L, H]``, no per-edge copy of
    the history), and with the sum aggregation the weighted history is one ``u_mul_e`` g-SpMM
    (another ``aggr`` materializes the ``[E, F]`` messages for ``propagate``).

    Self-loops follow PyG in each form: with an ``edge_index`` a node's existing loop keeps its
    weight (``add_remaining_self_loops``), with a ``SparseTensor`` the loops get weight 1
    (``fill_diag``), with a torch sparse adjacency a loop of weight 1 is added to any existing one.

    Args:
        channels (int): size of each input and output sample :math:`F`.
        heads (int, optional): attention heads (dividing ``channels``). (default: ``1``)
        groups (int, optional): groups of the projections (dividing ``channels``; one of
            ``heads``, ``groups`` divides the other). (default: ``1``)
        dropout (float, optional): dropout of the attention coefficients. (default: ``0.``)
        cached (bool, optional): keep the normalization of the graph seen (while the same
            adjacency object comes back: a different graph is normalized anew, where PyG would
            reuse the first one's). (default: ``False``)
        normalize (bool, optional): add self-loops and apply the symmetric normalization; without
            it the edge weights are used as given (1 without weights, where PyG fails).
            (default: ``True``)
        add_self_loops (bool, optional): add self-loops (with ``normalize``). (default: ``True``)
        bias (bool, optional): biases in the projections. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, default
            ``"add"``; ``flow``), as PyG's.

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index, edge_weight)`` (``edge_index`` a
          tensor, a ``SparseTensor`` or a torch sparse ``adj_t``, whose values are the weights),
          node features :math:`(|\mathcal{V}|, L, F)`, edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, F)`
    """

    resolves_flow = True

    def __init__(self, channels: int, heads: int = 1, groups: int = 1, dropout: float = 0.0, cached: bool = False,
                 normalize: bool = True, add_self_loops: bool = True, bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(node_dim=0, **kwargs)
        who = "DNAConv"
        check_positive(channels, "channels", who)
        check_positive(heads, "heads", who)
        check_positive(groups, "groups", who)
        self.bias, self.cached = bias, cached
        self.normalize, self.add_self_loops = normalize, add_self_loops
        self.multi_head = MultiHead(channels, channels, heads, groups, check_probability(dropout, "dropout", who),
                                    bias)
        self._cached_norm: tuple | None = None   # (weakref to the input graph, graph used, weights, the call's form)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.multi_head.reset_parameters()
        self._cached_norm = None

    @property
    def _cached_edge_index(self) -> tuple | None:
        """PyG's name: the cached normalization of an edge_index (or torch sparse) call, or None."""
        return self._cached_norm[1:3] if self._cached_norm and self._cached_norm[3] != "sparse_tensor" else None

    @property
    def _cached_adj_t(self) -> tuple | None:
        """PyG's name: the cached normalization of a ``SparseTensor`` call, or None."""
        return self._cached_norm[1:3] if self._cached_norm and self._cached_norm[3] == "sparse_tensor" else None

    def forward(self, x: Tensor | Any, edge_index: Any, edge_weight: Tensor | None = None) -> Tensor:
        who = "DNAConv"
        call = resolve(who, x, edge_index, edge_weight=edge_weight)
        if self.flow == "target_to_source" and call.form in SPARSE_FORMS:
            raise ValueError(f"{who}: flow='target_to_source' with a sparse adjacency is refused (as in PyG); pass "
                             "the transposed adjacency instead")
        g, x = oriented(call.graph, self.flow, who), call.x
        channels = self.multi_head.in_channels
        if not isinstance(x, Tensor) or x.dim() != 3 or x.shape[2] != channels:
            got = list(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"{who} expects node features of shape [num_nodes, num_layers, {channels}], got {got}")
        if g.is_bipartite or x.shape[0] != g.num_src_nodes:
            raise ValueError(f"{who} needs a square adjacency over the rows of x, got {g.num_src_nodes} source and "
                             f"{g.num_dst_nodes} destination nodes for {x.shape[0]} rows")
        weights = edge_input(g, call.edge_weight, who, "edge_weight", vector=True)
        if self.normalize:
            g, weights = self._normalized(g, weights, x.dtype, call.form)
        elif weights is None:
            weights = torch.ones(g.num_edges, dtype=x.dtype, device=x.device)
        return self._attend(g, x, weights)

    def _attend(self, g: Graph, x: Tensor, weights: Tensor) -> Tensor:
        """The weighted sum over edges of each neighbour's attended history (see the class docstring)."""
        heads, channels = self.multi_head.heads, self.multi_head.out_channels
        dim, num_nodes, layers = channels // heads, x.shape[0], x.shape[1]
        query = self.multi_head.lin_q(x[:, -1:]).view(num_nodes, 1, heads, dim)
        key = self.multi_head.lin_k(x).view(num_nodes, layers, heads, dim)
        value = self.multi_head.lin_v(x).view(num_nodes, layers, heads, dim)
        scores = ops.gsddmm(g, "dot", key, query, "u", "v") / math.sqrt(dim)       # [E, L, H, 1]
        alpha = _restricted_softmax(scores, dim=1)
        alpha = dropout(alpha, self.multi_head.dropout, self.training)
        coefficients = alpha * weights.view(-1, 1, 1, 1)
        if self.aggr == "sum" and self.aggr_module is None:
            return ops.gspmm(g, "u_mul_e", "sum", value, coefficients).sum(1).reshape(-1, channels)
        messages = (coefficients * value.index_select(0, g.src)).sum(1).reshape(-1, channels)
        return self.propagate(g, message_in=messages)

    def message(self, message_in: Tensor) -> Tensor:
        return message_in

    # ------------------------------------------------------------------ normalization
    def _normalized(self, g: Graph, weights: Tensor | None, dtype: torch.dtype, form: str) -> tuple[Graph, Tensor]:
        if self.cached and self._cached_norm is not None and self._cached_norm[0]() is g:
            return self._cached_norm[1], self._cached_norm[2]
        result = gcn_weights(g, weights, form, self.add_self_loops, dtype)
        if self.cached and not torch.compiler.is_compiling():
            self._cached_norm = (weakref.ref(g), result[0], result[1].detach(), form)
        return result

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.multi_head.in_channels}, heads={self.multi_head.heads}, "
                f"groups={self.multi_head.groups})")


def _restricted_softmax(scores: Tensor, dim: int) -> Tensor:
    """Softmax over ``dim`` with an extra implicit score 0 in the denominator, shifted by
    ``max(0, max score)`` for stability."""
    shift = scores.amax(dim=dim, keepdim=True).clamp(min=0.0)
    exp = (scores - shift).exp()
    return exp / (exp.sum(dim=dim, keepdim=True) + (-shift).exp())


def gcn_weights(g: Graph, weights: Tensor | None, form: str, add_self_loops: bool,
                dtype: torch.dtype) -> tuple[Graph, Tensor]:
    """``(graph, D^-1/2 A D^-1/2 weights)`` with PyG's ``gcn_norm`` per call form: the self-loops'
    weights are the existing loop's (edge_index: ``add_remaining_self_loops``), 1 (``SparseTensor``:
    ``fill_diag``) or 1 plus the existing loops' (torch sparse: ``add_self_loops`` then summed).
    Degrees are summed in float32 at least (as GCNConv), then the weights cast to ``dtype``."""
    exact = torch.promote_types(dtype, torch.float32)
    weights = (torch.ones(g.num_edges, dtype=exact, device=g.device) if weights is None else weights.to(exact))
    if add_self_loops:
        looped = with_self_loops(g)
        if form == "sparse_tensor":
            loops = weights.new_ones(looped.num_loops)
        elif form == "torch_sparse":
            existing = weights.new_zeros(looped.num_loops + 1).index_add(0, looped.loop_slot, weights)
            loops = existing[: looped.num_loops] + 1.0
        else:
            loops = looped.existing_loop_values(weights, 1.0)
        g, weights = looped.graph, looped.edge_values(weights, loops)
    degree = weights.new_zeros(g.num_dst_nodes).index_add(0, g.dst, weights)
    inverse_sqrt = degree.pow(-0.5)
    inverse_sqrt = inverse_sqrt.masked_fill(torch.isinf(inverse_sqrt), 0.0)
    norm = inverse_sqrt.index_select(0, g.src) * weights * inverse_sqrt.index_select(0, g.dst)
    return g, norm.to(dtype)
