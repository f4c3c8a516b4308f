"""GAE: Kipf and Welling's graph auto-encoder for link prediction."""
from __future__ import annotations

import torch
from torch import Tensor

from unigraph.models.gcn import GCN
from unigraph.tasks.link.decoders import DotDecoder


class GAE(torch.nn.Module):
    r"""The graph auto-encoder of `"Variational Graph Auto-Encoders"
    <https://arxiv.org/abs/1611.07308>`_ (its non-variational GAE): an encoder gives node
    embeddings :math:`\mathbf{Z}`, a decoder scores node pairs (logits).

    .. math::
        \mathbf{Z} = \mathrm{GCN}(\mathbf{X}, \mathbf{A}), \qquad
        s_{uv} = \mathbf{z}_u^\top \mathbf{z}_v, \qquad p(A_{uv} = 1) = \sigma(s_{uv})

    Args:
        encoder (torch.nn.Module, optional): ``encoder(graph_or_blocks, x) -> Z``; default the
            paper's two-layer GCN (:func:`gae_encoder` with ``in_channels``).
        decoder (torch.nn.Module, optional): ``decoder(z, pairs) -> [B]``; default
            :class:`~unigraph.tasks.link.DotDecoder`.
        in_channels, hidden_channels, out_channels (int): widths of the default encoder
            (the paper's 32 and 16).

    Shapes:
        - **input:** a graph (or blocks), node features :math:`(|\mathcal{V}|, F)`, pairs ``[2, B]``
          (or a pair graph)
        - **output:** logits :math:`(B,)`
    """

    def __init__(self, encoder: torch.nn.Module | None = None, decoder: torch.nn.Module | None = None, *,
                 in_channels: int | None = None, hidden_channels: int = 32, out_channels: int = 16):
        super().__init__()
        if encoder is None:
            if in_channels is None:
                raise ValueError("GAE needs an encoder, or in_channels to build the default two-layer GCN")
            encoder = gae_encoder(in_channels, hidden_channels, out_channels)
        self.encoder = encoder
        self.decoder = decoder if decoder is not None else DotDecoder()

    def encode(self, g, x: Tensor) -> Tensor:
        return self.encoder(g, x)

    def decode(self, z: Tensor, pairs) -> Tensor:
        return self.decoder(z, pairs)

    def forward(self, g, x: Tensor, pairs) -> Tensor:
        return self.decode(self.encode(g, x), pairs)


def gae_encoder(in_channels: int, hidden_channels: int = 32, out_channels: int = 16) -> GCN:
    """The GAE paper's encoder: GCN (self-loops, symmetric normalization), ReLU, GCN; no dropout."""
    return GCN(in_channels, out_channels=out_channels, hidden_channels=hidden_channels, num_layers=2, dropout=0.0)
