r"""DGL's heterograph modules: ``HeteroGraphConv`` (one module per relation, results combined per
destination type), ``HeteroLinear`` and ``HeteroEmbedding`` (one ``nn.Linear`` / ``nn.Embedding``
per key).

.. math::
    h_v' = \mathop{\mathrm{AGG}}_{r = (s, e, t(v))} f_r\big(g_r, (h_{s}, h_{t(v)})\big)_v

for each node ``v`` of type ``t(v)``, over the relations ``r`` into that type whose source type
has features, in the graph's (sorted) relation order; AGG is sum, max, min, mean, a stack along
dimension 1, or a callable ``agg(list_of_tensors, dst_type)``. Each relation module ``f_r`` gets the
relation graph ``g[r]`` and the pair (source features, destination features), is called even when
its relation has no edge, and is allowed zero-in-degree destinations
(``set_allow_zero_in_degree(True)``, as DGL does).
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Mapping

import torch
from torch import Tensor, nn

from unigraph.dgl.base import DGLError
from unigraph.dgl.graph import DGLGraph
from unigraph.dgl.heterograph import DGLHeteroGraph

AGGREGATES = ("sum", "max", "min", "mean", "stack")


class HeteroGraphConv(nn.Module):
    """Args (DGL's): ``mods`` (``{etype name or (src, etype, dst): module}``; a canonical key wins
    over a name), ``aggregate`` (one of ``'sum'``, ``'max'``, ``'min'``, ``'mean'``, ``'stack'``, or
    a callable).

    Forward: ``g`` a unigraph.dgl heterograph, graph or block; ``inputs`` ``{node type: features}``
    (on a block each destination type takes its first ``num_dst_nodes`` rows) or a pair ``(src
    dict, dst dict)``; ``mod_args`` / ``mod_kwargs`` ``{etype name (or canonical etype): extra
    args / kwargs}`` for the relation's module.

    Shapes: ``{node type: [N_t, *]}`` -> ``{dst type: [N_dst_t, *out]}`` for every destination
    type that some relation reached (``[N_dst_t, R_t, *out]`` with ``'stack'``, ``R_t`` the number
    of such relations).
    """

    def __init__(self, mods: Mapping[Any, nn.Module], aggregate: str | Callable = "sum"):
        super().__init__()
        if not isinstance(mods, Mapping):
            raise TypeError(f"HeteroGraphConv: mods must be a dict {{etype: module}}, got {type(mods).__name__}")
        self.mod_dict = mods  # the keys as given (DGL's attribute); the modules are registered in self.mods
        self.mods = nn.ModuleDict({str(key): mod for key, mod in mods.items()})
        for mod in self.mods.values():
            allow = getattr(mod, "set_allow_zero_in_degree", None)
            if callable(allow):
                allow(True)
        self.agg_fn = get_aggregate_fn(aggregate) if isinstance(aggregate, str) else aggregate
        if not callable(self.agg_fn):
            raise TypeError(f"HeteroGraphConv: aggregate must be one of {AGGREGATES} or a callable, got {aggregate!r}")

    def _get_module(self, cet: tuple[str, str, str]) -> nn.Module:
        """The module of relation ``cet``: under its canonical key, else under its name."""
        for key in (str(cet), str(cet[1])):
            if key in self.mods:
                return self.mods[key]
        raise DGLError(f"HeteroGraphConv has no module for edge type {cet} (keys: {list(self.mods)})")

    def forward(self, g, inputs, mod_args: Mapping | None = None, mod_kwargs: Mapping | None = None) -> dict:
        check_hetero_graph(g)
        src_inputs, dst_inputs = _split_inputs(g, inputs)
        mod_args, mod_kwargs = mod_args or {}, mod_kwargs or {}
        calls = []  # every relation to run, checked before any runs
        for cet in g.canonical_etypes:
            stype, etype, dtype = cet
            if stype not in src_inputs or (dst_inputs is not None and dtype not in dst_inputs):
                continue  # no features on a side: the relation takes no part (DGL's rule)
            if dst_inputs is None and dtype not in src_inputs:
                raise DGLError(f"HeteroGraphConv: relation {cet} has source features but no features for its "
                               f"destination type {dtype!r}")
            calls.append((cet, self._get_module(cet), mod_args.get(cet, mod_args.get(etype, ())),
                          mod_kwargs.get(cet, mod_kwargs.get(etype, {}))))
        dst_side = src_inputs if dst_inputs is None else dst_inputs
        outputs: dict[str, list[Tensor]] = {ntype: [] for ntype in g.dsttypes}
        for cet, mod, args, kwargs in calls:
            pair = (src_inputs[cet[0]], dst_side[cet[2]])
            outputs[cet[2]].append(mod(relation_graph(g, cet), pair, *args, **kwargs))
        return {ntype: self.agg_fn(results, ntype) for ntype, results in outputs.items() if results}


def check_hetero_graph(g) -> None:
    if not isinstance(g, (DGLHeteroGraph, DGLGraph)):
        raise DGLError(f"HeteroGraphConv expects a graph from unigraph.dgl, got {type(g).__name__}")


def relation_graph(g, cet: tuple[str, str, str]):
    """``g[cet]``; a graph of one relation is its own relation graph."""
    return g[cet] if isinstance(g, DGLHeteroGraph) else g


def _split_inputs(g, inputs) -> tuple[Mapping, Mapping | None]:
    """``(source features, destination features)`` by node type; ``None`` for the destinations
    when they are the sources' (a graph given one dict)."""
    if isinstance(inputs, tuple):
        if len(inputs) != 2 or not all(isinstance(side, Mapping) for side in inputs):
            raise TypeError("HeteroGraphConv: a tuple of inputs must be (src dict, dst dict) by node type")
        return inputs
    if not isinstance(inputs, Mapping):
        raise TypeError(f"HeteroGraphConv: inputs must be a dict {{node type: features}} or a (src, dst) pair of "
                        f"them, got {type(inputs).__name__}")
    if g.is_block:  # a block's destinations are the first rows of its sources, per type
        return inputs, {k: v[: g.number_of_dst_nodes(k)] for k, v in inputs.items() if k in g.dsttypes}
    return inputs, None


