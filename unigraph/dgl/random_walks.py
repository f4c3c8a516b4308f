r"""DGL's random walks (``dgl.sampling.random_walk``: uniform, weighted, with restart, along a
metapath of a heterograph; ``node2vec_random_walk``; ``pack_traces``).

A walk of ``L`` steps from seed :math:`v_0` draws, at step :math:`t`, one out-edge
:math:`e = (v_t, x)` of relation ``metapath[t]`` with probability

.. math::
    P(e \mid v_t) = \frac{w_e}{\sum_{e' = (v_t, \cdot)} w_{e'}}
    \qquad\text{(node2vec: } w_e \, \alpha_{pq}(v_{t-1}, x)\text{, }
    \alpha_{pq} = 1/p \text{ if } x = v_{t-1}\text{, } 1 \text{ if } x \to v_{t-1} \in E\text{, } 1/q \text{ else)}

(:math:`w_e = 1` without ``prob``; node2vec's first step has no :math:`\alpha`). A node without
such an edge (or whose edges all weigh 0) ends the walk: the rest of its trace is ``-1``, as in
DGL. With ``restart_prob`` :math:`r` the walk also ends before step :math:`t` with probability
:math:`r` (or ``restart_prob[t]``).

How it computes: one step for all walkers at a time (a loop over the steps, never over walkers
or nodes). A uniform step draws an offset in each walker's CSR row; a weighted step (``prob`` or
node2vec) gathers the candidate edges of every walker's row and runs an exponential race
(:math:`\arg\min_e E_e / w_e` with :math:`E_e \sim \mathrm{Exp}(1)` picks :math:`e` with
probability :math:`w_e / \sum w`), so a weighted step costs the out-degrees of the walkers' nodes.
DGL's node2vec draws by rejection instead; the distribution is the same.

Random numbers come from torch's generator of the graph's device (``dgl.seed`` /
``torch.manual_seed``): the walks are DGL's in distribution, not draw for draw.

What differs from DGL, on input where DGL crashes or gives undefined results: ``length=0`` gives
the seeds alone (DGL crashes), an empty ``metapath`` is refused (DGL crashes), a node whose edges
all weigh 0 is a dead end (DGL: undefined), negative or non-finite ``prob`` values are refused,
a ``prob`` named on none of the metapath's relations is refused (DGL walks them uniformly; on
some of them only, DGL's rule holds: the others are walked uniformly), node2vec refuses a
heterograph (DGL returns garbage), seeds may have any integer dtype, graphs may be on any device.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor

from unigraph.dgl.base import DGLError
from unigraph.dgl.views import as_ids


# ---------------------------------------------------------------------- one relation's out-edges
class _Relation:
    """One relation of the metapath, ready to step on: its out-CSR ``(ptr, dst, eid)`` and, for a
    weighted walk, each CSR slot's weight (``None``: uniform)."""

    def __init__(self, graph, prob: str | None, what: str):
        self.graph = graph
        self.ptr, self.dst, self.eid = graph.out_csr()
        self.weight = None
        if prob is not None and prob in graph.edata:
            self.weight = _checked_prob(graph.edata[prob], graph.number_of_edges(), f"{what} {prob!r}")[self.eid]

    def rows(self, current: Tensor) -> tuple[Tensor, Tensor]:
        """``(start, degree)`` of each walker's CSR row; a finished walker (-1) has degree 0."""
        alive = current >= 0
        node = current.clamp(min=0)
        start = self.ptr[node]
        return start, torch.where(alive, self.ptr[node + 1] - start, 0)

    def step(self, current: Tensor) -> Tensor:
        """Each walker's chosen CSR slot (-1: no edge to take)."""
        start, degree = self.rows(current)
        if self.weight is None:
            offset = (torch.rand(current.shape, dtype=torch.float64, device=current.device) * degree).long()
            return torch.where(degree > 0, start + torch.minimum(offset, degree - 1), -1)
        walker, slot = _candidates(start, degree)
        return _race(walker, slot, self.weight[slot], current.numel())


