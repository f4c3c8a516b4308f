r"""DGL's neighbour samplers on unigraph.dgl graphs: :func:`sample_neighbors` (and its block form
:func:`sample_neighbors_fused`), :func:`sample_etype_neighbors`, :func:`sample_neighbors_biased`
with :func:`sort_csr_by_tag` / :func:`sort_csc_by_tag`, and :func:`select_topk`.

Each picks, for every seed node :math:`v` and relation, some of its in-edges (out-edges with
``edge_dir='out'``) and returns a graph with *all* the nodes of ``g`` and only the picked edges
(``edata[dgl.EID]`` their ids in ``g``). With candidate edges :math:`N(v)`, weights :math:`w_e`
(``prob``; 1 without; only :math:`w_e > 0` are candidates) and :math:`n_v = |\{e \in N(v) : w_e > 0\}|`:

* ``fanout = -1``: every candidate (with or without ``replace``);
* ``replace=False``: :math:`\min(k, n_v)` distinct edges by successive sampling, each draw taking
  a remaining edge with probability :math:`w_e / \sum_{\text{remaining}} w` (uniform without
  ``prob``);
* ``replace=True``: :math:`k` independent draws, :math:`P(e) = w_e / \sum_{N(v)} w` (none when
  :math:`n_v = 0`), so an edge may come several times;
* :func:`select_topk`: the :math:`k` edges of largest (``ascending``: smallest) weight, ties in
  edge id order; :func:`sample_neighbors_biased`: :math:`w_e` = ``bias[tag(e)]``;
  :func:`sample_etype_neighbors`: the rule above per seed *and* edge type, with the type's fanout.

These are DGL's rules (``fanout=-1`` ignores ``replace``; a zero or negative weight is never
picked; ``exclude_edges`` are removed after picking, so a seed may end with fewer than ``k``).
Draws use torch's generator of the graph's device (``dgl.seed`` / ``torch.manual_seed``): the
samples are DGL's in distribution, not draw for draw. Order of the output edges: seed after seed
as given (a repeated seed is sampled again), then (per type for the etype sampler) edge id order
without replacement, draw order with, weight order for top-k (DGL's order within a seed is
random).

How it computes, vectorised over all candidates of all seeds (no loop over nodes or edges): the
candidates are the seeds' CSR rows laid end to end with a group id per candidate (the seed, or
seed x edge type). Without replacement each candidate gets a key (uniform, or
:math:`\log E - \log w_e` with :math:`E \sim \mathrm{Exp}(1)`: the smallest :math:`m` keys of a
group are a successive sample of size :math:`m`, Efraimidis-Spirakis), and a sort by (group, key)
ranks them; with replacement each draw is an inverse-CDF lookup (``searchsorted``) in the running
sum of the weights. Costs :math:`O(C \log C)` for :math:`C` candidate edges.

:func:`sort_csr_by_tag` / :func:`sort_csc_by_tag` return a copy of the graph with DGL's
``_TAG_OFFSET`` node feature (row :math:`v`: where each tag's neighbours begin in :math:`v`'s
tag-sorted adjacency) and remember that tag-sorted adjacency on the copy for
:func:`sample_neighbors_biased` (unigraph keeps its CSR in edge id order, so the order is kept
beside it; edge ids are unchanged, as in DGL). On a graph without that record (offsets set by
hand, or a copy moved with ``.to()``), the offsets are read against the edge-id-ordered CSR.

Differs from DGL where DGL crashes or guesses: fanouts below -1 and non-finite weights are
refused, a ``prob`` named on none of the sampled relations is refused (DGL silently samples
uniformly), integer ``prob`` other than int8/uint8 is refused as in DGL;
``sample_neighbors_fused`` with ``edge_dir='out'`` gives a block whose destination nodes are its
source nodes (DGL keeps only the seeds there, and its edges end outside them); its ``mapping``
argument is refused.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor

from unigraph.dgl.base import EID, NID, DGLError
from unigraph.dgl.views import as_ids, first_appearance

__all__ = ["sample_neighbors", "sample_neighbors_fused", "sample_etype_neighbors", "sample_neighbors_biased",
           "select_topk", "sort_csr_by_tag", "sort_csc_by_tag"]

WEIGHT_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.float16, torch.bfloat16, torch.float32, torch.float64)
# attribute of a sort_*_by_tag graph: {"csr"|"csc": (eid of each slot, the CSR's row pointer then)};
# valid only while that very pointer tensor is the graph's (a mutation, .to() or a rebuild make a new one;
# the reference held here keeps its identity from being reused)
TAG_ORDER = "_unigraph_tag_order"


# ---------------------------------------------------------------------- arguments
def _relations(g, what: str) -> dict:
    """``{canonical etype: relation graph}`` of a unigraph.dgl graph (blocks refused)."""
    from unigraph.dgl.graph import DGLGraph
    from unigraph.dgl.heterograph import DGLHeteroGraph
    if isinstance(g, DGLHeteroGraph) and not g.is_block:
        return {cet: g[cet] for cet in g.canonical_etypes}
    if isinstance(g, DGLGraph) and not g.is_block:
        return {g.canonical_etypes[0]: g}
    raise DGLError(f"{what} needs a unigraph.dgl graph (DGLGraph or DGLHeteroGraph, not a block), "
                   f"got {type(g).__name__}{' block' if getattr(g, 'is_block', False) else ''}")


def _direction(edge_dir: str) -> str:
    if edge_dir not in ("in", "out"):
        raise DGLError(f"edge_dir can only be 'in' or 'out', got {edge_dir!r}")
    return edge_dir


def _typed_nodes(g, nodes: Any, what: str = "nodes") -> dict[str, Tensor]:
    """``{node type: int64 ids}`` for every node type (absent types: none) from an id tensor
    (one node type only) or a dict by type."""
    if not isinstance(nodes, Mapping):
        if len(g.ntypes) > 1:
            raise DGLError(f"Must specify node type when the graph is not homogeneous: give {what} as a dict "
                           f"{{node type: ids}} over {g.ntypes}")
        nodes = {g.ntypes[0]: nodes}
    if len(nodes) == 0:
        raise ValueError(f"Got an empty dictionary in the {what} argument; pass a dictionary with empty tensors as "
                         "values instead")
    unknown = [t for t in nodes if t not in g.ntypes]
    if unknown:
        raise DGLError(f"{what} names node types {unknown} the graph does not have ({g.ntypes})")
    empty = torch.zeros(0, dtype=torch.int64, device=g.device)
    return {t: as_ids(nodes[t], g.num_nodes(t), f"{what}[{t!r}]", g.device) if t in nodes else empty
            for t in g.ntypes}


def _count(value: Any, what: str) -> int:
    if (isinstance(value, Tensor) and value.numel() == 1 and not value.is_floating_point()) or \
            isinstance(value, np.integer):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise DGLError(f"{what} must be an int >= -1 (-1: every neighbour), got {value!r}")
    return int(value)


def _per_relation(g, relations: dict, value: Any, what: str) -> dict:
    """An int for every relation, from one int or a dict with one entry per relation."""
    if not isinstance(value, Mapping):
        count = _count(value, what)
        return {cet: count for cet in relations}
    if len(value) != len(relations):
        raise DGLError(f"{what} must be specified for each edge type if a dict is provided: got {list(value)} for "
                       f"{list(relations)}")
    out = {g.to_canonical_etype(etype): _count(v, f"{what}[{etype!r}]") for etype, v in value.items()}
    if len(out) != len(relations):
        raise DGLError(f"{what} names an edge type twice: {list(value)}")
    return out


def _checked_weight(weight: Any, num_edges: int, what: str) -> Tensor:
    """A 1-D tensor of one weight per edge, as float64 (bool / int8 / uint8 masks become 0/1)."""
    if not isinstance(weight, Tensor) or weight.dim() != 1 or weight.dtype not in WEIGHT_DTYPES:
        shape = tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__
        raise DGLError(f"{what} must be a 1-D tensor of float32/float64 probabilities or a bool/int8/uint8 mask, got "
                       f"{shape} {getattr(weight, 'dtype', '')}".rstrip())
    if weight.numel() != num_edges:
        raise DGLError(f"{what} has {weight.numel()} entries for {num_edges} edges")
    weight = weight.double()
    if weight.numel() and not bool(torch.isfinite(weight).all()):
        raise DGLError(f"{what} must hold finite values")
    return weight


def _weights(relations: dict, prob: Any, what: str) -> dict:
    """Each relation's edge weights (None: uniform) for ``prob``, the name of an edge feature."""
    if prob is None:
        return {cet: None for cet in relations}
    if not isinstance(prob, str):
        raise DGLError(f"{what} must be the name of an edge feature, got {type(prob).__name__}")
    out = {cet: _checked_weight(rel.edata[prob], rel.num_edges(), f"edge feature {prob!r} of {cet}")
           if prob in rel.edata else None for cet, rel in relations.items()}
    if all(w is None for w in out.values()):
        raise DGLError(f"{what} {prob!r} is not an edge feature of any relation ({list(relations)})")
    return out


