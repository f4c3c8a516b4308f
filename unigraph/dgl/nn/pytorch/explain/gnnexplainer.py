r"""DGL's ``GNNExplainer`` and ``HeteroGNNExplainer`` (https://arxiv.org/abs/1903.03894).

An explanation is a soft edge mask :math:`M = \sigma(m)` (one entry per edge) and a soft feature
mask :math:`F = \sigma(f)` (one entry per feature column, per node type on a heterograph), learned
with Adam for ``num_epochs`` steps to keep the model's own prediction :math:`\hat y` while being
small and decisive:

.. math::
    \mathcal{L}(m, f) = -\log p_\theta\big(\hat y \mid G, X \odot F, M\big)
      + \alpha_1 \textstyle\sum_e M_e + \alpha_2\, \overline{H(M)}
      + \beta_1\, \overline{F} + \beta_2\, \overline{H(F)},
    \qquad H(p) = -p \log(p + \epsilon) - (1 - p) \log(1 - p + \epsilon)

(the bar is the mean over the entries, :math:`\epsilon = 10^{-15}`). The model reads the mask as
``model(graph=..., feat=..., eweight=M)`` and multiplies its messages by it. A node explanation
works on the ``num_hops`` in-neighbourhood subgraph of the node. The masks start as DGL's:
:math:`f \sim \mathcal N(0, 0.1^2)` then :math:`m \sim \mathcal N(0, \mathrm{gain}_{relu}^2 \cdot 2 / (2N))`
(:math:`N_{src} + N_{dst}` per relation on a heterograph), drawn from torch's generator in
that order with the default dtype, so one seed gives DGL's masks.
"""
from __future__ import annotations

from math import sqrt
from typing import Any, Callable

import torch
from torch import Tensor, nn

from unigraph.dgl.base import DGLError, EID, NID
from unigraph.dgl.nn.pytorch.explain._common import (
    check_count, check_homogeneous_graph, check_node_features, check_typed_features, check_typed_graph,
    khop_in_subgraph, one_node, progress, slice_node_edge_kwargs, typed_khop_in_subgraph)

EPS = 1e-15  # keeps log() finite at masks of exactly 0 or 1


def _entropy(mask: Tensor) -> Tensor:
    return -mask * torch.log(mask + EPS) - (1 - mask) * torch.log(1 - mask + EPS)


def _edge_mask_logits(num_edges: int, num_nodes: int, device) -> nn.Parameter:
    """DGL's initial edge logits; ``num_nodes`` is its count in the std: 2N on a homogeneous
    graph, N_src + N_dst for one relation of a heterograph."""
    std = nn.init.calculate_gain("relu")
    if num_nodes > 0:
        std *= sqrt(2.0 / num_nodes)
    return nn.Parameter(torch.randn(num_edges, device=device) * std)


def _feat_mask_logits(feat_size: int, device) -> nn.Parameter:
    return nn.Parameter(torch.randn(1, feat_size, device=device) * 0.1)


def _predicted(logits: Any, who: str) -> Tensor:
    """The model's predicted class of every row of its logits."""
    if not isinstance(logits, Tensor) or logits.dim() < 2:
        what = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise DGLError(f"{who}: the model must return logits [rows, classes], got {what}")
    return logits.argmax(dim=-1)


