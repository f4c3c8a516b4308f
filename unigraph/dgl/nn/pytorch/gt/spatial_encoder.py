r"""DGL's ``SpatialEncoder`` (Graphormer, https://arxiv.org/abs/2106.05234) and
``SpatialEncoder3d`` (Transformer-M, https://arxiv.org/abs/2210.01765): attention biases from
node-pair distances.

``SpatialEncoder``, from shortest-path distances :math:`\phi(i, j)` (-1: unreachable or padding):

.. math::
    b_{ij} = E\big[\operatorname{clamp}(\phi(i, j), -1, D) + 1\big] \in \mathbb{R}^{H}

row 0 (distance -1) is the zero padding row. The distances are the caller's, typically
``unigraph.dgl.shortest_dist`` of each graph, padded with -1 to the batch's largest graph.

``SpatialEncoder3d``, from coordinates :math:`r` and node types :math:`t`, with
:math:`x_{ij} = \gamma_{t_i t_j} \lVert r_i - r_j \rVert + \beta_{t_i t_j}` and :math:`K` Gaussian
kernels of centre :math:`\mu^k` and width :math:`\sigma^k = |s^k| + 0.01`:

.. math::
    \psi^k_{ij} = \frac{1}{\sqrt{2 \pi} \sigma^k} \exp\Big(-\frac{1}{2}
        \Big(\frac{x_{ij} - \mu^k}{\sigma^k}\Big)^2\Big), \qquad
    b_{ij} = W_2\, \mathrm{GELU}(W_1 \psi_{ij} + c_1) + c_2

:math:`\gamma_{t_i t_j}` (and :math:`\beta`) is the sum of a source-type entry and a target-type
entry of the ``gamma`` (``beta``) table. Without node types both entries are row 0, a padding
row (no gradient) that starts at gamma 1, beta 0, so :math:`x_{ij} = 2 \lVert r_i - r_j \rVert`
as in DGL. :math:`\pi` is DGL's 3.14159, kept for its exact numbers.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_PI = 3.14159  # DGL's constant (not math.pi): kept so the kernels equal DGL's


def _check_integer(t: Tensor, what: str) -> None:
    if not isinstance(t, Tensor) or t.is_floating_point() or t.is_complex():
        raise TypeError(f"{what} must be an integer tensor")


class SpatialEncoder(nn.Module):
    """Args (DGL's): ``max_dist`` (distances clamp into ``[-1, max_dist]``), ``num_heads``.

    Shapes: ``dist`` ``[B, N, N]`` integers, -1 for unreachable pairs and padding ->
    ``[B, N, N, num_heads]``. Parameter ``embedding_table`` ``[max_dist + 2, num_heads]``.
    """

    def __init__(self, max_dist: int, num_heads: int = 1):
        super().__init__()
        if max_dist < 0:
            raise ValueError(f"SpatialEncoder: max_dist must be >= 0, got {max_dist}")
        self.max_dist, self.num_heads = max_dist, num_heads
        self.embedding_table = nn.Embedding(max_dist + 2, num_heads, padding_idx=0)  # row 0: distance -1

    def forward(self, dist: Tensor) -> Tensor:
        _check_integer(dist, "SpatialEncoder: dist")
        return self.embedding_table(torch.clamp(dist, min=-1, max=self.max_dist) + 1)


class SpatialEncoder3d(nn.Module):
    """Args (DGL's): ``num_kernels`` (K), ``num_heads``, ``max_node_type`` (node types lie in
    ``[0, max_node_type)``; -1 marks a padded node).

    Shapes: ``coord`` ``[B, N, 3]``, ``node_type`` ``[B, N]`` integers (optional) ->
    ``[B, N, N, num_heads]``. Parameters as DGL's: ``means``, ``stds`` ``[K]`` (uniform on
    [0, 3]), ``linear_layer_1``, ``linear_layer_2``, ``gamma`` (ones) and ``beta`` (zeros)
    ``[2 * max_node_type + 3, 1]``: row 0 without node types, rows ``1 + (t + 1)`` for source types,
    rows ``max_node_type + 2 + (t + 1)`` for target types.
    """

    def __init__(self, num_kernels: int, num_heads: int = 1, max_node_type: int = 100):
        super().__init__()
        self.num_kernels, self.num_heads, self.max_node_type = num_kernels, num_heads, max_node_type
        self.means = nn.Parameter(torch.empty(num_kernels))
        self.stds = nn.Parameter(torch.empty(num_kernels))
        self.linear_layer_1 = nn.Linear(num_kernels, num_kernels)
        self.linear_layer_2 = nn.Linear(num_kernels, num_heads)
        self.gamma = nn.Embedding(2 * max_node_type + 3, 1, padding_idx=0)
        self.beta = nn.Embedding(2 * max_node_type + 3, 1, padding_idx=0)
        # drawn in DGL's order, so a seeded model starts equal to DGL's
        nn.init.uniform_(self.means, 0, 3)
        nn.init.uniform_(self.stds, 0, 3)
        nn.init.constant_(self.gamma.weight, 1)
        nn.init.constant_(self.beta.weight, 0)

    def _pair_types(self, node_type: Tensor | None, bsz: int, n: int, device) -> Tensor:
        """``[B, N, N, 2]`` rows of ``gamma``/``beta``: (source type's, target type's)."""
        if node_type is None:
            return torch.zeros((bsz, n, n, 2), dtype=torch.long, device=device)
        _check_integer(node_type, "SpatialEncoder3d: node_type")
        if node_type.shape != (bsz, n):
            raise ValueError(f"SpatialEncoder3d: node_type must be [B={bsz}, N={n}], got {list(node_type.shape)}")
        if node_type.numel() and (int(node_type.min()) < -1 or int(node_type.max()) >= self.max_node_type):
            raise ValueError(f"SpatialEncoder3d: node types must lie in [-1, max_node_type={self.max_node_type}), "
                             f"got values in [{int(node_type.min())}, {int(node_type.max())}]")
        source = node_type.unsqueeze(2).expand(bsz, n, n) + 2
        target = node_type.unsqueeze(1).expand(bsz, n, n) + self.max_node_type + 3
        return torch.stack([source, target], dim=-1)

    def forward(self, coord: Tensor, node_type: Tensor | None = None) -> Tensor:
        if coord.dim() != 3:
            raise ValueError(f"SpatialEncoder3d: coord must be [B, N, dims], got shape {list(coord.shape)}")
        bsz, n = coord.shape[:2]
        pairs = self._pair_types(node_type, bsz, n, coord.device)
        dist = torch.cdist(coord, coord, p=2.0).unsqueeze(-1)                            # [B, N, N, 1]
        x = self.gamma(pairs).sum(dim=-2) * dist + self.beta(pairs).sum(dim=-2)         # [B, N, N, 1]
        x = x.expand(-1, -1, -1, self.num_kernels)
        std = self.stds.abs() + 1e-2
        kernels = torch.exp(-0.5 * ((x - self.means) / std) ** 2) / ((2 * _PI) ** 0.5 * std)
        return self.linear_layer_2(F.gelu(self.linear_layer_1(kernels)))
