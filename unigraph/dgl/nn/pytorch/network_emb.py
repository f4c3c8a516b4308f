r"""DGL's network embeddings trained by skip-gram with negative sampling on random walks:
:class:`DeepWalk` (https://arxiv.org/abs/1403.6652) and :class:`MetaPath2Vec`
(https://dl.acm.org/doi/10.1145/3097983.3098036).

Both keep two tables, ``node_embed`` (:math:`u_v`, the centre role) and ``context_embed``
(:math:`c_v`), and minimise, over positive pairs :math:`(i, j)` that are close on a walk and
negative pairs :math:`(i, n)` drawn at random,

.. math::
    -\log\sigma\big(\mathrm{clip}(u_i^\top c_j)\big) - \sum_n \log\sigma\big(-\mathrm{clip}(u_i^\top c_n)\big)

(the exact reductions, clips and weights are in each class's docstring). The walks come from
:func:`unigraph.dgl.sampling.random_walk`; every random draw (walks, negatives) is torch's, so
``torch.manual_seed`` / ``dgl.seed`` fixes them.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from unigraph.dgl.base import DGLError
from unigraph.dgl.sampling import random_walk

__all__ = ["DeepWalk", "MetaPath2Vec"]


def _embedding_tables(module: nn.Module, num_nodes: int, emb_dim: int, sparse: bool) -> None:
    module.node_embed = nn.Embedding(num_nodes, emb_dim, sparse=sparse)
    module.context_embed = nn.Embedding(num_nodes, emb_dim, sparse=sparse)


def _reset_tables(module: nn.Module) -> None:
    """DGL's start: centre vectors uniform in +-1/emb_dim, context vectors zero."""
    bound = 1.0 / module.emb_dim
    nn.init.uniform_(module.node_embed.weight.data, -bound, bound)
    nn.init.zeros_(module.context_embed.weight.data)


def _check_ids(ids: Tensor, num_nodes: int, what: str) -> None:
    if not isinstance(ids, Tensor) or ids.is_floating_point() or ids.dtype == torch.bool:
        raise TypeError(f"{what} must be an integer tensor of node ids, got {getattr(ids, 'dtype', type(ids))}")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
        bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
        hint = " (-1: a walk that ended at a node without out-edges)" if bad == -1 else ""
        raise ValueError(f"{what} holds node id {bad}, outside 0..{num_nodes - 1}{hint}")


