"""R-GCN node classifier for heterogeneous graphs."""
from __future__ import annotations

from typing import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from unigraph.hetero.graph import HeteroGraph, Relation, check_type_name
from unigraph.hetero.linear import TypedLinear
from unigraph.nn.checks import check_positive, check_probability
from unigraph.nn.dropout import dropout
from unigraph.nn.rgcn_conv import RGCNConv


class RGCN(torch.nn.Module):
    r"""An R-GCN (Schlichtkrull et al., 2018) that classifies the nodes of one type.

    .. math::
        \mathbf{h}^{(0)}_i = \mathrm{ReLU}(\mathbf{W}_{\tau(i)} \mathbf{x}_i + \mathbf{b}_{\tau(i)}),
        \qquad \mathbf{h}^{(l+1)} = \mathrm{ReLU}(\mathrm{RGCNConv}_l(\mathbf{h}^{(l)}))

    (no ReLU after the last layer, whose output is the logits of the ``target`` type). The input
    projection is per node type (types may have different feature widths) and runs as one grouped
    product (:class:`~unigraph.hetero.TypedLinear`); dropout comes before every convolution.

    Args:
        in_channels (dict): ``{node_type: feature width}``.
        hidden_channels (int): width of the projection and the hidden layers.
        out_channels (int): number of classes.
        relations (list): the graph's relations (``hg.relations``); weights are matched by relation.
        target (str): the node type to classify.
        num_layers (int): R-GCN layers. (default: ``2``)
        num_bases, num_blocks (int, optional): weight decomposition of every layer (see
            :class:`~unigraph.nn.RGCNConv`).
        aggr (str): aggregation per relation. (default: ``"mean"``)
        dropout (float): dropout probability. (default: ``0.5``)

    Forward: ``model(hg, x_dict)`` on a whole :class:`~unigraph.HeteroGraph`, or
    ``model(blocks, x_dict)`` on ``num_layers`` typed blocks (``HeteroBlocks.blocks``) with the
    features of their input nodes; returns the logits of the target nodes (of the last block's
    destinations).
    """

    def __init__(self, in_channels: Mapping[str, int], hidden_channels: int, out_channels: int,
                 relations: Sequence[Relation], target: str, num_layers: int = 2, *, num_bases: int | None = None,
                 num_blocks: int | None = None, aggr: str = "mean", dropout: float = 0.5):
        super().__init__()
        who = "RGCN"
        if not isinstance(in_channels, Mapping):
            raise TypeError(f"{who} in_channels must be a dict {{node_type: width}}, got {type(in_channels).__name__}")
        self.target = check_type_name(target, "target")
        if target not in in_channels:
            raise ValueError(f"{who} target {target!r} is not among the node types {list(in_channels)}")
        self.num_layers = check_positive(num_layers, "num_layers", who)
        self.dropout = check_probability(dropout, "dropout", who)
        check_positive(hidden_channels, "hidden_channels", who)
        self.relations = list(relations)
        self.project = TypedLinear(dict(in_channels), hidden_channels)
        widths = [hidden_channels] * num_layers + [out_channels]
        self.convs = torch.nn.ModuleList(
            RGCNConv(widths[i], widths[i + 1], self.relations, num_bases=num_bases, num_blocks=num_blocks, aggr=aggr)
            for i in range(num_layers))

    def reset_parameters(self) -> None:
        self.project.reset_parameters()
        for conv in self.convs:
            conv.reset_parameters()

    def forward(self, graph: HeteroGraph | Sequence[HeteroGraph], x_dict: Mapping[str, Tensor]) -> Tensor:
        if isinstance(graph, HeteroGraph):
            graphs = [graph] * self.num_layers
        else:
            graphs = list(graph)
            if len(graphs) != self.num_layers or not all(isinstance(g, HeteroGraph) for g in graphs):
                raise ValueError(f"RGCN with {self.num_layers} layers takes a HeteroGraph or {self.num_layers} typed "
                                 f"blocks, got {len(graphs)} items")
        h = {t: F.relu(v) for t, v in self.project(x_dict).items()}
        for i, (conv, g) in enumerate(zip(self.convs, graphs)):
            h = conv(g, {t: dropout(v, self.dropout, self.training) for t, v in h.items()})
            if i < self.num_layers - 1:
                h = {t: F.relu(v) for t, v in h.items()}
        return h[self.target]
