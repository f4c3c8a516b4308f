"""GIN: Xu et al.'s graph isomorphism network, as a node classifier."""
from __future__ import annotations

import torch

from unigraph.models.layer_stack import LayerStack
from unigraph.nn.checks import check_positive, check_probability
from unigraph.nn.gin_conv import GINConv


def gin_mlp(in_channels: int, hidden_channels: int, out_channels: int) -> torch.nn.Sequential:
    """GIN's two-layer MLP with batch normalization: Linear, BatchNorm, ReLU, Linear."""
    return torch.nn.Sequential(
        torch.nn.Linear(in_channels, hidden_channels), torch.nn.BatchNorm1d(hidden_channels), torch.nn.ReLU(),
        torch.nn.Linear(hidden_channels, out_channels))


class GIN(LayerStack):
    r"""``num_layers`` :class:`~unigraph.nn.GINConv` layers, each with a two-layer MLP (see
    :func:`gin_mlp`), ReLU and dropout between layers; from `"How Powerful are Graph Neural
    Networks?" <https://arxiv.org/abs/1810.00826>`_.

    .. math::
        \mathbf{h}_i^{(l+1)} = \mathrm{MLP}^{(l)}\Big((1 + \epsilon^{(l)})\, \mathbf{h}_i^{(l)} +
        \sum_{j \in \mathcal{N}(i)} \mathbf{h}_j^{(l)}\Big)

    Args (all but ``in_channels`` by keyword, see :class:`~unigraph.models.layer_stack.LayerStack`):
        in_channels (int): input feature size.
        out_channels (int): number of classes.
        hidden_channels (int, optional): hidden size. (default: ``64``)
        num_layers (int, optional): number of layers. (default: ``3``)
        dropout (float, optional): dropout probability between layers. (default: ``0.5``)
        train_eps (bool, optional): learn :math:`\epsilon`. (default: ``False``)

    Shapes:
        - **input:** a graph or one block per layer, node features :math:`(|\mathcal{V}|, F_{in})`
        - **output:** logits :math:`(|\mathcal{V}_{dst}|, C)`
    """

    dropout_at = "after"

    def __init__(self, in_channels: int, *, out_channels: int, hidden_channels: int = 64, num_layers: int = 3,
                 dropout: float = 0.5, train_eps: bool = False):
        super().__init__()
        check_positive(num_layers, "num_layers", "GIN")
        self.dropout = check_probability(dropout, "dropout", "GIN")
        widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.convs = torch.nn.ModuleList(
            GINConv(gin_mlp(widths[i], hidden_channels, widths[i + 1]), train_eps=train_eps) for i in range(num_layers))
