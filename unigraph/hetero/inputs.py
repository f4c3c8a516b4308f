"""Typed node features of a heterogeneous layer: ``x_dict`` checked against the graph, and stacked
type after type (the row order of :mod:`unigraph.hetero.relational`)."""
from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import Tensor

from unigraph.hetero.graph import HeteroGraph
from unigraph.message_passing.inputs import rows_prefix


def relation_positions(hg: HeteroGraph, known: list, who: str, device: torch.device) -> Tensor:
    """The position of each of ``hg``'s relations in a layer's ``known`` relations (its weights), or
    ``ValueError`` naming the relations it has no weights for."""
    position = {r: i for i, r in enumerate(known)}
    unknown = [r for r in hg.relations if r not in position]
    if unknown:
        raise ValueError(f"{who} has no weights for relations {unknown}; it knows {known}")
    return torch.tensor([position[r] for r in hg.relations], dtype=torch.int64, device=device)


def relation_types(hg: HeteroGraph) -> set[str]:
    """Node types that are a source or destination of some relation."""
    return {t for relation in hg.relations for t in (relation[0], relation[2])}


class TypedInputs:
    """``x_dict`` of a layer on ``hg``: source features (``src``) and destination features (``dst``,
    the first ``num_dst_nodes`` rows of each type in a block), checked: every type that takes part
    in a relation and has nodes must be present with one row per node; with ``width`` every tensor
    must be ``[rows, width]`` (``width`` an int or ``{type: int}``)."""

    def __init__(self, hg: HeteroGraph, x_dict: Any, who: str, width: int | Mapping[str, int] | None = None):
        if not isinstance(x_dict, Mapping):
            raise TypeError(f"{who} expects node features as a dict {{node_type: tensor}}, got {type(x_dict).__name__}")
        unknown = [t for t in x_dict if t not in hg.node_types]
        if unknown:
            raise ValueError(f"{who}: x_dict has node types {unknown} that the graph does not have ({hg.node_types})")
        needed = relation_types(hg)
        missing = [t for t in hg.node_types if t in needed and t not in x_dict and hg.num_src_nodes(t) > 0]
        if missing:
            raise ValueError(f"{who}: x_dict has no features for node types {missing}, which take part in relations")
        self.hg = hg
        self.src: dict[str, Tensor] = {}
        self.dst: dict[str, Tensor] = {}
        for ntype, x in x_dict.items():
            rows = hg.num_src_nodes(ntype)
            expected = width.get(ntype) if isinstance(width, Mapping) else width
            if not isinstance(x, Tensor) or x.dim() != 2 or x.shape[0] != rows or \
                    (expected is not None and x.shape[1] != expected):
                shape = list(x.shape) if isinstance(x, Tensor) else type(x).__name__
                raise ValueError(f"{who}: features of node type {ntype!r} must be [{rows}, "
                                 f"{expected if expected is not None else 'F'}] (one row per "
                                 f"{'source ' if hg.is_block else ''}node), got {shape}")
            if not x.is_floating_point():
                raise TypeError(f"{who}: features of node type {ntype!r} must be floating point, got {x.dtype}")
            self.src[ntype] = x
            self.dst[ntype] = rows_prefix(x, hg.num_dst_nodes(ntype)) if hg.is_block else x
        kinds = {(x.dtype, x.device) for x in self.src.values()}
        if len(kinds) > 1:
            raise TypeError(f"{who}: node features of all types must share one dtype and device, got "
                            f"{ {t: (str(x.dtype), str(x.device)) for t, x in self.src.items()} }")
        like = next(iter(self.src.values()), None)
        self.dtype = like.dtype if like is not None else torch.get_default_dtype()
        self.device = like.device if like is not None else hg.device

    def stacked(self, side: str, features: Mapping[str, Tensor] | None = None, width: int | None = None) -> Tensor:
        """``features`` (default: the inputs of ``side``) of every node type, type after type; a type
        without features gets zero rows (it takes part in no relation, so nothing reads them)."""
        features = features if features is not None else (self.src if side == "src" else self.dst)
        counts = self.hg.num_src_nodes_dict if side == "src" else self.hg.num_dst_nodes_dict
        widths = {x.shape[1] for x in features.values()}
        if width is None:
            if len(widths) > 1:
                raise ValueError(f"features of different widths {sorted(widths)} cannot be stacked")
            width = widths.pop() if widths else 0
        parts = [features[t] if t in features else torch.zeros(counts[t], width, dtype=self.dtype, device=self.device)
                 for t in self.hg.node_types]
        return torch.cat(parts) if parts else torch.zeros(0, width, dtype=self.dtype, device=self.device)

    def split(self, stacked: Tensor, side: str = "dst") -> dict[str, Tensor]:
        """Per-type rows of a tensor stacked type after type."""
        counts = self.hg.num_src_nodes_dict if side == "src" else self.hg.num_dst_nodes_dict
        return dict(zip(self.hg.node_types, stacked.split([counts[t] for t in self.hg.node_types])))