class DeepWalk(nn.Module):
    r"""DGL's ``DeepWalk``: node embeddings from uniform random walks of ``walk_length`` nodes.

    On a batch of walks, the positive pairs are every position :math:`i` with each position
    :math:`j \ne i`, :math:`|i - j| \le` ``window_size``, of the same walk; each pair
    :math:`(j, i)` also gives ``negative_size`` negative pairs :math:`(i, n)`. The loss is

    .. math::
        \operatorname{mean}_{(j,i)} -\log\sigma\big(\mathrm{clip}_6(u_{w_j}^\top c_{w_i})\big)
        + \lambda K \operatorname{mean}_{(i,n)} -\log\sigma\big(-\mathrm{clip}_6(u_{w_i}^\top c_n)\big)

    (``clip_6`` to [-6, 6], :math:`K` = ``negative_size``, :math:`\lambda` = ``neg_weight``).
    With ``fast_neg`` each :math:`c_n` is the context vector of a random position of the batch
    (drawn without replacement from ``2 * window_size * negative_size`` copies of the batch's
    positions, as DGL does); otherwise :math:`n` is drawn from all nodes with probability
    proportional to out-degree^0.75 (``neg_prob``).

    Args:
        g: the graph (homogeneous) whose nodes are embedded; :meth:`sample` walks it.
        emb_dim: embedding size. walk_length: nodes per walk (``>= window_size + 1``).
        window_size, neg_weight, negative_size, fast_neg: as above.
        sparse: sparse gradients for both embedding tables.

    Shapes: :meth:`sample` ``[B]`` seeds -> ``[B, walk_length]`` walks; :meth:`forward`
    ``[B, walk_length]`` walks -> scalar loss. Parameters ``node_embed``, ``context_embed``
    (``nn.Embedding(g.num_nodes(), emb_dim)``), as DGL's.
    """

    def __init__(self, g, emb_dim: int = 128, walk_length: int = 40, window_size: int = 5, neg_weight: float = 1,
                 negative_size: int = 5, fast_neg: bool = True, sparse: bool = True):
        super().__init__()
        if walk_length < window_size + 1:
            raise ValueError(f"DeepWalk needs walk_length >= window_size + 1, got {walk_length} and {window_size}")
        if window_size < 1 or negative_size < 0:
            raise ValueError(f"DeepWalk needs window_size >= 1 (no positive pair otherwise) and negative_size >= 0, "
                             f"got {window_size} and {negative_size}")
        self.g = g
        self.emb_dim, self.walk_length, self.window_size = emb_dim, walk_length, window_size
        self.neg_weight, self.negative_size, self.fast_neg = neg_weight, negative_size, fast_neg
        _embedding_tables(self, g.num_nodes(), emb_dim, sparse)
        self.reset_parameters()
        if not fast_neg:
            weight = g.out_degrees().double().pow(0.75)
            if not bool(weight.sum() > 0):
                raise DGLError("DeepWalk with fast_neg=False draws negatives by out-degree: the graph has no edges")
            self.register_buffer("neg_prob", (weight / weight.sum()).float(), persistent=False)
        src, dst = self._window_pairs(walk_length, window_size)
        self.register_buffer("idx_list_src", src, persistent=False)   # not in the state_dict, as in DGL
        self.register_buffer("idx_list_dst", dst, persistent=False)

    @staticmethod
    def _window_pairs(length: int, window: int) -> tuple[Tensor, Tensor]:
        """Positions ``(j, i)`` of one walk with ``0 < |i - j| <= window``, ordered by ``i``, then ``j``."""
        i = torch.arange(length).repeat_interleave(2 * window + 1)
        j = i + torch.arange(-window, window + 1).repeat(length)
        keep = (j >= 0) & (j < length) & (j != i)
        return j[keep], i[keep]

    def reset_parameters(self) -> None:
        _reset_tables(self)

    def sample(self, indices) -> Tensor:
        """One uniform walk of ``walk_length`` nodes from each of ``indices`` (a DataLoader's
        ``collate_fn``); ``-1`` after a node without out-edges (which :meth:`forward` refuses)."""
        return random_walk(self.g, indices, length=self.walk_length - 1)[0]

    def forward(self, batch_walk: Tensor) -> Tensor:
        """The loss of the class docstring on ``batch_walk`` ``[B, walk_length]``."""
        if not isinstance(batch_walk, Tensor) or batch_walk.dim() != 2 or batch_walk.shape[1] != self.walk_length:
            raise ValueError(f"batch_walk must be [batch, walk_length={self.walk_length}], "
                             f"got {tuple(getattr(batch_walk, 'shape', ()))}")
        _check_ids(batch_walk, self.node_embed.num_embeddings, "batch_walk")
        batch_walk = batch_walk.long()
        centre = self.node_embed(batch_walk).reshape(-1, self.emb_dim)
        context = self.context_embed(batch_walk).reshape(-1, self.emb_dim)
        base = (torch.arange(batch_walk.shape[0], device=batch_walk.device) * self.walk_length)[:, None]
        src = (base + self.idx_list_src).reshape(-1)
        dst = (base + self.idx_list_dst).reshape(-1)

        positive = (centre[src] * context[dst]).sum(1).clamp(-6, 6)
        neg_centre = centre[dst.repeat_interleave(self.negative_size)]
        negative = (neg_centre * self._negative_context(context, neg_centre.shape[0])).sum(1).clamp(-6, 6)
        pos_loss = -F.logsigmoid(positive).mean()
        neg_loss = -F.logsigmoid(-negative).mean() * self.negative_size * self.neg_weight
        return pos_loss + neg_loss

    def _negative_context(self, context: Tensor, count: int) -> Tensor:
        """``count`` context vectors for the negative pairs (class docstring)."""
        if self.fast_neg:
            positions = context.shape[0]
            copies = positions * self.negative_size * self.window_size * 2
            picked = torch.randperm(copies, device=context.device)[:count] % positions
            return context[picked]
        nodes = torch.multinomial(self.neg_prob, count, replacement=True)
        return self.context_embed(nodes)


