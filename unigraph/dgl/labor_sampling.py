r"""DGL's ``dgl.sampling.sample_labors``: layer-neighbour (LABOR) sampling, `Balın and Çatalyürek,
NeurIPS 2023 <https://arxiv.org/abs/2210.13339>`__, its LABOR-0 variant.

Every node :math:`t` that could be sampled draws one uniform variate :math:`r_t` for the whole
call (so seeds sharing a neighbour tend to take it together, and a batch touches fewer distinct
nodes than independent sampling). Each seed :math:`s` keeps its candidate edge :math:`(t, s)`
(in-edges; out-edges with ``edge_dir='out'``) iff

.. math::
    r_t \le \pi_{ts} = \min(1,\, c_s\, w_{ts}),

with :math:`w_{ts} = 1` and :math:`c_s = k / d_s` without ``prob`` (:math:`d_s` the seed's
candidates, ``k`` the fanout: each candidate is kept with probability :math:`k / d_s`, about
:math:`k` in expectation), and with ``prob`` the :math:`c_s` for which :math:`\sum_t \pi_{ts} = k`
over the candidates of positive weight (water-filling: the heaviest saturate at 1; zero weights are
never kept). ``fanout=-1``, or a fanout at least the seed's candidates of positive weight, keeps
them all; 0 keeps none. Returns ``(graph, importances)``: a graph with all of ``g``'s nodes and
the kept edges (``edata[dgl.EID]`` their ids in ``g``), and per relation (canonical order) the
kept edges' importance weights :math:`w_{ts} / \pi_{ts}` normalized to mean 1 per seed (so that a
mean aggregation stays unbiased) with ``prob``, an empty tensor without (DGL returns none there).

``random_seed`` (an int64 tensor of one element) fixes the variates: a node's :math:`r_t` is then
the same in every call with that seed (one batch sampled in several calls). Draws otherwise use
torch's generator. ``exclude_edges`` are removed after sampling, as
:func:`~unigraph.dgl.neighbor_sampling.sample_neighbors` does.

Differs from DGL 2.1: with ``prob`` DGL runs one round of its importance-sampling fixed point for
:math:`c_s` (a variance target, Eq. 22 of the paper) where this solves the expected count above;
``importance_sampling`` other than 0 (LABOR-i, LABOR-*) and ``seed2_contribution`` are not offered
(refused by name).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from unigraph.dgl.base import DGLError
from unigraph.dgl.neighbor_sampling import (
    _direction, _excluded, _expand, _frontier, _moved, _per_relation, _relations, _typed_nodes, _weights,
    stable_argsort)

__all__ = ["sample_labors"]


def sample_labors(g, nodes, fanout, edge_dir: str = "in", prob=None, importance_sampling: int = 0,
                  random_seed=None, seed2_contribution: float = 0, copy_ndata: bool = True, copy_edata: bool = True,
                  exclude_edges=None, output_device=None):
    """LABOR-0 sampling of ``fanout`` neighbours per seed of ``nodes`` and relation (module
    docstring): ``(graph, importances)``."""
    if importance_sampling != 0:
        raise NotImplementedError(f"sample_labors: importance_sampling={importance_sampling} (LABOR-i / LABOR-*) is "
                                  "not offered; LABOR-0 (importance_sampling=0) is")
    if seed2_contribution != 0:
        raise NotImplementedError("sample_labors: seed2_contribution (mixing a second random seed) is not offered")
    relations = _relations(g, "sample_labors")
    edge_dir = _direction(edge_dir)
    seeds = _typed_nodes(g, nodes)
    fanouts = _per_relation(g, relations, fanout, "fanout")
    weights = _weights(relations, prob, "prob")
    excluded = _excluded(g, relations, exclude_edges)
    variates = _variates(g, random_seed)
    picked, importances = {}, []
    for cet, rel in relations.items():
        rows = seeds[cet[2] if edge_dir == "in" else cet[0]]
        ptr, neighbours, eids = rel.in_csr() if edge_dir == "in" else rel.out_csr()
        none = torch.zeros(0, dtype=torch.int64, device=g.device)
        if rows.numel() == 0 or fanouts[cet] == 0:
            picked[cet] = none
            importances.append(torch.zeros(0, dtype=torch.float64, device=g.device))
            continue
        row, slot = _expand(ptr, rows)
        weight = None if weights[cet] is None else weights[cet][eids[slot]]
        probability = _inclusion(row, rows.numel(), weight, fanouts[cet])
        other_type = cet[0] if edge_dir == "in" else cet[2]
        kept = (variates[other_type](g.num_nodes(other_type))[neighbours[slot]] <= probability) & (probability > 0)
        edges, owner = eids[slot[kept]], row[kept]
        importance = torch.zeros(0, dtype=torch.float64, device=g.device)
        if weight is not None:
            importance = _normalized_per_seed(weight[kept] / probability[kept], owner, rows.numel())
        if excluded[cet] is not None:
            stay = ~excluded[cet][edges]
            edges, importance = edges[stay], importance[stay] if weight is not None else importance
        picked[cet] = edges
        importances.append(importance)
    return _moved(_frontier(g, relations, picked, copy_ndata, copy_edata, store_eid=True), output_device), importances


def _variates(g, random_seed: Any) -> dict:
    """Per node type, a function ``count -> [count]`` uniform variates, one per node, the same for
    every relation of the call (drawn once per type), or the same in every call with ``random_seed``."""
    if random_seed is not None:
        if not isinstance(random_seed, Tensor) or random_seed.numel() != 1 or random_seed.is_floating_point():
            raise DGLError(f"sample_labors: random_seed must be an int64 tensor of one element, got {random_seed!r}")
        seed = int(random_seed)
    drawn: dict = {}

    def of(ntype: str):
        def draw(count: int) -> Tensor:
            if ntype not in drawn:
                generator = None
                if random_seed is not None:   # a node's variate depends on the seed and its type alone
                    generator = torch.Generator().manual_seed((seed * 1_000_003 + sorted(g.ntypes).index(ntype))
                                                              % (2 ** 63))
                drawn[ntype] = torch.rand(count, dtype=torch.float64, generator=generator).to(g.device)
            return drawn[ntype]
        return draw
    return {ntype: of(ntype) for ntype in g.ntypes}


def _inclusion(row: Tensor, num_rows: int, weight: Tensor | None, fanout: int) -> Tensor:
    """Each candidate's :math:`\\pi_{ts}` (module docstring); candidates grouped by ``row`` (ascending)."""
    if weight is None:
        degree = torch.bincount(row, minlength=num_rows).to(torch.float64)
        if fanout == -1:
            return torch.ones(row.shape, dtype=torch.float64, device=row.device)
        return (fanout / degree[row]).clamp(max=1.0)
    eligible = weight > 0
    count = torch.bincount(row[eligible], minlength=num_rows)
    if fanout == -1:
        return eligible.to(torch.float64)
    scale = _water_level(row, num_rows, torch.where(eligible, weight, 0.0), count, fanout)
    return torch.where(eligible, (scale[row] * weight).clamp(max=1.0), 0.0)


