r"""DGL's ``JumpingKnowledge`` (https://arxiv.org/abs/1806.03536): one node representation from
the outputs :math:`h^{(1)}, \dots, h^{(L)}` of a model's ``L`` layers.

.. math::
    \text{cat:}\ h_i = h_i^{(1)} \Vert \dots \Vert h_i^{(L)} \qquad
    \text{max:}\ h_i = \max_l h_i^{(l)} \ \text{(per feature)} \qquad
    \text{lstm:}\ h_i = \sum_l \alpha_i^{(l)} h_i^{(l)}, \
    \alpha_i = \operatorname{softmax}_l\big(w^\top \mathrm{BiLSTM}(h_i^{(1..L)})_l + c\big)
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn

from unigraph.dgl.base import DGLError

MODES = ("cat", "max", "lstm")


class JumpingKnowledge(nn.Module):
    """Args (DGL's): ``mode`` (``'cat'``, ``'max'`` or ``'lstm'``); for ``'lstm'`` also
    ``in_feats`` (each layer's width) and ``num_layers`` (how many outputs are combined). Parameters
    (``'lstm'``) as DGL's: ``lstm``, a bidirectional batch-first LSTM of hidden size
    ``(num_layers * in_feats) // 2`` over the layers, and ``att`` = ``Linear(2 * hidden, 1)``.

    Shapes: ``feat_list``, ``L`` tensors ``[N, in_feats]`` -> ``[N, L * in_feats]`` (``'cat'``;
    widths may differ there) or ``[N, in_feats]``.
    """

    def __init__(self, mode: str = "cat", in_feats: int | None = None, num_layers: int | None = None):
        super().__init__()
        if mode not in MODES:
            raise DGLError(f"JumpingKnowledge: mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        if mode == "lstm":
            if in_feats is None or num_layers is None:
                raise DGLError("JumpingKnowledge: mode='lstm' needs in_feats and num_layers, got "
                               f"in_feats={in_feats}, num_layers={num_layers}")
            hidden = (num_layers * in_feats) // 2
            self.lstm = nn.LSTM(in_feats, hidden, bidirectional=True, batch_first=True)
            self.att = nn.Linear(2 * hidden, 1)

    def reset_parameters(self) -> None:
        if self.mode == "lstm":
            self.lstm.reset_parameters()
            self.att.reset_parameters()

    def forward(self, feat_list: Sequence[Tensor]) -> Tensor:
        if len(feat_list) == 0:
            raise DGLError("JumpingKnowledge: feat_list is empty")
        if self.mode == "cat":
            return torch.cat(list(feat_list), dim=-1)
        if self.mode == "max":   # max, not amax: on ties the gradient goes to one layer, as in DGL
            return torch.stack(list(feat_list), dim=-1).max(dim=-1)[0]
        stacked = torch.stack(list(feat_list), dim=1)   # [N, L, D]: the layers as a sequence per node
        scores = self.att(self.lstm(stacked)[0]).squeeze(-1)
        return (stacked * scores.softmax(dim=-1).unsqueeze(-1)).sum(dim=1)
