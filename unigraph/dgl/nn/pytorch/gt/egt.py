r"""DGL's ``EGTLayer``: one layer of the Edge-augmented Graph Transformer
(https://arxiv.org/abs/2108.03348), dense over padded batches of graphs.

Per graph of the batch, with :math:`\hat x = \mathrm{LN}(x)`, :math:`\hat e = \mathrm{LN}(e)` and
head :math:`h` of width :math:`d`:

.. math::
    \hat A^h_{ij} = \operatorname{clip}_{[-5, 5]}\big(q_i^h \cdot k_j^h\big) + \hat e_{ij} W_E^h, \qquad
    G^h_{ij} = \sigma\big(\hat e_{ij} W_G^h + M_{ij}\big), \qquad
    \tilde A^h_{ij} = \operatorname{softmax}_j\big(\hat A^h_{ij} + M_{ij}\big)\, G^h_{ij}

.. math::
    u_i = \Big\Vert_h\, s_i^h \sum_j \tilde A^h_{ij} v_j^h, \quad
    s_i^h = \log\Big(1 + \sum_j G^h_{ij}\Big) \;(1 \text{ for the virtual nodes}), \qquad
    x' = y + \mathrm{FFN}_x(y), \quad y = x + u W_O

and, with ``edge_update``, :math:`e' = f + \mathrm{FFN}_e(f)`, :math:`f = e + \hat A W_{O_e}`
(each FFN: layer norm, linear, activation, linear, dropout). :math:`M` is the additive mask (0
where a pair counts, :math:`-\infty` or a large negative where it does not); the attention is not
scaled by :math:`1/\sqrt{d}`, as in DGL. ``q, k, v`` come from ``qkv_proj`` laid out as DGL's:
the ``3 * feat_size`` outputs read as ``[3 * d, H]`` (head fastest), and the heads' outputs are
concatenated the same way. The virtual nodes are the first ``num_virtual_nodes`` rows.
Parameters as DGL's (``mha_ln_h``, ``mha_ln_e``, ``edge_input``, ``qkv_proj``, ``gate``,
``node_output``, ``node_ffn``, and with ``edge_update`` ``edge_output``, ``edge_ffn``), with
PyTorch's default initialisation.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class EGTLayer(nn.Module):
    """Args (DGL's): ``feat_size`` (divisible by ``num_heads``), ``edge_feat_size``, ``num_heads``,
    ``num_virtual_nodes``, ``dropout`` (on the node and edge updates), ``attn_dropout`` (on
    :math:`\\tilde A`), ``activation`` (one module, shared by both FFNs as in DGL), ``edge_update``.

    Shapes: ``nfeat`` ``[B, N, feat_size]``, ``efeat`` ``[B, N, N, edge_feat_size]``, ``mask``
    ``[B, N, N]`` (additive: 0 kept, a large negative or ``-inf`` dropped) -> ``nfeat``
    ``[B, N, feat_size]``, and with ``edge_update`` also ``efeat`` ``[B, N, N, edge_feat_size]``.
    N counts the virtual nodes (first) and the padding.
    """

    def __init__(self, feat_size: int, edge_feat_size: int, num_heads: int, num_virtual_nodes: int,
                 dropout: float = 0, attn_dropout: float = 0, activation: nn.Module = nn.ELU(),
                 edge_update: bool = True):
        super().__init__()
        if num_heads < 1 or feat_size % num_heads:
            raise ValueError(f"EGTLayer: feat_size={feat_size} must be divisible by num_heads={num_heads}")
        if num_virtual_nodes < 0:
            raise ValueError(f"EGTLayer: num_virtual_nodes must be >= 0, got {num_virtual_nodes}")
        self.feat_size, self.edge_feat_size = feat_size, edge_feat_size
        self.num_heads, self.num_virtual_nodes = num_heads, num_virtual_nodes
        self.edge_update = edge_update
        self.dot_dim = feat_size // num_heads
        self.mha_ln_h = nn.LayerNorm(feat_size)
        self.mha_ln_e = nn.LayerNorm(edge_feat_size)
        self.edge_input = nn.Linear(edge_feat_size, num_heads)
        self.qkv_proj = nn.Linear(feat_size, feat_size * 3)
        self.gate = nn.Linear(edge_feat_size, num_heads)
        self.attn_dropout = nn.Dropout(attn_dropout)
        self.node_output = nn.Linear(feat_size, feat_size)
        self.mha_dropout_h = nn.Dropout(dropout)
        self.node_ffn = _ffn(feat_size, activation, dropout)
        if edge_update:
            self.edge_output = nn.Linear(num_heads, edge_feat_size)
            self.mha_dropout_e = nn.Dropout(dropout)
            self.edge_ffn = _ffn(edge_feat_size, activation, dropout)

    def forward(self, nfeat: Tensor, efeat: Tensor, mask: Tensor | None = None):
        self._check(nfeat, efeat, mask)
        batch, n, _ = nfeat.shape
        efeat_ln = self.mha_ln_e(efeat)
        qkv = self.qkv_proj(self.mha_ln_h(nfeat)).view(batch, n, 3 * self.dot_dim, self.num_heads)
        q, k, v = qkv.split(self.dot_dim, dim=2)                                  # [B, N, d, H] each
        scores = torch.einsum("bldh,bmdh->blmh", q, k).clamp(-5, 5) + self.edge_input(efeat_ln)
        gates = self.gate(efeat_ln)                                               # [B, N, N, H]
        logits = scores
        if mask is not None:
            gates = gates + mask.unsqueeze(-1)
            logits = scores + mask.unsqueeze(-1)
        gates = torch.sigmoid(gates)
        attention = self.attn_dropout(F.softmax(logits, dim=2) * gates)
        aggregated = torch.einsum("blmh,bmdh->bldh", attention, v)                # [B, N, d, H]
        aggregated = aggregated * self._degree_scalers(gates)
        node = self.mha_dropout_h(self.node_output(aggregated.reshape(batch, n, self.feat_size))) + nfeat
        node = node + self.node_ffn(node)
        if not self.edge_update:
            return node
        edge = self.mha_dropout_e(self.edge_output(scores)) + efeat
        return node, edge + self.edge_ffn(edge)

    def _degree_scalers(self, gates: Tensor) -> Tensor:
        """``log(1 + sum_j G_ij)`` per node and head ``[B, N, 1, H]``; 1 for the virtual nodes."""
        scalers = torch.log1p(gates.sum(dim=2, keepdim=True))
        virtual = torch.arange(gates.shape[1], device=gates.device) < self.num_virtual_nodes
        return torch.where(virtual.view(1, -1, 1, 1), torch.ones_like(scalers), scalers)

    def _check(self, nfeat, efeat, mask) -> None:
        if not isinstance(nfeat, Tensor) or nfeat.dim() != 3 or nfeat.shape[-1] != self.feat_size:
            raise ValueError(f"EGTLayer: nfeat must be [B, N, feat_size={self.feat_size}], got "
                             f"{list(nfeat.shape) if isinstance(nfeat, Tensor) else type(nfeat).__name__}")
        batch, n, _ = nfeat.shape
        want = [batch, n, n, self.edge_feat_size]
        if not isinstance(efeat, Tensor) or list(efeat.shape) != want:
            raise ValueError(f"EGTLayer: efeat must be [B, N, N, edge_feat_size] = {want}, got "
                             f"{list(efeat.shape) if isinstance(efeat, Tensor) else type(efeat).__name__}")
        if mask is not None and (not isinstance(mask, Tensor) or list(mask.shape) != [batch, n, n]):
            raise ValueError(f"EGTLayer: mask must be [B, N, N] = {[batch, n, n]} (additive: 0 or -inf), got "
                             f"{list(mask.shape) if isinstance(mask, Tensor) else type(mask).__name__}")
        if mask is not None and mask.dtype == torch.bool:
            raise ValueError("EGTLayer: mask is added to the scores (0 kept, -inf or a large negative dropped); "
                             "got a bool mask, convert it (e.g. mask.float() * -1e9)")


def _ffn(size: int, activation: nn.Module, dropout: float) -> nn.Sequential:
    """DGL's feed-forward block (its indices are the state_dict's: 0 norm, 1 and 3 linear)."""
    return nn.Sequential(nn.LayerNorm(size), nn.Linear(size, size), activation, nn.Linear(size, size),
                         nn.Dropout(dropout))
