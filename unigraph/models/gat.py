"""GAT: Velickovic et al.'s attention node classifier."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from unigraph.models.layer_stack import LayerStack
from unigraph.nn.checks import check_positive, check_probability
from unigraph.nn.gat_conv import GATConv


class GAT(LayerStack):
    r"""The node classifier of `"Graph Attention Networks" <https://arxiv.org/abs/1710.10903>`_:
    :class:`~unigraph.nn.GATConv` layers of ``heads`` heads of ``hidden_channels`` (concatenated)
    with ELU between them, and a last layer of ``out_heads`` heads that are averaged. Dropout before
    every layer (input features included) and on the attention weights.

    .. math::
        \mathbf{h}_i^{(1)} = \big\Vert_{k=1}^{K} \mathrm{ELU}\Big(\sum_{j \in \mathcal{N}(i) \cup \{i\}}
        \alpha_{ij}^{k} \mathbf{W}^{k} \mathbf{x}_j\Big), \qquad
        \mathbf{z}_i = \frac{1}{K'} \sum_{k=1}^{K'} \sum_{j \in \mathcal{N}(i) \cup \{i\}}
        \alpha_{ij}^{k} \mathbf{W}^{k} \mathbf{h}_j^{(1)}

    Bag-of-words input features (a sparse tensor, or a dense CPU tensor that is mostly zeros, which
    is converted once and cached) are projected with a sparse product and dropped out sparsely (see
    :mod:`unigraph.nn.projection`).

    Args (all but ``in_channels`` by keyword, see :class:`~unigraph.models.layer_stack.LayerStack`):
        in_channels (int): input feature size.
        out_channels (int): number of classes.
        hidden_channels (int, optional): features *per head* in hidden layers (PyG's GAT model divides
            its ``hidden_channels`` among the heads instead). (default: ``8``)
        heads (int, optional): heads in hidden layers. (default: ``8``)
        num_layers (int, optional): number of layers. (default: ``2``)
        out_heads (int, optional): heads of the last layer, averaged. (default: ``1``)
        dropout (float, optional): feature dropout probability. (default: ``0.6``)
        attention_dropout (float, optional): attention dropout probability; ``None`` means
            ``dropout``. (default: ``None``)
        negative_slope (float, optional): LeakyReLU slope. (default: ``0.2``)
        residual (bool, optional): residual connections in every layer. (default: ``False``)

    Shapes:
        - **input:** a graph (or one block per layer), node features :math:`(|\mathcal{V}|, F_{in})`
          (dense or sparse)
        - **output:** logits :math:`(|\mathcal{V}|, C)` (the last block's destinations for blocks)
    """

    dropout_at = "before"
    activation = staticmethod(F.elu)

    def __init__(self, in_channels: int, *, out_channels: int, hidden_channels: int = 8, heads: int = 8,
                 num_layers: int = 2, out_heads: int = 1, dropout: float = 0.6, attention_dropout: float | None = None,
                 negative_slope: float = 0.2, residual: bool = False):
        super().__init__()
        check_positive(num_layers, "num_layers", "GAT")
        self.dropout = check_probability(dropout, "dropout", "GAT")
        attention_dropout = self.dropout if attention_dropout is None else attention_dropout
        common = dict(dropout=attention_dropout, negative_slope=negative_slope, residual=residual)
        convs = []
        width = in_channels
        for _ in range(num_layers - 1):
            convs.append(GATConv(width, hidden_channels, heads=heads, concat=True, **common))
            width = hidden_channels * heads
        convs.append(GATConv(width, out_channels, heads=out_heads, concat=False, **common))
        self.convs = torch.nn.ModuleList(convs)
