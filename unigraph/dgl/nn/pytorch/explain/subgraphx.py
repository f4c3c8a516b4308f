r"""DGL's ``SubgraphX`` and ``HeteroSubgraphX`` (https://arxiv.org/abs/2102.05152).

The explanation of a graph classification is a small connected subgraph :math:`G_i` found by
Monte-Carlo tree search. A tree node is a node set; its children remove one of its
``num_child`` highest- (``high2low``) or lowest-degree nodes and keep the largest weakly
connected component of the rest; a tree node of at most ``node_min`` nodes is a leaf. Each
rollout walks down from the whole graph choosing the child maximising

.. math::
    \frac{W(c)}{\max(N(c), 1)} + \lambda\, R(c)\, \frac{\sqrt{\sum_{c'} N(c')}}{1 + N(c)}

(:math:`W` the summed rewards, :math:`N` the visits, :math:`\lambda` = ``coef``), and adds the
leaf's reward to every node on the way. The reward :math:`R(G_i)` is a Monte-Carlo Shapley value
over the players :math:`P'` = the nodes within ``num_hops - 1`` hops of :math:`G_i`, not in it:

.. math::
    R(G_i) \approx \frac{1}{T} \sum_{t=1}^{T} \Big(p_y\big(X \odot \mathbb 1_{S_t \cup G_i}\big)
        - p_y\big(X \odot \mathbb 1_{S_t}\big)\Big)

with :math:`S_t` the players before :math:`G_i` in a random order (``np.random.permutation``,
``T`` = ``shapley_steps``), :math:`p_y` the softmax probability of ``target_class``, and the
features of the region's other nodes zeroed (nodes outside the region keep theirs). The result
is the leaf with the highest reward.

The search draws from numpy's global generator exactly as DGL 2.1's does, so one
``np.random.seed`` gives DGL's answer on a homogeneous graph. Search nodes are keyed by their id
tuples (DGL keys them by the tensors' ``str``, which abbreviates sets of over 1000 nodes).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor, nn

from unigraph.dgl.base import DGLError
from unigraph.dgl.convert import to_homogeneous
from unigraph.dgl.nn.pytorch.explain._common import (
    check_count, check_homogeneous_graph, check_node_features, check_typed_features, check_typed_graph)


class MCTSNode:
    """A node of the search tree: a node set (``nodes``, as the explainer returns it), its
    visit count, summed and immediate rewards, and its children once expanded."""

    def __init__(self, nodes: Any, ids: Tensor | None = None):
        self.nodes = nodes
        self._ids = nodes.long() if ids is None else ids  # sorted ids in the searched (homogeneous) graph
        self.num_visit = 0
        self.total_reward = 0.0
        self.immediate_reward = 0.0
        self.children: list[MCTSNode] = []

    def __repr__(self) -> str:
        return str(self.nodes)


def _largest_component(num_nodes: int, src: Tensor, dst: Tensor, removed: int) -> Tensor:
    """The sorted local ids of the largest weakly connected component of the graph ``(src, dst)``
    over ``num_nodes`` nodes once node ``removed`` is gone; among equally large ones, the one with
    the smallest node id (the first that networkx enumerates, as DGL picks)."""
    kept = (src != removed) & (dst != removed)
    src, dst = src[kept], dst[kept]
    label = torch.arange(num_nodes, device=src.device)
    while True:  # min-label propagation along both directions, with pointer jumping
        new = label.clone()
        new.scatter_reduce_(0, dst, label[src], "amin")
        new.scatter_reduce_(0, src, label[dst], "amin")
        new = new[new]
        if torch.equal(new, label):
            break
        label = new
    alive = torch.ones(num_nodes, dtype=torch.bool, device=src.device)
    alive[removed] = False
    sizes = torch.bincount(label[alive], minlength=num_nodes)
    return ((label == torch.argmax(sizes)) & alive).nonzero().flatten()


class _ShapleySearch(nn.Module):
    """The search both explainers share, over a homogeneous graph ``self._view``; a subclass says
    how a node mask reaches the model (:meth:`_target_prob`) and how a node set is shown
    (:meth:`_public`, :meth:`_ids_of`)."""

    def __init__(self, model: nn.Module, num_hops: int, coef: float = 10.0, high2low: bool = True,
                 num_child: int = 12, num_rollouts: int = 20, node_min: int = 3, shapley_steps: int = 100,
                 log: bool = False):
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(f"{type(self).__name__}: model must be a torch.nn.Module, got {type(model).__name__}")
        self.num_hops = check_count(num_hops, "num_hops", 0)
        self.coef = coef
        self.high2low = high2low
        self.num_child = check_count(num_child, "num_child", 1)
        self.num_rollouts = check_count(num_rollouts, "num_rollouts", 1)
        self.node_min = check_count(node_min, "node_min", 1)  # 0 would expand single nodes into nothing
        self.shapley_steps = check_count(shapley_steps, "shapley_steps", 1)
        self.log = log
        self.model = model

    # ------------------------------------------------------------------ hooks
    def _target_prob(self, mask: Tensor) -> Tensor:
        raise NotImplementedError

    def _public(self, ids: Tensor) -> Any:
        raise NotImplementedError

    def _ids_of(self, nodes: Any) -> Tensor:
        raise NotImplementedError

    # ------------------------------------------------------------------ rewards
    def shapley(self, subgraph_nodes) -> float:
        """The Monte-Carlo Shapley value of the node set ``subgraph_nodes`` (module docstring)."""
        return self._shapley_ids(self._ids_of(subgraph_nodes))

    def _shapley_ids(self, ids: Tensor) -> float:
        """:meth:`shapley` of the sorted ids ``ids`` of the searched graph; the masks are drawn as
        DGL draws them (one permutation of the player list per step, exclusion mask first)."""
        num_nodes = self._view.num_nodes()
        members = ids.tolist()
        region = members
        for _ in range(self.num_hops - 1):
            region = list(set(region + self._neighbours(region)))
        # the players, listed as DGL lists them (a permutation of the same list draws the same order)
        split_point = num_nodes
        players = list(set(region) - set(members)) + [split_point]
        region_ids, member_ids = torch.tensor(region, dtype=torch.int64), torch.tensor(members, dtype=torch.int64)
        contributions = []
        for _ in range(self.shapley_steps):
            order = np.random.permutation(players)
            before = torch.from_numpy(order[: int(np.flatnonzero(order == split_point)[0])]).long()
            exclude = torch.ones(num_nodes)
            exclude[region_ids] = 0.0
            exclude[before] = 1.0
            include = exclude.clone()
            include[member_ids] = 1.0
            with torch.no_grad():
                excluded = self._target_prob(exclude)
                contributions.append(self._target_prob(include) - excluded)
        return torch.cat(contributions).mean().item()

    def _neighbours(self, region: list[int]) -> list[int]:
        """The in-neighbours, then the out-neighbours of ``region``, listed as DGL's ``in_edges``
        and ``out_edges`` list them (node by node in the order of ``region``, edge id order within),
        so that the sets built from them iterate in DGL's order."""
        src, dst = self._edges
        rank = torch.full((self._view.num_nodes(),), -1, dtype=torch.int64)
        rank[torch.tensor(region, dtype=torch.int64)] = torch.arange(len(region))
        into = (rank[dst] >= 0).nonzero().flatten()
        into = into[torch.sort(rank[dst[into]], stable=True).indices]
        out_of = (rank[src] >= 0).nonzero().flatten()
        out_of = out_of[torch.sort(rank[src[out_of]], stable=True).indices]
        return torch.cat([src[into], dst[out_of]]).tolist()

    # ------------------------------------------------------------------ tree
    def get_mcts_children(self, mcts_node: MCTSNode) -> list[MCTSNode]:
        """The children of ``mcts_node`` (expanded and scored on the first call)."""
        if mcts_node.children:
            return mcts_node.children
        ids = mcts_node._ids
        src, dst = self._induced_edges(ids)
        count = ids.numel()
        degree = (torch.bincount(src, minlength=count) + torch.bincount(dst, minlength=count)).to(self._idtype)
        chosen = torch.topk(degree, min(count, self.num_child), largest=self.high2low).indices
        children: dict[tuple, MCTSNode] = {}
        for removed in chosen.tolist():
            child_ids = ids[_largest_component(count, src, dst, removed)]
            key = tuple(child_ids.tolist())
            if key not in self.mcts_node_maps:
                self.mcts_node_maps[key] = MCTSNode(self._public(child_ids), child_ids)
            children.setdefault(key, self.mcts_node_maps[key])
        mcts_node.children = list(children.values())
        for child in mcts_node.children:
            if child.immediate_reward == 0:  # not scored yet (DGL's test: a zero reward is scored again)
                child.immediate_reward = self._shapley_ids(child._ids)
        return mcts_node.children

    def _induced_edges(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """The edges between the nodes ``ids``, as positions in ``ids``."""
        src, dst = self._edges
        position = torch.full((self._view.num_nodes(),), -1, dtype=torch.int64)
        position[ids] = torch.arange(ids.numel())
        inside = (position[src] >= 0) & (position[dst] >= 0)
        return position[src[inside]], position[dst[inside]]

    def mcts_rollout(self, mcts_node: MCTSNode) -> float:
        """One rollout from ``mcts_node`` down to a leaf; returns the leaf's reward, which every
        node chosen on the way adds to its total (with one more visit)."""
        path, node = [], mcts_node
        while node._ids.numel() > self.node_min:
            children = self.get_mcts_children(node)
            visits_sqrt = math.sqrt(sum(child.num_visit for child in children))
            node = max(children, key=lambda c: c.total_reward / max(c.num_visit, 1)
                       + self.coef * c.immediate_reward * visits_sqrt / (1 + c.num_visit))
            path.append(node)
        reward = node.immediate_reward
        for chosen in path:
            chosen.num_visit += 1
            chosen.total_reward += reward
        return reward

    def _search(self, view, root_nodes: Any, root_ids: Tensor) -> Any:
        """Every rollout from the whole graph, then the best-rewarded leaf's node set."""
        self.model.eval()
        if view.num_nodes() <= self.node_min:
            raise DGLError(f"{type(self).__name__}: the graph has {view.num_nodes()} nodes; it needs more than "
                           f"node_min={self.node_min}")
        self._view, self._idtype, self._device = view, view.idtype, view.device
        self._edges = tuple(ids.long().cpu() for ids in view.edges())
        root = MCTSNode(root_nodes, root_ids)
        self.mcts_node_maps = {tuple(root_ids.tolist()): root}
        for i in range(self.num_rollouts):
            if self.log:
                print(f"Rollout {i}/{self.num_rollouts}: {len(self.mcts_node_maps)} subgraphs explored so far")
            self.mcts_rollout(root)
        leaves = [node for node in self.mcts_node_maps.values() if node._ids.numel() <= self.node_min]
        best = leaves[0]
        for leaf in leaves[1:]:  # the first of the best, as DGL scans them
            if leaf.immediate_reward > best.immediate_reward:
                best = leaf
        return best.nodes


class SubgraphX(_ShapleySearch):
    r"""The most important connected subgraph for a homogeneous graph's classification (see the
    module docstring for the search and the reward).

    Args (DGL's): ``model`` (``forward(graph, feat)`` -> logits ``[B, C]``), ``num_hops`` (its
    depth), ``coef`` (exploration weight, 10.0), ``high2low`` (prune high-degree nodes first),
    ``num_child`` (12), ``num_rollouts`` (20), ``node_min`` (leaf size, 3), ``shapley_steps``
    (100), ``log`` (print the rollouts).

    Shapes: :meth:`explain_graph` -> the ids of the subgraph's nodes ``[n <= node_min]``, sorted.
    """

    def _target_prob(self, mask: Tensor) -> Tensor:
        feat = self.feat * mask.unsqueeze(1).to(self.feat.device)
        return self.model(self.graph, feat, **self.kwargs).softmax(dim=-1)[:, self.target_class]

    def _public(self, ids: Tensor) -> Tensor:
        return ids.to(device=self._device, dtype=self._idtype)

    def _ids_of(self, nodes) -> Tensor:
        return torch.as_tensor(nodes).long().cpu()

    def explain_graph(self, graph, feat: Tensor, target_class: int, **kwargs) -> Tensor:
        """The node ids of the subgraph that best explains the class ``target_class`` of
        ``graph``; ``kwargs`` go to the model."""
        who = "SubgraphX.explain_graph"
        check_homogeneous_graph(graph, who)
        check_node_features(graph, feat, who)
        _check_class(target_class, who)
        self.graph, self.feat, self.target_class, self.kwargs = graph, feat, target_class, kwargs
        nodes = graph.nodes()
        return self._search(graph, nodes, nodes.long().cpu())


class HeteroSubgraphX(_ShapleySearch):
    r"""SubgraphX on a heterograph: the search runs on its homogeneous view (all node types,
    all relations: :func:`dgl.to_homogeneous`), so node sets, degrees, components and Shapley
    players span the types; the node mask is split back per type for the model.

    Args: as :class:`SubgraphX`'s; ``feat`` is ``{ntype: [N_t, D_t]}`` for every node type.

    Shapes: :meth:`explain_graph` -> ``{ntype: sorted ids}`` (every type, possibly empty), of at
    most ``node_min`` nodes in all.

    This is not DGL 2.1's heterogeneous code, which (a) sets the subgraph nodes in the
    coalition-only mask instead of the other one, so its rewards have the opposite sign,
    (b) picks the answer among every searched set (it counts node types, not nodes, against
    ``node_min``), (c) draws players per node type and (d) picks a random node when no edge is
    left; on a graph of one node type, this class gives :class:`SubgraphX`'s answer.
    """

    def _target_prob(self, mask: Tensor) -> Tensor:
        feat = {ntype: self.feat[ntype] * mask[start:stop].unsqueeze(1).to(self.feat[ntype].device)
                for ntype, (start, stop) in self._ranges.items()}
        return self.model(self.graph, feat, **self.kwargs).softmax(dim=-1)[:, self.target_class]

    def _public(self, ids: Tensor) -> dict[str, Tensor]:
        return {ntype: (ids[(ids >= start) & (ids < stop)] - start).to(device=self._device, dtype=self._idtype)
                for ntype, (start, stop) in self._ranges.items()}

    def _ids_of(self, nodes: Mapping[str, Tensor]) -> Tensor:
        parts = [torch.as_tensor(nodes[ntype]).long().cpu() + start
                 for ntype, (start, _) in self._ranges.items() if ntype in nodes]
        return torch.sort(torch.cat(parts)).values

    def explain_graph(self, graph, feat: Mapping[str, Tensor], target_class: int, **kwargs) -> dict[str, Tensor]:
        """``{ntype: node ids}`` of the subgraph that best explains the class ``target_class``
        of ``graph``; ``kwargs`` go to the model."""
        who = "HeteroSubgraphX.explain_graph"
        check_typed_graph(graph, who)
        check_typed_features(graph, feat, who, every_type=True)
        _check_class(target_class, who)
        self.graph, self.feat, self.target_class, self.kwargs = graph, feat, target_class, kwargs
        counts = np.cumsum([0] + [graph.num_nodes(ntype) for ntype in graph.ntypes]).tolist()
        self._ranges = {ntype: (counts[i], counts[i + 1]) for i, ntype in enumerate(graph.ntypes)}
        view = to_homogeneous(graph)
        self._idtype, self._device = view.idtype, view.device
        all_ids = torch.arange(view.num_nodes())
        return self._search(view, self._public(all_ids), all_ids)


def _check_class(target_class: Any, who: str) -> None:
    if isinstance(target_class, bool) or not isinstance(target_class, (int, np.integer)):
        raise TypeError(f"{who}: target_class must be an int class index, got {target_class!r}")
