r"""DGL's readouts: one row per graph of a batch (``dgl.batch``; a single graph is a batch of one).

With :math:`V_b` the nodes of graph :math:`b` and :math:`x_i` the feature of node :math:`i`:

.. math::
    \text{Sum/Avg/MaxPooling:}\quad r_b = \textstyle\sum / \operatorname{mean} / \max_{i \in V_b} x_i
    \qquad \text{WeightAndSum:}\quad r_b = \sum_{i \in V_b} \sigma(w^\top x_i + c)\, x_i

    \text{GlobalAttentionPooling:}\quad r_b = \sum_{i \in V_b} \operatorname{softmax}_{i \in V_b}
    \big(f_{gate}(x_i)\big)\, f_{feat}(x_i)

``SortPooling`` (the top ``k`` nodes by their largest feature), ``Set2Set`` (an LSTM over attention
readouts) and the set transformer (``SetTransformerEncoder``/``SetTransformerDecoder``, multi-head
attention within each graph) are described on their classes.

Nodes of one graph are consecutive rows (as ``dgl.batch`` lays them out); every segment operation
runs over ``graph.batch_num_nodes()`` with :mod:`unigraph.dgl.ops` (``segment_reduce``,
``segment_softmax``), and an empty graph reads out 0. The attention modules work on a padded
``[batch, longest graph, ...]`` layout, masking the padding. Parameter names, nesting and initial
values are DGL's, so a DGL ``state_dict`` loads.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import torch
from torch import Tensor, nn

from unigraph.dgl.base import DGLError
from unigraph.dgl.ops import segment_reduce, segment_softmax

__all__ = ["SumPooling", "AvgPooling", "MaxPooling", "SortPooling", "GlobalAttentionPooling", "Set2Set",
           "SetTransformerEncoder", "SetTransformerDecoder", "WeightAndSum"]


# ---------------------------------------------------------------------- helpers
def node_counts(graph: Any, feat: Tensor, layer: str) -> Tensor:
    """The node count of each graph of the batch (int64, on ``feat``'s device), after checking
    that ``feat`` has one row per node. Blocks are refused as DGL refuses ``block.ndata``: their
    source and destination nodes are two sets, so "the nodes of the graph" means neither."""
    if not hasattr(graph, "batch_num_nodes"):
        raise DGLError(f"{layer} expects a graph from unigraph.dgl, got {type(graph).__name__}")
    if getattr(graph, "is_block", False):
        raise DGLError(f"{layer} reads out the nodes of whole graphs; a block has separate source and destination "
                       "nodes (read out a homogeneous graph, or dgl.batch of graphs)")
    if not isinstance(feat, Tensor) or feat.dim() == 0:
        raise DGLError(f"{layer}: feat must be a tensor with one row per node, got {type(feat).__name__}"
                       + (" of 0 dimensions" if isinstance(feat, Tensor) else ""))
    counts = graph.batch_num_nodes().to(device=feat.device, dtype=torch.int64)
    if feat.shape[0] != int(counts.sum()):
        raise DGLError(f"{layer}: feat has {feat.shape[0]} rows but the graph has {int(counts.sum())} nodes")
    return counts


def _check_width(feat: Tensor, width: int, layer: str, name: str) -> None:
    if feat.dim() != 2 or feat.shape[1] != width:
        raise DGLError(f"{layer}: feat must be [num_nodes, {name}={width}], got {list(feat.shape)}")


def _valid(counts: Tensor, min_len: int = 0) -> Tensor:
    """``[batch, L]`` mask, True at the first ``counts[b]`` places of row ``b``; ``L`` is the
    largest count (at least ``min_len``)."""
    length = max(int(counts.max()) if counts.numel() else 0, min_len)
    return torch.arange(length, device=counts.device) < counts.unsqueeze(1)


def _pad(rows: Tensor, valid: Tensor, fill: float) -> Tensor:
    """Packed rows ``[sum(counts), *]`` -> ``[batch, L, *]`` (graph ``b``'s rows at the start of
    ``b``, ``fill`` after them); out of place, so autograd carries the rows' gradient."""
    padded = rows.new_full((*valid.shape, *rows.shape[1:]), fill)
    return padded.index_put((valid,), rows)


def _lengths(lengths: Any, device: torch.device) -> Tensor:
    return torch.as_tensor(lengths, dtype=torch.int64, device=device).reshape(-1)


# ---------------------------------------------------------------------- plain readouts
class _Pooling(nn.Module):
    """Shapes: ``feat`` ``[N, *]`` -> ``[batch_size, *]``."""

    reducer = "sum"

    def forward(self, graph, feat: Tensor) -> Tensor:
        counts = node_counts(graph, feat, type(self).__name__)
        return segment_reduce(counts, feat, reducer=self.reducer)


class SumPooling(_Pooling):
    reducer = "sum"


class AvgPooling(_Pooling):
    reducer = "mean"


class MaxPooling(_Pooling):
    reducer = "max"


class SortPooling(nn.Module):
    r"""SortPool (https://arxiv.org/abs/1801.03002 ; DGCNN): each node's features sorted in
    ascending order, then per graph the ``k`` nodes with the largest last (= largest) feature, in
    decreasing order, concatenated. A graph of fewer than ``k`` nodes is padded with zero rows
    (so is an infinite feature, as DGL does).

    .. math::
        r_b = \big\Vert_{t=1}^{k} \operatorname{sort}(x_{\pi_b(t)}), \qquad
        \pi_b = \operatorname{argsort}_{i \in V_b}^{\downarrow} \max_d x_{i,d}

    Args: ``k``. Shapes: ``feat`` ``[N, D]`` -> ``[batch_size, k * D]``.
    """

    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, graph, feat: Tensor) -> Tensor:
        counts = node_counts(graph, feat, "SortPooling")
        if feat.dim() != 2:
            raise DGLError(f"SortPooling: feat must be [num_nodes, D], got {list(feat.shape)}")
        feat = feat.sort(dim=-1)[0]
        padded = _pad(feat, _valid(counts, self.k), -math.inf)   # padding ranks after every real node
        order = padded[..., -1].topk(self.k, dim=-1)[1]
        top = padded.gather(1, order.unsqueeze(-1).expand(-1, -1, feat.shape[-1]))
        return top.masked_fill(top.isinf(), 0).reshape(-1, self.k * feat.shape[-1])


