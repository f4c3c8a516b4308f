"""GINConv: the graph isomorphism network operator."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.call_forms import resolve
from unigraph.nn.checks import edge_input, node_inputs, reset_module
from unigraph.nn.projection import dense
from unigraph.nn.static_graph import batch_major, is_static, node_major


class GINConv(MessagePassing):
    r"""The graph isomorphism operator from the `"How Powerful are Graph Neural Networks?"
    <https://arxiv.org/abs/1810.00826>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = h_{\mathbf{\Theta}} \left( \left( \mathbf{A} + (1 + \epsilon)
        \mathbf{I} \right) \cdot \mathbf{X} \right)

    per node:

    .. math::
        \mathbf{x}^{\prime}_i = h_{\mathbf{\Theta}} \left( (1 + \epsilon) \cdot \mathbf{x}_i +
        \sum_{j \in \mathcal{N}(i)} \mathbf{x}_j \right)

    The neighbour sum is one g-SpMM (``copy_u``, sum).

    Args:
        nn (torch.nn.Module): the network :math:`h_{\mathbf{\Theta}}` mapping
            ``[-1, in_channels]`` to ``[-1, out_channels]`` (an MLP, say).
        eps (float, optional): (initial) :math:`\epsilon`. (default: ``0.``)
        train_eps (bool, optional): learn :math:`\epsilon`. (default: ``False``)

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index)`` (:mod:`unigraph.call_forms`), node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_s|, F_{in}), (|\mathcal{V}_t|, F_{in}))` for a block
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True
    _sparse_values = "edge_weight"  # what a sparse adjacency's values are (GINConv ignores them)

    def __init__(self, nn: Callable, eps: float = 0.0, train_eps: bool = False, **kwargs: Any):
        kwargs.setdefault("aggr", "sum")
        super().__init__(**kwargs)
        if not callable(nn):
            raise TypeError(f"GINConv nn must be a callable network, got {type(nn).__name__}")
        self.nn = nn
        self.initial_eps = float(eps)
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.nn)
        with torch.no_grad():
            self.eps.fill_(self.initial_eps)

    def forward(self, x: Any, edge_index: Any, size: Any = None) -> Tensor:
        return self._convolve(x, edge_index, None, size)

    def _convolve(self, x: Any, edge_index: Any, edge_attr: Tensor | None, size: Any) -> Tensor:
        """``nn((1 + eps) x_i + sum_j message_j)`` in any call form; ``[B, N, F]`` features run as
        ``B`` feature sets over one graph (:mod:`unigraph.nn.static_graph`)."""
        who = type(self).__name__
        batch = x.shape[0] if is_static(x) else None
        call = resolve(who, node_major(x) if batch is not None else x, edge_index, size=size, edge_attr=edge_attr,
                       values=self._sparse_values)
        g = oriented(call.graph, self.flow, who)
        g, x_src, x_dst = node_inputs(g, call.x, who)
        if x_dst is not None and x_src.shape[1:] != x_dst.shape[1:]:
            raise ValueError(f"{who} needs source and destination features of one width, got "
                             f"{list(x_src.shape[1:])} and {list(x_dst.shape[1:])}")
        out = self._aggregate(g, dense(x_src), edge_attr if edge_attr is not None else call.edge_attr, batch)
        if x_dst is not None:
            out = out + root_term(self.eps, dense(x_dst))
        return self.nn(batch_major(out, batch) if batch is not None else out)

    def _aggregate(self, g: Graph, x_src: Tensor, edge_attr: Tensor | None, batch: int | None) -> Tensor:
        return self.propagate(g, x=x_src)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(nn={self.nn})"


def root_term(eps: Tensor, x_dst: Tensor) -> Tensor:
    """GIN's ``(1 + eps) * x_dst`` (PyG's GINConv/GINEConv, DGL's GINConv); ``x_dst`` itself where
    that is the same tensor: a fixed ``eps`` of 0 (the default) on the CPU whose dtype does not
    widen ``x_dst``'s (``1.0 * x`` is ``x``, bit for bit, infinities, NaN and -0.0 included, and so
    is its gradient). Two elementwise passes and a temporary fewer per layer call: 5-10% of a GIN
    step on PyG's mini-batches of small graphs (docs/performance.md). ``eps`` is read on every
    call (no cache to go stale), only where that costs no device sync and no trace break."""
    if (not eps.requires_grad and eps.device.type == "cpu" and x_dst.is_floating_point()
            and torch.promote_types(eps.dtype, x_dst.dtype) == x_dst.dtype
            and not torch.compiler.is_compiling() and not torch._C._are_functorch_transforms_active()
            and eps.item() == 0.0):
        return x_dst
    return (1 + eps) * x_dst