def _water_level(row: Tensor, num_rows: int, weight: Tensor, count: Tensor, fanout: int) -> Tensor:
    """Per row, the :math:`c` with :math:`\\sum \\min(1, c\\, w) = \\min(k, n)` over its positive
    weights (``count`` = :math:`n`; ``inf`` where :math:`k \\ge n`: all kept). Sorted heaviest first,
    the first ``p`` saturate where ``p`` is the smallest position with :math:`(k - p)\\, w_p \\le S_p`
    (:math:`S_p` the weights from position ``p`` on); then :math:`c = (k - p) / S_p`."""
    order = stable_argsort(weight, descending=True)
    order = order[stable_argsort(row[order])]
    sorted_row, sorted_weight = row[order], weight[order]
    size = torch.bincount(row, minlength=num_rows)
    start = torch.cumsum(size, 0) - size
    position = torch.arange(order.numel(), device=row.device) - start[sorted_row]
    before = torch.cumsum(sorted_weight, 0) - sorted_weight          # all weights before, across rows
    before = before - before[start[sorted_row]]                         # ... before, within the row
    total = torch.zeros(num_rows, dtype=torch.float64, device=row.device).index_add_(0, row, weight)
    suffix = total[sorted_row] - before                                 # S_p
    budget = (fanout - position).to(torch.float64)                     # k - p
    valid = (sorted_weight > 0) & (budget > 0) & (budget * sorted_weight <= suffix)
    first = torch.full((num_rows,), order.numel(), dtype=torch.int64, device=row.device)
    first = first.scatter_reduce(0, sorted_row[valid], valid.nonzero().flatten(), "amin")
    level = torch.full((num_rows,), torch.inf, dtype=torch.float64, device=row.device)
    found = (count > fanout) & (first < order.numel())
    at = first[found]
    level[found] = budget[at] / suffix[at]
    return level


def _normalized_per_seed(importance: Tensor, owner: Tensor, num_rows: int) -> Tensor:
    """``importance`` scaled so that each seed's kept edges average 1 (a mean stays unbiased)."""
    total = torch.zeros(num_rows, dtype=importance.dtype, device=importance.device).index_add_(0, owner, importance)
    count = torch.bincount(owner, minlength=num_rows).to(importance.dtype)
    return importance * (count / total.clamp(min=torch.finfo(importance.dtype).tiny))[owner]
