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
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.call_forms import resolve
from unigraph.nn.knn import knn
from unigraph.nn.checks import node_inputs, reset_module
from unigraph.nn.projection import dense
from unigraph.nn.static_graph import is_static, static_copies


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
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index)`` (:mod:`unigraph.call_forms`), node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_s|, F_{in}), (|\mathcal{V}_t|, F_{in}))`
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, nn: Callable, aggr: str = "max", **kwargs: Any):
        super().__init__(aggr=aggr, **kwargs)
        if not callable(nn):
            raise TypeError(f"EdgeConv nn must be a callable network, got {type(nn).__name__}")
        self.nn = nn
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.nn)

    def forward(self, x: Any, edge_index: Any) -> Tensor:
        if is_static(x):  # [B, N, F]: B copies of the graph (the network mixes channels per edge)
            g, x_flat, _ = static_copies(type(self).__name__, x, edge_index)
            out = self._convolve(oriented(g, self.flow, type(self).__name__), x_flat)
            return out.view(x.shape[0], x.shape[1], -1)
        call = resolve(type(self).__name__, x, edge_index)
        return self._convolve(oriented(call.graph, self.flow, type(self).__name__), call.x)

    def _convolve(self, g: Graph, x: Any) -> Tensor:
        g, x_src, x_dst = node_inputs(g, x, type(self).__name__)
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


class DynamicEdgeConv(EdgeConv):
    r"""EdgeConv on the k-nearest-neighbour graph of its input, rebuilt on every call (the dynamic
    graph of `"Dynamic Graph CNN for Learning on Point Clouds" <https://arxiv.org/abs/1801.07829>`_):

    .. math::
        \mathbf{x}^{\prime}_i = \bigoplus_{j \in \mathcal{N}_k(i)}
        h_{\mathbf{\Theta}}(\mathbf{x}_i \, \Vert \, \mathbf{x}_j - \mathbf{x}_i)

    with :math:`\mathcal{N}_k(i)` the ``k`` rows of ``x`` (of the same example) nearest to
    :math:`\mathbf{x}_i` in Euclidean distance, :math:`i` itself included (as PyG's, which
    uses ``torch_cluster.knn``; here :func:`unigraph.nn.knn.knn`). No gradient flows through the
    choice of neighbours.

    Args:
        nn (torch.nn.Module): :math:`h_{\mathbf{\Theta}}`, ``[-1, 2 * in_channels]`` to ``[-1, out_channels]``.
        k (int): neighbours per node.
        aggr (str, optional): ``"max"``, ``"mean"``, ``"sum"`` (``"add"``) or ``"min"``. (default: ``"max"``)
        num_workers (int, optional): accepted for PyG's signature (threads are torch's). (default: ``1``)

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_s|, F_{in}), (|\mathcal{V}_t|, F_{in}))` (neighbours of each
          destination among the sources), example ids ``batch`` :math:`(|\mathcal{V}|)` or a pair
          *(optional, sorted)*
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    def __init__(self, nn: Callable, k: int, aggr: str = "max", num_workers: int = 1, **kwargs: Any):
        if "flow" in kwargs:  # PyG's fixes it too (a TypeError there)
            raise TypeError("DynamicEdgeConv takes no flow: messages go from the k nearest neighbours to each node")
        super().__init__(nn, aggr=aggr, **kwargs)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"DynamicEdgeConv k must be a positive int, got {k!r}")
        self.k, self.num_workers = k, num_workers

    def forward(self, x: Tensor | tuple[Tensor, Tensor], batch: Tensor | tuple | None = None) -> Tensor:
        x_src, x_dst = (x if isinstance(x, (tuple, list)) else (x, x))
        for part in (x_src, x_dst):
            if not isinstance(part, Tensor) or part.dim() != 2:
                raise ValueError(f"DynamicEdgeConv expects node features [N, F] (or a pair of them), got "
                                 f"{list(getattr(part, 'shape', []))}; static graphs [B, N, F] are not supported")
        batch_src, batch_dst = batch if isinstance(batch, (tuple, list)) else (batch, batch)
        dst, src = knn(x_src, x_dst, self.k, batch_src, batch_dst)
        g = Graph(torch.stack([src, dst]), num_src_nodes=x_src.shape[0], num_dst_nodes=x_dst.shape[0])
        return self._convolve(g, (x_src, x_dst))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(nn={self.nn}, k={self.k})"


def _split_first_linear(nn) -> tuple[Linear | None, Sequential | None]:
    if isinstance(nn, Linear):
        return nn, None
    if isinstance(nn, Sequential) and len(nn) > 0 and isinstance(nn[0], Linear):
        return nn[0], (nn[1:] if len(nn) > 1 else None)
    return None, None