class GlobalAttentionPooling(nn.Module):
    r"""Gated attention readout (https://arxiv.org/abs/1511.05493):

    .. math::
        r_b = \sum_{i \in V_b} \operatorname{softmax}_{i \in V_b}\big(f_{gate}(x_i)\big)\, f_{feat}(x_i)

    Args: ``gate_nn`` (a module mapping ``[N, D]`` to ``[N, 1]`` scores), ``feat_nn`` (None: the
    features themselves). Shapes: ``feat`` ``[N, D]`` -> ``[batch_size, D']``; with
    ``get_attention=True`` also the softmaxed gate ``[N, 1]``.
    """

    def __init__(self, gate_nn: nn.Module, feat_nn: nn.Module | None = None):
        super().__init__()
        self.gate_nn = gate_nn
        self.feat_nn = feat_nn

    def forward(self, graph, feat: Tensor, get_attention: bool = False):
        counts = node_counts(graph, feat, "GlobalAttentionPooling")
        gate = self.gate_nn(feat)
        if gate.shape[-1] != 1:
            raise DGLError(f"GlobalAttentionPooling: gate_nn must output one score per node ([N, 1]), got "
                           f"{list(gate.shape)}")
        value = self.feat_nn(feat) if self.feat_nn is not None else feat
        gate = segment_softmax(counts, gate)
        readout = segment_reduce(counts, value * gate, reducer="sum")
        return (readout, gate) if get_attention else readout


