r"""Jumping knowledge (`"Representation Learning on Graphs with Jumping Knowledge Networks"
<https://arxiv.org/abs/1806.03536>`_): one representation per node from the outputs
:math:`\mathbf{x}^{(1)}, \ldots, \mathbf{x}^{(L)}` of every layer.

- ``"cat"``: :math:`[\mathbf{x}^{(1)} \Vert \ldots \Vert \mathbf{x}^{(L)}]`;
- ``"max"``: :math:`\max_l \mathbf{x}^{(l)}` elementwise;
- ``"lstm"``: :math:`\sum_l \alpha^{(l)} \mathbf{x}^{(l)}`, the weights a softmax over layers of a
  linear score (``att``) of a bidirectional LSTM (``lstm``) run across the layers.
"""
from __future__ import annotations

import torch
from torch import Tensor

MODES = ("cat", "max", "lstm")


class JumpingKnowledge(torch.nn.Module):
    """Args: ``mode``; for ``"lstm"`` also ``channels`` (features per layer) and ``num_layers``."""

    def __init__(self, mode: str, channels: int | None = None, num_layers: int | None = None):
        super().__init__()
        mode = mode.lower() if isinstance(mode, str) else mode
        if mode not in MODES:
            raise ValueError(f"JumpingKnowledge mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode, self.channels, self.num_layers = mode, channels, num_layers
        if mode == "lstm":
            if channels is None or num_layers is None:
                raise ValueError("JumpingKnowledge('lstm') needs channels and num_layers")
            hidden = (num_layers * channels) // 2
            self.lstm = torch.nn.LSTM(channels, hidden, bidirectional=True, batch_first=True)
            self.att = torch.nn.Linear(2 * hidden, 1)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.mode == "lstm":
            self.lstm.reset_parameters()
            self.att.reset_parameters()

    def forward(self, xs: list[Tensor]) -> Tensor:
        if self.mode == "cat":
            return torch.cat(xs, dim=-1)
        stacked = torch.stack(xs, dim=-1)
        if self.mode == "max":
            return stacked.max(dim=-1)[0]
        per_node = stacked.transpose(1, 2)                     # [N, L, C]
        scores = self.att(self.lstm(per_node)[0]).squeeze(-1)  # [N, L]
        alpha = torch.softmax(scores, dim=-1)
        return (per_node * alpha.unsqueeze(-1)).sum(dim=1)

    def __repr__(self) -> str:
        if self.mode == "lstm":
            return f"{type(self).__name__}({self.mode}, channels={self.channels}, layers={self.num_layers})"
        return f"{type(self).__name__}({self.mode})"
