"""AntiSymmetricConv: the anti-symmetric deep graph network of Gravina et al."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import Tensor
from torch.nn import Parameter

from unigraph.call_forms import is_graph_object
from unigraph.nn.checks import check_positive
from unigraph.nn.gcn_conv import GCNConv
from unigraph.nn.resolver import activation_resolver


class AntiSymmetricConv(torch.nn.Module):
    r"""The anti-symmetric graph convolution from the `"Anti-Symmetric DGN: a stable architecture
    for Deep Graph Networks" <https://openreview.net/forum?id=J3Y7cgZOOS>`_ paper.

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{x}_i + \epsilon \cdot \sigma \left(
            (\mathbf{W}-\mathbf{W}^T-\gamma \mathbf{I}) \mathbf{x}_i +
            \Phi(\mathbf{X}, \mathcal{N}_i) + \mathbf{b}\right),

    applied ``num_iters`` times (forward Euler steps of a stable ODE: the anti-symmetric matrix
    has purely imaginary eigenvalues, shifted left by :math:`\gamma`), with :math:`\Phi` a message
    passing layer from ``in_channels`` to ``in_channels`` (``phi``; by default
    :class:`~unigraph.nn.GCNConv` without bias) that gets every extra argument of the call.

    Args:
        in_channels (int): size of each input (and output) sample.
        phi (torch.nn.Module, optional): the layer :math:`\Phi`, called as ``phi(x, edge_index,
            *args, **kwargs)``: unigraph's or PyG's. (default: ``None``, a ``GCNConv``)
        num_iters (int, optional): number of steps. (default: ``1``)
        epsilon (float, optional): the step size :math:`\epsilon`. (default: ``0.1``)
        gamma (float, optional): the diffusion strength :math:`\gamma`. (default: ``0.1``)
        act (str or callable, optional): the activation :math:`\sigma` (``None``: none).
            (default: ``"tanh"``)
        act_kwargs (dict, optional): arguments of a named activation. (default: ``None``)
        bias (bool, optional): learn :math:`\mathbf{b}`. (default: ``True``)

    Shapes:
        - **input:** whatever ``phi`` takes: PyG's ``(x, edge_index[, edge_weight])`` (an
          ``edge_index``, ``SparseTensor`` or torch sparse ``adj_t`` for the default) or
          ``(g, x)``; node features :math:`(|\mathcal{V}|, F_{in})`
        - **output:** node features :math:`(|\mathcal{V}|, F_{in})`
    """

    def __init__(self, in_channels: int, phi: torch.nn.Module | None = None, num_iters: int = 1,
                 epsilon: float = 0.1, gamma: float = 0.1, act: str | Callable | None = "tanh",
                 act_kwargs: dict[str, Any] | None = None, bias: bool = True):
        super().__init__()
        who = "AntiSymmetricConv"
        self.in_channels = check_positive(in_channels, "in_channels", who)
        if isinstance(num_iters, bool) or not isinstance(num_iters, int) or num_iters < 0:
            raise ValueError(f"{who} num_iters must be an int >= 0, got {num_iters!r}")
        self.num_iters = num_iters
        self.gamma, self.epsilon = gamma, epsilon
        self.act = activation_resolver(act, **(act_kwargs or {}))
        self.W = Parameter(torch.empty(in_channels, in_channels))
        self.register_buffer("eye", torch.eye(in_channels))
        self.phi = GCNConv(in_channels, in_channels, bias=False) if phi is None else phi
        self.bias = Parameter(torch.empty(in_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        torch.nn.init.kaiming_uniform_(self.W, a=math.sqrt(5))   # (torch's Linear default)
        self.phi.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, x: Any, edge_index: Any, *args: Any, **kwargs: Any) -> Tensor:
        if is_graph_object(x):   # unigraph's form phi(g, x): the features come second
            g, x = x, edge_index
            phi = lambda h: self.phi(g, h, *args, **kwargs)  # noqa: E731
        else:
            phi = lambda h: self.phi(h, edge_index, *args, **kwargs)  # noqa: E731
        if not isinstance(x, Tensor) or x.dim() < 2 or x.shape[-1] != self.in_channels:
            got = list(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"AntiSymmetricConv expects node features [num_nodes, {self.in_channels}] (in_channels), "
                             f"got {got}")
        antisymmetric = self.W - self.W.t() - self.gamma * self.eye
        for _ in range(self.num_iters):
            h = x @ antisymmetric.t() + phi(x)
            if self.bias is not None:
                h = h + self.bias
            if self.act is not None:
                h = self.act(h)
            x = x + self.epsilon * h
        return x

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.in_channels}, phi={self.phi}, num_iters={self.num_iters}, "
                f"epsilon={self.epsilon}, gamma={self.gamma})")
