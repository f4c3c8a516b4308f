r"""DGL's ``GraphormerLayer``: a Transformer layer whose attention is :class:`BiasedMHA`
(Graphormer, https://arxiv.org/abs/2106.05234).

Post-norm (``norm_first=False``, the default):

.. math::
    h = \mathrm{LN}_1\big(x + \mathrm{Drop}(\mathrm{MHA}(x, B, M))\big), \qquad
    y = \mathrm{LN}_2\big(h + \mathrm{FFN}(h)\big)

pre-norm (``norm_first=True``): :math:`h = x + \mathrm{Drop}(\mathrm{MHA}(\mathrm{LN}_1 x, B, M))`,
:math:`y = h + \mathrm{FFN}(\mathrm{LN}_2 h)`; with
:math:`\mathrm{FFN} = \mathrm{Drop} \circ W_2 \circ \mathrm{Drop} \circ \sigma \circ W_1`.
Parameters as DGL's: ``attn`` (a :class:`BiasedMHA`), ``ffn`` (``ffn.0`` and ``ffn.3`` the
linears), ``attn_layer_norm`` (:math:`\mathrm{LN}_1`), ``ffn_layer_norm`` (:math:`\mathrm{LN}_2`).
"""
from __future__ import annotations

from torch import Tensor, nn

from unigraph.dgl.nn.pytorch.gt.biased_mha import BiasedMHA


class GraphormerLayer(nn.Module):
    """Args (DGL's): ``feat_size``, ``hidden_size`` (of the feed-forward network), ``num_heads``,
    ``attn_bias_type`` (``"add"``/``"mul"``), ``norm_first``, ``dropout``, ``attn_dropout``,
    ``activation`` (a module, default ReLU).

    Shapes: ``nfeat`` ``[B, N, feat_size]``, ``attn_bias`` ``[B, N, N, num_heads]``, ``attn_mask``
    ``[B, N, N]`` (True: ignored pair) -> ``[B, N, feat_size]``.
    """

    def __init__(self, feat_size: int, hidden_size: int, num_heads: int, attn_bias_type: str = "add",
                 norm_first: bool = False, dropout: float = 0.1, attn_dropout: float = 0.1,
                 activation: nn.Module | None = None):
        super().__init__()
        self.norm_first = norm_first
        self.attn = BiasedMHA(feat_size=feat_size, num_heads=num_heads, attn_bias_type=attn_bias_type,
                              attn_drop=attn_dropout)
        self.ffn = nn.Sequential(
            nn.Linear(feat_size, hidden_size),
            nn.ReLU() if activation is None else activation,
            nn.Dropout(p=dropout),
            nn.Linear(hidden_size, feat_size),
            nn.Dropout(p=dropout),
        )
        self.dropout = nn.Dropout(p=dropout)
        self.attn_layer_norm = nn.LayerNorm(feat_size)
        self.ffn_layer_norm = nn.LayerNorm(feat_size)

    def _sublayer(self, x: Tensor, norm: nn.LayerNorm, body) -> Tensor:
        """The residual block ``body`` with its layer norm before (pre-norm) or after (post-norm)."""
        if self.norm_first:
            return x + body(norm(x))
        return norm(x + body(x))

    def forward(self, nfeat: Tensor, attn_bias: Tensor | None = None, attn_mask: Tensor | None = None) -> Tensor:
        h = self._sublayer(nfeat, self.attn_layer_norm, lambda x: self.dropout(self.attn(x, attn_bias, attn_mask)))
        return self._sublayer(h, self.ffn_layer_norm, self.ffn)
