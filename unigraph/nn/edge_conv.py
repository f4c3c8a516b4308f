"""EdgeConv: the edge convolution of Dynamic Graph CNN."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor
from torch.nn import Linear, Sequential

from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.lazy import Interpreter, Pending, Record, Rows
from unigraph.message_passing.plan import MessagePlan
from unigraph.message_passing.tracing import E, U, V
from unigraph.nn.call_forms import resolve
from unigraph.nn.checks import node_inputs, reset_module
from unigraph.nn.projection import dense


class EdgeConv(MessagePassing):
    r"""The edge convolutional operator from the `"Dynamic Graph CNN for Learning on Point Clouds"
    <https://arxiv.org/abs/1801.07829>`_ paper.

    .. math::
        \mathbf{x}^{\prime}_i = \bigoplus_{j \in \mathcal{N}(i)}
        h_{\mathbf{\Theta}}(\mathbf{x}_i \, \Vert \, \mathbf{x}_j - \mathbf{x}_i)

    with :math:`\bigoplus` max by default. In matrix form, with :math:`\mathbf{S}, \mathbf{T}` the
    source and target incidence matrices (:math:`|\mathcal{E}| \times |\mathcal{V}|`):
    :math:`\mathbf{X}' = \operatorname{AGG}\big(h_{\mathbf{\Theta}}([\mathbf{T}\mathbf{X} \,\Vert\,
    (\mathbf{S} - \mathbf{T})\mathbf{X}])\big)`.

    When :math:`h_{\mathbf{\Theta}}` starts with a ``Linear`` :math:`[\mathbf{W}_1\, \mathbf{W}_2]`,
    its first layer is split as DGL does, :math:`\mathbf{W}_1 \mathbf{x}_i + \mathbf{W}_2 (\mathbf{x}_j
    - \mathbf{x}_i) = (\mathbf{W}_1 - \mathbf{W}_2)\mathbf{x}_i + \mathbf{W}_2 \mathbf{x}_j`: both
    products run on node rows and one g-SDDMM adds them per edge, so the E x 2F concatenation is
    never built; a lone ``Linear`` reduces with no per-edge tensor at all (max commutes with the
    destination term). Other networks run on the materialized messages, as in PyG.

    Args:
        nn (torch.nn.Module): the network :math:`h_{\mathbf{\Theta}}` mapping ``[-1, 2 * in_channels]``
            to ``[-1, out_channels]``.
        aggr (str, optional): ``"max"``, ``"mean"``, ``"sum"`` (``"add"``) or ``"min"``. (default: ``"max"``)

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index)`` (:mod:`unigraph.nn.call_forms`), node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_s|, F_{in}), (|\mathcal{V}_t|, F_{in}))`
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    def __init__(self, nn: Callable, aggr: str = "max"):
        super().__init__(aggr=aggr)
        if not callable(nn):
            raise TypeError(f"EdgeConv nn must be a callable network, got {type(nn).__name__}")
        self.nn = nn
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.nn)

    def forward(self, g: Graph | Any, x: Any) -> Tensor:
        call = resolve("EdgeConv", g, x)
        g, x_src, x_dst = node_inputs(call.graph, call.x, "EdgeConv")
        if x_dst is None:
            raise ValueError("EdgeConv needs destination features: pass (x_src, x_dst) with x_dst a tensor")
        x_src, x_dst = dense(x_src), dense(x_dst)
        if x_src.dim() != 2 or x_dst.shape[1:] != x_src.shape[1:]:
            raise ValueError(f"EdgeConv needs source and destination features [nodes, F] of one width, got "
                             f"{list(x_src.shape)} and {list(x_dst.shape)}")
        first, rest = _split_first_linear(self.nn)
        if first is None or first.in_features != 2 * x_src.shape[1]:
            return self.propagate(g, x=(x_src, x_dst))
        return self._split_propagate(g, x_src, x_dst, first, rest)

    def message(self, x_i: Tensor, x_j: Tensor) -> Tensor:
        return self.nn(torch.cat([x_i, x_j - x_i], dim=-1))

    def _split_propagate(self, g: Graph, x_src: Tensor, x_dst: Tensor, first: Linear, rest: Sequential | None) -> Tensor:
        width = x_src.shape[1]
        w_dst, w_rel = first.weight[:, :width], first.weight[:, width:]
        from_src = x_src @ w_rel.t()
        from_dst = torch.nn.functional.linear(x_dst, w_dst - w_rel, first.bias)
        record = Record()
        interpreter = Interpreter(g, record)
        value = Pending("add", Rows(U, from_src), Rows(V, from_dst))
        if rest is not None:
            value = Rows(E, rest(interpreter.materialize(value, "the layers after the first Linear")))
        out = interpreter.reduce(value, self.aggr)
        self._last_plan = MessagePlan.from_record(f"{type(self).__name__} (first Linear split per node)", "", record)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(nn={self.nn})"


def _split_first_linear(nn) -> tuple[Linear | None, Sequential | None]:
    if isinstance(nn, Linear):
        return nn, None
    if isinstance(nn, Sequential) and len(nn) > 0 and isinstance(nn[0], Linear):
        return nn[0], (nn[1:] if len(nn) > 1 else None)
    return None, None
