r"""Link decoders: a score (a logit) for each node pair from the nodes' embeddings.

Pairs are a ``[2, B]`` tensor of node ids or a pair graph (DGL's ``pos_graph``/``neg_graph``);
either way the per-pair work is one g-SDDMM on :mod:`unigraph.ops`.

* :class:`DotDecoder` - :math:`s_{uv} = \mathbf{z}_u^\top \mathbf{z}_v` (GAE's inner product).
* :class:`MLPDecoder` - :math:`s_{uv} = \mathrm{MLP}(\mathbf{z}_u \odot \mathbf{z}_v)` (OGB's
  link predictor): Linear, ReLU, dropout, ..., Linear to one output.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph import ops
from unigraph.graph import Graph
from unigraph.nn.checks import check_positive, check_probability
from unigraph.nn.dropout import dropout


def pair_graph(z: Tensor, pairs) -> Graph:
    """``pairs`` as a graph over the rows of ``z`` (a ``[2, B]`` tensor is checked and wrapped)."""
    if not isinstance(z, Tensor) or z.dim() != 2:
        raise TypeError(f"z must be node embeddings [N, F], got {type(z).__name__} {list(getattr(z, 'shape', []))}")
    if isinstance(pairs, Graph):
        graph = pairs
    elif isinstance(pairs, Tensor):
        graph = Graph(pairs, num_nodes=z.shape[0])
    else:
        raise TypeError(f"pairs must be a [2, B] tensor of node ids or a unigraph.Graph, got {type(pairs).__name__}")
    if graph.num_src_nodes != z.shape[0] or graph.num_dst_nodes != z.shape[0]:
        raise ValueError(f"the pair graph has {graph.num_src_nodes} nodes but z has {z.shape[0]} rows")
    return graph


class DotDecoder(torch.nn.Module):
    """Inner-product decoder (no parameters): ``decoder(z, pairs) -> [B]`` logits."""

    def forward(self, z: Tensor, pairs) -> Tensor:
        return ops.gsddmm(pair_graph(z, pairs), "dot", z, z, "u", "v").view(-1)


class MLPDecoder(torch.nn.Module):
    """``num_layers`` linear layers on the element-wise product of the two embeddings.

    Args:
        in_channels (int): embedding width. hidden_channels (int): hidden width.
        num_layers (int, optional): linear layers (>= 1). (default: ``2``)
        dropout (float, optional): dropout between layers. (default: ``0.0``)
    """

    def __init__(self, in_channels: int, hidden_channels: int, num_layers: int = 2, dropout: float = 0.0):
        super().__init__()
        check_positive(num_layers, "num_layers", "MLPDecoder")
        self.dropout = check_probability(dropout, "dropout", "MLPDecoder")
        widths = [in_channels] + [hidden_channels] * (num_layers - 1) + [1]
        self.lins = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))

    def reset_parameters(self) -> None:
        for lin in self.lins:
            lin.reset_parameters()

    def forward(self, z: Tensor, pairs) -> Tensor:
        h = ops.gsddmm(pair_graph(z, pairs), "mul", z, z, "u", "v")
        for lin in self.lins[:-1]:
            h = dropout(F.relu(lin(h)), self.dropout, self.training)
        return self.lins[-1](h).view(-1)