def _reduce_stacked(results: list[Tensor], dsttype: str, fn: Callable) -> Tensor:
    return fn(torch.stack(results, dim=0), dim=0)


def _max(stacked: Tensor, dim: int) -> Tensor:
    return torch.max(stacked, dim=dim).values  # not amax: a tie sends its gradient to one relation, as DGL's


def _min(stacked: Tensor, dim: int) -> Tensor:
    return torch.min(stacked, dim=dim).values


def _stack(results: list[Tensor], dsttype: str) -> Tensor:
    return torch.stack(results, dim=1)


def get_aggregate_fn(agg: str) -> Callable:
    """DGL's combiner ``fn(list of per-relation results, dst type)`` for the name ``agg``."""
    reducers = {"sum": torch.sum, "mean": torch.mean, "max": _max, "min": _min}
    if agg == "stack":
        return _stack
    if agg not in reducers:
        raise DGLError(f"Invalid cross type aggregator {agg!r}: must be one of {AGGREGATES} (or a callable)")
    return partial(_reduce_stacked, fn=reducers[agg])


class HeteroLinear(nn.Module):
    r"""One ``nn.Linear`` per key: :math:`y_k = x_k W_k^\top + b_k`.

    Args (DGL's): ``in_size`` ``{key: in width}`` (a key is a node type or an edge type triple),
    ``out_size``, ``bias``. Parameters: ``linears[str(key)]`` (``nn.Linear``'s own initialization).

    Shapes: ``{key: [N_k, in_k]}`` -> ``{key: [N_k, out_size]}`` for the keys given.
    """

    def __init__(self, in_size: Mapping[Any, int], out_size: int, bias: bool = True):
        super().__init__()
        self.linears = nn.ModuleDict({str(key): nn.Linear(width, out_size, bias=bias)
                                      for key, width in in_size.items()})

    def forward(self, feat: Mapping[Any, Tensor]) -> dict:
        _check_keys(feat, self.linears, "HeteroLinear")
        return {key: self.linears[str(key)](x) for key, x in feat.items()}


class HeteroEmbedding(nn.Module):
    """One ``nn.Embedding`` per key.

    Args (DGL's): ``num_embeddings`` ``{key: rows}`` (a key is a node type or an edge type
    triple), ``embedding_dim``. Parameters: ``embeds[str(key)]`` (``nn.Embedding``'s standard
    normal initialization; :meth:`reset_parameters` is Glorot uniform, as DGL's). ``weight`` is
    ``{key: table}`` under the keys as given.

    Shapes: ``{key: ids [*]}`` -> ``{key: [*, embedding_dim]}`` for the keys given.
    """

    def __init__(self, num_embeddings: Mapping[Any, int], embedding_dim: int):
        super().__init__()
        self.embeds = nn.ModuleDict({str(key): nn.Embedding(rows, embedding_dim)
                                     for key, rows in num_embeddings.items()})
        self.raw_keys = {str(key): key for key in num_embeddings}

    @property
    def weight(self) -> dict:
        return {self.raw_keys[name]: emb.weight for name, emb in self.embeds.items()}

    def reset_parameters(self) -> None:
        for emb in self.embeds.values():
            nn.init.xavier_uniform_(emb.weight)

    def forward(self, input_ids: Mapping[Any, Tensor]) -> dict:
        _check_keys(input_ids, self.embeds, "HeteroEmbedding")
        return {key: self.embeds[str(key)](ids) for key, ids in input_ids.items()}


def _check_keys(given: Mapping, known: nn.ModuleDict, who: str) -> None:
    if not isinstance(given, Mapping):
        raise TypeError(f"{who} expects a dict {{key: tensor}}, got {type(given).__name__}")
    unknown = [key for key in given if str(key) not in known]
    if unknown:
        raise DGLError(f"{who} has no module for keys {unknown}; it has {list(known)}")