def _excluded(g, relations: dict, exclude_edges: Any) -> dict:
    """Per relation, a mask of the edges to leave out (None: none)."""
    if exclude_edges is None:
        return {cet: None for cet in relations}
    if not isinstance(exclude_edges, Mapping):
        if len(relations) > 1:
            raise DGLError("Must specify etype when the graph is not homogeneous: give exclude_edges as a dict "
                           "{edge type: edge ids}")
        exclude_edges = {next(iter(relations)): exclude_edges}
    out = {cet: None for cet in relations}
    for etype, ids in exclude_edges.items():
        cet = g.to_canonical_etype(etype)
        mask = torch.zeros(relations[cet].num_edges(), dtype=torch.bool, device=g.device)
        mask[as_ids(ids, mask.numel(), f"exclude_edges[{etype!r}]", g.device)] = True
        out[cet] = mask
    return out


# ---------------------------------------------------------------------- candidates and picks
def stable_argsort(values: Tensor, descending: bool = False) -> Tensor:
    """The stable sort order of ``values`` (ids, counts or float keys). Integer ids are sorted as
    float64 (exact below 2**53): torch's CPU sort of int64 is several times slower than of
    float64 (0.18 s against 0.03 s for 200k values here), and these sorts dominate sampling."""
    keys = values if values.is_floating_point() else values.double()
    return torch.sort(keys, descending=descending, stable=True).indices


