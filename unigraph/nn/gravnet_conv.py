"""GravNetConv: GravNet's message passing over a learned k-nearest-neighbour space."""
from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor

from unigraph import ops
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_positive, check_width, reset_module
from unigraph.nn.knn import knn
from unigraph.nn.lazy import LAZY, make_linear, materialize


class GravNetConv(MessagePassing):
    r"""The GravNet operator from the `"Learning Representations of Irregular Particle-detector
    Geometry with Distance-weighted Graph Networks" <https://arxiv.org/abs/1902.07987>`_ paper.

    Every node is placed in a learned space, :math:`\mathbf{s}_i = \mathbf{W}_s \mathbf{x}_i +
    \mathbf{b}_s`, and receives messages from its ``k`` nearest nodes there (itself included),
    weighted by their distance:

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{W}_1 \mathbf{x}_i + \mathbf{W}_2 \left[
        \operatorname{mean}_{j \in \mathcal{N}_k(i)} e_{j,i} \mathbf{h}_j \,\Big\Vert\,
        \max_{j \in \mathcal{N}_k(i)} e_{j,i} \mathbf{h}_j \right] + \mathbf{b},
        \qquad e_{j,i} = \exp\left(-10 \lVert \mathbf{s}_j - \mathbf{s}_i \rVert^2\right),

    with :math:`\mathbf{h}_j = \mathbf{W}_h \mathbf{x}_j + \mathbf{b}_h` (``lin_h``),
    :math:`\mathbf{W}_1` ``lin_out1`` and :math:`\mathbf{W}_2, \mathbf{b}` ``lin_out2``. The
    neighbours are found by :func:`unigraph.nn.knn.knn` (squared Euclidean distance, per example
    of ``batch``; PyG uses pyg-lib's kernel); no gradient flows through their choice, the weights
    :math:`e_{j,i}` are differentiable. Mean and max are one weighted g-SpMM each (``u_mul_e``),
    so no per-edge message tensor is built.

    Args:
        in_channels (int): size of each input sample (``-1``: inferred on the first call).
        out_channels (int): size of each output sample.
        space_dimensions (int): dimensions of the learned space :math:`\mathbf{s}`.
        propagate_dimensions (int): width of the propagated features :math:`\mathbf{h}`.
        k (int): neighbours per node.
        num_workers (int, optional): deprecated in PyG and ignored (a warning says so).
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments; ``aggr_kwargs``
            configures the ``["mean", "max"]`` aggregation (``layer.aggr_module``, then used on the
            materialized messages), as in PyG.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_s|, F_{in}), (|\mathcal{V}_t|, F_{in}))` (neighbours of each
          destination among the sources); example ids ``batch`` :math:`(|\mathcal{V}|)` or a pair
          *(optional, sorted ascending)*
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, space_dimensions: int, propagate_dimensions: int,
                 k: int, num_workers: int | None = None, **kwargs: Any):
        super().__init__(aggr=["mean", "max"], flow="source_to_target", **kwargs)
        who = type(self).__name__
        if num_workers is not None:
            warnings.warn(f"{who}: num_workers is deprecated (as in PyG) and ignored", stacklevel=2)
        if in_channels != LAZY:
            check_positive(in_channels, "in_channels", who)
        self.in_channels = in_channels
        self._widths = (in_channels, in_channels)
        self._lazy = in_channels == LAZY
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.k = check_positive(k, "k", who)
        self._mean_max = not kwargs.get("aggr_kwargs")   # the default aggregation: two g-SpMMs
        self.lin_s = make_linear(in_channels, check_positive(space_dimensions, "space_dimensions", who))
        self.lin_h = make_linear(in_channels, check_positive(propagate_dimensions, "propagate_dimensions", who))
        self.lin_out1 = make_linear(in_channels, out_channels, bias=False)
        self.lin_out2 = torch.nn.Linear(2 * propagate_dimensions, out_channels)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.aggr_module)
        for lin in (self.lin_s, self.lin_h, self.lin_out1, self.lin_out2):
            lin.reset_parameters()

    def forward(self, x: Tensor | tuple[Tensor, Tensor], batch: Tensor | tuple | None = None) -> Tensor:
        who = type(self).__name__
        x_src, x_dst, bipartite = _features(x, who)
        batch_src, batch_dst = _batches(batch, who)
        if self._lazy:
            materialize(self, x_src, x_dst, (self.lin_s, self.lin_h), (self.lin_out1,))
        check_width(x_src, self._widths[0], who, "x (source features)" if bipartite else "x")
        check_width(x_dst, self._widths[1], who, "x (destination features)" if bipartite else "x")
        s_src = self.lin_s(x_src)
        s_dst = self.lin_s(x_dst) if bipartite else s_src
        dst, src = knn(s_src, s_dst, self.k, batch_src, batch_dst)
        g = Graph(torch.stack([src, dst]), num_src_nodes=x_src.shape[0], num_dst_nodes=x_dst.shape[0])
        distance = (s_src.index_select(0, src) - s_dst.index_select(0, dst)).pow(2).sum(-1)
        weight = torch.exp(-10.0 * distance)
        h = self.lin_h(x_src)
        if self._mean_max:
            aggregated = torch.cat([ops.gspmm(g, "u_mul_e", "mean", h, weight.unsqueeze(-1)),
                                    ops.gspmm(g, "u_mul_e", "max", h, weight.unsqueeze(-1))], dim=-1)
        else:
            aggregated = self.propagate(g, x=(h, None), edge_weight=weight)
        return self.lin_out1(x_dst) + self.lin_out2(aggregated)

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return x_j * edge_weight.unsqueeze(1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, k={self.k})"


def _features(x: Any, who: str) -> tuple[Tensor, Tensor, bool]:
    """``(x_src, x_dst, bipartite)``: one tensor is both sides; each must be ``[nodes, F]``."""
    bipartite = isinstance(x, (tuple, list))
    pair = tuple(x) if bipartite else (x, x)
    if len(pair) != 2:
        raise ValueError(f"{who}: x must be one tensor or a (source, destination) pair, got a sequence of {len(pair)}")
    for part in pair:
        if not isinstance(part, Tensor) or not part.is_floating_point():
            raise TypeError(f"{who}: x must hold floating-point tensors, got "
                            f"{getattr(part, 'dtype', type(part).__name__)}")
        if part.dim() != 2:
            raise ValueError(f"{who} does not take static graphs (as in PyG): x must be [num_nodes, F], got "
                             f"{list(part.shape)}")
    return pair[0], pair[1], bipartite


def _batches(batch: Any, who: str) -> tuple[Tensor | None, Tensor | None]:
    """``(batch_src, batch_dst)``: one vector is used for both sides, as PyG does."""
    if batch is None or isinstance(batch, Tensor):
        return batch, batch
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        return batch[0], batch[1]
    raise TypeError(f"{who}: batch must be None, one example-id vector or a (source, destination) pair of them, "
                    f"got {type(batch).__name__}")
