"""GraphSAGE: Hamilton et al.'s inductive node classifier."""
from __future__ import annotations

import torch

from unigraph.models.layer_stack import LayerStack
from unigraph.nn.checks import check_positive, check_probability
from unigraph.nn.sage_conv import SAGEConv


class GraphSAGE(LayerStack):
    r"""The node classifier of `"Inductive Representation Learning on Large Graphs"
    <https://arxiv.org/abs/1706.02216>`_: ``num_layers`` :class:`~unigraph.nn.SAGEConv` layers with
    ReLU and dropout between them. Built for mini-batch training on sampled blocks (layer ``i``
    gets block ``i``); a full graph works too.

    .. math::
        \mathbf{h}_i^{(l+1)} = \mathrm{ReLU}\Big(\mathbf{W}_2^{(l)} \mathbf{h}_i^{(l)} + \mathbf{W}_1^{(l)}
        \operatorname{mean}_{j \in \mathcal{N}(i)} \mathbf{h}_j^{(l)}\Big)

    Args (all but ``in_channels`` by keyword, see :class:`~unigraph.models.layer_stack.LayerStack`):
        in_channels (int): input feature size.
        out_channels (int): number of classes.
        hidden_channels (int, optional): hidden size. (default: ``256``)
        num_layers (int, optional): number of layers. (default: ``3``)
        aggr (str, optional): ``"mean"``, ``"sum"``, ``"max"`` or ``"min"``. (default: ``"mean"``)
        dropout (float, optional): dropout probability between layers. (default: ``0.5``)

    Shapes:
        - **input:** a graph or one block per layer, node features :math:`(|\mathcal{V}_{src}|, F_{in})`
        - **output:** logits :math:`(|\mathcal{V}_{dst}|, C)` of the last layer's destinations
    """

    dropout_at = "after"

    def __init__(self, in_channels: int, *, out_channels: int, hidden_channels: int = 256, num_layers: int = 3,
                 aggr: str = "mean", dropout: float = 0.5):
        super().__init__()
        check_positive(num_layers, "num_layers", "GraphSAGE")
        self.dropout = check_probability(dropout, "dropout", "GraphSAGE")
        widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.convs = torch.nn.ModuleList(SAGEConv(widths[i], widths[i + 1], aggr=aggr) for i in range(num_layers))
