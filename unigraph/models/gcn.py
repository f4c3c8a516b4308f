"""GCN: Kipf and Welling's node classifier."""
from __future__ import annotations

import torch

from unigraph.models.layer_stack import LayerStack
from unigraph.nn.checks import check_positive, check_probability
from unigraph.nn.gcn_conv import GCNConv


class GCN(LayerStack):
    r"""The node classifier of `"Semi-supervised Classification with Graph Convolutional Networks"
    <https://arxiv.org/abs/1609.02907>`_: ``num_layers`` :class:`~unigraph.nn.GCNConv` layers with
    ReLU between them and dropout before each (the input features included, as in the paper's and
    PyG's Cora setup). Mostly-zero input features run the first product sparse, as in :class:`GAT`.

    .. math::
        \mathbf{Z} = \hat{\mathbf{A}}\, \mathrm{ReLU}\big(\hat{\mathbf{A}} \mathbf{X} \mathbf{W}^{(0)}\big)
        \mathbf{W}^{(1)}, \qquad \hat{\mathbf{A}} = \hat{\mathbf{D}}^{-1/2}(\mathbf{A} + \mathbf{I})\hat{\mathbf{D}}^{-1/2}

    Args (all but ``in_channels`` by keyword, see :class:`~unigraph.models.layer_stack.LayerStack`):
        in_channels (int): input feature size.
        out_channels (int): number of classes.
        hidden_channels (int, optional): hidden size. (default: ``16``)
        num_layers (int, optional): number of layers. (default: ``2``)
        dropout (float, optional): dropout probability. (default: ``0.5``)
        cached (bool, optional): cache the normalization (transductive training). (default: ``False``)

    Shapes:
        - **input:** a graph (or one block per layer), node features :math:`(|\mathcal{V}|, F_{in})`
          (dense or sparse)
        - **output:** logits :math:`(|\mathcal{V}|, C)` (the last block's destinations for blocks)
    """

    dropout_at = "before"

    def __init__(self, in_channels: int, *, out_channels: int, hidden_channels: int = 16, num_layers: int = 2,
                 dropout: float = 0.5, cached: bool = False):
        super().__init__()
        check_positive(num_layers, "num_layers", "GCN")
        self.dropout = check_probability(dropout, "dropout", "GCN")
        widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.convs = torch.nn.ModuleList(GCNConv(widths[i], widths[i + 1], cached=cached) for i in range(num_layers))