class WeightAndSum(nn.Module):
    r"""A sum of the nodes weighted by a learned sigmoid gate:

    .. math::
        r_b = \sum_{i \in V_b} \sigma(w^\top x_i + c)\, x_i

    Args: ``in_feats``. Parameters as DGL's: ``atom_weighting`` = ``Sequential(Linear(in_feats,
    1), Sigmoid())``. Shapes: ``feats`` ``[N, in_feats]`` -> ``[batch_size, in_feats]``.
    """

    def __init__(self, in_feats: int):
        super().__init__()
        self.in_feats = in_feats
        self.atom_weighting = nn.Sequential(nn.Linear(in_feats, 1), nn.Sigmoid())

    def forward(self, g, feats: Tensor) -> Tensor:
        counts = node_counts(g, feats, "WeightAndSum")
        _check_width(feats, self.in_feats, "WeightAndSum", "in_feats")
        return segment_reduce(counts, feats * self.atom_weighting(feats), reducer="sum")


class Set2Set(nn.Module):
    r"""Set2Set (https://arxiv.org/abs/1511.06391): ``n_iters`` steps of an ``n_layers`` LSTM
    whose query attends over each graph's nodes; starting from :math:`q^*_0 = 0`,

    .. math::
        q_t = \mathrm{LSTM}(q^*_{t-1}), \quad
        \alpha_{i} = \operatorname{softmax}_{i \in V_b}(x_i \cdot q_{t,b}), \quad
        r_{t,b} = \sum_{i \in V_b} \alpha_{i} x_i, \quad q^*_t = q_t \Vert r_t

    Args: ``input_dim``, ``n_iters``, ``n_layers``. Parameters as DGL's: ``lstm`` =
    ``LSTM(2 * input_dim, input_dim, n_layers)``. Shapes: ``feat`` ``[N, input_dim]`` ->
    ``[batch_size, 2 * input_dim]``.
    """

    def __init__(self, input_dim: int, n_iters: int, n_layers: int):
        super().__init__()
        self.input_dim, self.output_dim = input_dim, 2 * input_dim
        self.n_iters, self.n_layers = n_iters, n_layers
        self.lstm = nn.LSTM(self.output_dim, self.input_dim, n_layers)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lstm.reset_parameters()

    def forward(self, graph, feat: Tensor) -> Tensor:
        counts = node_counts(graph, feat, "Set2Set")
        _check_width(feat, self.input_dim, "Set2Set", "input_dim")
        batch = counts.numel()
        state = (feat.new_zeros(self.n_layers, batch, self.input_dim),
                 feat.new_zeros(self.n_layers, batch, self.input_dim))
        q_star = feat.new_zeros(batch, self.output_dim)
        for _ in range(self.n_iters):   # a sequence of n_iters steps: each step reads the last
            q, state = self.lstm(q_star.unsqueeze(0), state)
            q = q.reshape(batch, self.input_dim)
            score = (feat * q.repeat_interleave(counts, dim=0)).sum(dim=-1, keepdim=True)
            readout = segment_reduce(counts, feat * segment_softmax(counts, score), reducer="sum")
            q_star = torch.cat([q, readout], dim=-1)
        return q_star

    def extra_repr(self) -> str:
        return f"n_iters={self.n_iters}"


