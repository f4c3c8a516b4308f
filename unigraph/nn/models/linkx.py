"""LINKX (Lim et al., 2021): MLPs over the adjacency rows and the node features, PyG's interface."""
import math
from typing import Optional

import torch
from torch import Tensor
from torch.nn import BatchNorm1d, Parameter

from unigraph.message_passing import MessagePassing
from unigraph.nn.mlp import MLP


class SparseLinear(MessagePassing):
    r"""A linear layer whose input is the adjacency matrix itself: row :math:`i` of the output
    is :math:`\sum_{j \to i} w_{ji} \mathbf{W}_j + \mathbf{b}`, i.e. :math:`\mathbf{A}\mathbf{W}`
    without building :math:`\mathbf{A}` densely (``W`` has one row per node).

    Args:
        in_channels (int): number of nodes (rows of ``W``).
        out_channels (int): output width.
        bias (bool, optional): add a learnable bias. (default: ``True``)
    """

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True):
        super().__init__(aggr="add")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.weight = Parameter(torch.empty(in_channels, out_channels))
        if bias:
            self.bias = Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # Kaiming-uniform with a = sqrt(5) and fan = in_channels: bound 1 / sqrt(in_channels),
        # the same bound as the bias.
        bound = 1.0 / math.sqrt(self.in_channels)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def forward(self, edge_index, edge_weight: Optional[Tensor] = None) -> Tensor:
        out = self.propagate(edge_index, weight=self.weight, edge_weight=edge_weight)
        if self.bias is not None:
            out = out + self.bias
        return out

    def message(self, weight_j: Tensor, edge_weight: Optional[Tensor]) -> Tensor:
        return weight_j if edge_weight is None else edge_weight.view(-1, 1) * weight_j


class LINKX(torch.nn.Module):
    r"""LINKX from "Large Scale Learning on Non-Homophilous Graphs: New Benchmarks and Strong
    Simple Methods":

    .. math::
        \mathbf{H}_{\mathbf{A}} &= \textrm{MLP}_{\mathbf{A}}(\mathbf{A}) \\
        \mathbf{H}_{\mathbf{X}} &= \textrm{MLP}_{\mathbf{X}}(\mathbf{X}) \\
        \mathbf{Y} &= \textrm{MLP}_{f}\big(\sigma(\mathbf{W}[\mathbf{H}_{\mathbf{A}},
        \mathbf{H}_{\mathbf{X}}] + \mathbf{H}_{\mathbf{A}} + \mathbf{H}_{\mathbf{X}})\big)

    where :math:`\mathbf{W}[\cdot,\cdot]` is computed as two linear maps (``cat_lin1`` on
    :math:`\mathbf{H}_{\mathbf{A}}`, ``cat_lin2`` on :math:`\mathbf{H}_{\mathbf{X}}`). With
    ``x=None`` the node-feature branch is left out.

    Args:
        num_nodes (int): number of nodes.
        in_channels (int): node feature width, or ``-1`` to infer it at the first call.
        hidden_channels (int): hidden width.
        out_channels (int): output width.
        num_layers (int): layers of :math:`\textrm{MLP}_{f}`.
        num_edge_layers (int, optional): layers of :math:`\textrm{MLP}_{\mathbf{A}}`.
            (default: ``1``)
        num_node_layers (int, optional): layers of :math:`\textrm{MLP}_{\mathbf{X}}`.
            (default: ``1``)
        dropout (float, optional): dropout of :math:`\textrm{MLP}_{f}`'s hidden layers.
            (default: ``0.0``)

    Shapes:
        - **input:** node features :math:`(N, F_{in})` or ``None``, edge_index
          :math:`(2, |\mathcal{E}|)` or a sparse adj_t, edge_weight :math:`(|\mathcal{E}|)`
          (optional)
        - **output:** :math:`(N, F_{out})`
    """

    def __init__(self, num_nodes: int, in_channels: int, hidden_channels: int, out_channels: int,
                 num_layers: int, num_edge_layers: int = 1, num_node_layers: int = 1,
                 dropout: float = 0.0):
        super().__init__()
        self.num_nodes = num_nodes
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.num_edge_layers = num_edge_layers

        self.edge_lin = SparseLinear(num_nodes, hidden_channels)
        if num_edge_layers > 1:
            self.edge_norm = BatchNorm1d(hidden_channels)
            self.edge_mlp = MLP([hidden_channels] * num_edge_layers, dropout=0., act_first=True)
        else:
            self.edge_norm = None
            self.edge_mlp = None
        self.node_mlp = MLP([in_channels] + [hidden_channels] * num_node_layers, dropout=0.,
                            act_first=True)
        self.cat_lin1 = torch.nn.Linear(hidden_channels, hidden_channels)
        self.cat_lin2 = torch.nn.Linear(hidden_channels, hidden_channels)
        self.final_mlp = MLP([hidden_channels] * num_layers + [out_channels], dropout=dropout,
                             act_first=True)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-initialise every sub-module."""
        for module in (self.edge_lin, self.edge_norm, self.edge_mlp, self.node_mlp,
                       self.cat_lin1, self.cat_lin2, self.final_mlp):
            if module is not None:
                module.reset_parameters()

    def forward(self, x: Optional[Tensor], edge_index, edge_weight: Optional[Tensor] = None
                ) -> Tensor:
        """Node outputs; ``x`` may be ``None`` (structure only)."""
        out = self.edge_lin(edge_index, edge_weight)
        if self.edge_mlp is not None:
            out = self.edge_mlp(self.edge_norm(out.relu()))
        out = out + self.cat_lin1(out)
        if x is not None:
            if x.size(0) != out.size(0):
                raise ValueError(f"LINKX: x has {x.size(0)} rows but the graph has "
                                 f"{out.size(0)} nodes")
            x = self.node_mlp(x)
            out = out + x + self.cat_lin2(x)
        return self.final_mlp(out.relu())

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}(num_nodes={self.num_nodes}, "
                f"in_channels={self.in_channels}, out_channels={self.out_channels})")