class MetaPath2Vec(nn.Module):
    r"""DGL's ``MetaPath2Vec``: embeddings of every node of a heterograph from walks along
    ``metapath`` (one walk of ``len(metapath)`` steps per seed of the metapath's first node type).

    Nodes are numbered globally as ``dgl.to_homogeneous`` numbers them (node types in
    ``g.ntypes`` order, ``local_to_global_nid[ntype]``). :meth:`sample` turns each walk
    :math:`w_0 \dots w_T` into positive pairs ``(u, v)`` and draws ``negative_size`` negatives per
    pair from ``neg_prob``: over one walk from every seed, the number of walks that visit each node
    (a walk counts a node once, as DGL's count does), to the power 0.75, normalised.
    :meth:`forward` returns

    .. math::
        \operatorname{mean}_{(u,v)} \Big[-\log\sigma\big(\mathrm{clip}_{10}(u_u^\top c_v)\big)
        - \sum_{n} \log\sigma\big(-\mathrm{clip}_{10}(u_u^\top c_n)\big)\Big]

    The positive pairs are DGL's, window rule included: for position :math:`i`, the candidates are
    positions :math:`s \dots i + W - 1` (:math:`s = \max(i - W, 0)`, :math:`W` = ``window_size``)
    less the one at offset :math:`i` from :math:`s`; so beyond the first positions a node is
    paired with itself and the right side of the window is one shorter. Unlike DGL, pairs that
    touch a dead end's ``-1`` padding are dropped (DGL reads them as the last node of the type),
    and padding does not count in ``neg_prob``.

    Args:
        g: a heterograph; metapath: edge types, each starting where the previous one ends;
        window_size: ``<= len(metapath) + 1``; emb_dim, negative_size; sparse: sparse gradients.

    Shapes: :meth:`sample` ``[B]`` seeds -> ``pos_u`` ``[P]``, ``pos_v`` ``[P]``, ``neg_v``
    ``[P, negative_size]`` global ids; :meth:`forward` -> scalar loss. Parameters ``node_embed``,
    ``context_embed`` (``nn.Embedding(g.num_nodes(), emb_dim)``), as DGL's.
    """

    def __init__(self, g, metapath: Sequence, window_size: int, emb_dim: int = 128, negative_size: int = 5,
                 sparse: bool = True):
        super().__init__()
        if len(metapath) + 1 < window_size:
            raise ValueError(f"MetaPath2Vec needs window_size <= len(metapath) + 1, got {window_size} "
                             f"for a metapath of {len(metapath)} edge types")
        self.hg, self.metapath = g, list(metapath)
        self.emb_dim, self.window_size, self.negative_size = emb_dim, window_size, negative_size
        path = [g.to_canonical_etype(etype) for etype in self.metapath]
        self.node_metapath = [path[0][0]] + [cet[2] for cet in path]

        counts = torch.tensor([g.num_nodes(t) for t in g.ntypes])
        starts = torch.cumsum(counts, 0) - counts
        offset = dict(zip(g.ntypes, starts.tolist()))
        self.local_to_global_nid = {t: list(range(offset[t], offset[t] + int(n))) for t, n in zip(g.ntypes, counts)}
        self.register_buffer("_position_offset", torch.tensor([offset[t] for t in self.node_metapath]),
                             persistent=False)
        centre, context = self._window_pairs(len(self.node_metapath), window_size)
        self.register_buffer("_pair_centre", centre, persistent=False)
        self.register_buffer("_pair_context", context, persistent=False)

        seeds = torch.arange(g.num_nodes(self.node_metapath[0]))
        frequency = self._walks_visiting(self._global_walks(seeds), int(counts.sum())).double().pow(0.75)
        self.register_buffer("neg_prob", (frequency / frequency.sum()).float(), persistent=False)

        _embedding_tables(self, int(counts.sum()), emb_dim, sparse)
        self.reset_parameters()

    @staticmethod
    def _window_pairs(length: int, window: int) -> tuple[Tensor, Tensor]:
        """DGL's (centre, context) positions of a walk of ``length`` nodes (class docstring)."""
        pairs = [(i, start + k) for i in range(length)
                 for start in [max(i - window, 0)]
                 for k in range(min(i + window, length) - start) if k != i]
        centre, context = zip(*pairs) if pairs else ((), ())
        return torch.tensor(centre, dtype=torch.long), torch.tensor(context, dtype=torch.long)

    @staticmethod
    def _walks_visiting(walks: Tensor, num_nodes: int) -> Tensor:
        """How many of ``walks`` visit each node (a walk counts a node once, as DGL's count does)."""
        ordered = walks.sort(1).values
        first = torch.ones_like(ordered, dtype=torch.bool)
        first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        return torch.bincount(ordered[first & (ordered >= 0)], minlength=num_nodes)

    def _global_walks(self, seeds) -> Tensor:
        """Walks from ``seeds`` in global node ids (-1 kept for padding)."""
        traces = random_walk(self.hg, seeds, metapath=self.metapath)[0].long()
        return torch.where(traces >= 0, traces + self._position_offset.to(traces.device), -1)

    def reset_parameters(self) -> None:
        _reset_tables(self)

    def sample(self, indices) -> tuple[Tensor, Tensor, Tensor]:
        """``(pos_u, pos_v, neg_v)`` from one walk per seed in ``indices`` (class docstring)."""
        walks = self._global_walks(indices)
        u, v = walks[:, self._pair_centre].reshape(-1), walks[:, self._pair_context].reshape(-1)
        kept = (u >= 0) & (v >= 0)
        u, v = u[kept], v[kept]
        neg_v = torch.multinomial(self.neg_prob, u.numel() * self.negative_size, replacement=True)
        return u, v, neg_v.reshape(u.numel(), self.negative_size).to(u.device)

    def forward(self, pos_u: Tensor, pos_v: Tensor, neg_v: Tensor) -> Tensor:
        """The loss of the class docstring: ``pos_u``, ``pos_v`` ``[P]``, ``neg_v`` ``[P, K]``."""
        num_nodes = self.node_embed.num_embeddings
        for ids, name in ((pos_u, "pos_u"), (pos_v, "pos_v"), (neg_v, "neg_v")):
            _check_ids(ids, num_nodes, name)
        if pos_u.dim() != 1 or pos_v.shape != pos_u.shape or neg_v.dim() != 2 or neg_v.shape[0] != pos_u.shape[0]:
            raise ValueError(f"pos_u, pos_v must be [P] and neg_v [P, K], got {tuple(pos_u.shape)}, "
                             f"{tuple(pos_v.shape)}, {tuple(neg_v.shape)}")
        centre = self.node_embed(pos_u)
        positive = (centre * self.context_embed(pos_v)).sum(1).clamp(-10, 10)
        negative = torch.bmm(self.context_embed(neg_v), centre.unsqueeze(2)).squeeze(2).clamp(-10, 10)
        return (-F.logsigmoid(positive) - F.logsigmoid(-negative).sum(1)).mean()