def _checked_prob(prob: Tensor, num_edges: int, what: str) -> Tensor:
    if not isinstance(prob, Tensor) or not prob.is_floating_point() or prob.dim() != 1:
        shape = tuple(prob.shape) if isinstance(prob, Tensor) else type(prob).__name__
        raise DGLError(f"{what} must be a 1-D floating point edge feature, got {shape} "
                       f"{getattr(prob, 'dtype', '')}".rstrip())
    if prob.numel() != num_edges:
        raise DGLError(f"{what} has {prob.numel()} entries for {num_edges} edges")
    if prob.numel() and not bool(((prob >= 0) & torch.isfinite(prob)).all()):
        raise DGLError(f"{what} must hold finite non-negative weights")
    return prob


def _candidates(start: Tensor, degree: Tensor) -> tuple[Tensor, Tensor]:
    """Every walker's row, flattened: ``(walker, slot)`` per candidate edge."""
    walker = torch.repeat_interleave(torch.arange(degree.numel(), device=degree.device), degree)
    first = torch.cumsum(degree, 0) - degree   # where each walker's candidates begin
    slot = (start - first)[walker] + torch.arange(walker.numel(), device=degree.device)
    return walker, slot


def _race(walker: Tensor, slot: Tensor, weight: Tensor, num_walkers: int) -> Tensor:
    """Per walker, one of its candidate ``slot``s drawn with probability proportional to
    ``weight`` (an exponential race: the smallest ``Exp(1) / weight`` wins); -1 where a walker has
    no candidate of positive weight."""
    arrival = torch.empty(weight.shape, dtype=torch.float64, device=weight.device).exponential_()
    key = torch.where(weight > 0, arrival / weight.double(), torch.inf)
    best = torch.full((num_walkers,), torch.inf, dtype=torch.float64, device=weight.device)
    best = best.scatter_reduce(0, walker, key, "amin")
    won = (key == best[walker]) & torch.isfinite(key)
    chosen = torch.full((num_walkers,), -1, dtype=slot.dtype, device=slot.device)
    return chosen.scatter_reduce(0, walker[won], slot[won], "amax")


# ---------------------------------------------------------------------- arguments
def _is_hetero(g) -> bool:
    return len(g.canonical_etypes) > 1 or len(g.ntypes) > 1


def _relation_graph(g, etype):
    return g[etype] if hasattr(g, "_relations") else g


def _metapath(g, metapath: Sequence | None, length: int | None) -> list[tuple[str, str, str]]:
    """The canonical relation of each step."""
    if metapath is None:
        if _is_hetero(g):
            raise DGLError("metapath not specified and the graph is not homogeneous: random_walk needs a metapath "
                           f"on a graph with node types {g.ntypes} and relations {g.canonical_etypes}")
        if length is None:
            raise ValueError("random_walk needs either metapath or length")
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise ValueError(f"length must be a non-negative int, got {length!r}")
        return [g.canonical_etypes[0]] * length
    if length is not None:
        raise ValueError("random_walk takes metapath or length, not both")
    if isinstance(metapath, (str, tuple)) or len(metapath) == 0:
        raise DGLError(f"metapath must be a non-empty list of edge types, got {metapath!r}")
    path = [g.to_canonical_etype(etype) for etype in metapath]
    for t in range(1, len(path)):
        if path[t][0] != path[t - 1][2]:
            raise DGLError(f"metapath step {t} {path[t]} starts at node type {path[t][0]!r}, but step {t - 1} "
                           f"{path[t - 1]} ends at {path[t - 1][2]!r}")
    return path


