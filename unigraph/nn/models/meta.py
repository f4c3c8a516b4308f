"""MetaLayer: one graph-network block (edge, node and global updates), PyG's interface."""
from typing import Optional, Tuple

import torch
from torch import Tensor


class MetaLayer(torch.nn.Module):
    r"""A graph-network block (Battaglia et al., "Relational inductive biases, deep learning,
    and graph networks") built from three user models, each optional, applied in order:

    .. math::
        \mathbf{e}'_{ij} &= \phi^{e}(\mathbf{x}_i, \mathbf{x}_j, \mathbf{e}_{ij},
        \mathbf{u}, \mathbf{b}_i) \\
        \mathbf{X}' &= \phi^{v}(\mathbf{X}, \mathbf{E}, \mathbf{E}', \mathbf{u}, \mathbf{b}) \\
        \mathbf{u}' &= \phi^{u}(\mathbf{X}', \mathbf{E}, \mathbf{E}', \mathbf{u}, \mathbf{b})

    For an edge :math:`(j \to i)` stored as ``edge_index[:, k] = (j, i)``, the edge model gets
    ``src = x[edge_index[0]]``, ``dst = x[edge_index[1]]`` and the batch of the source node.

    Args:
        edge_model (torch.nn.Module, optional): called as
            ``edge_model(src, dst, edge_attr, u, edge_batch)``; returns the new edge features.
        node_model (torch.nn.Module, optional): called as
            ``node_model(x, edge_index, edge_attr, u, batch)``; returns the new node features.
        global_model (torch.nn.Module, optional): called as
            ``global_model(x, edge_index, edge_attr, u, batch)``; returns the new global features.

    Shapes:
        - **input:** node features :math:`(N, F_x)`, edges :math:`(2, E)`, edge features
          :math:`(E, F_e)` (optional), global features :math:`(B, F_u)` (optional), batch
          vector :math:`(N)` (optional)
        - **output:** the tuple ``(x, edge_attr, u)``, each updated where its model is given
    """

    def __init__(self, edge_model: Optional[torch.nn.Module] = None,
                 node_model: Optional[torch.nn.Module] = None,
                 global_model: Optional[torch.nn.Module] = None):
        super().__init__()
        self.edge_model = edge_model
        self.node_model = node_model
        self.global_model = global_model
        self.reset_parameters()

    def reset_parameters(self):
        """Re-initialise every sub-model that knows how to."""
        for model in (self.node_model, self.edge_model, self.global_model):
            if hasattr(model, "reset_parameters"):
                model.reset_parameters()

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Optional[Tensor] = None,
                u: Optional[Tensor] = None, batch: Optional[Tensor] = None
                ) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
        """Apply the edge, node and global models in turn; return ``(x, edge_attr, u)``."""
        if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise ValueError("MetaLayer: edge_index must be a [2, E] index tensor")
        src, dst = edge_index[0], edge_index[1]
        if self.edge_model is not None:
            edge_batch = None if batch is None else batch[src]
            edge_attr = self.edge_model(x[src], x[dst], edge_attr, u, edge_batch)
        if self.node_model is not None:
            x = self.node_model(x, edge_index, edge_attr, u, batch)
        if self.global_model is not None:
            u = self.global_model(x, edge_index, edge_attr, u, batch)
        return x, edge_attr, u

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}(\n"
                f"  edge_model={self.edge_model},\n"
                f"  node_model={self.node_model},\n"
                f"  global_model={self.global_model}\n"
                f")")
