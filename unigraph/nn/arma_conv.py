"""ARMAConv: the ARMA graph convolution of Bianchi et al."""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter, ReLU
from torch.nn.parameter import UninitializedParameter

from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_positive, glorot_
from unigraph.nn.lazy import LAZY
from unigraph.nn.gcn_conv import gcn_norm
from unigraph.nn.layer_inputs import propagate_nodes, square_call


class ARMAConv(MessagePassing):
    r"""The ARMA graph convolution from the `"Graph Neural Networks with Convolutional ARMA
    Filters" <https://arxiv.org/abs/1901.01343>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \frac{1}{K} \sum_{k=1}^K \mathbf{X}_k^{(T)},
        \qquad
        \mathbf{X}_k^{(t+1)} = \sigma \left( \mathbf{\hat{L}} \mathbf{X}_k^{(t)} \mathbf{W}_k^{(t)}
        + \mathrm{dropout}(\mathbf{X}) \mathbf{V}_k^{(t)} + \mathbf{b}_k^{(t)} \right),
        \qquad \mathbf{X}_k^{(0)} = \mathbf{X},

    with :math:`\mathbf{\hat{L}} = \mathbf{D}^{-1/2} \mathbf{A} \mathbf{D}^{-1/2}` (no self-loops
    added: PyG's ``gcn_norm(add_self_loops=False)``, :func:`unigraph.nn.gcn_conv.gcn_norm`),
    :math:`K` stacks of :math:`T` layers, :math:`\mathbf{W}_k^{(0)}` the ``init_weight`` and
    :math:`\mathbf{W}_k^{(t>0)}` the ``weight`` (one per layer, or one shared), :math:`\mathbf{V}`
    the ``root_weight``. The :math:`K` stacks propagate together: one g-SpMM per layer.

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each output sample.
        num_stacks (int, optional): number of parallel stacks :math:`K`. (default: ``1``)
        num_layers (int, optional): number of layers :math:`T`. (default: ``1``)
        shared_weights (bool, optional): one set of weights for every layer :math:`t > 0` of a
            stack (and one root weight and bias). (default: ``False``)
        act (callable, optional): the activation :math:`\sigma`, or ``None``. (default: ``ReLU()``)
        dropout (float, optional): dropout probability of the skip connection's input. (default: ``0.``)
        bias (bool, optional): learn additive biases. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, ``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (any of its adjacency forms) or ``(g, x)``; node
          features :math:`(*, |\mathcal{V}|, F_{in})`, edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(*, |\mathcal{V}|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, num_stacks: int = 1, num_layers: int = 1,
                 shared_weights: bool = False, act: Callable | None = ReLU(), dropout: float = 0.,
                 bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        self.in_channels = in_channels if in_channels == LAZY else check_positive(in_channels, "in_channels",
                                                                                   "ARMAConv")
        self.out_channels = check_positive(out_channels, "out_channels", "ARMAConv")
        self.num_stacks = check_positive(num_stacks, "num_stacks", "ARMAConv")
        self.num_layers = check_positive(num_layers, "num_layers", "ARMAConv")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout <= 1.0:
            raise ValueError(f"ARMAConv dropout must be in [0, 1], got {dropout!r}")
        self.act, self.shared_weights, self.dropout = act, shared_weights, dropout
        K, T = num_stacks, 1 if shared_weights else num_layers
        self.weight = Parameter(torch.empty(max(1, T - 1), K, out_channels, out_channels))
        if in_channels == LAZY:  # sized from the first call's features (_materialize)
            self.init_weight, self.root_weight = UninitializedParameter(), UninitializedParameter()
        else:
            self.init_weight = Parameter(torch.empty(K, in_channels, out_channels))
            self.root_weight = Parameter(torch.empty(T, K, in_channels, out_channels))
        self.bias = Parameter(torch.empty(T, K, 1, out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        glorot_(self.weight)
        glorot_(self.init_weight)   # (no-ops while lazy)
        glorot_(self.root_weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def _materialize(self, width: int) -> None:
        """The lazy weights' shapes from the first input's width, then Glorot (as PyG's hook)."""
        T, K = self.root_weight_layers(), self.num_stacks
        with torch.no_grad():
            self.init_weight.materialize((K, width, self.out_channels))
            self.root_weight.materialize((T, K, width, self.out_channels))
        glorot_(self.init_weight)
        glorot_(self.root_weight)

    def root_weight_layers(self) -> int:
        return 1 if self.shared_weights else self.num_layers

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # a lazy layer takes its shapes from the state_dict it loads
        for name in ("init_weight", "root_weight"):
            param, saved = getattr(self, name), state_dict.get(prefix + name)
            if isinstance(param, UninitializedParameter) and saved is not None:
                with torch.no_grad():
                    param.materialize(saved.shape)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, x: Tensor | Any, edge_index: Any, edge_weight: Tensor | None = None) -> Tensor:
        call = square_call(self, x, edge_index, edge_weight)
        x = call.x
        if isinstance(self.init_weight, UninitializedParameter):
            self._materialize(x.shape[-1])
        if x.shape[-1] != self.init_weight.shape[1]:
            raise ValueError(f"ARMAConv expects x with {self.init_weight.shape[1]} features (its in_channels), got "
                             f"{x.shape[-1]}")
        g, weights = gcn_norm(call.graph, call.edge_weight, x.dtype, call.form, add_self_loops=False)
        x = x.unsqueeze(-3)   # [..., 1, N, F]: the stacks broadcast along dimension -3
        out = x
        for t in range(self.num_layers):
            out = out @ (self.init_weight if t == 0 else self.weight[0 if self.shared_weights else t - 1])
            out = propagate_nodes(self, g, out, edge_weight=weights)
            root = F.dropout(x, p=self.dropout, training=self.training)
            out = out + root @ self.root_weight[0 if self.shared_weights else t]
            if self.bias is not None:
                out = out + self.bias[0 if self.shared_weights else t]
            if self.act is not None:
                out = self.act(out)
        return out.mean(dim=-3)

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, num_stacks={self.num_stacks}, "
                f"num_layers={self.num_layers})")
