r"""DGL's ``PGExplainer`` and ``HeteroPGExplainer`` (https://arxiv.org/abs/2011.04573).

A small network (``elayers``: Linear(2D or 3D, 64), ReLU, Linear(64, 1)) maps the frozen model
embeddings :math:`z` of each edge's ends (and, for a node explanation, of the center node
:math:`c`) to a logit :math:`\omega_{uv}`, so one trained network explains many instances:

.. math::
    \omega_{uv} = \mathrm{MLP}\big([z_u \,\|\, z_v\, (\|\, z_c)]\big), \qquad
    s_{uv} = \sigma\Big(\frac{\log \epsilon - \log(1 - \epsilon) + \omega_{uv}}{\tau}\Big),\
    \epsilon \sim \mathcal U(b, 1 - b)

(the concrete relaxation, temperature :math:`\tau`, ``sample_bias`` :math:`b`; without training
:math:`s = \sigma(\omega)`). The edge weight is symmetrised, :math:`M_{uv} = (s_{uv} + s_{vu}) / 2`
(every edge needs its reverse), and the model predicts with ``edge_weight=M``. Training minimises

.. math::
    -\overline{\log(p_{\hat y} + 10^{-6})}
    + c_b\, \mathrm{ReLU}\big(\textstyle\sum s - c_b\big)
    + c_c\, \overline{H\big(0.98\, M + 0.01\big)}

(:math:`c_b` = ``coff_budget``, the plain :math:`c_b \sum s` when :math:`c_b \le 0`; :math:`c_c` =
``coff_connect``; :math:`H` the binary entropy). As in DGL 2.1, the probabilities are detached
while training, so the prediction term adds to the loss value but not to its gradient.

The model contract is DGL's: ``model(graph, feat, embed=False, edge_weight=None, **kwargs)``
returns the embeddings ``[N, num_features]`` with ``embed=True``, else the logits.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from unigraph.dgl.base import ETYPE, NID, DGLError
from unigraph.dgl.convert import to_homogeneous
from unigraph.dgl.nn.pytorch.explain._common import (
    check_count, check_homogeneous_graph, check_node_features, check_typed_features, check_typed_graph,
    khop_in_subgraph, node_list, typed_khop_in_subgraph)
from unigraph.dgl.transforms import batch

ENTROPY_SCALE = 0.99  # the entropy term reads the mask squeezed into [0.01, 0.99]


def _reverse_edge_ids(graph, who: str) -> tuple[Tensor, Tensor, Tensor]:
    """``(src, dst, eid of dst -> src)`` of every edge; refuses a graph where a reverse is missing."""
    src, dst = graph.edges()
    if not bool(graph.has_edges_between(dst, src).all()):
        raise DGLError(f"{who}: every edge needs its reverse edge in the graph (the edge mask is symmetrised); "
                       "add them, e.g. with dgl.to_bidirected or dgl.transforms.AddReverse")
    return src.long(), dst.long(), graph.edge_ids(dst, src).long()


class PGExplainer(nn.Module):
    r"""Parameterized explainer of a homogeneous graph's (or its nodes') predictions (see the
    module docstring for the sampling and the loss).

    Args (DGL's): ``model``, ``num_features`` (its embedding size), ``num_hops`` (its depth;
    needed for node explanations), ``explain_graph`` (graph- or node-level explainer), keyword
    ``coff_budget`` (0.01), ``coff_connect`` (5e-4), ``sample_bias`` (0.0).

    Shapes: :meth:`explain_graph` -> probabilities ``[B, C]``, edge mask ``[E]``;
    :meth:`explain_node` -> probabilities ``[N_batch, C]``, edge mask ``[E_batch]``, the batch of
    the nodes' in-subgraphs, the centers' ids in it. :meth:`train_step` and
    :meth:`train_step_node` return the scalar loss; :meth:`parameters` are ``elayers``'.
    """

    def __init__(self, model: nn.Module, num_features: int, num_hops: int | None = None, explain_graph: bool = True,
                 coff_budget: float = 0.01, coff_connect: float = 5e-4, sample_bias: float = 0.0):
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(f"{type(self).__name__}: model must be a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.graph_explanation = explain_graph
        # a node explanation also reads the center's embedding
        self.num_features = check_count(num_features, "num_features", 1) * (2 if explain_graph else 3)
        self.num_hops = None if num_hops is None else check_count(num_hops, "num_hops", 0)
        self.coff_budget = coff_budget
        self.coff_connect = coff_connect
        self.sample_bias = sample_bias
        self.init_bias = 0.0
        self.elayers = nn.Sequential(nn.Linear(self.num_features, 64), nn.ReLU(), nn.Linear(64, 1))

    # ------------------------------------------------------------------ DGL's helper methods
    def set_masks(self, graph, edge_mask: Tensor | None = None) -> None:
        """Keep ``edge_mask`` (the loss reads it); without one, draw DGL's random initial mask."""
        if edge_mask is None:
            std = nn.init.calculate_gain("relu") * math.sqrt(2.0 / (2 * graph.num_nodes()))
            edge_mask = torch.randn(graph.num_edges()) * std + self.init_bias
        self.edge_mask = edge_mask.to(graph.device)

    def clear_masks(self) -> None:
        self.edge_mask = None

    def parameters(self, recurse: bool = True):
        """The explanation network's parameters only (what an optimiser of the explainer trains)."""
        return self.elayers.parameters(recurse)

    def loss(self, prob: Tensor, ori_pred: Tensor) -> Tensor:
        """Prediction, size and entropy terms (module docstring) for the probabilities ``[B, C]``
        of the original predictions ``ori_pred`` ``[B]``; reads the masks of the last explanation."""
        target_prob = prob.gather(-1, ori_pred.unsqueeze(-1)) + 1e-6  # 1e-6: no log(0)
        pred_loss = torch.mean(-torch.log(target_prob))
        total = torch.sum(self.sparse_mask_values)
        if self.coff_budget <= 0:
            size_loss = self.coff_budget * total
        else:
            size_loss = self.coff_budget * F.relu(total - self.coff_budget)
        mask = self.edge_mask * (2 * ENTROPY_SCALE - 1.0) + (1.0 - ENTROPY_SCALE)
        entropy = -mask * torch.log(mask) - (1 - mask) * torch.log(1 - mask)
        return pred_loss + size_loss + self.coff_connect * torch.mean(entropy)

    def concrete_sample(self, w: Tensor, beta: float = 1.0, training: bool = True) -> Tensor:
        """Gate probabilities: ``sigmoid((logistic noise + w) / beta)`` when training, else ``sigmoid(w)``.
        The noise is drawn on the CPU with the default dtype (DGL's draw, so one seed gives its gates)."""
        if not training:
            return torch.sigmoid(w)
        noise = torch.rand(w.size()).to(w.device)
        noise = self.sample_bias + (1 - 2 * self.sample_bias) * noise
        return torch.sigmoid((torch.log(noise) - torch.log(1.0 - noise) + w) / beta)

    # ------------------------------------------------------------------ shared steps
    def _require(self, graph_level: bool, who: str) -> None:
        if self.graph_explanation != graph_level:
            raise DGLError(f"{who} needs a {'graph' if graph_level else 'node'}-level explainer: construct it with "
                           f"explain_graph={graph_level}")
        if not graph_level and self.num_hops is None:
            raise DGLError(f"{who}: num_hops must be given when constructing a node-level explainer")

    def _to_device(self, graph) -> None:
        self.model = self.model.to(graph.device)
        self.elayers = self.elayers.to(graph.device)

    def _edge_gates(self, pair_emb: Tensor, temperature: float, training: bool) -> Tensor:
        """The sampled gate of each edge from its embedding row; kept for the size loss."""
        values = self.concrete_sample(self.elayers(pair_emb).reshape(-1), beta=temperature, training=training)
        self.sparse_mask_values = values
        return values

    def _finish(self, probs, training: bool):
        """Training keeps the masks for :meth:`loss` and detaches the probabilities (DGL's)."""
        if training:
            return {k: v.detach() for k, v in probs.items()} if isinstance(probs, dict) else probs.detach()
        self.clear_masks()
        return probs

    # ------------------------------------------------------------------ homogeneous API
    def train_step(self, graph, feat, temperature: float, **kwargs) -> Tensor:
        """The loss of one training step for graph classification on the (batched) ``graph``."""
        self._require(True, f"{type(self).__name__}.train_step")
        self._to_device(graph)
        with torch.no_grad():
            pred = self.model(graph, feat, embed=False, **kwargs).argmax(-1)
        prob, _ = self.explain_graph(graph, feat, temperature, training=True, **kwargs)
        return self.loss(prob, pred)

    def train_step_node(self, nodes, graph, feat: Tensor, temperature: float, **kwargs) -> Tensor:
        """The loss of one training step for the classification of ``nodes`` (distinct ids)."""
        self._require(False, "PGExplainer.train_step_node")
        self._to_device(graph)
        prob, _, batched_graph, centers = self.explain_node(nodes, graph, feat, temperature, training=True, **kwargs)
        with torch.no_grad():
            pred = self.model(batched_graph, self.batched_feats, embed=False, **kwargs).argmax(-1)
        return self.loss(prob[centers], pred[centers])

    def explain_graph(self, graph, feat: Tensor, temperature: float = 1.0, training: bool = False, **kwargs):
        """``(class probabilities [B, C] under the mask, edge mask [E])`` of the (batched) graph."""
        who = "PGExplainer.explain_graph"
        self._require(True, who)
        check_homogeneous_graph(graph, who)
        check_node_features(graph, feat, who)
        self._to_device(graph)
        src, dst, reverse = _reverse_edge_ids(graph, who)
        embed = self.model(graph, feat, embed=True, **kwargs).detach()
        values = self._edge_gates(torch.cat([embed[src], embed[dst]], dim=-1), temperature, training)
        edge_mask = (values + values[reverse]) / 2
        self.set_masks(graph, edge_mask)
        probs = F.softmax(self.model(graph, feat, edge_weight=self.edge_mask, **kwargs), dim=-1)
        return self._finish(probs, training), edge_mask

    def explain_node(self, nodes, graph, feat: Tensor, temperature: float = 1.0, training: bool = False, **kwargs):
        """``(probabilities [N_batch, C], edge mask [E_batch], batched subgraphs, center ids)`` for
        ``nodes`` (an int, ids or a tensor): each node's ``num_hops`` in-subgraph is embedded by
        the model on its own, then all are batched and explained at once."""
        who = "PGExplainer.explain_node"
        self._require(False, who)
        check_homogeneous_graph(graph, who)
        check_node_features(graph, feat, who)
        ids = node_list(nodes, graph.num_nodes(), f"{who}: nodes")
        self._to_device(graph)
        subgraphs, rows = [], []
        for node_id in ids:  # one subgraph and one embedding pass per explained node, as DGL
            sg, center = khop_in_subgraph(graph, torch.tensor([node_id], device=graph.device), self.num_hops)
            sg.ndata["feat"] = feat[sg.ndata[NID].long().to(feat.device)]
            is_center = torch.zeros(sg.num_nodes(), dtype=torch.bool, device=sg.device)
            is_center[center] = True
            sg.ndata["train"] = is_center
            embed = self.model(sg, sg.ndata["feat"], embed=True, **kwargs).detach()
            src, dst = (ids_.long() for ids_ in sg.edges())
            rows.append(torch.cat([embed[src], embed[dst], embed[center[0]].repeat(sg.num_edges(), 1)], dim=-1))
            subgraphs.append(sg)
        batched_graph = batch(subgraphs)
        values = self._edge_gates(torch.cat(rows), temperature, training)
        _, _, reverse = _reverse_edge_ids(batched_graph, who)
        edge_mask = (values + values[reverse]) / 2
        self.set_masks(batched_graph, edge_mask)
        batched_feats = batched_graph.ndata["feat"]
        probs = F.softmax(self.model(batched_graph, batched_feats, edge_weight=self.edge_mask, **kwargs), dim=-1)
        centers = batched_graph.ndata["train"].nonzero().squeeze(1)
        if training:
            self.batched_feats = batched_feats
        return self._finish(probs, training), edge_mask, batched_graph, centers


