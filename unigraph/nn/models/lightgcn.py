"""LightGCN (He et al., 2020) for link prediction and recommendation, PyG's interface."""
from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Embedding, ModuleList
from torch.nn.modules.loss import _Loss

from unigraph.call_forms import is_sparse_adjacency
from unigraph.nn.lg_conv import LGConv


def _pairs_of(adj) -> Tensor:
    """The ``[2, E]`` index pairs stored in an adjacency (tensor, SparseTensor, torch sparse)."""
    if not is_sparse_adjacency(adj):
        return adj
    if not isinstance(adj, Tensor):  # torch_sparse.SparseTensor
        row, col, _ = adj.coo()
        return torch.stack([row, col], dim=0).long()
    if adj.layout == torch.sparse_coo:
        return adj._indices().detach().long()  # as stored, no coalescing (PyG does the same)
    if adj.layout == torch.sparse_csr:
        rows = torch.repeat_interleave(torch.arange(adj.size(0), device=adj.device),
                                       adj.crow_indices().diff())
        return torch.stack([rows, adj.col_indices()], dim=0).detach().long()
    if adj.layout == torch.sparse_csc:
        cols = torch.repeat_interleave(torch.arange(adj.size(1), device=adj.device),
                                       adj.ccol_indices().diff())
        return torch.stack([adj.row_indices(), cols], dim=0).detach().long()
    raise ValueError(f"LightGCN: unsupported sparse layout {adj.layout}")