def _restart(restart_prob: Any, steps: int, device: torch.device) -> Tensor | None:
    """Each step's probability to end the walk before it (None: never)."""
    if restart_prob is None:
        return None
    if isinstance(restart_prob, Tensor):
        if not restart_prob.is_floating_point() or restart_prob.dim() != 1 or restart_prob.numel() != steps:
            raise DGLError(f"restart_prob as a tensor must be 1-D floating point with one entry per step ({steps}), "
                           f"got {tuple(restart_prob.shape)} {restart_prob.dtype}")
        if steps and not bool(((restart_prob >= 0) & (restart_prob <= 1)).all()):
            raise DGLError("restart_prob must hold probabilities in [0, 1]")
        return restart_prob.to(device=device, dtype=torch.float64)
    if isinstance(restart_prob, float):
        if not 0 <= restart_prob < 1:
            raise DGLError(f"restart_prob must be in [0, 1), got {restart_prob}")
        return torch.full((steps,), restart_prob, dtype=torch.float64, device=device)
    raise TypeError(f"restart_prob should be a float or a tensor, got {type(restart_prob).__name__}")


def _seeds(graph, nodes: Any) -> Tensor:
    return as_ids(nodes, graph.number_of_src_nodes(), "nodes", graph.device)


# ---------------------------------------------------------------------- walks
def random_walk(g, nodes, *, metapath=None, length=None, prob=None, restart_prob=None, return_eids=False):
    """DGL's ``random_walk``: one walk from each of ``nodes`` along ``metapath`` (or ``length``
    steps on a graph of one node and edge type); see the module docstring for the distribution.

    Args:
        g: a ``DGLGraph`` or ``DGLHeteroGraph``.
        nodes: the seeds, of the source type of ``metapath[0]`` (a tensor, list or int).
        metapath: the relation of each step (names or canonical triples); or ``length``.
        prob: name of an edge feature of unnormalised, non-negative weights (1-D float); a relation
            without it is walked uniformly.
        restart_prob: a float in [0, 1) or a tensor of one probability per step: the walk ends
            before a step with that probability.
        return_eids: also return the edge taken at each step.

    Returns:
        ``(traces, types)`` or ``(traces, eids, types)``: ``traces`` ``[len(nodes), steps + 1]``
        node ids (``-1`` after the walk ended), ``eids`` ``[len(nodes), steps]`` (``-1`` likewise),
        ``types`` ``[steps + 1]`` the node type id at each position; all of the graph's ``idtype``.
    """
    path = _metapath(g, metapath, length)
    first = _relation_graph(g, path[0] if path else None)
    seeds = _seeds(first, nodes)
    relations = {cet: _Relation(_relation_graph(g, cet), prob, f"edge feature of {cet}") for cet in set(path)}
    if prob is not None and path and all(rel.weight is None for rel in relations.values()):
        raise DGLError(f"prob {prob!r} is not an edge feature of any relation on the walk {sorted(relations)}")
    stop = _restart(restart_prob, len(path), seeds.device)

    current, nodes_at, eids_at = seeds, [seeds], []
    for t, cet in enumerate(path):
        relation = relations[cet]
        slot = relation.step(current)
        if stop is not None:
            slot = torch.where(torch.rand(slot.shape, dtype=torch.float64, device=slot.device) < stop[t], -1, slot)
        taken = slot >= 0
        current = torch.where(taken, relation.dst[slot.clamp(min=0)], -1)
        nodes_at.append(current)
        eids_at.append(torch.where(taken, relation.eid[slot.clamp(min=0)], -1))

    traces = torch.stack(nodes_at, 1).to(g.idtype)
    node_types = [cet[0] for cet in path[:1]] + [cet[2] for cet in path] if path else [first.ntypes[0]]
    types = torch.tensor([g.get_ntype_id(t) for t in node_types], dtype=g.idtype, device=seeds.device)
    if not return_eids:
        return traces, types
    eids = torch.stack(eids_at, 1) if eids_at else seeds.new_zeros((seeds.numel(), 0))
    return traces, eids.to(g.idtype), types


