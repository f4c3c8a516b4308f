"""The shape GCN, GAT, GraphSAGE and GIN share: convolutions in ``self.convs`` applied in order,
with dropout and an activation around each, one graph (or sampled block) per layer.

Two dropout layouts, as in the papers' and PyG's reference setups:

* ``"before"`` (GCN, GAT): dropout on every convolution's input, the features included; the
  first layer reads mostly-zero (bag-of-words) input as a sparse matrix. Between layers this is
  the same as dropping the activation's output, which is where :func:`apply_layer` does it.
* ``"after"`` (GraphSAGE, GIN): dropout after the activation between layers.

:func:`apply_layer` is the one place that says what happens around convolution ``i``: the
models' ``forward`` runs it layer after layer, and the pipeline's stages
(:mod:`unigraph.train.layers`) run it one layer at a time, so the two cannot drift apart.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.graph import Graph
from unigraph.models.layer_graphs import graphs_per_layer
from unigraph.nn.dropout import activation_dropout
from unigraph.nn.projection import dropout as sparse_aware_dropout
from unigraph.nn.projection import sparse_if_mostly_zero


def apply_layer(conv: torch.nn.Module, graph: Graph, h: Tensor, *, first: bool, last: bool, dropout_at: str,
                activation: Callable[[Tensor], Tensor], p: float, training: bool) -> Tensor:
    """Convolution ``conv`` with the dropout and activation its model puts around it.

    Both layouts drop the activation's output between layers, so that dropout is applied here,
    after the activation (fused with a ReLU into one pass); ``"before"`` also drops the input
    features at the first layer."""
    if first and dropout_at == "before":
        # bag-of-words features: sparse products in the first layer, and dropout of the stored
        # values; the model's input features, reused every epoch: converted at their first use
        h = sparse_if_mostly_zero(h, first_use=True)
        h = sparse_aware_dropout(h, p, training)
    h = conv(graph, h)
    return h if last else activation_dropout(h, activation, p, training)


class LayerStack(torch.nn.Module):
    """Base of the node classifiers: subclasses build ``self.convs`` and ``self.dropout`` and set
    ``dropout_at`` and ``activation``.

    Their sizes are keyword-only after ``in_channels``: ``GCN(1433, out_channels=7,
    hidden_channels=16)``. PyG's basic models take ``(in_channels, hidden_channels, num_layers,
    out_channels)`` positionally; here a positional call is refused (TypeError) rather than read
    in another order: PyG's contract is :mod:`unigraph.nn.models`."""

    dropout_at: str = "after"
    activation = staticmethod(F.relu)

    def reset_parameters(self) -> None:
        for conv in self.convs:
            conv.reset_parameters()

    def forward(self, g: Graph | Sequence[Graph], x: Tensor) -> Tensor:
        last = len(self.convs) - 1
        for i, (conv, graph) in enumerate(zip(self.convs, graphs_per_layer(g, len(self.convs), type(self).__name__))):
            x = apply_layer(conv, graph, x, first=i == 0, last=i == last, dropout_at=self.dropout_at,
                            activation=self.activation, p=self.dropout, training=self.training)
        return x
