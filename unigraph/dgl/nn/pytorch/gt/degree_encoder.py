r"""DGL's ``DegreeEncoder``: Graphormer's learned degree embedding (https://arxiv.org/abs/2106.05234).

.. math::
    z_i = E^{-}\big[\min(d^{-}_i, D)\big] + E^{+}\big[\min(d^{+}_i, D)\big]

for ``direction="both"`` (in-degrees :math:`d^-` through ``encoder1``, out-degrees :math:`d^+`
through ``encoder2``); ``"in"``/``"out"`` embed one degree through ``encoder``. Degrees are
clamped into :math:`[0, D]`, ``D = max_degree``; index 0 is the padding row (zero, no gradient),
so zero-padded positions of a batch embed to zero. Parameters as DGL's: ``nn.Embedding`` tables
of ``max_degree + 1`` rows, PyTorch's default initialisation.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

DIRECTIONS = ("in", "out", "both")


class DegreeEncoder(nn.Module):
    """Args (DGL's): ``max_degree``, ``embedding_dim``, ``direction`` (``"in"``, ``"out"`` or
    ``"both"``).

    Shapes: ``degrees`` ``[B, N]`` (one direction) or ``[2, B, N]`` (in-degrees stacked on
    out-degrees, for ``"both"``), integers zero-padded per graph -> ``[B, N, embedding_dim]``.
    """

    def __init__(self, max_degree: int, embedding_dim: int, direction: str = "both"):
        super().__init__()
        if direction not in DIRECTIONS:
            raise ValueError(f"DegreeEncoder: direction must be one of {DIRECTIONS}, got {direction!r}")
        if max_degree < 0:
            raise ValueError(f"DegreeEncoder: max_degree must be >= 0, got {max_degree}")
        self.direction, self.max_degree = direction, max_degree
        if direction == "both":
            self.encoder1 = nn.Embedding(max_degree + 1, embedding_dim, padding_idx=0)
            self.encoder2 = nn.Embedding(max_degree + 1, embedding_dim, padding_idx=0)
        else:
            self.encoder = nn.Embedding(max_degree + 1, embedding_dim, padding_idx=0)

    def _check(self, degrees: Tensor) -> None:
        if not isinstance(degrees, Tensor) or degrees.is_floating_point() or degrees.is_complex():
            raise TypeError("DegreeEncoder: degrees must be an integer tensor")
        if self.direction == "both" and (degrees.dim() != 3 or degrees.shape[0] != 2):
            raise ValueError("DegreeEncoder(direction='both') takes in- and out-degrees stacked as [2, B, N], got "
                             f"shape {list(degrees.shape)}")
        if self.direction != "both" and degrees.dim() != 2:
            raise ValueError(f"DegreeEncoder(direction={self.direction!r}) takes degrees [B, N], got shape "
                             f"{list(degrees.shape)}")

    def forward(self, degrees: Tensor) -> Tensor:
        self._check(degrees)
        degrees = torch.clamp(degrees, min=0, max=self.max_degree)
        if self.direction == "both":
            return self.encoder1(degrees[0]) + self.encoder2(degrees[1])
        return self.encoder(degrees)
