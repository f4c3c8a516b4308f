"""RECT-L (Wang et al., "Network Embedding with Completely-imbalanced Labels"), PyG's interface."""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Linear

from unigraph.nn.gcn_conv import GCNConv


class RECT_L(torch.nn.Module):
    r"""The supervised part of RECT: one GCN layer followed by a linear map back to the input
    width, trained to reconstruct class-semantic targets (the class centres of the input
    features, :meth:`get_semantic_labels`):

    .. math::
        \mathbf{H} = \mathrm{GCN}(\mathbf{X}, \mathbf{A}), \qquad
        \mathbf{Y} = \mathrm{drop}(\mathbf{H})\,\mathbf{W}^\top + \mathbf{b}

    :meth:`embed` returns :math:`\mathbf{H}` (without gradients).

    Args:
        in_channels (int): input feature width (also the output width).
        hidden_channels (int): embedding width.
        normalize (bool, optional): self loops and symmetric normalization in the GCN layer.
            (default: ``True``)
        dropout (float, optional): dropout on the embeddings. (default: ``0.0``)

    Shapes:
        - **input:** node features :math:`(N, F)`, edge_index :math:`(2, |\mathcal{E}|)` or a
          sparse adj_t, edge_weight :math:`(|\mathcal{E}|)` (optional)
        - **output:** :math:`(N, F)`
    """

    def __init__(self, in_channels: int, hidden_channels: int, normalize: bool = True,
                 dropout: float = 0.0):
        super().__init__()
        self.in_channels = in_channels
        self.hidden_channels = hidden_channels
        self.dropout = dropout
        self.conv = GCNConv(in_channels, hidden_channels, normalize=normalize)
        self.lin = Linear(hidden_channels, in_channels)
        self.reset_parameters()

    def reset_parameters(self):
        """Reset the GCN layer; Xavier-uniform weight and default bias for the linear map."""
        self.conv.reset_parameters()
        self.lin.reset_parameters()
        torch.nn.init.xavier_uniform_(self.lin.weight.data)

    def forward(self, x: Tensor, edge_index, edge_weight: Optional[Tensor] = None) -> Tensor:
        """Reconstructed semantic features of every node."""
        x = self.conv(x, edge_index, edge_weight)
        x = F.dropout(x, p=self.dropout, training=self.training)
        return self.lin(x)

    def embed(self, x: Tensor, edge_index, edge_weight: Optional[Tensor] = None) -> Tensor:
        """The GCN embeddings, computed without gradients."""
        with torch.no_grad():
            return self.conv(x, edge_index, edge_weight)

    def get_semantic_labels(self, x: Tensor, y: Tensor, mask: Tensor) -> Tensor:
        """For each node in ``mask``, the mean of ``x`` over the masked nodes of its class."""
        with torch.no_grad():
            y, x = y[mask], x[mask]
            num_classes = int(y.max()) + 1 if y.numel() > 0 else 0
            sums = x.new_zeros(num_classes, x.size(-1)).index_add_(0, y, x)
            counts = torch.bincount(y, minlength=num_classes).clamp(min=1).to(x.dtype)
            return (sums / counts.unsqueeze(-1))[y]

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.hidden_channels})"
