"""PMLP (Yang et al., 2023): an MLP in training, a GNN at inference, PyG's interface."""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.nn.simple_conv import SimpleConv


class PMLP(torch.nn.Module):
    r"""The Propagational MLP from "Graph Neural Networks are Inherently Good Generalizers:
    Insights by Bridging GNNs and MLPs". Each layer is

    .. math::
        \mathbf{H}^{(l+1)} = \mathrm{drop}\big(\mathrm{ReLU}(\mathrm{BN}(
        P(\mathbf{H}^{(l)} \mathbf{W}^{(l)\top}) + \mathbf{b}^{(l)}))\big)

    (the last layer stops after the bias), where in training :math:`P` is the identity (a plain
    MLP) and in evaluation :math:`P` is the mean over each node's in-neighbours and itself.
    ``BN`` is a batch norm without affine parameters or running statistics.

    Args:
        in_channels (int): input width.
        hidden_channels (int): hidden width.
        out_channels (int): output width.
        num_layers (int): number of linear layers (at least 2).
        dropout (float, optional): dropout on the hidden layers. (default: ``0.``)
        norm (bool, optional): apply the batch norm. (default: ``True``)
        bias (bool, optional): learn biases. (default: ``True``)

    Shapes:
        - **input:** node features :math:`(N, F_{in})`, edge_index :math:`(2, |\mathcal{E}|)`
          (needed in evaluation mode)
        - **output:** :math:`(N, F_{out})`
    """

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int, dropout: float = 0., norm: bool = True, bias: bool = True):
        super().__init__()
        if in_channels < 1:
            raise ValueError(f"PMLP: in_channels must be a positive width (lazy -1 is not "
                             f"supported), got {in_channels}")
        if num_layers < 2:
            raise ValueError(f"PMLP: num_layers must be at least 2, got {num_layers}")
        self.in_channels = in_channels
        self.hidden_channels = hidden_channels
        self.out_channels = out_channels
        self.num_layers = num_layers
        self.dropout = dropout
        self.bias = bias

        widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.lins = torch.nn.ModuleList(
            torch.nn.Linear(a, b, bias=bias) for a, b in zip(widths[:-1], widths[1:]))
        self.norm = None
        if norm:
            self.norm = torch.nn.BatchNorm1d(hidden_channels, affine=False,
                                             track_running_stats=False)
        self.conv = SimpleConv(aggr="mean", combine_root="self_loop")
        self.reset_parameters()

    def reset_parameters(self):
        """Xavier-uniform weights (gain 1.414), zero biases."""
        for lin in self.lins:
            torch.nn.init.xavier_uniform_(lin.weight, gain=1.414)
            if self.bias:
                torch.nn.init.zeros_(lin.bias)

    def forward(self, x: Tensor, edge_index: Optional[Tensor] = None) -> Tensor:
        """MLP forward in training; propagates after each linear map in evaluation."""
        if not self.training and edge_index is None:
            raise ValueError(f"'edge_index' needs to be present during inference in "
                             f"'{self.__class__.__name__}'")
        last = self.num_layers - 1
        for i, lin in enumerate(self.lins):
            # The bias is added after propagation, so the weight is applied on its own.
            x = x @ lin.weight.t()
            if not self.training:
                x = self.conv(x, edge_index)
            if self.bias:
                x = x + lin.bias
            if i != last:
                if self.norm is not None:
                    x = self.norm(x)
                x = F.dropout(x.relu(), p=self.dropout, training=self.training)
        return x

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"num_layers={self.num_layers})")
