"""HeteroConv: any unigraph layer per relation, combined per destination type."""
from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import Tensor

from unigraph.hetero.graph import HeteroGraph, Relation, check_relation
from unigraph.message_passing.inputs import rows_prefix
from unigraph.nn import hetero_forms

AGGREGATIONS = ("sum", "mean", "max", "min", "cat", None)


def _module_key(relation: Relation) -> str:
    """The ModuleDict key of a relation, PyG's (so a PyG state_dict loads): ``<src___name___dst>``,
    with ``.`` (not allowed in a module name) written ``#``."""
    return f"<{'___'.join(relation)}>".replace(".", "#")


def group(outputs: list[Tensor], aggr: str | None) -> Tensor:
    """Combine the outputs of the relations into one destination type (PyG's ``HeteroConv`` rule):
    element-wise sum, mean, max or min, ``"cat"`` along the features, ``None`` stacked on a new
    dimension 1 (``[N, relations, F]``)."""
    if aggr is None:
        return torch.stack(outputs, dim=1)
    if len(outputs) == 1:
        return outputs[0]
    if aggr == "cat":
        return torch.cat(outputs, dim=-1)
    stacked = torch.stack(outputs)
    if aggr == "sum":
        return stacked.sum(0)
    if aggr == "mean":
        return stacked.mean(0)
    # max/min send the gradient to one extreme relation (as the graph ops' max/min and PyG), not split over ties
    return stacked.max(0).values if aggr == "max" else stacked.min(0).values