class LightGCN(torch.nn.Module):
    r"""LightGCN from "LightGCN: Simplifying and Powering Graph Convolution Network for
    Recommendation": learnable node embeddings :math:`\mathbf{x}^{(0)}` are propagated by
    :class:`~unigraph.nn.LGConv` layers and the final embedding is their weighted sum

    .. math::
        \mathbf{x}_i = \sum_{l=0}^{L} \alpha_l \mathbf{x}^{(l)}_i, \qquad
        \mathbf{x}^{(l+1)}_i = \sum_{j \in \mathcal{N}(i)}
        \frac{1}{\sqrt{\deg(i)\deg(j)}}\mathbf{x}^{(l)}_j .

    A pair :math:`(i, j)` is scored by :math:`\mathbf{x}_i^\top \mathbf{x}_j`. Link prediction
    uses :meth:`link_pred_loss` / :meth:`predict_link`; recommendation uses
    :meth:`recommendation_loss` (BPR) / :meth:`recommend`. The graph used to propagate is
    ``edge_index``; the pairs scored are ``edge_label_index``.

    Args:
        num_nodes (int): number of nodes (rows of the embedding table).
        embedding_dim (int): embedding size.
        num_layers (int): number of :class:`LGConv` layers :math:`L`.
        alpha (float or torch.Tensor, optional): the weights :math:`\alpha_l`: one scalar for
            every layer, or a vector of size :math:`L + 1`. ``None`` means
            :math:`1 / (L + 1)`. (default: ``None``)
        **kwargs (optional): passed on to every :class:`LGConv`.

    Shapes:
        - **input:** edge_index :math:`(2, |\mathcal{E}|)` or a sparse adjacency,
          edge_label_index :math:`(2, |\mathcal{E}'|)` (optional), edge_weight
          :math:`(|\mathcal{E}|)` (optional)
        - **output:** scores :math:`(|\mathcal{E}'|)`
    """

    def __init__(self, num_nodes: int, embedding_dim: int, num_layers: int,
                 alpha: Optional[Union[float, Tensor]] = None, **kwargs):
        super().__init__()
        self.num_nodes = num_nodes
        self.embedding_dim = embedding_dim
        self.num_layers = num_layers
        self.register_buffer("alpha", self._alpha_vector(alpha, num_layers))
        self.embedding = Embedding(num_nodes, embedding_dim)
        self.convs = ModuleList([LGConv(**kwargs) for _ in range(num_layers)])
        self.reset_parameters()

    @staticmethod
    def _alpha_vector(alpha, num_layers: int) -> Tensor:
        if alpha is None:
            alpha = 1. / (num_layers + 1)
        if isinstance(alpha, Tensor):
            if alpha.dim() != 1 or alpha.size(0) != num_layers + 1:
                raise ValueError(f"LightGCN: alpha must have num_layers + 1 = {num_layers + 1} "
                                 f"entries, got shape {tuple(alpha.shape)}")
            return alpha
        return torch.tensor([alpha] * (num_layers + 1))

    def reset_parameters(self):
        """Xavier-uniform embeddings; reset the convs."""
        torch.nn.init.xavier_uniform_(self.embedding.weight)
        for conv in self.convs:
            conv.reset_parameters()

    def get_embedding(self, edge_index, edge_weight: Optional[Tensor] = None) -> Tensor:
        """The final node embeddings :math:`\\sum_l \\alpha_l \\mathbf{x}^{(l)}`."""
        x = self.embedding.weight
        out = x * self.alpha[0]
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index, edge_weight)
            out = out + x * self.alpha[i + 1]
        return out

    def forward(self, edge_index, edge_label_index: Optional[Tensor] = None,
                edge_weight: Optional[Tensor] = None) -> Tensor:
        """Scores of the pairs in ``edge_label_index`` (default: the edges of ``edge_index``)."""
        if edge_label_index is None:
            edge_label_index = _pairs_of(edge_index)
        out = self.get_embedding(edge_index, edge_weight)
        return (out[edge_label_index[0]] * out[edge_label_index[1]]).sum(dim=-1)

    def predict_link(self, edge_index, edge_label_index: Optional[Tensor] = None,
                     edge_weight: Optional[Tensor] = None, prob: bool = False) -> Tensor:
        """Link probabilities (``prob=True``) or 0/1 decisions of the scored pairs."""
        pred = self(edge_index, edge_label_index, edge_weight).sigmoid()
        return pred if prob else pred.round()

    def recommend(self, edge_index, edge_weight: Optional[Tensor] = None,
                  src_index: Optional[Tensor] = None, dst_index: Optional[Tensor] = None,
                  k: int = 1, sorted: bool = True) -> Tensor:
        """The ``k`` best-scored nodes of ``dst_index`` (default all) for each of ``src_index``."""
        out_src = out_dst = self.get_embedding(edge_index, edge_weight)
        if src_index is not None:
            out_src = out_src[src_index]
        if dst_index is not None:
            out_dst = out_dst[dst_index]
        top = (out_src @ out_dst.t()).topk(k, dim=-1, sorted=sorted).indices
        if dst_index is not None:  # positions within dst_index -> node ids
            top = dst_index[top.reshape(-1)].view(*top.size())
        return top

    def link_pred_loss(self, pred: Tensor, edge_label: Tensor, **kwargs) -> Tensor:
        """Binary cross-entropy on logits; ``kwargs`` go to :class:`torch.nn.BCEWithLogitsLoss`."""
        return torch.nn.BCEWithLogitsLoss(**kwargs)(pred, edge_label.to(pred.dtype))

    def recommendation_loss(self, pos_edge_rank: Tensor, neg_edge_rank: Tensor,
                            node_id: Optional[Tensor] = None, lambda_reg: float = 1e-4,
                            **kwargs) -> Tensor:
        """BPR loss of paired positive/negative scores, L2-regularising the embeddings of
        ``node_id`` (default all nodes); ``kwargs`` go to :class:`BPRLoss`."""
        emb = self.embedding.weight
        emb = emb if node_id is None else emb[node_id]
        return BPRLoss(lambda_reg, **kwargs)(pos_edge_rank, neg_edge_rank, emb)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.num_nodes}, {self.embedding_dim}, "
                f"num_layers={self.num_layers})")


class BPRLoss(_Loss):
    r"""Bayesian Personalized Ranking loss, averaged over the pairs:

    .. math::
        L = -\frac{1}{M}\sum_{m=1}^{M} \ln \sigma(\hat{y}^{+}_m - \hat{y}^{-}_m)
        + \frac{\lambda}{M} \lVert \mathbf{x}^{(0)} \rVert_2^2

    Args:
        lambda_reg (float, optional): the L2 strength :math:`\lambda`. (default: ``0``)
        **kwargs (optional): passed on to :class:`torch.nn.modules.loss._Loss`.
    """
    __constants__ = ["lambda_reg"]
    lambda_reg: float

    def __init__(self, lambda_reg: float = 0, **kwargs):
        super().__init__(None, None, "sum", **kwargs)
        self.lambda_reg = lambda_reg

    def forward(self, positives: Tensor, negatives: Tensor,
                parameters: Optional[Tensor] = None) -> Tensor:
        """``positives[m]`` and ``negatives[m]`` score pairs of the same entity (user)."""
        loss = -F.logsigmoid(positives - negatives).mean()
        if self.lambda_reg != 0:
            if parameters is None:
                raise ValueError("BPRLoss: lambda_reg != 0 needs the parameters to regularise")
            loss = loss + self.lambda_reg * parameters.norm(p=2).pow(2) / positives.size(0)
        return loss