# ---------------------------------------------------------------------- set transformer
class MultiHeadAttention(nn.Module):
    r"""Multi-head attention of the set transformer (https://arxiv.org/abs/1810.00825) from the
    rows of ``x`` (queries) to the rows of ``mem`` (keys and values), within each set of a batch,
    then two residual sublayers with layer norm:

    .. math::
        A^h = \operatorname{softmax}\Big(\frac{(x W_q^h)(m W_k^h)^\top}{\sqrt{d_{head}}}\Big), \quad
        x' = \mathrm{LN}_{in}\big(x + [A^1 m W_v^1 \Vert \dots \Vert A^H m W_v^H] W_o\big), \quad
        y = \mathrm{LN}_{inter}\big(x' + \mathrm{FFN}(x')\big)

    with :math:`\mathrm{FFN} = \mathrm{Linear} \circ \mathrm{Dropout}(dropouth) \circ \mathrm{ReLU}
    \circ \mathrm{Linear}`. As in DGL 2.1, ``droph``/``dropa`` are built but never applied (the
    FFN's dropout is the only one), so a model trains as it does there. Parameters as DGL's:
    ``proj_q``/``proj_k``/``proj_v`` ``[H * d_head, d_model]`` and ``proj_o``, no bias; ``ffn``;
    ``norm_in``, ``norm_inter``; every matrix Glorot uniform.

    Shapes: ``x`` ``[sum(lengths_x), d_model]``, ``mem`` ``[sum(lengths_mem), d_model]``, the sets
    laid one after another -> ``[sum(lengths_x), d_model]``.
    """

    def __init__(self, d_model: int, num_heads: int, d_head: int, d_ff: int, dropouth: float = 0.0,
                 dropouta: float = 0.0):
        super().__init__()
        self.d_model, self.num_heads, self.d_head, self.d_ff = d_model, num_heads, d_head, d_ff
        self.proj_q = nn.Linear(d_model, num_heads * d_head, bias=False)
        self.proj_k = nn.Linear(d_model, num_heads * d_head, bias=False)
        self.proj_v = nn.Linear(d_model, num_heads * d_head, bias=False)
        self.proj_o = nn.Linear(num_heads * d_head, d_model, bias=False)
        self.ffn = _feed_forward(d_model, d_ff, dropouth)
        self.droph = nn.Dropout(dropouth)
        self.dropa = nn.Dropout(dropouta)
        self.norm_in = nn.LayerNorm(d_model)
        self.norm_inter = nn.LayerNorm(d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for param in self.parameters():
            if param.dim() > 1:
                nn.init.xavier_uniform_(param)

    def forward(self, x: Tensor, mem: Tensor, lengths_x: Any, lengths_mem: Any) -> Tensor:
        lengths_x, lengths_mem = _lengths(lengths_x, x.device), _lengths(lengths_mem, x.device)
        if lengths_x.numel() != lengths_mem.numel():
            raise DGLError(f"MultiHeadAttention: {lengths_x.numel()} query sets for {lengths_mem.numel()} memory sets")
        for name, rows, lengths in (("x", x, lengths_x), ("mem", mem, lengths_mem)):
            if rows.dim() != 2 or rows.shape != (int(lengths.sum()), self.d_model):
                raise DGLError(f"MultiHeadAttention: {name} must be [{int(lengths.sum())}, d_model={self.d_model}] "
                               f"(one row per set member), got {list(rows.shape)}")
        valid_x, valid_mem = _valid(lengths_x), _valid(lengths_mem)
        heads = (self.num_heads, self.d_head)
        queries = _pad(self.proj_q(x).view(-1, *heads), valid_x, 0.0)      # [B, Lx, H, d_head]
        keys = _pad(self.proj_k(mem).view(-1, *heads), valid_mem, 0.0)     # [B, Lm, H, d_head]
        values = _pad(self.proj_v(mem).view(-1, *heads), valid_mem, 0.0)
        scores = torch.einsum("bxhd,byhd->bhxy", queries, keys) / math.sqrt(self.d_head)
        # a padded query, or a set with no memory, has only masked scores: softmax gives NaN, set to 0
        masked = ~(valid_x[:, None, :, None] & valid_mem[:, None, None, :])
        alpha = scores.masked_fill(masked, -math.inf).softmax(dim=-1).masked_fill(masked, 0.0)
        attended = torch.einsum("bhxy,byhd->bxhd", alpha, values).flatten(2)
        out = self.proj_o(attended)[valid_x]   # back to packed rows, set by set
        x = self.norm_in(x + out)
        return self.norm_inter(x + self.ffn(x))


def _feed_forward(d_model: int, d_ff: int, dropout: float) -> nn.Sequential:
    # DGL's layout: ffn.0 and ffn.3 are the Linear layers (state_dict names)
    return nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model))