class HeteroConv(torch.nn.Module):
    r"""Runs one layer per relation and combines the results per destination type (PyG's
    ``HeteroConv``; DGL's ``HeteroGraphConv``):

    .. math::
        \mathbf{x}_i^{\prime} = \bigoplus_{r = (s, \cdot, \tau(i))}
        f_r\big(\mathcal{G}_r, (\mathbf{X}_s, \mathbf{X}_{\tau(i)})\big)_i

    with :math:`\bigoplus` the ``aggr`` over the relations that end in :math:`i`'s type.

    Any unigraph layer works as :math:`f_r`: it gets the relation's :class:`~unigraph.Graph` and,
    for a self-relation (source type = destination type), the features of that type as one tensor
    (a homogeneous graph, or in a sampled block a bipartite graph whose first sources are the
    destinations); for a relation between two types, a ``(x_src, x_dst)`` pair (``x_dst`` is
    ``None`` when the destination type has no features). Layers that add self-loops (``GCNConv``,
    ``GATConv``, ...) join node ``i`` to node ``i``, which between two different types would be
    meaningless: such a layer with ``add_self_loops=True`` on a relation between two types raises
    ``ValueError``.

    Extra arguments reach the layers by relation, as in PyG: a keyword ``edge_attr_dict={relation:
    tensor}`` passes ``edge_attr=tensor`` to that relation's layer. In PyG's form every positional
    argument is such a dict too (``conv(x_dict, edge_index_dict, edge_attr_dict)``): per relation,
    a dict keyed by relations gives its entry, a dict keyed by node types gives the type's entry
    for a self-relation and the ``(source, destination)`` pair otherwise; a dict with nothing for
    the relation passes nothing (the arguments after it move up one place, as in PyG). Node
    types that no relation ends in are not in the output.

    Args:
        convs (dict): ``{(src_type, name, dst_type): layer}``.
        aggr (str or None): ``"sum"`` (default), ``"mean"``, ``"max"``, ``"min"``, ``"cat"`` or ``None``
            (stack: ``[N, relations, F]``).
    """

    def __init__(self, convs: Mapping[Relation, torch.nn.Module], aggr: str | None = "sum"):
        super().__init__()
        if not isinstance(convs, Mapping) or not convs:
            raise TypeError(f"HeteroConv expects a non-empty dict {{relation: layer}}, got {convs!r}")
        if aggr not in AGGREGATIONS:
            raise ValueError(f"HeteroConv aggr must be one of {AGGREGATIONS}, got {aggr!r}")
        self.relations = []
        modules = {}
        for relation, conv in convs.items():
            relation = check_relation(relation)
            if not isinstance(conv, torch.nn.Module):
                raise TypeError(f"HeteroConv: the layer for {relation} must be a torch.nn.Module, got "
                                f"{type(conv).__name__}")
            if relation[0] != relation[2] and getattr(conv, "add_self_loops", False):
                raise ValueError(f"HeteroConv: the layer for {relation} adds self-loops (joining node i of "
                                 f"{relation[0]!r} to node i of {relation[2]!r}), which is incorrect message passing "
                                 "between two node types; build it with add_self_loops=False")
            self.relations.append(relation)
            modules[_module_key(relation)] = conv
        self.convs = torch.nn.ModuleDict(modules)
        self.aggr = aggr

    def reset_parameters(self) -> None:
        for conv in self.convs.values():
            if hasattr(conv, "reset_parameters"):
                conv.reset_parameters()

    def forward(self, *args: Any, **kwargs: Any) -> dict[str, Tensor]:
        """``conv(hg, x_dict)``, or PyG's ``conv(x_dict, edge_index_dict, *more_dicts)``: then each
        relation's layer is called in PyG's form, ``layer(x, edge_index_dict[relation], ...)``, so a
        ``SparseTensor``'s values reach it as they would in PyG (see :mod:`unigraph.call_forms`)."""
        for name, value in kwargs.items():
            if not name.endswith("_dict") or not isinstance(value, Mapping):
                raise TypeError(f"HeteroConv passes extra arguments by relation: give {name}_dict={{relation: "
                                f"value}} (a dict named ..._dict), got {name}={type(value).__name__}")
        if len(args) < 2:
            raise TypeError(f"HeteroConv takes (hg, x_dict) or (x_dict, edge_index_dict, ...); got {len(args)} "
                            "positional arguments")
        if isinstance(args[0], HeteroGraph) or len(args) == 2:
            form = hetero_forms.hetero_form("HeteroConv", args[0], args[1])
        else:
            form = "dicts"
        if form == "graph":
            if len(args) != 2:
                raise TypeError("HeteroConv(hg, x_dict) takes further inputs as keyword dicts (edge_attr_dict=...), "
                                f"got {len(args) - 2} more positional arguments")
            return self._forward_graph(args[0], args[1], kwargs)
        for i, value in enumerate(args):
            if not isinstance(value, Mapping):
                raise TypeError(f"HeteroConv in PyG's form takes dicts only; positional argument {i} is "
                                f"{type(value).__name__}")
        return self._forward_dicts(args, kwargs)

    def _forward_dicts(self, args: tuple, kwargs: dict) -> dict[str, Tensor]:
        """PyG's form: every argument a dict by relation or by node type (see the class docstring)."""
        missing = [r for r in self.relations if not any(r in value for value in (*args, *kwargs.values()))]
        if missing:
            raise ValueError(f"HeteroConv has layers for relations {missing} that the edge_index_dict does not have "
                             "(nor any other dict argument)")
        outputs: dict[str, list[Tensor]] = {}
        for relation in self.relations:
            # PyG's rule: a dict with nothing for this relation passes nothing (later ones move up)
            call_args = [e for e in (_entry(value, relation) for value in args) if e is not _ABSENT]
            call_kwargs = {name[:-5]: _entry(value, relation) for name, value in kwargs.items()}
            call_kwargs = {name: value for name, value in call_kwargs.items() if value is not _ABSENT}
            out = self._call(relation, call_args, call_kwargs)
            outputs.setdefault(relation[2], []).append(out)
        return {t: group(outs, self.aggr) for t, outs in outputs.items()}

    def _forward_graph(self, hg: HeteroGraph, x_dict: Any, kwargs: dict) -> dict[str, Tensor]:
        if not isinstance(x_dict, Mapping):
            raise TypeError(f"HeteroConv expects node features as a dict {{node_type: tensor}}, got "
                            f"{type(x_dict).__name__}")
        missing = [r for r in self.relations if r not in hg]
        if missing:
            raise ValueError(f"HeteroConv has layers for relations {missing} that the graph does not have "
                             f"({list(hg.relations)})")
        block = hg.is_block  # a block's destinations: the first rows of their type
        outputs: dict[str, list[Tensor]] = {}
        for relation in self.relations:
            src_type, _, dst_type = relation
            if src_type not in x_dict:
                raise ValueError(f"HeteroConv: x_dict has no features for {src_type!r}, the source type of {relation}")
            if src_type == dst_type:
                x = x_dict[src_type]
            else:
                x_dst = x_dict.get(dst_type)
                if x_dst is not None and block:
                    x_dst = rows_prefix(x_dst, hg.num_dst_nodes(dst_type))
                x = (x_dict[src_type], x_dst)
            extra = {name[:-5]: value[relation] for name, value in kwargs.items() if relation in value}
            outputs.setdefault(dst_type, []).append(self._call(relation, [hg[relation], x], extra))
        return {t: group(outs, self.aggr) for t, outs in outputs.items()}

    def _call(self, relation: Relation, args: list, kwargs: dict) -> Tensor:
        conv = self.convs[_module_key(relation)]
        try:
            return conv(*args, **kwargs)
        except (TypeError, ValueError) as err:  # re-raised with the relation named, never swallowed
            if type(err) not in (TypeError, ValueError):
                raise
            raise type(err)(f"HeteroConv, relation {relation}: {err}") from err

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_relations={len(self.relations)})"


_ABSENT = object()


def _entry(value: Mapping, relation: Relation) -> Any:
    """PyG's rule for one dict argument and one relation: its entry for the relation, else for a
    self-relation its node type's entry, else the (source, destination) pair of entries."""
    src_type, _, dst_type = relation
    if relation in value:
        return value[relation]
    if src_type == dst_type and src_type in value:
        return value[src_type]
    if src_type in value or dst_type in value:
        return value.get(src_type), value.get(dst_type)
    return _ABSENT