class GINEConv(GINConv):
    r"""GIN with edge features, from `"Strategies for Pre-training Graph Neural Networks"
    <https://arxiv.org/abs/1905.12265>`_:

    .. math::
        \mathbf{x}^{\prime}_i = h_{\mathbf{\Theta}} \left( (1 + \epsilon) \cdot \mathbf{x}_i +
        \sum_{j \in \mathcal{N}(i)} \mathrm{ReLU} ( \mathbf{x}_j + \mathbf{e}_{j,i} ) \right)

    with :math:`\mathbf{e}_{j,i}` the edge features, first mapped to the node width by a linear
    ``lin`` when ``edge_dim`` is given (else they must already be that wide). The message runs on
    the fused path: one g-SDDMM adds each edge's features to its source row, the ReLU runs per
    edge, one g-SpMM sums.

    Args:
        nn (torch.nn.Module): :math:`h_{\mathbf{\Theta}}`.
        eps (float, optional): (initial) :math:`\epsilon`. (default: ``0.``)
        train_eps (bool, optional): learn :math:`\epsilon`. (default: ``False``)
        edge_dim (int, optional): edge feature size, mapped to ``nn``'s input width (read from
            ``nn.in_features``, ``nn.in_channels`` or the first module of a ``Sequential``).
            (default: ``None``)

    Shapes:
        - **input:** ``(g, x, edge_attr)`` or PyG's ``(x, edge_index, edge_attr)`` (a
          ``SparseTensor``'s values are the edge features), node features
          :math:`(|\mathcal{V}|, F_{in})`, a pair for a block, or :math:`(B, |\mathcal{V}|, F_{in})`
          (static graph), edge features :math:`(|\mathcal{E}|, D)`
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    _sparse_values = "edge_attr"

    def __init__(self, nn: Callable, eps: float = 0.0, train_eps: bool = False, edge_dim: int | None = None,
                 **kwargs: Any):
        self._edge_dim = edge_dim  # read by the first reset_parameters (in GINConv.__init__), which builds lin
        super().__init__(nn, eps=eps, train_eps=train_eps, **kwargs)

    def _build_edge_linear(self) -> None:
        first = self.nn[0] if isinstance(self.nn, torch.nn.Sequential) and len(self.nn) else self.nn
        width = getattr(first, "in_features", getattr(first, "in_channels", None))
        if not isinstance(width, int):
            raise ValueError("GINEConv(edge_dim=...) maps edge features to nn's input width, but cannot read it "
                             "from nn (no in_features or in_channels)")
        self.lin = torch.nn.Linear(self._edge_dim, width)

    def reset_parameters(self) -> None:
        if not hasattr(self, "lin"):
            if self._edge_dim is not None:
                self._build_edge_linear()
            else:
                self.lin = None
        super().reset_parameters()
        if self.lin is not None:
            self.lin.reset_parameters()

    def forward(self, x: Any, edge_index: Any, edge_attr: Tensor | None = None, size: Any = None) -> Tensor:
        return self._convolve(x, edge_index, edge_attr, size)

    def _aggregate(self, g: Graph, x_src: Tensor, edge_attr: Tensor | None, batch: int | None) -> Tensor:
        who = type(self).__name__
        if edge_attr is None:
            raise ValueError(f"{who} needs edge_attr (one row of edge features per edge)")
        edge_attr = edge_input(g, edge_attr, who, "edge_attr")
        if self.lin is not None:
            edge_attr = self.lin(edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr)
        width = x_src.shape[-1] // batch if batch is not None else x_src.shape[-1]
        if edge_attr.shape[-1] != width:
            raise ValueError(f"{who}: node features have {width} channels but edge_attr has {edge_attr.shape[-1]}; "
                             "pass edge_dim to map edge features to the node width")
        if batch is not None:  # the same edge features for every feature set of the static graph
            edge_attr = edge_attr.repeat(1, batch)
        return self.propagate(g, x=x_src, edge_attr=edge_attr)

    def message(self, x_j: Tensor, edge_attr: Tensor) -> Tensor:
        return (x_j + edge_attr).relu()