class _MaskExplainer(nn.Module):
    """The optimisation both GNNExplainers share: hyperparameters, the regulariser, the Adam loop."""

    def __init__(self, model: nn.Module, num_hops: int, lr: float = 0.01, num_epochs: int = 100, *,
                 alpha1: float = 0.005, alpha2: float = 1.0, beta1: float = 1.0, beta2: float = 0.1,
                 log: bool = True):
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(f"{type(self).__name__}: model must be a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.num_hops = check_count(num_hops, "num_hops", 0)
        self.lr = lr
        self.num_epochs = check_count(num_epochs, "num_epochs", 0)
        self.alpha1, self.alpha2, self.beta1, self.beta2 = alpha1, alpha2, beta1, beta2
        self.log = log

    def _regularised(self, loss: Tensor, feat_masks: list[Tensor], edge_masks: list[Tensor]) -> Tensor:
        """``loss`` plus the size and entropy terms, edge masks first (DGL's order of additions)."""
        for logits in edge_masks:
            mask = logits.sigmoid()
            loss = loss + self.alpha1 * torch.sum(mask)
            loss = loss + self.alpha2 * _entropy(mask).mean()
        for logits in feat_masks:
            mask = logits.sigmoid()
            loss = loss + self.beta1 * torch.mean(mask)
            loss = loss + self.beta2 * _entropy(mask).mean()
        return loss

    def _fit(self, params: list[Tensor], log_prob: Callable[[], Tensor], feat_masks: list[Tensor],
             edge_masks: list[Tensor], description: str) -> None:
        """``num_epochs`` Adam steps on ``-log_prob() + regulariser``."""
        optimizer = torch.optim.Adam(params, lr=self.lr)
        bar = progress(self.log, self.num_epochs, description)
        for _ in range(self.num_epochs):
            optimizer.zero_grad()
            loss = self._regularised(-log_prob(), feat_masks, edge_masks)
            loss.backward()
            optimizer.step()
            bar.update(1)
        bar.close()

    def _prepare_model(self, graph) -> None:
        self.model = self.model.to(graph.device)
        self.model.eval()


class GNNExplainer(_MaskExplainer):
    r"""Edge and feature masks explaining a node or graph prediction of a homogeneous graph
    (see the module docstring for the objective).

    Args (DGL's): ``model`` (``forward(graph, feat, eweight=None)`` returning logits; ``eweight``
    ``[E]`` multiplies the messages), ``num_hops`` (the model's message passing depth), ``lr``,
    ``num_epochs``, keyword-only ``alpha1``, ``alpha2`` (edge mask size and entropy), ``beta1``,
    ``beta2`` (feature mask mean and entropy), ``log`` (a tqdm bar, when tqdm is installed).

    Shapes: :meth:`explain_node` -> center ``[1]``, the subgraph, feature mask ``[D]``, edge mask
    ``[E_sub]``; :meth:`explain_graph` -> feature mask ``[D]``, edge mask ``[E]``; masks in (0, 1).
    """

    def _init_masks(self, graph, feat: Tensor) -> tuple[nn.Parameter, nn.Parameter]:
        """The learnable logits: feature mask ``[1, D]``, then edge mask ``[E]`` (DGL's draw order)."""
        feat_mask = _feat_mask_logits(feat.shape[1], feat.device)
        edge_mask = _edge_mask_logits(graph.num_edges(), 2 * feat.shape[0], feat.device)
        return feat_mask, edge_mask

    def _loss_regularize(self, loss: Tensor, feat_mask: Tensor, edge_mask: Tensor) -> Tensor:
        return self._regularised(loss, [feat_mask], [edge_mask])

    def explain_node(self, node_id, graph, feat: Tensor, **kwargs):
        """Masks explaining the prediction for node ``node_id`` on its ``num_hops`` in-subgraph.
        Extra ``kwargs`` go to the model; tensors with a row per node or per edge of ``graph``
        are cut to the subgraph. Returns ``(new center id [1], subgraph, feature mask [D],
        edge mask [E_sub])``."""
        who = "GNNExplainer.explain_node"
        check_homogeneous_graph(graph, who)
        check_node_features(graph, feat, who)
        seed = one_node(node_id, graph.num_nodes(), f"{who}: node_id").to(graph.device)
        self._prepare_model(graph)
        sg, center = khop_in_subgraph(graph, seed, self.num_hops)
        sg_nodes, sg_edges = sg.ndata[NID].long(), sg.edata[EID].long()
        kwargs = slice_node_edge_kwargs(kwargs, graph.num_nodes(), graph.num_edges(), sg_nodes, sg_edges)
        feat = feat[sg_nodes.to(feat.device)]
        with torch.no_grad():
            label = _predicted(self.model(graph=sg, feat=feat, **kwargs), who)[center]
        feat_mask, edge_mask = self._init_masks(sg, feat)

        def log_prob() -> Tensor:
            logits = self.model(graph=sg, feat=feat * feat_mask.sigmoid(), eweight=edge_mask.sigmoid(), **kwargs)
            return logits.log_softmax(dim=-1)[center, label]

        self._fit([feat_mask, edge_mask], log_prob, [feat_mask], [edge_mask], f"Explain node {node_id}")
        return center, sg, feat_mask.detach().sigmoid().squeeze(), edge_mask.detach().sigmoid()

    def explain_graph(self, graph, feat: Tensor, **kwargs):
        """Masks explaining the model's prediction for the (first) graph. Returns ``(feature
        mask [D], edge mask [E])``."""
        who = "GNNExplainer.explain_graph"
        check_homogeneous_graph(graph, who)
        check_node_features(graph, feat, who)
        self._prepare_model(graph)
        with torch.no_grad():
            label = _predicted(self.model(graph=graph, feat=feat, **kwargs), who)[0]
        feat_mask, edge_mask = self._init_masks(graph, feat)

        def log_prob() -> Tensor:
            logits = self.model(graph=graph, feat=feat * feat_mask.sigmoid(), eweight=edge_mask.sigmoid(), **kwargs)
            return logits.log_softmax(dim=-1)[0, label]

        self._fit([feat_mask, edge_mask], log_prob, [feat_mask], [edge_mask], "Explain graph")
        return feat_mask.detach().sigmoid().squeeze(), edge_mask.detach().sigmoid()


class HeteroGNNExplainer(_MaskExplainer):
    r"""GNNExplainer on a heterograph: one feature mask per node type, one edge mask per
    canonical edge type (see the module docstring for the objective, summed over the masks).

    Args: as :class:`GNNExplainer`'s; the model takes ``feat`` ``{ntype: [N_t, D_t]}`` and
    ``eweight`` ``{canonical etype: [E_r]}``, and returns ``{ntype: logits}`` for
    :meth:`explain_node`, graph logits ``[B, C]`` for :meth:`explain_graph`.

    Shapes: masks ``{ntype: [D_t]}`` and ``{canonical etype: [E_r]}``, values in (0, 1).
    """

    def _init_masks(self, graph, feat) -> tuple[dict, dict]:
        """Feature masks in the order of ``feat``, then edge masks in ``canonical_etypes`` order."""
        device = graph.device
        feat_masks = {ntype: _feat_mask_logits(value.shape[1], device) for ntype, value in feat.items()}
        edge_masks = {cet: _edge_mask_logits(graph.num_edges(cet), graph.num_nodes(cet[0]) + graph.num_nodes(cet[2]),
                                             device)
                      for cet in graph.canonical_etypes}
        return feat_masks, edge_masks

    def _loss_regularize(self, loss: Tensor, feat_masks: dict, edge_masks: dict) -> Tensor:
        return self._regularised(loss, list(feat_masks.values()), list(edge_masks.values()))

    def _masked_logits(self, graph, feat: dict, feat_masks: dict, edge_masks: dict, kwargs: dict):
        masked = {ntype: value * feat_masks[ntype].sigmoid() for ntype, value in feat.items()}
        eweight = {cet: logits.sigmoid() for cet, logits in edge_masks.items()}
        return self.model(graph=graph, feat=masked, eweight=eweight, **kwargs)

    @staticmethod
    def _finished(feat_masks: dict, edge_masks: dict) -> tuple[dict, dict]:
        return ({ntype: m.detach().sigmoid().squeeze() for ntype, m in feat_masks.items()},
                {cet: m.detach().sigmoid() for cet, m in edge_masks.items()})

    def explain_node(self, ntype: str, node_id, graph, feat: dict, **kwargs):
        """Masks explaining the prediction for node ``node_id`` of type ``ntype`` on its
        ``num_hops`` in-subgraph. Returns ``(new center id [1], subgraph, {ntype: [D_t]},
        {canonical etype: [E_r]})``."""
        who = "HeteroGNNExplainer.explain_node"
        check_typed_graph(graph, who)
        if ntype not in graph.ntypes:
            raise DGLError(f"{who}: node type {ntype!r} is not in the graph ({graph.ntypes})")
        check_typed_features(graph, feat, who, every_type=True)
        seed = one_node(node_id, graph.num_nodes(ntype), f"{who}: node_id").to(graph.device)
        self._prepare_model(graph)
        sg, centers = typed_khop_in_subgraph(graph, {ntype: seed}, self.num_hops)
        center = centers[ntype]
        sg_feat = {t: feat[t][sg.nodes[t].data[NID].long().to(feat[t].device)] for t in sg.ntypes}
        with torch.no_grad():
            label = _predicted(self._typed_output(self.model(graph=sg, feat=sg_feat, **kwargs), ntype, who),
                               who)[center]
        feat_masks, edge_masks = self._init_masks(sg, sg_feat)

        def log_prob() -> Tensor:
            logits = self._masked_logits(sg, sg_feat, feat_masks, edge_masks, kwargs)[ntype]
            return logits.log_softmax(dim=-1)[center, label]

        self._fit([*feat_masks.values(), *edge_masks.values()], log_prob, list(feat_masks.values()),
                  list(edge_masks.values()), f"Explain node {node_id} with type {ntype}")
        return (center, sg) + self._finished(feat_masks, edge_masks)

    def explain_graph(self, graph, feat: dict, **kwargs):
        """Masks explaining the model's prediction for the (first) graph. Returns
        ``({ntype: [D_t]}, {canonical etype: [E_r]})``."""
        who = "HeteroGNNExplainer.explain_graph"
        check_typed_graph(graph, who)
        check_typed_features(graph, feat, who, every_type=False)
        self._prepare_model(graph)
        with torch.no_grad():
            label = _predicted(self.model(graph=graph, feat=feat, **kwargs), who)[0]
        feat_masks, edge_masks = self._init_masks(graph, feat)

        def log_prob() -> Tensor:
            return self._masked_logits(graph, feat, feat_masks, edge_masks, kwargs).log_softmax(dim=-1)[0, label]

        self._fit([*feat_masks.values(), *edge_masks.values()], log_prob, list(feat_masks.values()),
                  list(edge_masks.values()), "Explain graph")
        return self._finished(feat_masks, edge_masks)

    @staticmethod
    def _typed_output(logits: Any, ntype: str, who: str) -> Tensor:
        if not isinstance(logits, dict) or ntype not in logits:
            got = f"keys {list(logits)}" if isinstance(logits, dict) else type(logits).__name__
            raise DGLError(f"{who}: the model must return {{node type: logits}} including {ntype!r}, got {got}")
        return logits[ntype]
