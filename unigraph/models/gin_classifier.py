"""GINClassifier: Xu et al.'s graph isomorphism network as a graph classifier."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.models.gin import gin_mlp
from unigraph.nn.checks import check_positive, check_probability
from unigraph.nn.dropout import dropout
from unigraph.nn.gin_conv import GINConv
from unigraph.nn.pool import READOUT_REDUCES, global_pool


class GINClassifier(torch.nn.Module):
    r"""Graph classification with GIN, from `"How Powerful are Graph Neural Networks?"
    <https://arxiv.org/abs/1810.00826>`_: ``num_layers`` :class:`~unigraph.nn.GINConv` layers
    (each with the two-layer MLP of :func:`~unigraph.models.gin.gin_mlp` and a ReLU), a global
    pooling of the last layer's node features, and a two-layer MLP head.

    .. math::
        \mathbf{h}_i^{(l+1)} = \mathrm{ReLU}\Big(\mathrm{MLP}^{(l)}\big((1 + \epsilon^{(l)})\,
            \mathbf{h}_i^{(l)} + \sum_{j \in \mathcal{N}(i)} \mathbf{h}_j^{(l)}\big)\Big), \qquad
        \mathbf{y}_k = W_2\, \mathrm{Dropout}\Big(\mathrm{ReLU}\big(W_1 \sum_{i \in \mathcal{V}_k}
            \mathbf{h}_i^{(L)} + b_1\big)\Big) + b_2

    (the sum is the ``pool`` reduction; ``"sum"`` is GIN's injective choice).

    Args:
        in_channels (int): node feature size (1 for featureless graphs: pass ``x = ones``).
        hidden_channels (int): width of every layer.
        num_classes (int): number of graph classes.
        num_layers (int, optional): GIN layers. (default: ``5``)
        dropout (float, optional): dropout before the last linear layer. (default: ``0.5``)
        pool (str, optional): ``"sum"``, ``"mean"`` or ``"max"``. (default: ``"sum"``)
        train_eps (bool, optional): learn :math:`\epsilon`. (default: ``False``)

    Shapes:
        - **input:** a :class:`~unigraph.data.GraphBatch` (its ``graph``, ``x`` and readout) or
          ``(graph, x, batch)`` with a batch vector
        - **output:** logits :math:`(|\mathcal{G}|, C)`
    """

    def __init__(self, in_channels: int, *, num_classes: int, hidden_channels: int = 64, num_layers: int = 5,
                 dropout: float = 0.5, pool: str = "sum", train_eps: bool = False):
        super().__init__()
        check_positive(num_layers, "num_layers", "GINClassifier")
        for name, value in (("in_channels", in_channels), ("hidden_channels", hidden_channels),
                            ("num_classes", num_classes)):
            check_positive(value, name, "GINClassifier")
        self.dropout = check_probability(dropout, "dropout", "GINClassifier")
        if pool not in READOUT_REDUCES:
            raise ValueError(f"GINClassifier pool must be one of {', '.join(map(repr, READOUT_REDUCES))}, got {pool!r}")
        self.pool = pool
        widths = [in_channels] + [hidden_channels] * num_layers
        self.convs = torch.nn.ModuleList(
            GINConv(gin_mlp(widths[i], hidden_channels, hidden_channels), train_eps=train_eps) for i in range(num_layers))
        self.lin1 = torch.nn.Linear(hidden_channels, hidden_channels)
        self.lin2 = torch.nn.Linear(hidden_channels, num_classes)

    def reset_parameters(self) -> None:
        for module in (*self.convs, self.lin1, self.lin2):
            module.reset_parameters()

    def forward(self, batch, x: Tensor | None = None, batch_vector: Tensor | None = None) -> Tensor:
        """``model(graph_batch)`` (features from ``graph_batch.x``, or ``x`` if given), or
        ``model(graph, x, batch_vector)``."""
        if hasattr(batch, "readout"):  # a GraphBatch
            graph, readout = batch.graph, batch
            h = x if x is not None else batch.x
        else:
            graph, readout, h = batch, batch_vector, x
            if h is None or batch_vector is None:
                raise TypeError("GINClassifier takes a GraphBatch, or (graph, x, batch_vector)")
        if h is None:
            raise ValueError("the batch has no node features (x); featureless datasets use a constant: "
                             "x = torch.ones(num_nodes, 1)")
        for conv in self.convs:
            h = F.relu(conv(graph, h))
        h = global_pool(h, readout, self.pool)
        h = dropout(F.relu(self.lin1(h)), self.dropout, self.training)
        return self.lin2(h)
