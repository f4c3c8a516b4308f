r"""DGL's ``SAGEConv``: GraphSAGE (https://arxiv.org/abs/1706.02216).

.. math::
    h_{N(i)} = \operatorname{aggregate}_{j \in N(i)} e_{ji} h_j, \qquad
    h_i' = \sigma\big(\mathrm{norm}(W_{self} h_i + W_{neigh} h_{N(i)} + b)\big)

Aggregators: ``mean``; ``gcn`` (:math:`W_{neigh} (h_i + \sum_j h_j) / (d_i + 1)`, no self
weight); ``pool`` (:math:`\max_j \mathrm{ReLU}(W_{pool} h_j + b_{pool})`); ``lstm`` (an LSTM over
each node's neighbours in edge id order, DGL's degree-bucketed mailboxes). Parameters as DGL's:
``fc_self`` (carries the bias, except for ``gcn``, which has ``bias``), ``fc_neigh``, ``fc_pool``,
``lstm``; Glorot uniform with the ReLU gain, zero biases.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from unigraph import function as fn
from unigraph import graph_compat, ops
from unigraph.dgl.base import DGLError
from unigraph.dgl.nn.pytorch.utils import check_graph, expand_as_pair, plain_linear
from unigraph.message_passing import dgl_style
from unigraph.nn.projection import linear

AGGREGATORS = ("mean", "gcn", "pool", "lstm")


def _is_prefix(part: Tensor, whole: Tensor) -> bool:
    """Whether ``part`` is ``whole[:len(part)]`` (the same memory, rows and strides)."""
    return (part.dim() == whole.dim() == 2 and part.shape[1] == whole.shape[1] and part.shape[0] <= whole.shape[0]
            and part.stride() == whole.stride() and part.data_ptr() == whole.data_ptr()
            and part.dtype == whole.dtype and part.device == whole.device)


class _SourcesAndPrefix(torch.autograd.Function):
    """``(x, x[:n])`` as one operation: the block's source features and its destinations' (the
    first ``n`` rows). Used through two separate ops, autograd would give ``x[:n]`` a gradient of
    ``x``'s full size (zero-filled, then added to the aggregation's): here the destinations'
    gradient is added into the first ``n`` rows of the sources' gradient, in place (the sources'
    gradient is the fresh output of the aggregation's backward, used by nothing else), or out of
    place under ``create_graph``."""

    @staticmethod
    def forward(ctx, x: Tensor, n: int):
        ctx.n = n
        ctx.shape = x.shape
        return x.view_as(x), x[:n]

    @staticmethod
    def backward(ctx, grad_all: Tensor | None, grad_prefix: Tensor | None):
        n = ctx.n
        if grad_all is None:
            grad_all = grad_prefix.new_zeros(ctx.shape)
        if grad_prefix is None:
            return grad_all, None
        if torch.is_grad_enabled() or not grad_all.is_contiguous() or grad_all._base is not None:
            return torch.cat([grad_all[:n] + grad_prefix, grad_all[n:]]), None
        grad_all[:n] += grad_prefix
        return grad_all, None


class SAGEConv(nn.Module):
    """Args (DGL's): ``in_feats`` (an int or a ``(src, dst)`` pair), ``out_feats``,
    ``aggregator_type``, ``feat_drop``, ``bias``, ``norm`` (a callable on the output),
    ``activation``.

    Shapes: ``feat`` ``[N_src, in]`` (or a pair) -> ``[N_dst, out_feats]``; ``edge_weight`` ``[E]``.
    """

    def __init__(self, in_feats, out_feats: int, aggregator_type: str, feat_drop: float = 0.0, bias: bool = True,
                 norm: Callable | None = None, activation: Callable | None = None):
        super().__init__()
        if aggregator_type not in AGGREGATORS:
            raise DGLError(f"aggregator_type must be one of {AGGREGATORS}, got {aggregator_type!r}")
        self._in_src_feats, self._in_dst_feats = in_feats if isinstance(in_feats, tuple) else (in_feats, in_feats)
        self._out_feats, self._aggre_type = out_feats, aggregator_type
        self.norm, self.activation = norm, activation
        self.feat_drop = nn.Dropout(feat_drop)
        if aggregator_type == "pool":
            self.fc_pool = nn.Linear(self._in_src_feats, self._in_src_feats)
        if aggregator_type == "lstm":
            self.lstm = nn.LSTM(self._in_src_feats, self._in_src_feats, batch_first=True)
        self.fc_neigh = nn.Linear(self._in_src_feats, out_feats, bias=False)
        if aggregator_type != "gcn":
            self.fc_self = nn.Linear(self._in_dst_feats, out_feats, bias=bias)
        elif bias:
            self.bias = nn.Parameter(torch.zeros(out_feats))
        else:
            self.register_buffer("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        if self._aggre_type == "pool":
            nn.init.xavier_uniform_(self.fc_pool.weight, gain=gain)
        if self._aggre_type == "lstm":
            self.lstm.reset_parameters()
        if self._aggre_type != "gcn":
            nn.init.xavier_uniform_(self.fc_self.weight, gain=gain)
        nn.init.xavier_uniform_(self.fc_neigh.weight, gain=gain)

    def _aggregate(self, graph, h: Tensor, reduce: str, edge_weight: Tensor | None) -> Tensor:
        if edge_weight is None:
            return ops.gspmm(graph, "copy_u", reduce, h)
        return ops.gspmm(graph, "u_mul_e", reduce, h, edge_weight)

    def _lstm(self, graph, h: Tensor, edge_weight: Tensor | None) -> Tensor:
        def reducer(nodes):
            mailbox = nodes.mailbox["m"]
            state = mailbox.new_zeros((1, mailbox.shape[0], self._in_src_feats))
            _, (last, _) = self.lstm(mailbox, (state, state))
            return {"neigh": last.squeeze(0)}

        with graph_compat.local_scope(graph):
            graph.srcdata["h"] = h
            if edge_weight is None:
                message = fn.copy_u("h", "m")
            else:
                graph.edata["_edge_weight"] = edge_weight
                message = fn.u_mul_e("h", "_edge_weight", "m")
            dgl_style.update_all(graph, message, reducer)
            if "neigh" in graph.dstdata:
                return graph.dstdata["neigh"]
            return h.new_zeros((graph.num_dst_nodes, self._in_src_feats))

    def _mean(self, graph, feat_src: Tensor, feat_dst: Tensor, project_first: bool,
              edge_weight: Tensor | None) -> Tensor:
        """``fc_self(h_dst) + fc_neigh(mean_j h_j)`` with the projections on pooled memory (no page
        faults for a large block's outputs each step) and, aggregating first, the neighbours'
        projection accumulated into the root term in place (``addmm_``: no separate sum over the
        ``N_dst x out`` output, forward or backward)."""
        w_neigh, w_self, bias = self.fc_neigh.weight, self.fc_self.weight, self.fc_self.bias
        if feat_dst is not feat_src and _is_prefix(feat_dst, feat_src):   # a block: destinations first
            feat_src, feat_dst = _SourcesAndPrefix.apply(feat_src, feat_dst.shape[0])
        if project_first:
            h_neigh = self._aggregate(graph, linear(feat_src, w_neigh), "mean", edge_weight)
            return linear(feat_dst, w_self, bias) + h_neigh
        h_neigh = self._aggregate(graph, feat_src, "mean", edge_weight)
        root = linear(feat_dst, w_self, bias)
        if h_neigh.dim() != 2 or root.dim() != 2 or torch.is_autocast_enabled(root.device.type):
            return root + F.linear(h_neigh, w_neigh)   # (in-place ops are not autocast)
        return root.addmm_(h_neigh, w_neigh.t())         # root is this call's own fresh tensor

    def forward(self, graph, feat, edge_weight: Tensor | None = None) -> Tensor:
        graph = check_graph(graph, "SAGEConv")
        if isinstance(feat, tuple):
            feat_src, feat_dst = self.feat_drop(feat[0]), self.feat_drop(feat[1])
        else:
            feat_src, feat_dst = expand_as_pair(self.feat_drop(feat), graph)
        if edge_weight is not None and edge_weight.shape[0] != graph.num_edges:
            raise DGLError(f"edge_weight has {edge_weight.shape[0]} rows for {graph.num_edges} edges")
        # project first when that narrows what the aggregation moves (an exact reordering: linear maps)
        project_first = self._in_src_feats > self._out_feats
        fused = self._aggre_type == "mean" and plain_linear(self.fc_neigh) and plain_linear(self.fc_self)
        if fused:
            rst = self._mean(graph, feat_src, feat_dst, project_first, edge_weight)
        elif self._aggre_type == "mean":
            h_neigh = self._aggregate(graph, self.fc_neigh(feat_src) if project_first else feat_src, "mean", edge_weight)
            if not project_first:
                h_neigh = self.fc_neigh(h_neigh)
        elif self._aggre_type == "gcn":
            if feat_src.shape != feat_dst.shape and not isinstance(feat, tuple) and not graph.is_bipartite:
                raise DGLError("the gcn aggregator needs source and destination features of one shape")
            src = self.fc_neigh(feat_src) if project_first else feat_src
            if not project_first or isinstance(feat, tuple):
                dst = self.fc_neigh(feat_dst) if project_first else feat_dst
            elif feat_dst is feat_src:  # one tensor for both sides: projected once, as DGL does
                dst = src
            else:  # a block: its destinations are the first rows of its sources (expand_as_pair)
                dst = src[: graph.num_dst_nodes]
            summed = self._aggregate(graph, src, "sum", edge_weight)
            degrees = graph.in_degrees().to(summed).unsqueeze(-1)
            h_neigh = (summed + dst) / (degrees + 1)
            if not project_first:
                h_neigh = self.fc_neigh(h_neigh)
        elif self._aggre_type == "pool":
            h_neigh = self.fc_neigh(self._aggregate(graph, F.relu(self.fc_pool(feat_src)), "max", edge_weight))
        else:
            h_neigh = self.fc_neigh(self._lstm(graph, feat_src, edge_weight))
        if self._aggre_type == "gcn":
            rst = h_neigh + self.bias if self.bias is not None else h_neigh
        elif not fused:
            rst = self.fc_self(feat_dst) + h_neigh
        if self.activation is not None:
            rst = self.activation(rst)
        return self.norm(rst) if self.norm is not None else rst
