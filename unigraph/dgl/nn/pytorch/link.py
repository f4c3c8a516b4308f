r"""DGL's link-prediction heads: scores for (source, destination) pairs of node representations.

.. math::
    \text{EdgePredictor:}\ s_{uv} = W\,\mathrm{op}(h_u, h_v) + b, \quad
    \mathrm{op} \in \{h_u \cdot h_v,\ \cos(h_u, h_v),\ h_u \odot h_v,\ h_u \Vert h_v\}

    \text{TransE:}\ s = -\lVert h_{head} + r - h_{tail} \rVert_p \qquad
    \text{TransR:}\ s = -\lVert h_{head} M_r + r - h_{tail} M_r \rVert_p

(``W``, ``b`` only with ``in_feats`` and ``out_feats``; :math:`r` and :math:`M_r` learned per
relation type.) Knowledge-graph embeddings: TransE https://papers.nips.cc/paper/5071 , TransR
https://ojs.aaai.org/index.php/AAAI/article/view/9491 .
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from unigraph.dgl.base import DGLError

OPS = ("dot", "cos", "ele", "cat")


class EdgePredictor(nn.Module):
    """Args (DGL's): ``op`` (``'dot'``, ``'cos'``, ``'ele'``, ``'cat'``), ``in_feats``,
    ``out_feats`` (both given: a ``linear`` layer maps the combination to ``out_feats``; else
    ``linear`` is None), ``bias``.

    Shapes: ``h_src``, ``h_dst`` ``[N, in_feats]`` -> ``[N, out_feats]``, or without ``linear``
    ``[N, 1]`` (dot, cos), ``[N, in_feats]`` (ele), ``[N, 2 * in_feats]`` (cat).
    """

    def __init__(self, op: str, in_feats: int | None = None, out_feats: int | None = None, bias: bool = False):
        super().__init__()
        if op not in OPS:
            raise DGLError(f"EdgePredictor: op must be one of {OPS}, got {op!r}")
        self.op = op
        self.linear = None
        if in_feats is not None and out_feats is not None:
            width = {"dot": 1, "cos": 1, "cat": 2 * in_feats}.get(op, in_feats)   # the combination's width
            self.linear = nn.Linear(width, out_feats, bias=bias)

    def reset_parameters(self) -> None:
        if self.linear is not None:
            self.linear.reset_parameters()

    def forward(self, h_src: Tensor, h_dst: Tensor) -> Tensor:
        if self.op in ("dot", "cos") and (h_src.dim() != 2 or h_src.shape != h_dst.shape):
            raise DGLError(f"EdgePredictor(op={self.op!r}): h_src and h_dst must both be [N, D], got "
                           f"{list(h_src.shape)} and {list(h_dst.shape)}")
        if self.op == "dot":
            h = (h_src * h_dst).sum(dim=-1, keepdim=True)
        elif self.op == "cos":
            h = F.cosine_similarity(h_src, h_dst, dim=1).unsqueeze(-1)
        elif self.op == "ele":
            h = h_src * h_dst
        else:
            h = torch.cat([h_src, h_dst], dim=-1)
        return self.linear(h) if self.linear is not None else h


def _check_triples(h_head: Tensor, h_tail: Tensor, rels: Tensor, width: int, layer: str) -> None:
    if h_head.shape != h_tail.shape or h_head.dim() != 2 or h_head.shape[1] != width:
        raise DGLError(f"{layer}: h_head and h_tail must both be [N, {width}], got {list(h_head.shape)} and "
                       f"{list(h_tail.shape)}")
    if rels.shape != (h_head.shape[0],):
        raise DGLError(f"{layer}: rels must hold one relation id per pair ([{h_head.shape[0]}]), got "
                       f"{list(rels.shape)}")


class TransE(nn.Module):
    """Args (DGL's): ``num_rels``, ``feats``, ``p`` (the norm, 1). Parameters as DGL's:
    ``rel_emb`` = ``Embedding(num_rels, feats)``.

    Shapes: ``h_head``, ``h_tail`` ``[N, feats]``, ``rels`` ``[N]`` (int) -> ``[N]``.
    """

    def __init__(self, num_rels: int, feats: int, p: float = 1):
        super().__init__()
        self.rel_emb = nn.Embedding(num_rels, feats)
        self.p = p

    def reset_parameters(self) -> None:
        self.rel_emb.reset_parameters()

    def forward(self, h_head: Tensor, h_tail: Tensor, rels: Tensor) -> Tensor:
        _check_triples(h_head, h_tail, rels, self.rel_emb.embedding_dim, "TransE")
        return -torch.linalg.vector_norm(h_head + self.rel_emb(rels) - h_tail, ord=self.p, dim=-1)


class TransR(nn.Module):
    """Args (DGL's): ``num_rels``, ``rfeats`` (the relation space), ``nfeats`` (the node
    features), ``p`` (the norm, 1). Parameters as DGL's: ``rel_emb`` = ``Embedding(num_rels,
    rfeats)``, ``rel_project`` = ``Embedding(num_rels, nfeats * rfeats)`` (each row a row-major
    ``[nfeats, rfeats]`` projection :math:`M_r`).

    Shapes: ``h_head``, ``h_tail`` ``[N, nfeats]``, ``rels`` ``[N]`` (int) -> ``[N]``.
    """

    def __init__(self, num_rels: int, rfeats: int, nfeats: int, p: float = 1):
        super().__init__()
        self.rel_emb = nn.Embedding(num_rels, rfeats)
        self.rel_project = nn.Embedding(num_rels, nfeats * rfeats)
        self.rfeats, self.nfeats, self.p = rfeats, nfeats, p

    def reset_parameters(self) -> None:
        self.rel_emb.reset_parameters()
        self.rel_project.reset_parameters()

    def forward(self, h_head: Tensor, h_tail: Tensor, rels: Tensor) -> Tensor:
        _check_triples(h_head, h_tail, rels, self.nfeats, "TransR")
        project = self.rel_project(rels).view(-1, self.nfeats, self.rfeats)
        # (h_head - h_tail) M_r once instead of projecting both sides: the same value, one product fewer
        moved = torch.einsum("nf,nfr->nr", h_head - h_tail, project) + self.rel_emb(rels)
        return -torch.linalg.vector_norm(moved, ord=self.p, dim=-1)
