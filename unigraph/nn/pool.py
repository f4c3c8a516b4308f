r"""Global pooling: one vector per graph of a mini-batch.

For graph :math:`k` with node set :math:`\mathcal{V}_k`:

.. math::
    \mathbf{r}_k^{sum} = \sum_{i \in \mathcal{V}_k} \mathbf{x}_i, \qquad
    \mathbf{r}_k^{mean} = \frac{1}{|\mathcal{V}_k|} \sum_{i \in \mathcal{V}_k} \mathbf{x}_i, \qquad
    \mathbf{r}_k^{max} = \max_{i \in \mathcal{V}_k} \mathbf{x}_i, \qquad
    \mathbf{r}_k^{att} = \sum_{i \in \mathcal{V}_k} \mathrm{softmax}_{i \in \mathcal{V}_k}
        \big(h_{gate}(\mathbf{x}_i)\big) \, h_{\Theta}(\mathbf{x}_i)

Each is a reduction over the in-edges of the *readout graph* (node ``i`` -> graph ``batch[i]``):
``copy_u`` g-SpMM for sum/mean/max, ``edge_softmax`` then a ``u_mul_e`` g-SpMM for attention, so
pooling runs on the same kernels (and backends) as the layers. A graph without nodes pools to 0
for every reduction (the ops' contract for a destination without in-edges).

NaN and infinities propagate as in torch's reductions (a NaN feature makes its graph's sum, mean,
max and attention output NaN), as in PyG's pools.

``batch`` is PyG's batch vector (``[N]`` ints, graph of each node; need not be sorted) or a
:class:`~unigraph.data.GraphBatch`, whose readout graph is built once and reused.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from unigraph import ops
from unigraph.graph import Graph
from unigraph.nn.checks import reset_module

READOUT_REDUCES = ("sum", "mean", "max")


def readout_of(x: Tensor, batch, size: int | None = None) -> Graph:
    """The readout graph for features ``x`` and ``batch`` (a vector or a GraphBatch), checked."""
    if not isinstance(x, Tensor) or x.dim() < 1:
        raise TypeError(f"x must be a node feature tensor [N, ...], got {type(x).__name__} {list(getattr(x, 'shape', []))}")
    if hasattr(batch, "readout") and hasattr(batch, "ptr"):  # a GraphBatch
        graph = batch.readout()
        if size is not None and size != graph.num_dst_nodes:
            raise ValueError(f"size={size} but the batch holds {graph.num_dst_nodes} graphs")
    elif batch is None:  # one graph of all nodes
        graph = Graph(torch.stack([torch.arange(x.shape[0], device=x.device),
                                   torch.zeros(x.shape[0], dtype=torch.int64, device=x.device)]),
                      num_src_nodes=x.shape[0], num_dst_nodes=1 if size is None else size)
    elif isinstance(batch, Tensor):
        if batch.dim() != 1 or batch.dtype in (torch.bool,) or batch.is_floating_point():
            raise TypeError(f"batch must be a 1-D integer tensor (the graph of each node), got {batch.dtype} "
                            f"{list(batch.shape)}")
        if batch.numel() and int(batch.min()) < 0:
            raise ValueError(f"batch holds the negative graph id {int(batch.min())}")
        inferred = int(batch.max()) + 1 if batch.numel() else 0
        if size is not None and size < inferred:
            raise ValueError(f"batch holds graph id {inferred - 1} but size={size}; valid ids are 0..{size - 1}")
        graph = Graph(torch.stack([torch.arange(batch.numel(), device=batch.device), batch.to(torch.int64)]),
                      num_src_nodes=batch.numel(), num_dst_nodes=inferred if size is None else size)
    else:
        raise TypeError(f"batch must be a batch vector, a unigraph.data.GraphBatch or None, got {type(batch).__name__}")
    if x.shape[0] != graph.num_src_nodes:
        raise ValueError(f"x has {x.shape[0]} rows but the batch has {graph.num_src_nodes} nodes")
    return graph


def global_pool(x: Tensor, batch, reduce: str = "sum", size: int | None = None) -> Tensor:
    """``[num_graphs, ...]``: ``x`` reduced over each graph's nodes with ``reduce`` (sum/mean/max)."""
    if reduce not in READOUT_REDUCES:
        raise ValueError(f"reduce must be one of {', '.join(map(repr, READOUT_REDUCES))}, got {reduce!r}")
    return ops.gspmm(readout_of(x, batch, size), "copy_u", reduce, u=x)


def global_add_pool(x: Tensor, batch, size: int | None = None) -> Tensor:
    """Sum of each graph's node features (PyG's name and arguments)."""
    return global_pool(x, batch, "sum", size)


def global_mean_pool(x: Tensor, batch, size: int | None = None) -> Tensor:
    """Mean of each graph's node features (0 for a graph without nodes)."""
    return global_pool(x, batch, "mean", size)


def global_max_pool(x: Tensor, batch, size: int | None = None) -> Tensor:
    """Element-wise maximum of each graph's node features (0 for a graph without nodes)."""
    return global_pool(x, batch, "max", size)


class AttentionPool(torch.nn.Module):
    r"""Soft attention pooling from `"Gated Graph Sequence Neural Networks"
    <https://arxiv.org/abs/1511.05493>`_ (PyG's ``AttentionalAggregation``, DGL's
    ``GlobalAttentionPooling``):

    .. math::
        \mathbf{r}_k = \sum_{i \in \mathcal{V}_k} \mathrm{softmax}_{i \in \mathcal{V}_k}
        \big(h_{gate}(\mathbf{x}_i)\big) \odot h_{\Theta}(\mathbf{x}_i)

    Args:
        gate_nn (callable): maps ``[N, F]`` to scores ``[N, 1]`` (one attention per node) or
            ``[N, F']`` (one per output channel).
        nn (callable, optional): :math:`h_{\Theta}`, applied to ``x`` before weighting
            (default: identity).

    Shapes:
        - **input:** ``x`` :math:`(|\mathcal{V}|, F)`, ``batch`` (vector or GraphBatch)
        - **output:** :math:`(|\mathcal{G}|, F')`; a graph without nodes gives zeros
    """

    def __init__(self, gate_nn: Callable, nn: Callable | None = None):
        super().__init__()
        if not callable(gate_nn) or (nn is not None and not callable(nn)):
            raise TypeError("AttentionPool needs callable gate_nn (and nn, if given)")
        self.gate_nn = gate_nn
        self.nn = nn
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.gate_nn)
        if self.nn is not None:
            reset_module(self.nn)

    def forward(self, x: Tensor, batch, size: int | None = None, return_attention: bool = False):
        graph = readout_of(x, batch, size)
        gate = self.gate_nn(x)
        if gate.dim() == 1:
            gate = gate.unsqueeze(-1)
        h = self.nn(x) if self.nn is not None else x
        if gate.shape[0] != h.shape[0] or gate.shape[-1] not in (1, h.shape[-1]):
            raise ValueError(f"gate_nn must give [N, 1] or [N, {h.shape[-1]}] scores, got {list(gate.shape)}")
        alpha = ops.edge_softmax(graph, gate)  # readout edge i is node i: scores are already in edge order
        out = ops.gspmm(graph, "u_mul_e", "sum", u=h, e=alpha)
        return (out, alpha) if return_attention else out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(gate_nn={self.gate_nn}, nn={self.nn})"