def node2vec_random_walk(g, nodes, p, q, walk_length, prob=None, return_eids=False):
    """DGL's ``node2vec_random_walk`` (https://arxiv.org/abs/1607.00653): ``walk_length`` steps
    from each of ``nodes`` on a homogeneous graph, biased by the return parameter ``p`` and the
    in-out parameter ``q`` (module docstring); ``prob`` names 1-D non-negative edge weights.

    Returns ``traces`` ``[len(nodes), walk_length + 1]`` (``-1`` after a dead end) and, with
    ``return_eids``, ``eids`` ``[len(nodes), walk_length]``; both of the graph's ``idtype``.
    """
    if _is_hetero(g):
        raise DGLError(f"node2vec_random_walk needs a homogeneous graph, got node types {g.ntypes} and relations "
                       f"{g.canonical_etypes}")
    for name, value in (("p", p), ("q", q)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    if isinstance(walk_length, bool) or not isinstance(walk_length, int) or walk_length < 0:
        raise ValueError(f"walk_length must be a non-negative int, got {walk_length!r}")
    if prob is not None and prob not in g.edata:
        raise DGLError(f"prob {prob!r} is not an edge feature of the graph (it has {list(g.edata.keys())})")
    relation = _Relation(g, prob, "edge feature")
    seeds = _seeds(g, nodes)
    bias = torch.tensor([1.0 / p, 1.0, 1.0 / q], dtype=torch.float64, device=seeds.device)

    previous, current, nodes_at, eids_at = seeds, seeds, [seeds], []
    for t in range(walk_length):
        slot = relation.step(current) if t == 0 else _node2vec_step(g, relation, previous, current, bias)
        taken = slot >= 0
        previous, current = current, torch.where(taken, relation.dst[slot.clamp(min=0)], -1)
        nodes_at.append(current)
        eids_at.append(torch.where(taken, relation.eid[slot.clamp(min=0)], -1))

    traces = torch.stack(nodes_at, 1).to(g.idtype)
    if not return_eids:
        return traces
    eids = torch.stack(eids_at, 1) if eids_at else seeds.new_zeros((seeds.numel(), 0))
    return traces, eids.to(g.idtype)


def _node2vec_step(g, relation: _Relation, previous: Tensor, current: Tensor, bias: Tensor) -> Tensor:
    """One biased step: candidate ``x`` of a walker at ``current`` that came from ``previous``
    weighs ``w * bias[k]``, ``k`` = 0 if ``x`` is ``previous``, 1 if ``x -> previous`` is an edge
    (the test DGL makes), 2 otherwise."""
    walker, slot = _candidates(*relation.rows(current))
    target, came_from = relation.dst[slot], previous[walker]
    kind = torch.where(target == came_from, 0, torch.where(g.has_edges_between(target, came_from), 1, 2))
    weight = bias[kind] if relation.weight is None else relation.weight[slot].double() * bias[kind]
    return _race(walker, slot, weight, current.numel())


def pack_traces(traces: Tensor, types: Tensor):
    """DGL's ``pack_traces``: the traces of :func:`random_walk` without their ``-1`` padding.

    Each trace is cut at its first ``-1``. Returns ``(concat_vids, concat_types, lengths,
    offsets)``: the kept node ids and their type ids concatenated trace after trace (dtypes of
    ``traces`` and ``types``), each trace's length and its offset in the concatenation (int64).
    """
    if not isinstance(traces, Tensor) or traces.dim() != 2 or traces.is_floating_point() or traces.dtype == torch.bool:
        raise DGLError(f"traces must be a 2-D integer tensor, got {getattr(traces, 'shape', type(traces).__name__)}")
    if not isinstance(types, Tensor) or types.dim() != 1 or types.is_floating_point() or types.dtype == torch.bool:
        raise DGLError(f"types must be a 1-D integer tensor, got {getattr(types, 'shape', type(types).__name__)}")
    if types.numel() != traces.shape[1]:
        raise DGLError(f"types has {types.numel()} entries for traces of length {traces.shape[1]}")
    padding = traces == -1
    lengths = torch.where(padding.any(1), padding.int().argmax(1), traces.shape[1]).to(torch.int64)
    kept = torch.arange(traces.shape[1], device=traces.device) < lengths[:, None]
    offsets = torch.cumsum(lengths, 0) - lengths
    return traces[kept], types.to(traces.device).expand_as(traces)[kept], lengths, offsets