class SetAttentionBlock(nn.Module):
    r"""SAB: :math:`\mathrm{MHA}(X, X)`, each set attending to itself. Parameters: ``mha``."""

    def __init__(self, d_model: int, num_heads: int, d_head: int, d_ff: int, dropouth: float = 0.0,
                 dropouta: float = 0.0):
        super().__init__()
        self.mha = MultiHeadAttention(d_model, num_heads, d_head, d_ff, dropouth=dropouth, dropouta=dropouta)

    def forward(self, feat: Tensor, lengths: Any) -> Tensor:
        return self.mha(feat, feat, lengths, lengths)


class InducedSetAttentionBlock(nn.Module):
    r"""ISAB: :math:`\mathrm{MHA}_1(X, \mathrm{MHA}_0(I, X))` through ``m`` learned inducing points
    :math:`I` (``inducing_points`` ``[m, d_model]``, Glorot uniform), linear in the set size.
    Parameters: ``inducing_points``, ``mha`` (a list of two)."""

    def __init__(self, m: int, d_model: int, num_heads: int, d_head: int, d_ff: int, dropouth: float = 0.0,
                 dropouta: float = 0.0):
        super().__init__()
        if m == 1:   # a softmax over one key is 1 whatever the score: W_q, W_k get no gradient
            warnings.warn("InducedSetAttentionBlock with m=1: the query and key projections of its attention get "
                          "no gradient and will not train", stacklevel=2)
        self.m, self.d_model = m, d_model
        self.inducing_points = nn.Parameter(torch.empty(m, d_model))
        self.mha = nn.ModuleList([MultiHeadAttention(d_model, num_heads, d_head, d_ff, dropouth=dropouth,
                                                     dropouta=dropouta) for _ in range(2)])
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.inducing_points)

    def forward(self, feat: Tensor, lengths: Any) -> Tensor:
        batch = len(lengths)
        per_set = [self.m] * batch
        memory = self.mha[0](self.inducing_points.repeat(batch, 1), feat, per_set, lengths)
        return self.mha[1](feat, memory, lengths, per_set)

    def extra_repr(self) -> str:
        return f"InducedVector: ({self.m}, {self.d_model})"


class PMALayer(nn.Module):
    r"""PMA: :math:`\mathrm{MHA}(S, \mathrm{FFN}(X))`, ``k`` learned seed vectors :math:`S`
    (``seed_vectors`` ``[k, d_model]``, Glorot uniform) attending to each set: ``k`` rows per set.
    Parameters: ``seed_vectors``, ``mha``, ``ffn`` (PyTorch's default initialization)."""

    def __init__(self, k: int, d_model: int, num_heads: int, d_head: int, d_ff: int, dropouth: float = 0.0,
                 dropouta: float = 0.0):
        super().__init__()
        if k == 1:
            warnings.warn("PMALayer with k=1: the query and key projections of its attention get no gradient and "
                          "will not train", stacklevel=2)
        self.k, self.d_model = k, d_model
        self.seed_vectors = nn.Parameter(torch.empty(k, d_model))
        self.mha = MultiHeadAttention(d_model, num_heads, d_head, d_ff, dropouth=dropouth, dropouta=dropouta)
        self.ffn = _feed_forward(d_model, d_ff, dropouth)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.seed_vectors)

    def forward(self, feat: Tensor, lengths: Any) -> Tensor:
        batch = len(lengths)
        return self.mha(self.seed_vectors.repeat(batch, 1), self.ffn(feat), [self.k] * batch, lengths)

    def extra_repr(self) -> str:
        return f"SeedVector: ({self.k}, {self.d_model})"


BLOCK_TYPES = ("sab", "isab")