class HeteroPGExplainer(PGExplainer):
    r"""PGExplainer on a heterograph: the edges are read in the homogeneous view of the graph
    (:func:`dgl.to_homogeneous`: node types, then relations, in type order), and the edge mask
    is handed to the model and returned per canonical edge type.

    Args: as :class:`PGExplainer`'s; ``feat`` is ``{ntype: [N_t, D_t]}``, the model's embeddings
    ``{ntype: [N_t, num_features]}`` (every node type), its node logits ``{ntype: [N_t, C]}``.

    Shapes: :meth:`explain_graph` -> ``[B, C]``, ``{canonical etype: [E_r]}``;
    :meth:`explain_node` (``nodes``: ``{ntype: ids}``) -> ``{ntype: [N_t, C]}``, the edge mask
    per relation, the batched subgraphs, ``{ntype: center ids}``.

    Unlike DGL 2.1, which reads the node at the center's per-type index among all nodes, the
    center embedding of a node explanation is the center's own when its type is not the first
    node type (identical results when it is). The graph's node features are left untouched
    (DGL writes the embeddings into ``ndata['emb']``).
    """

    def train_step(self, graph, feat, temperature: float, **kwargs) -> Tensor:
        """The loss of one training step for graph classification."""
        return super().train_step(graph, feat, temperature, **kwargs)

    def train_step_node(self, nodes, graph, feat, temperature: float, **kwargs) -> Tensor:
        """The loss of one training step for the classification of ``nodes`` ``{ntype: ids}``."""
        self._require(False, "HeteroPGExplainer.train_step_node")
        self._to_device(graph)
        prob, _, batched_graph, centers = self.explain_node(nodes, graph, feat, temperature, training=True, **kwargs)
        with torch.no_grad():
            logits = self.model(batched_graph, self.batched_feats, embed=False, **kwargs)
        typed = [(ntype, ids) for ntype, ids in centers.items() if ids.numel()]
        return self.loss(torch.cat([prob[ntype][ids] for ntype, ids in typed]),
                         torch.cat([logits[ntype].argmax(-1)[ids] for ntype, ids in typed]))

    def _homogeneous_view(self, graph, embed: Any, who: str) -> tuple[Any, Tensor]:
        """The homogeneous graph of ``graph`` and the embeddings stacked in its node order."""
        missing = [t for t in graph.ntypes if not isinstance(embed, Mapping) or t not in embed]
        if missing:
            raise DGLError(f"{who}: the model's embeddings (embed=True) must be a dict with every node type; "
                           f"missing {missing}")
        return to_homogeneous(graph), torch.cat([embed[t].detach() for t in graph.ntypes])

    def _edge_mask_to_heterogeneous(self, edge_mask: Tensor, homograph, heterograph) -> dict:
        """``{canonical etype: its entries of edge_mask}`` by the homogeneous edges' type ids."""
        edge_type = homograph.edata[ETYPE]
        return {cet: edge_mask[(edge_type == heterograph.get_etype_id(cet)).nonzero().squeeze(1)]
                for cet in heterograph.canonical_etypes}

    def explain_graph(self, graph, feat, temperature: float = 1.0, training: bool = False, **kwargs):
        """``(probabilities [B, C], {canonical etype: edge mask [E_r]})`` of the graph."""
        who = "HeteroPGExplainer.explain_graph"
        self._require(True, who)
        check_typed_graph(graph, who)
        check_typed_features(graph, feat, who, every_type=False)
        self._to_device(graph)
        homo, embed = self._homogeneous_view(graph, self.model(graph, feat, embed=True, **kwargs), who)
        src, dst, reverse = _reverse_edge_ids(homo, who)
        values = self._edge_gates(torch.cat([embed[src], embed[dst]], dim=-1), temperature, training)
        edge_mask = (values + values[reverse]) / 2
        self.set_masks(homo, edge_mask)
        typed_mask = self._edge_mask_to_heterogeneous(edge_mask, homo, graph)
        probs = F.softmax(self.model(graph, feat, edge_weight=typed_mask, **kwargs), dim=-1)
        return self._finish(probs, training), typed_mask

    def explain_node(self, nodes, graph, feat, temperature: float = 1.0, training: bool = False, **kwargs):
        """``({ntype: probabilities}, {canonical etype: edge mask}, batched subgraphs, {ntype:
        center ids})`` for ``nodes`` ``{ntype: ids}``, one in-subgraph per node (see
        :meth:`PGExplainer.explain_node`)."""
        who = "HeteroPGExplainer.explain_node"
        self._require(False, who)
        check_typed_graph(graph, who)
        check_typed_features(graph, feat, who, every_type=True)
        if not isinstance(nodes, Mapping):
            raise TypeError(f"{who}: nodes must be a dict {{node type: ids}}, got {type(nodes).__name__}")
        unknown = [t for t in nodes if t not in graph.ntypes]
        if unknown:
            raise DGLError(f"{who}: node types {unknown} are not in the graph ({graph.ntypes})")
        self._to_device(graph)
        homos, typed, rows = [], [], []
        for target_type, target_ids in nodes.items():
            for node_id in node_list(target_ids, graph.num_nodes(target_type), f"{who}: nodes[{target_type!r}]"):
                seed = torch.tensor([node_id], device=graph.device)
                sg, centers = typed_khop_in_subgraph(graph, {target_type: seed}, self.num_hops)
                for ntype in sg.ntypes:
                    data = sg.nodes[ntype].data
                    data["feat"] = feat[ntype][data[NID].long().to(feat[ntype].device)]
                    is_center = torch.zeros(sg.num_nodes(ntype), dtype=torch.bool, device=sg.device)
                    if ntype in centers:
                        is_center[centers[ntype]] = True
                    data["train"] = is_center
                sg_feat = {t: sg.nodes[t].data["feat"] for t in sg.ntypes}
                homo, embed = self._homogeneous_view(sg, self.model(sg, sg_feat, embed=True, **kwargs), who)
                offset = sum(sg.num_nodes(t) for t in sg.ntypes[: sg.ntypes.index(target_type)])
                src, dst = (ids_.long() for ids_ in homo.edges())
                center_row = embed[offset + centers[target_type][0]].repeat(sg.num_edges(), 1)
                rows.append(torch.cat([embed[src], embed[dst], center_row], dim=-1))
                homos.append(homo)
                typed.append(sg)
        batched_homo, batched_graph = batch(homos), batch(typed)
        values = self._edge_gates(torch.cat(rows), temperature, training)
        _, _, reverse = _reverse_edge_ids(batched_homo, who)
        edge_mask = (values + values[reverse]) / 2
        self.set_masks(batched_homo, edge_mask)
        typed_mask = self._edge_mask_to_heterogeneous(edge_mask, batched_homo, batched_graph)
        batched_feats = {t: batched_graph.nodes[t].data["feat"] for t in batched_graph.ntypes}
        logits = self.model(batched_graph, batched_feats, edge_weight=typed_mask, **kwargs)
        probs = {t: F.softmax(value, dim=-1) for t, value in logits.items()}
        centers = {t: batched_graph.nodes[t].data["train"].nonzero().squeeze(1) for t in batched_graph.ntypes}
        if training:
            self.batched_feats = batched_feats
        return self._finish(probs, training), typed_mask, batched_graph, centers
