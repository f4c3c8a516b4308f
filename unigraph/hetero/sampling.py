"""Typed neighbour sampling: per-relation fanouts, seeds of one (or more) node types, typed blocks."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.hetero.graph import HeteroGraph, Relation
from unigraph.sampling.batch import block_from_csr
from unigraph.sampling.counter_rng import GOLDEN, KeySequence, layer_key, mix64_int
from unigraph.sampling.csr_view import check_node_ids
from unigraph.sampling.torch_kernels import mark_seeds, relabel, sample_layer, unmark

ALL = -1  # a fanout of -1 keeps every in-edge of the relation


def _check_fanout_list(values: Any, where: str) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise TypeError(f"{where} must be a non-empty list of ints (one per layer), got {values!r}")
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{where}[{i}] must be an int, got {type(value).__name__} ({value!r})")
        if value < 0 and value != ALL:
            raise ValueError(f"{where}[{i}] must be >= 0 (0: no edges of this relation) or {ALL} (every edge), "
                             f"got {value}")
    return tuple(values)


@dataclasses.dataclass
class HeteroBlocks:
    """A typed mini-batch (DGL's typed message-flow graphs).

    Fields:
        seeds: ``{node_type: ids}`` of the nodes to predict (``output_nodes``).
        input_nodes: ``{node_type: ids}`` of every node the first layer reads, per type: the seeds
            of that type first, then each hop's new nodes in order of first appearance.
        blocks: one typed block (:class:`~unigraph.HeteroGraph` with ``is_block``) per layer, in
            layer order: ``blocks[i]`` has ``num_src_nodes(t)`` source nodes
            ``input_nodes[t][:num_src_nodes(t)]`` and ``num_dst_nodes(t)`` destination nodes
            ``input_nodes[t][:num_dst_nodes(t)]`` of each type, every relation's graph a bipartite
            block between them (original edge ids in ``edata["eid"]`` with ``return_eids``), and
            ``blocks[i].num_dst_nodes(t) == blocks[i + 1].num_src_nodes(t)``.
        x: ``{node_type: features of input_nodes}``, y: labels of the seeds (filled by the caller).

    A model runs ``h = x; for layer, block in zip(layers, blocks): h = layer(block, h)``; the last
    block's destinations of type ``t`` are ``seeds[t]``, in order.
    """

    seeds: dict[str, Tensor]
    input_nodes: dict[str, Tensor]
    blocks: list[HeteroGraph]
    x: dict[str, Tensor] | None = None
    y: Tensor | None = None

    @property
    def output_nodes(self) -> dict[str, Tensor]:
        return self.seeds

    def to(self, device: torch.device | str) -> "HeteroBlocks":
        move = (lambda d: None if d is None else {k: v.to(device) for k, v in d.items()})
        return HeteroBlocks(move(self.seeds), move(self.input_nodes), [b.to(device) for b in self.blocks],
                            move(self.x), None if self.y is None else self.y.to(device))


class HeteroNeighborSampler:
    """Samples in-neighbours per relation and hop into typed blocks (:class:`HeteroBlocks`).

    Args:
        fanouts: one list for every relation (``[10, 10]``), or ``{relation: [...]}`` with an entry
            for every relation of the graph (a relation given by its triple or its unique name;
            PyG's ``num_neighbors={edge_type: [...]}``). Lists are **in layer order**, as
            :class:`~unigraph.sampling.NeighborSampler`'s: ``fanouts[r][i]`` is the fanout of
            ``blocks[i]``, so the last entry is the hop next to the seeds (PyG lists hops from the
            seeds outwards: reverse its lists). ``-1`` keeps every in-edge, ``0`` none.
        replace: sample with replacement (exactly ``fanout`` edges per node with any in-edge of
            that relation) or without (``min(fanout, in-degree)`` distinct edges).
        return_eids: record each block edge's id in its relation in ``edata["eid"]``.
        seed: seeds the keys of :meth:`sample` calls that pass no ``key``.

    Per hop (from the seeds outwards) and relation ``(s, name, d)``: every node of type ``d``
    found so far samples in-edges of that relation, with counter-based random numbers keyed by
    ``(key, hop, relation position, node)``, the same draws as
    :class:`~unigraph.sampling.NeighborSampler` makes on a homogeneous graph. New source nodes of
    type ``s`` get the next local ids of their type. Deterministic: the same graph, seeds and key
    give the same blocks; a node's sampled tree does not depend on the other seeds.
    """

    def __init__(self, fanouts: Sequence[int] | Mapping[Any, Sequence[int]], replace: bool = False, *,
                 return_eids: bool = False, seed: int = 0):
        if isinstance(fanouts, Mapping):
            if not fanouts:
                raise ValueError("fanouts must give a list for every relation; got an empty dict")
            self.fanouts: tuple | dict = {key: _check_fanout_list(v, f"fanouts[{key!r}]") for key, v in fanouts.items()}
            lengths = {len(v) for v in self.fanouts.values()}
            if len(lengths) > 1:
                raise ValueError(f"every relation's fanouts must have one entry per layer; got lengths "
                                 f"{ {k: len(v) for k, v in self.fanouts.items()} }")
            self.num_layers = lengths.pop()
        else:
            self.fanouts = _check_fanout_list(fanouts, "fanouts")
            self.num_layers = len(self.fanouts)
        if not isinstance(replace, bool):
            raise TypeError(f"replace must be a bool, got {type(replace).__name__}")
        self.replace = replace
        self.return_eids = bool(return_eids)
        self._keys = KeySequence(seed)
        self._scratch: dict[tuple[str, str, int], Tensor] = {}

    def __repr__(self) -> str:
        return f"HeteroNeighborSampler(fanouts={self.fanouts}, replace={self.replace})"

    def __getstate__(self) -> dict:  # scratch arrays belong to one process
        return {**self.__dict__, "_scratch": {}}

    def relation_fanouts(self, hg: HeteroGraph) -> dict[Relation, tuple[int, ...]]:
        """Each relation's fanouts for graph ``hg`` (checks the dict against its relations)."""
        if not isinstance(self.fanouts, dict):
            return {r: self.fanouts for r in hg.relations}
        resolved: dict[Relation, tuple[int, ...]] = {}
        for key, values in self.fanouts.items():
            relation = hg.relation(key)
            if relation in resolved:
                raise ValueError(f"fanouts name relation {relation} twice")
            resolved[relation] = values
        missing = [r for r in hg.relations if r not in resolved]
        if missing:
            raise ValueError(f"fanouts has no entry for relations {missing}; give every relation a list "
                             "(0 to leave a relation out)")
        return resolved

    def _local_ids(self, ntype: str, size: int, device: torch.device) -> Tensor:
        slot = (str(device), ntype, size)
        if slot not in self._scratch:
            self._scratch[slot] = torch.full((size,), -1, dtype=torch.int64, device=device)
        return self._scratch[slot]

    def sample(self, hg: HeteroGraph, seeds: Mapping[str, Any], *, key: int | None = None) -> HeteroBlocks:
        """Sample the typed blocks around ``seeds`` (``{node_type: distinct ids}``)."""
        if not isinstance(hg, HeteroGraph) or hg.is_block:
            raise TypeError(f"HeteroNeighborSampler samples a whole unigraph.HeteroGraph, got {hg!r}")
        if not isinstance(seeds, Mapping) or not seeds:
            raise TypeError(f"seeds must be a non-empty dict {{node_type: ids}}, got {seeds!r}")
        fanouts = self.relation_fanouts(hg)
        device = hg.device
        seed_ids = {}
        for ntype, ids in seeds.items():
            if ntype not in hg.node_types:
                raise ValueError(f"seeds name the node type {ntype!r}, which the graph does not have ({hg.node_types})")
            seed_ids[ntype] = check_node_ids(f"seeds[{ntype!r}]", ids, hg.num_nodes(ntype), device)
        key = self._keys.resolve(key)
        local = {t: self._local_ids(t, hg.num_nodes(t), device) for t in hg.node_types}
        empty = torch.empty(0, dtype=torch.int64, device=device)
        nodes = {t: [seed_ids.get(t, empty)] for t in hg.node_types}
        try:
            for ntype, ids in seed_ids.items():
                if not mark_seeds(local[ntype], ids):
                    raise ValueError(f"seeds[{ntype!r}] holds duplicate node ids; each seed must appear once")
            hop_blocks = [self._hop(hg, hop, fanouts, key, local, nodes) for hop in range(self.num_layers)]
        finally:  # leave the scratch arrays clean for the next call, also after an error
            for ntype in hg.node_types:
                unmark(local[ntype], torch.cat(nodes[ntype]))
        input_nodes = {t: torch.cat(parts) for t, parts in nodes.items()}
        return HeteroBlocks(seeds=seed_ids, input_nodes=input_nodes, blocks=hop_blocks[::-1])

    def _hop(self, hg: HeteroGraph, hop: int, fanouts: dict[Relation, tuple[int, ...]], key: int,
             local: dict[str, Tensor], nodes: dict[str, list[Tensor]]) -> HeteroGraph:
        """One hop: every relation samples in-edges of every node of its destination type found so far."""
        layer = self.num_layers - 1 - hop
        frontier = {t: torch.cat(parts) if len(parts) > 1 else parts[0] for t, parts in nodes.items()}
        num_dst = {t: f.numel() for t, f in frontier.items()}
        count = dict(num_dst)
        sampled = {}
        hop_key = layer_key(key, hop)
        for position, (relation, graph) in enumerate(hg.items()):
            src_type, _, dst_type = relation
            fanout = fanouts[relation][layer]
            rows = frontier[dst_type]
            ptr, indices, eids = graph.in_csr()
            if fanout == 0 or rows.numel() == 0 or graph.num_edges == 0:
                indptr = torch.zeros(rows.numel() + 1, dtype=torch.int64, device=rows.device)
                sampled[relation] = (indptr, indices[:0], eids[:0])
                continue
            replace = self.replace and fanout != ALL
            if fanout == ALL:
                fanout = max(1, graph.stats().max_in_degree)
            relation_key = mix64_int(hop_key + (position + 1) * GOLDEN)
            counts, positions = sample_layer(ptr, rows, fanout, replace, relation_key)
            local_src, new_nodes = relabel(indices[positions], local[src_type], count[src_type])
            nodes[src_type].append(new_nodes)
            count[src_type] += new_nodes.numel()
            indptr = torch.zeros(rows.numel() + 1, dtype=torch.int64, device=rows.device)
            torch.cumsum(counts, 0, out=indptr[1:])
            sampled[relation] = (indptr, local_src, eids[positions])
        graphs: dict[Relation, Graph] = {}
        for relation, (indptr, local_src, edge_ids) in sampled.items():
            graphs[relation] = block_from_csr(indptr, local_src, count[relation[0]],
                                              edge_ids if self.return_eids else None)
        return HeteroGraph._trusted(graphs, count, num_dst)