class SetTransformerEncoder(nn.Module):
    r"""The set transformer's encoder (https://arxiv.org/abs/1810.00825): ``n_layers`` blocks, each
    graph of the batch one set of its nodes,

    .. math::
        \mathrm{SAB}(X) = \mathrm{MHA}(X, X) \qquad \text{or} \qquad
        \mathrm{ISAB}_m(X) = \mathrm{MHA}\big(X, \mathrm{MHA}(I_m, X)\big)

    (:class:`MultiHeadAttention`: attention, then residual + layer norm, FFN, residual + layer norm).

    Args (DGL's): ``d_model``, ``n_heads``, ``d_head``, ``d_ff``, ``n_layers`` (1), ``block_type``
    (``'sab'`` or ``'isab'``), ``m`` (the inducing points of ISAB; required there), ``dropouth``,
    ``dropouta``. Parameters: ``layers.<i>`` (:class:`SetAttentionBlock` or
    :class:`InducedSetAttentionBlock`).

    Shapes: ``feat`` ``[N, d_model]`` -> ``[N, d_model]``.
    """

    def __init__(self, d_model: int, n_heads: int, d_head: int, d_ff: int, n_layers: int = 1,
                 block_type: str = "sab", m: int | None = None, dropouth: float = 0.0, dropouta: float = 0.0):
        super().__init__()
        if block_type not in BLOCK_TYPES:
            raise DGLError(f"SetTransformerEncoder: block_type must be one of {BLOCK_TYPES}, got {block_type!r}")
        if block_type == "isab" and m is None:
            raise DGLError("SetTransformerEncoder: block_type='isab' needs m, the number of inducing points")
        self.n_layers, self.block_type, self.m, self.d_model = n_layers, block_type, m, d_model
        sizes = (d_model, n_heads, d_head, d_ff)
        drops = dict(dropouth=dropouth, dropouta=dropouta)
        self.layers = nn.ModuleList([SetAttentionBlock(*sizes, **drops) if block_type == "sab"
                                     else InducedSetAttentionBlock(m, *sizes, **drops) for _ in range(n_layers)])

    def forward(self, graph, feat: Tensor) -> Tensor:
        lengths = node_counts(graph, feat, "SetTransformerEncoder")
        _check_width(feat, self.d_model, "SetTransformerEncoder", "d_model")
        for layer in self.layers:
            feat = layer(feat, lengths)
        return feat


class SetTransformerDecoder(nn.Module):
    r"""The set transformer's decoder: pooling by multi-head attention to ``k`` rows per graph,
    then ``n_layers`` SABs over those ``k`` rows, flattened:

    .. math::
        r_b = \operatorname{vec}\big(\mathrm{SAB}^{n\_layers}(\mathrm{MHA}(S_k, \mathrm{FFN}(X_b)))\big)

    Args (DGL's): ``d_model``, ``num_heads``, ``d_head``, ``d_ff``, ``n_layers``, ``k``,
    ``dropouth``, ``dropouta``. Parameters: ``pma`` (:class:`PMALayer`), ``layers.<i>``
    (:class:`SetAttentionBlock`).

    Shapes: ``feat`` ``[N, d_model]`` -> ``[batch_size, k * d_model]``.
    """

    def __init__(self, d_model: int, num_heads: int, d_head: int, d_ff: int, n_layers: int, k: int,
                 dropouth: float = 0.0, dropouta: float = 0.0):
        super().__init__()
        self.n_layers, self.k, self.d_model = n_layers, k, d_model
        sizes = (d_model, num_heads, d_head, d_ff)
        drops = dict(dropouth=dropouth, dropouta=dropouta)
        self.pma = PMALayer(k, *sizes, **drops)
        self.layers = nn.ModuleList([SetAttentionBlock(*sizes, **drops) for _ in range(n_layers)])

    def forward(self, graph, feat: Tensor) -> Tensor:
        lengths = node_counts(graph, feat, "SetTransformerDecoder")
        _check_width(feat, self.d_model, "SetTransformerDecoder", "d_model")
        batch = lengths.numel()
        feat = self.pma(feat, lengths)
        for layer in self.layers:
            feat = layer(feat, [self.k] * batch)
        return feat.view(batch, self.k * self.d_model)