def _rows(rel, seeds: Tensor, edge_dir: str) -> tuple[Tensor, Tensor, Tensor]:
    """The candidate edges of ``seeds`` in ``rel``: ``(row, slot, eid)``, row = index in ``seeds``,
    slot = position in the CSR (in-CSR by destination for 'in', out-CSR by source for 'out')."""
    ptr, _, eid = rel.in_csr() if edge_dir == "in" else rel.out_csr()
    return _expand(ptr, seeds) + (eid,)


def _expand(ptr: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
    """``(row, slot)``: every CSR slot of ``rows``, row after row in the order given."""
    start, count = ptr[rows], ptr[rows + 1] - ptr[rows]
    row = torch.repeat_interleave(torch.arange(rows.numel(), device=ptr.device), count)
    first = torch.cumsum(count, 0) - count
    return row, (start - first)[row] + torch.arange(row.numel(), device=ptr.device)


def _group_starts(group: Tensor, num_groups: int) -> tuple[Tensor, Tensor]:
    """Candidates per group and where each group begins (candidates sorted by group)."""
    size = torch.bincount(group, minlength=num_groups)
    return size, torch.cumsum(size, 0) - size


def _rank_in_group(group: Tensor, key: Tensor, num_groups: int, descending: bool = False) -> tuple[Tensor, Tensor]:
    """``(order, rank)``: the candidates ordered by (group, key) (ties: candidate order) and each
    ordered candidate's rank inside its group."""
    order = stable_argsort(key, descending)
    order = order[stable_argsort(group[order])]
    _, start = _group_starts(group, num_groups)
    return order, torch.arange(order.numel(), device=group.device) - start[group[order]]


def _pick(group: Tensor, num_groups: int, weight: Tensor | None, fanout: Tensor, replace: bool) -> Tensor:
    """DGL's sampling rule (module docstring) for candidates grouped by ``group`` (ascending):
    the picked candidate indices, group after group. ``fanout``: one int per group (-1: all)."""
    eligible = weight > 0 if weight is not None else torch.ones_like(group, dtype=torch.bool)
    nnz = torch.bincount(group[eligible], minlength=num_groups)
    take_all = fanout == -1
    if replace:
        draws = torch.where(take_all | (nnz == 0), 0, fanout)
        drawn = _draw_with_replacement(group, num_groups, weight, eligible, draws)
        everything = (eligible & take_all[group]).nonzero().flatten()
        return _merge_by_group(group, everything, drawn)
    keep = torch.where(take_all, nnz, torch.minimum(fanout, nnz))
    whole = keep == nnz                      # every eligible candidate of the group: nothing to draw
    chosen = eligible & whole[group]
    sampled = eligible & ~whole[group]
    if bool(sampled.any()):
        key = torch.full(group.shape, torch.inf, dtype=torch.float64, device=group.device)
        race = torch.empty(int(sampled.sum()), dtype=torch.float64, device=group.device)
        if weight is None:
            key[sampled] = race.uniform_()
        else:   # log E - log w: the smallest m keys are a successive weighted sample of size m
            key[sampled] = race.exponential_().log() - weight[sampled].log()
        order, rank = _rank_in_group(group, key, num_groups)
        won = rank < keep[group[order]]
        chosen[order[won & sampled[order]]] = True
    return chosen.nonzero().flatten()


def _draw_with_replacement(group: Tensor, num_groups: int, weight: Tensor | None, eligible: Tensor,
                           draws: Tensor) -> Tensor:
    """``draws[g]`` independent picks in each group ``g``, proportional to ``weight`` (uniform
    without), as candidate indices group after group."""
    size, start = _group_starts(group, num_groups)
    owner = torch.repeat_interleave(torch.arange(num_groups, device=group.device), draws)
    u = torch.rand(owner.numel(), dtype=torch.float64, device=group.device)
    if weight is None:
        offset = torch.minimum((u * size[owner]).long(), size[owner] - 1)
        return start[owner] + offset
    w = torch.where(eligible, weight, 0.0)
    running = torch.cumsum(w, 0)
    before = running - w                                        # weight of the candidates before each
    total = torch.zeros(num_groups, dtype=torch.float64, device=group.device).index_add_(0, group, w)
    base = before[start.clamp(max=max(group.numel() - 1, 0))] if group.numel() else total
    picked = torch.searchsorted(running, base[owner] + u * total[owner], right=True)
    last = torch.full((num_groups,), -1, dtype=torch.int64, device=group.device)
    last = last.scatter_reduce(0, group[eligible], eligible.nonzero().flatten(), "amax")
    return torch.minimum(torch.maximum(picked, start[owner]), last[owner])   # (rounding at a group's end)


def _merge_by_group(group: Tensor, first: Tensor, second: Tensor) -> Tensor:
    """Two lists of candidate indices, each grouped by group, merged group after group."""
    both = torch.cat([first, second])
    return both[stable_argsort(group[both])]


# ---------------------------------------------------------------------- the sampled graph
def _frontier(g, relations: dict, picked: dict, copy_ndata: bool, copy_edata: bool, store_eid: bool):
    """A graph with every node of ``g`` and, per relation, the edges ``picked[cet]`` (edge ids of
    ``g``, in that order): node features shared with ``g`` (``copy_ndata``), edge features
    gathered (``copy_edata``), ``edata[EID]`` the picked ids (with ``copy_edata`` or ``store_eid``)."""
    from unigraph.dgl.convert import heterograph
    data = {}
    for cet, rel in relations.items():
        src, dst = rel.find_edges(picked[cet])
        data[cet] = (src.long(), dst.long())
    out = heterograph(data, {t: g.num_nodes(t) for t in g.ntypes}, idtype=g.idtype, device=g.device)
    if copy_ndata:
        for ntype in g.ntypes:
            for key, value in g.nodes[ntype].data.items():
                out.nodes[ntype].data[key] = value
    for cet, rel in relations.items():
        target = out.edges[cet].data
        if copy_edata:
            for key, value in rel.edata.items():
                target[key] = value[picked[cet]]
        if copy_edata or store_eid:
            target[EID] = picked[cet].to(g.idtype)
    return out


def _moved(graph, output_device):
    return graph if output_device is None else graph.to(output_device)


# ---------------------------------------------------------------------- samplers
def _sample(g, nodes, fanout, edge_dir, prob, replace, exclude_edges, what) -> tuple[dict, dict, dict]:
    """The parsed relations and seeds, and per relation ``(eids, rows)``: the picked edge ids and
    the seed occurrence (index in the seeds of its type) each was picked for."""
    relations = _relations(g, what)
    edge_dir = _direction(edge_dir)
    seeds = _typed_nodes(g, nodes)
    fanouts = _per_relation(g, relations, fanout, "fanout")
    weights = _weights(relations, prob, "prob")
    excluded = _excluded(g, relations, exclude_edges)
    picked = {}
    for cet, rel in relations.items():
        rows = seeds[cet[2] if edge_dir == "in" else cet[0]]
        if rows.numel() == 0 or fanouts[cet] == 0:
            none = torch.zeros(0, dtype=torch.int64, device=g.device)
            picked[cet] = (none, none)
            continue
        row, slot, eid = _rows(rel, rows, edge_dir)
        weight = None if weights[cet] is None else weights[cet][eid[slot]]
        fanout_of_row = torch.full((rows.numel(),), fanouts[cet], dtype=torch.int64, device=g.device)
        chosen = _pick(row, rows.numel(), weight, fanout_of_row, bool(replace))
        eids, owner = eid[slot[chosen]], row[chosen]
        if excluded[cet] is not None:
            kept = ~excluded[cet][eids]
            eids, owner = eids[kept], owner[kept]
        picked[cet] = (eids, owner)
    return relations, seeds, picked


def sample_neighbors(g, nodes, fanout, edge_dir: str = "in", prob=None, replace: bool = False,
                     copy_ndata: bool = True, copy_edata: bool = True, _dist_training: bool = False,
                     exclude_edges=None, output_device=None):
    """DGL's ``sample_neighbors``: for each seed of ``nodes`` (ids, or ``{node type: ids}``),
    ``fanout`` of its in-edges (out-edges with ``edge_dir='out'``) per relation, by the rule of
    the module docstring.

    Args:
        g: a ``DGLGraph`` or ``DGLHeteroGraph`` (any device).
        nodes: seed ids, or a dict by node type.
        fanout: an int (-1: every neighbour) or ``{edge type: int}`` for every relation.
        prob: name of an edge feature of non-negative weights (float) or a bool/int8/uint8 mask;
            relations without it are sampled uniformly.
        replace: draw with replacement.
        exclude_edges: edge ids (or ``{edge type: ids}``) removed from the sample.
        copy_ndata / copy_edata: share node features / gather edge features into the result.
        output_device: move the result there.

    Returns:
        A graph of the same type with all of ``g``'s nodes and the sampled edges;
        ``edata[dgl.EID]`` holds their ids in ``g`` (with ``copy_edata``).
    """
    if _dist_training:
        raise DGLError("sample_neighbors: _dist_training (DGL's distributed sampler) is not supported")
    relations, _, picked = _sample(g, nodes, fanout, edge_dir, prob, replace, exclude_edges, "sample_neighbors")
    picked = {cet: eids for cet, (eids, _) in picked.items()}
    return _moved(_frontier(g, relations, picked, copy_ndata, copy_edata, store_eid=False), output_device)


def sample_neighbors_fused(g, nodes, fanout, edge_dir: str = "in", prob=None, replace: bool = False,
                           copy_ndata: bool = True, copy_edata: bool = True, exclude_edges=None, mapping=None):
    """DGL's ``sample_neighbors_fused``: :func:`sample_neighbors` made into a block at once.

    Per node type, the source nodes are the seeds of that type (as given) followed by the
    sampled neighbours in order of first appearance (relation after relation). ``edge_dir='in'``:
    the destination nodes are the seeds and each edge goes from a neighbour to the seed it was
    sampled for; ``edge_dir='out'``: each edge goes from the seed to the neighbour and the
    destination nodes are the source nodes (DGL keeps only the seeds there, so its edges end
    outside the destination nodes). With ``copy_ndata``, node features are gathered and
    ``srcdata`` / ``dstdata[dgl.NID]`` hold the ids in ``g``; with ``copy_edata``, edge features and
    ``edata[dgl.EID]`` likewise (DGL sets the ids only with the features). ``mapping`` (DGL's
    reusable scratch array) is refused."""
    if mapping is not None:
        raise DGLError("sample_neighbors_fused: mapping (DGL's reusable id scratch space) is not supported; leave it "
                       "None")
    relations, seeds, picked = _sample(g, nodes, fanout, edge_dir, prob, replace, exclude_edges,
                                       "sample_neighbors_fused")
    outward = edge_dir == "out"
    reached = {t: [] for t in g.ntypes}   # per node type, the neighbours each relation reached
    ends = {}
    for cet, rel in relations.items():
        src, dst = rel.find_edges(picked[cet][0])
        ends[cet] = (dst if outward else src).long()
        reached[cet[2] if outward else cet[0]].append(ends[cet])
    src_nodes = {t: _seeds_then_new(seeds[t], torch.cat(found) if found else seeds[t][:0], g.num_nodes(t))
                 for t, found in reached.items()}
    dst_nodes = src_nodes if outward else seeds
    local = {t: _local_ids(ids, g.num_nodes(t)) for t, ids in src_nodes.items()}
    data = {}
    for cet in relations:
        owner, end = picked[cet][1], local[cet[2] if outward else cet[0]][ends[cet]]
        data[cet] = (owner, end) if outward else (end, owner)
    return _block(g, relations, data, src_nodes, dst_nodes, {cet: p[0] for cet, p in picked.items()},
                  copy_ndata, copy_edata)


def _seeds_then_new(seeds: Tensor, found: Tensor, num_nodes: int) -> Tensor:
    """The seeds (as given), then the nodes of ``found`` that are not seeds, by first appearance."""
    is_seed = torch.zeros(num_nodes, dtype=torch.bool, device=seeds.device)
    is_seed[seeds] = True
    new = found[~is_seed[found]]
    return torch.cat([seeds, first_appearance(new) if new.numel() else new])


def _local_ids(nodes: Tensor, num_nodes: int) -> Tensor:
    """Node id -> position in ``nodes`` (a repeated node: its last position, as DGL maps seeds)."""
    local = torch.full((num_nodes,), -1, dtype=torch.int64, device=nodes.device)
    return local.scatter_reduce(0, nodes, torch.arange(nodes.numel(), device=nodes.device), "amax")


def _block(g, relations: dict, data: dict, src_nodes: dict, dst_nodes: dict, eids: dict, copy_ndata: bool,
           copy_edata: bool):
    """A block of the edges ``data`` (local ids) over the node lists, with DGL's id features."""
    from unigraph.dgl.convert import create_block
    block = create_block(data, {t: ids.numel() for t, ids in src_nodes.items()},
                         {t: ids.numel() for t, ids in dst_nodes.items()}, idtype=g.idtype, device=g.device)
    for side, nodes_of in ((block.srcnodes, src_nodes), (block.dstnodes, dst_nodes)):
        for ntype, ids in nodes_of.items():
            if copy_ndata:   # (DGL sets the id features only with the features)
                store = side[ntype].data
                for key, value in g.nodes[ntype].data.items():
                    store[key] = value[ids]
                store[NID] = ids.to(g.idtype)
    for cet, rel in relations.items():
        if copy_edata:
            target = block.edges[cet].data
            for key, value in rel.edata.items():
                target[key] = value[eids[cet]]
            target[EID] = eids[cet].to(g.idtype)
    return block


def sample_etype_neighbors(g, nodes, etype_offset, fanout, edge_dir: str = "in", prob=None, replace: bool = False,
                           copy_ndata: bool = True, copy_edata: bool = True, etype_sorted: bool = False,
                           _dist_training: bool = False, output_device=None):
    """DGL's ``sample_etype_neighbors`` on a homogeneous graph whose edges are typed by id ranges
    (``to_homogeneous``'s layout): edges ``etype_offset[t] <= id < etype_offset[t + 1]`` are of
    type ``t``; each seed keeps ``fanout[t]`` of its in-edges (out-edges) of each type ``t``
    (rule of the module docstring).

    Args:
        etype_offset: ``T + 1`` non-decreasing edge ids from 0 to the edge count.
        fanout: an int tensor (or list) of ``T`` fanouts (-1: all).
        prob: None, the name of an edge feature (indexed by edge id), or a list of ``T`` tensors
            (one weight per edge of that type, or None for uniform).
        etype_sorted: DGL's hint that each adjacency is sorted by type; the result does not
            depend on it.
    """
    from unigraph.dgl.graph import DGLGraph
    if _dist_training:
        raise DGLError("sample_etype_neighbors: _dist_training (DGL's distributed sampler) is not supported")
    if not isinstance(g, DGLGraph) or g.is_block or g.is_bipartite:
        raise DGLError("sample_etype_neighbors needs a homogeneous unigraph.dgl graph (dgl.to_homogeneous of a "
                       f"heterograph), got {type(g).__name__}")
    if isinstance(nodes, Mapping):
        if len(nodes) != 1:
            raise DGLError("sample_etype_neighbors: the graph has one node type; give nodes as ids")
        nodes = next(iter(nodes.values()))
    seeds = as_ids(nodes, g.num_nodes(), "nodes", g.device)
    offsets, fanouts = _etype_layout(g, etype_offset, fanout)
    num_types = fanouts.numel()
    weight_of_edge = _etype_weights(g, prob, offsets)
    row, slot, eid = _rows(g, seeds, _direction(edge_dir))
    edge = eid[slot]
    etype = torch.searchsorted(offsets, edge, right=True) - 1
    group = row * num_types + etype
    order = stable_argsort(group)                          # seed, then type, then edge id order
    group, edge = group[order], edge[order]
    weight = None if weight_of_edge is None else weight_of_edge[edge]
    fanout_of_group = fanouts.repeat(seeds.numel())
    picked = edge[_pick(group, seeds.numel() * num_types, weight, fanout_of_group, bool(replace))]
    relations = {g.canonical_etypes[0]: g}
    out = _frontier(g, relations, {g.canonical_etypes[0]: picked}, copy_ndata, copy_edata, store_eid=False)
    return _moved(out, output_device)


def _etype_layout(g, etype_offset: Any, fanout: Any) -> tuple[Tensor, Tensor]:
    offsets = torch.as_tensor(etype_offset, dtype=torch.int64).reshape(-1).to(g.device)
    if offsets.numel() < 2 or int(offsets[0]) != 0 or int(offsets[-1]) != g.num_edges() or \
            bool((offsets[1:] < offsets[:-1]).any()):
        raise DGLError(f"etype_offset must rise from 0 to the edge count {g.num_edges()}, got {offsets.tolist()}")
    if isinstance(fanout, (int, bool)) or (isinstance(fanout, Tensor) and fanout.is_floating_point()):
        raise DGLError(f"fanout must be an int tensor (or list) of one fanout per edge type, got {fanout!r}")
    fanouts = torch.as_tensor(fanout, dtype=torch.int64).reshape(-1).to(g.device)
    if fanouts.numel() != offsets.numel() - 1:
        raise DGLError(f"fanout has {fanouts.numel()} entries for {offsets.numel() - 1} edge types")
    if bool((fanouts < -1).any()):
        raise DGLError(f"fanouts must be ints >= -1 (-1: every neighbour), got {fanouts.tolist()}")
    return offsets, fanouts


def _etype_weights(g, prob: Any, offsets: Tensor) -> Tensor | None:
    """One weight per edge id for sample_etype_neighbors (None: uniform everywhere)."""
    if prob is None:
        return None
    if isinstance(prob, str):
        if prob not in g.edata:
            raise DGLError(f"prob {prob!r} is not an edge feature of the graph ({list(g.edata.keys())})")
        return _checked_weight(g.edata[prob], g.num_edges(), f"edge feature {prob!r}")
    if not isinstance(prob, (list, tuple)) or len(prob) != offsets.numel() - 1:
        raise DGLError(f"prob must be None, an edge feature name or a list of one tensor (or None) per edge type "
                       f"({offsets.numel() - 1}), got {type(prob).__name__}")
    sizes = (offsets[1:] - offsets[:-1]).tolist()
    parts = [torch.ones(n, dtype=torch.float64, device=g.device) if p is None or (isinstance(p, Tensor) and
             p.numel() == 0 and n > 0) else _checked_weight(p, n, f"prob[{t}]").to(g.device)
             for t, (p, n) in enumerate(zip(prob, sizes))]
    return torch.cat(parts) if parts else None


def select_topk(g, k, weight: str, nodes=None, edge_dir: str = "in", ascending: bool = False,
                copy_ndata: bool = True, copy_edata: bool = True, output_device=None):
    """DGL's ``select_topk``: for each node of ``nodes`` (default: every node of every type), its
    ``k`` in-edges (out-edges) of largest ``weight`` (``ascending``: smallest) per relation, ties
    in edge id order; ``k`` an int (-1: all) or ``{edge type: int}``. Every relation must have the
    edge feature ``weight`` (1-D, any real dtype). The edges come seed by seed in weight order."""
    relations = _relations(g, "select_topk")
    edge_dir = _direction(edge_dir)
    seeds = {t: torch.arange(g.num_nodes(t), device=g.device) for t in g.ntypes} if nodes is None \
        else _typed_nodes(g, nodes)
    ks = _per_relation(g, relations, k, "k")
    picked = {}
    for cet, rel in relations.items():
        if weight not in rel.edata:
            raise DGLError(f'Edge weights "{weight}" do not exist for relation graph "{cet}".')
        values = rel.edata[weight]
        if values.dim() != 1 or values.dtype == torch.bool or values.is_complex():
            raise DGLError(f"select_topk: edge feature {weight!r} of {cet} must be 1-D real, got "
                           f"{tuple(values.shape)} {values.dtype}")
        rows = seeds[cet[2] if edge_dir == "in" else cet[0]]
        if rows.numel() == 0 or ks[cet] == 0:
            picked[cet] = torch.zeros(0, dtype=torch.int64, device=g.device)
            continue
        row, slot, eid = _rows(rel, rows, edge_dir)
        order, rank = _rank_in_group(row, values[eid[slot]], rows.numel(), descending=not ascending)
        keep = order if ks[cet] == -1 else order[rank < ks[cet]]
        picked[cet] = eid[slot[keep]]
    return _moved(_frontier(g, relations, picked, copy_ndata, copy_edata, store_eid=False), output_device)


# ---------------------------------------------------------------------- tags
def _tag_sorted(g, tag: Tensor, tag_offset_name: str, tag_type: str, fmt: str):
    from unigraph.dgl.graph import DGLGraph
    what = f"sort_{fmt}_by_tag"
    if not isinstance(g, DGLGraph) or g.is_block:
        raise DGLError(f"{what}: Only support homograph and bipartite graph (a unigraph.dgl DGLGraph of one relation), "
                       f"got {type(g).__name__}")
    if tag_type not in ("node", "edge"):
        raise DGLError(f"{what}: tag_type should be either 'node' or 'edge', got {tag_type!r}")
    tag = torch.as_tensor(tag).to(g.device)
    if tag.dim() != 1 or tag.is_floating_point() or tag.dtype == torch.bool:
        raise DGLError(f"{what}: tag must be a 1-D integer tensor, got {tuple(tag.shape)} {tag.dtype}")
    src, dst = g.all_edges(order="eid")
    if tag_type == "node":   # a neighbour's tag: the destination's in a CSR row, the source's in a CSC column
        neighbours = (dst if fmt == "csr" else src).long()
        expected = g.num_dst_nodes() if fmt == "csr" else g.num_src_nodes()
        if tag.numel() != expected:
            raise DGLError(f"{what}: tag has {tag.numel()} entries for {expected} neighbour nodes")
        tag = tag[neighbours]
    elif tag.numel() != g.num_edges():
        raise DGLError(f"{what}: an edge tag has {tag.numel()} entries for {g.num_edges()} edges")
    tag = tag.long()
    if tag.numel() and int(tag.min()) < 0:
        raise DGLError(f"{what}: tags must be non-negative, got {int(tag.min())}")
    num_tags = int(tag.max()) + 1 if tag.numel() else 1
    ptr, _, eid = g.out_csr() if fmt == "csr" else g.in_csr()
    rows = ptr.numel() - 1
    row = torch.repeat_interleave(torch.arange(rows, device=g.device), ptr[1:] - ptr[:-1])
    slot_tag = tag[eid]
    order = stable_argsort(row * num_tags + slot_tag)     # by row, then tag, then edge id
    counts = torch.zeros(rows * num_tags, dtype=torch.int64, device=g.device)
    counts.index_add_(0, row * num_tags + slot_tag, torch.ones_like(row))
    offsets = torch.zeros(rows, num_tags + 1, dtype=torch.int64, device=g.device)
    offsets[:, 1:] = torch.cumsum(counts.view(rows, num_tags), 1)
    out = g.clone()
    (out.srcdata if fmt == "csr" else out.dstdata)[tag_offset_name] = offsets.to(g.idtype)
    setattr(out, TAG_ORDER, {**getattr(g, TAG_ORDER, {}), fmt: (eid[order], ptr)})
    return out


def _tag_order(g, fmt: str) -> Tensor:
    """The edge of each CSR (CSC) slot in the order ``sort_csr_by_tag`` (``sort_csc_by_tag``) made;
    refused where it is unknown or stale: the offsets would then be read against the edge-id
    order, silently sampling the wrong tags."""
    entry = getattr(g, TAG_ORDER, {}).get(fmt)
    if entry is None or entry[1] is not (g.out_csr() if fmt == "csr" else g.in_csr())[0]:
        name = "sort_csc_by_tag" if fmt == "csc" else "sort_csr_by_tag"
        raise DGLError(f"sample_neighbors_biased needs the graph {name} returned (its tag order is not known for this "
                       f"graph: never sorted, or lost by a copy such as .to() or by a mutation); call {name} on it")
    return entry[0].to(g.device)


def sort_csr_by_tag(g, tag, tag_offset_name: str = "_TAG_OFFSET", tag_type: str = "node"):
    """DGL's ``sort_csr_by_tag``: a copy of ``g`` whose out-adjacency of each node is sorted by
    the tag of the destination (``tag_type='node'``, one tag per node) or of the edge
    (``'edge'``); ``srcdata[tag_offset_name]`` ``[num_src, num_tags + 1]`` holds where each
    tag's edges begin in each node's sorted row. Edge ids do not change."""
    return _tag_sorted(g, tag, tag_offset_name, tag_type, "csr")


def sort_csc_by_tag(g, tag, tag_offset_name: str = "_TAG_OFFSET", tag_type: str = "node"):
    """DGL's ``sort_csc_by_tag``: as :func:`sort_csr_by_tag` for in-adjacencies (the tag of each
    in-edge's source, or of the edge); the offsets go to ``dstdata[tag_offset_name]``."""
    return _tag_sorted(g, tag, tag_offset_name, tag_type, "csc")


def sample_neighbors_biased(g, nodes, fanout, bias, edge_dir: str = "in", tag_offset_name: str = "_TAG_OFFSET",
                            replace: bool = False, copy_ndata: bool = True, copy_edata: bool = True,
                            output_device=None):
    """DGL's ``sample_neighbors_biased``: :func:`sample_neighbors` on a graph from
    :func:`sort_csc_by_tag` (``edge_dir='in'``) or :func:`sort_csr_by_tag` (``'out'``) where an
    edge of tag ``t`` weighs ``bias[t]`` (``fanout`` an int, ``bias`` one non-negative float per
    tag). ``edata[dgl.EID]`` is always set."""
    from unigraph.dgl.graph import DGLGraph
    edge_dir = _direction(edge_dir)
    if not isinstance(g, DGLGraph) or g.is_block:
        raise DGLError(f"sample_neighbors_biased needs a unigraph.dgl DGLGraph of one relation, got {type(g).__name__}")
    store = g.dstdata if edge_dir == "in" else g.srcdata
    if tag_offset_name not in store:
        raise DGLError(f"sample_neighbors_biased: the graph has no {'dst' if edge_dir == 'in' else 'src'}data"
                       f"[{tag_offset_name!r}]; make the graph with sort_{'csc' if edge_dir == 'in' else 'csr'}_by_tag")
    offsets = store[tag_offset_name].long()
    bias = torch.as_tensor(bias).to(g.device)
    if bias.dim() != 1 or not bias.is_floating_point() or bias.numel() != offsets.shape[1] - 1:
        raise DGLError(f"bias must be a 1-D float tensor of one bias per tag ({offsets.shape[1] - 1}), got "
                       f"{tuple(bias.shape)} {bias.dtype}")
    bias = _checked_weight(bias, bias.numel(), "bias")
    seeds = as_ids(nodes, offsets.shape[0], "nodes", g.device)
    fanout = _count(fanout, "fanout")
    ptr, _, eid = g.in_csr() if edge_dir == "in" else g.out_csr()
    fmt = "csc" if edge_dir == "in" else "csr"
    slot_eid = _tag_order(g, fmt)     # each slot's edge in the tag-sorted order
    picked = torch.zeros(0, dtype=torch.int64, device=g.device)
    if seeds.numel() and fanout != 0:
        row, slot = _expand(ptr, seeds)
        position = slot - ptr[seeds][row]
        tag = (offsets[seeds][row, 1:] <= position[:, None]).sum(1)     # the tag range the slot lies in
        weight = bias[tag.clamp(max=bias.numel() - 1)]
        fanout_of_row = torch.full((seeds.numel(),), fanout, dtype=torch.int64, device=g.device)
        picked = slot_eid[slot[_pick(row, seeds.numel(), weight, fanout_of_row, bool(replace))]]
    relations = {g.canonical_etypes[0]: g}
    out = _frontier(g, relations, {g.canonical_etypes[0]: picked}, copy_ndata, copy_edata, store_eid=True)
    return _moved(out, output_device)
