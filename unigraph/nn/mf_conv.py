"""MFConv: the molecular fingerprint convolution, one weight pair per node degree."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.nn import ModuleList

from unigraph.call_forms import resolve
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.checks import channels_pair, check_positive
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.layer_inputs import node_features, size_linear, sized_widths
from unigraph.nn.projection import dense


class MFConv(MessagePassing):
    r"""The graph neural network operator from `"Convolutional Networks on Graphs for Learning
    Molecular Fingerprints" <https://arxiv.org/abs/1509.09292>`_:

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{W}^{(\deg(i))}_1 \bigoplus_{j \in \mathcal{N}(i)}
        \mathbf{x}_j + \mathbf{b}^{(\deg(i))} + \mathbf{W}^{(\deg(i))}_2 \mathbf{x}_i

    with a distinct weight pair for each in-degree :math:`\deg(i)` (edges counted with their
    multiplicity; degrees above ``max_degree`` share the weights of ``max_degree``) and
    :math:`\bigoplus` the sum by default. The neighbour sum is one g-SpMM; the nodes are then
    grouped by degree (one sort) and each group goes through its own weights.

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes;
            ``-1`` infers it on the first call.
        out_channels (int): size of each output sample.
        max_degree (int, optional): the largest degree with weights of its own. (default: ``10``)
        bias (bool, optional): learn an additive bias per degree. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``,
            ``flow``, ...).

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index)`` with ``size``
          (:mod:`unigraph.call_forms`; a sparse adjacency's values are not read), node features
          :math:`(|\mathcal{V}|, F_{in})` or a pair :math:`((|\mathcal{V}_s|, F_{s}),
          (|\mathcal{V}_t|, F_{t}))` (``x_t`` may be ``None``: no root term)
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, max_degree: int = 10,
                 bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        who = type(self).__name__
        self.in_channels = in_channels
        self._widths = channels_pair(in_channels, who, lazy=True)
        self._lazy = LAZY in self._widths
        self.out_channels = check_positive(out_channels, "out_channels", who)
        if isinstance(max_degree, bool) or not isinstance(max_degree, int) or max_degree < 0:
            raise ValueError(f"{who} max_degree must be an int >= 0, got {max_degree!r}")
        self.max_degree = max_degree
        self.lins_l = ModuleList([make_linear(self._widths[0], out_channels, bias=bias)
                                  for _ in range(max_degree + 1)])
        self.lins_r = ModuleList([make_linear(self._widths[1], out_channels, bias=False)
                                  for _ in range(max_degree + 1)])
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (*self.lins_l, *self.lins_r):
            if not (isinstance(lin, torch.nn.LazyLinear) and lin.has_uninitialized_params()):
                lin.reset_parameters()

    def forward(self, x: Any, edge_index: Any, size: Any = None) -> Tensor:
        who = type(self).__name__
        call = resolve(who, x, edge_index, size=size)
        g = oriented(call.graph, self.flow, who)
        g, x_src, x_dst = node_features(self, g, call.x)
        x_dst = dense(x_dst) if x_dst is not None else None
        aggregated = self.propagate(g, x=dense(x_src))
        degree = g.in_degree_counts().clamp(max=self.max_degree)
        # nodes grouped by degree (a stable sort), each group through its degree's weights
        order = torch.argsort(degree, stable=True)
        counts = torch.bincount(degree, minlength=self.max_degree + 1).tolist()
        groups = aggregated.index_select(0, order).split(counts)
        roots = x_dst.index_select(0, order).split(counts) if x_dst is not None else [None] * len(counts)
        parts = []
        for group, root, lin_l, lin_r in zip(groups, roots, self.lins_l, self.lins_r):
            part = lin_l(group)   # (an empty group too: its weights then get zero gradients, as in PyG)
            parts.append(part if root is None else part + lin_r(root))
        out = torch.cat(parts)
        return torch.empty_like(out).index_copy(0, order, out)

    def _materialize(self, x_src: Tensor, x_dst: Tensor | None) -> None:
        self._widths = sized_widths(self._widths, x_src, x_dst)
        # (a LazyLinear initializes itself when sized, as PyG's Linear: torch's default init)
        for lin in self.lins_l:
            size_linear(lin, self._widths[0], lambda w: None)
        for lin in self.lins_r:
            size_linear(lin, self._widths[1], lambda w: None)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels})"
