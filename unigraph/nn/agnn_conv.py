"""AGNNConv: propagation weighted by the softmax of scaled cosine similarities (Thekumparampil et al.)."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from unigraph import ops
from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import node_inputs
from unigraph.nn.projection import dense
from unigraph.nn.layer_inputs import pyg_call
from unigraph.self_loops import with_self_loops


class AGNNConv(MessagePassing):
    r"""The graph attentional propagation layer from the `"Attention-based Graph Neural Network
    for Semi-Supervised Learning" <https://arxiv.org/abs/1803.03735>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \mathbf{P} \mathbf{X}, \qquad
        P_{i,j} = \frac{\exp(\beta \cdot \cos(\mathbf{x}_i, \mathbf{x}_j))}
        {\sum_{k \in \mathcal{N}(i) \cup \{ i \}} \exp(\beta \cdot \cos(\mathbf{x}_i, \mathbf{x}_k))}

    with a learned (or fixed) scalar :math:`\beta`. The cosines are one ``dot`` g-SDDMM of the
    row-normalized features, normalized by ``edge_softmax``; the propagation is one ``u_mul_e``
    g-SpMM (``propagate``).

    Args:
        requires_grad (bool, optional): learn :math:`\beta` (else a buffer fixed at 1).
            (default: ``True``)
        add_self_loops (bool, optional): replace self-loops by one per node. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``,
            default ``"add"``; ``flow``, ...), as PyG's.

    Call forms: ``conv(g, x)`` or PyG's ``conv(x, edge_index)`` with ``edge_index`` a tensor, a
    ``SparseTensor`` or a torch sparse ``adj_t`` (its values are ignored, as in PyG).

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F)`
        - **output:** node features :math:`(|\mathcal{V}|, F)`
    """

    resolves_flow = True

    def __init__(self, requires_grad: bool = True, add_self_loops: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        self.requires_grad = requires_grad
        self.add_self_loops = add_self_loops
        if requires_grad:
            self.beta = Parameter(torch.empty(1))
        else:
            self.register_buffer("beta", torch.ones(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.requires_grad:
            with torch.no_grad():
                self.beta.fill_(1.0)

    def forward(self, x: Tensor, edge_index: Any) -> Tensor:
        who = "AGNNConv"
        call, g = pyg_call(self, who, x, edge_index)
        g, x_src, x_dst = node_inputs(g, call.x, who)
        if x_dst is None:
            raise ValueError(f"{who} needs destination features: pass (x_src, x_dst) with x_dst a tensor")
        if x_src.dim() != 2 or x_dst.dim() != 2 or x_src.shape[1] != x_dst.shape[1]:
            raise ValueError(f"{who} expects node features [num_nodes, F] (the same F on both sides), got "
                             f"{list(x_src.shape)} and {list(x_dst.shape)}")
        if self.add_self_loops:
            g = with_self_loops(g).graph
        x_src, x_dst = dense(x_src), dense(x_dst)
        norm_src = F.normalize(x_src, p=2.0, dim=-1)
        norm_dst = norm_src if x_dst is x_src else F.normalize(x_dst, p=2.0, dim=-1)
        cosine = ops.gsddmm(g, "dot", norm_src, norm_dst, "u", "v").squeeze(-1)   # [E]
        alpha = ops.edge_softmax(g, self.beta * cosine)
        return self.propagate(g, x=x_src, alpha=alpha)

    def message(self, x_j: Tensor, alpha: Tensor) -> Tensor:
        return alpha.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
