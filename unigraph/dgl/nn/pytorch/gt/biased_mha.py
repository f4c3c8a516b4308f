r"""DGL's ``BiasedMHA``: dense multi-head attention with a graph attention bias (Graphormer,
https://arxiv.org/abs/2106.05234).

.. math::
    A^h = \operatorname{softmax}_j\Big(\frac{Q^h {K^h}^\top}{\sqrt{d}} \circ B^h\Big), \qquad
    y = W_o \big\Vert_h A^h V^h + b_o

per graph of the batch and head :math:`h`, with :math:`Q^h, K^h, V^h` the head's slices of the
projections ``q_proj``, ``k_proj``, ``v_proj`` of the node features, :math:`d` the head width,
:math:`\circ` ``+`` (``attn_bias_type="add"``) or :math:`\times` (``"mul"``), and the pairs of
``attn_mask`` set to :math:`-\infty` before the softmax. Dropout acts on :math:`A`. Parameters as
DGL's: Glorot uniform with gain :math:`2^{-1/2}` for the q/k/v weights (their biases PyTorch's
default), Glorot uniform and a zero bias for ``out_proj``.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

BIAS_TYPES = ("add", "mul")


class BiasedMHA(nn.Module):
    """Args (DGL's): ``feat_size`` (divisible by ``num_heads``), ``num_heads``, ``bias`` (of the
    four projections), ``attn_bias_type`` (``"add"`` or ``"mul"``), ``attn_drop``.

    Shapes: ``ndata`` ``[B, N, feat_size]`` (N: the largest graph, padded); ``attn_bias``
    ``[B, N, N, num_heads]`` (or broadcastable to it); ``attn_mask`` ``[B, N, N]``, True where a
    pair is ignored (keep one False per row, else the row is NaN) -> ``[B, N, feat_size]``.
    """

    def __init__(self, feat_size: int, num_heads: int, bias: bool = True, attn_bias_type: str = "add",
                 attn_drop: float = 0.1):
        super().__init__()
        if num_heads < 1 or feat_size % num_heads:
            raise ValueError(f"BiasedMHA: feat_size={feat_size} must be divisible by num_heads={num_heads}")
        if attn_bias_type not in BIAS_TYPES:
            raise ValueError(f"BiasedMHA: attn_bias_type must be one of {BIAS_TYPES}, got {attn_bias_type!r}")
        self.feat_size, self.num_heads = feat_size, num_heads
        self.head_dim = feat_size // num_heads
        self.scaling = self.head_dim ** -0.5
        self.attn_bias_type = attn_bias_type
        self.q_proj = nn.Linear(feat_size, feat_size, bias=bias)
        self.k_proj = nn.Linear(feat_size, feat_size, bias=bias)
        self.v_proj = nn.Linear(feat_size, feat_size, bias=bias)
        self.out_proj = nn.Linear(feat_size, feat_size, bias=bias)
        self.dropout = nn.Dropout(p=attn_drop)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight, gain=2 ** -0.5)
        nn.init.xavier_uniform_(self.out_proj.weight)
        if self.out_proj.bias is not None:
            nn.init.zeros_(self.out_proj.bias)

    def _check(self, ndata: Tensor, attn_bias: Tensor | None, attn_mask: Tensor | None) -> None:
        if ndata.dim() != 3 or ndata.shape[-1] != self.feat_size:
            raise ValueError(f"BiasedMHA: ndata must be [B, N, feat_size={self.feat_size}], got "
                             f"{list(ndata.shape)}")
        bsz, n, _ = ndata.shape
        scores = (bsz, n, n, self.num_heads)
        if attn_bias is not None:
            try:
                fits = torch.broadcast_shapes(attn_bias.shape, scores) == scores
            except RuntimeError:
                fits = False
            if not fits:
                raise ValueError(f"BiasedMHA: attn_bias must be [B, N, N, num_heads] = {list(scores)} (or "
                                 f"broadcast to it), got {list(attn_bias.shape)}")
        if attn_mask is not None and attn_mask.shape != scores[:3]:
            raise ValueError(f"BiasedMHA: attn_mask must be [B, N, N] = {list(scores[:3])}, got "
                             f"{list(attn_mask.shape)}")

    def _heads(self, x: Tensor) -> Tensor:
        """``[B, N, F]`` -> ``[B, H, N, F / H]``."""
        bsz, n, _ = x.shape
        return x.view(bsz, n, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, ndata: Tensor, attn_bias: Tensor | None = None, attn_mask: Tensor | None = None) -> Tensor:
        self._check(ndata, attn_bias, attn_mask)
        bsz, n, _ = ndata.shape
        q = self._heads(self.q_proj(ndata)) * self.scaling
        k, v = self._heads(self.k_proj(ndata)), self._heads(self.v_proj(ndata))
        scores = q @ k.transpose(-1, -2)                                     # [B, H, N, N]
        if attn_bias is not None:
            bias = attn_bias.expand(bsz, n, n, self.num_heads).permute(0, 3, 1, 2)
            scores = scores + bias if self.attn_bias_type == "add" else scores * bias
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask.to(torch.bool).unsqueeze(1), float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        out = (weights @ v).transpose(1, 2).reshape(bsz, n, self.feat_size)
        return self.out_proj(out)
