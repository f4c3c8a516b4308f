r"""PyG's basic GNN models (``torch_geometric.nn.models``): GCN, GraphSAGE, GIN, GAT, PNA,
EdgeCNN, with PyG's constructor, forward signature, layer order and parameter names, so a
model built with the same arguments loads a PyG ``state_dict`` and computes the same function.

``num_layers`` convolutions ``convs[i]``; after every one but the last (after every one with
``jk``) comes ``norms[i]``, the activation (before the norm with ``act_first``) and dropout:

.. math::
    \mathbf{h}^{(i+1)} = \mathrm{dropout}\Big(\sigma\big(\mathrm{norm}^{(i)}(\mathrm{conv}^{(i)}(\mathbf{h}^{(i)}, \mathcal{G}))\big)\Big)

The last convolution maps to ``out_channels`` (when given, and without ``jk``); with ``jk`` the
layer outputs are combined by :class:`~unigraph.nn.models.jumping_knowledge.JumpingKnowledge`
(``"cat"``, ``"max"``, ``"lstm"``; ``"last"`` takes the last) and a final ``lin`` maps them to
``out_channels``.

Call forms: PyG's ``model(x, edge_index, edge_weight=None, edge_attr=None, batch=None,
batch_size=None, num_sampled_nodes_per_hop=None, num_sampled_edges_per_hop=None)`` with
``edge_index`` anything the layers take (``[2, E]`` tensor, ``SparseTensor``, torch sparse
``adj_t``); and unigraph's ``model(g, x)`` with ``g`` a :class:`~unigraph.Graph` (or a DGL graph,
a PyG ``Data``), or ``model(blocks, x)`` with one sampled block per layer (block ``i`` feeds
layer ``i``; with ``jk`` each layer's output is cut to the last block's destination nodes, the
first rows of every layer). ``batch``/``batch_size`` go to normalizations that take them
(``supports_norm_batch``). ``num_sampled_*_per_hop`` trim, before layer ``i > 0``, the nodes and
edges of the ``i`` outermost hops (PyG's ``trim_to_layer``: they cannot reach the seeds).

These are the PyG-compatible models; :mod:`unigraph.models` holds unigraph's own task models
(paper setups, keyword sizes, fused sparse input paths), which call graphs and blocks only.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

import torch
from torch import Tensor

from unigraph.graph import Graph
from unigraph.call_forms import is_graph_object
from unigraph.nn.checks import check_positive, reset_module
from unigraph.nn.edge_conv import EdgeConv
from unigraph.nn.gat_conv import GATConv
from unigraph.nn.gatv2_conv import GATv2Conv
from unigraph.nn.gcn_conv import GCNConv
from unigraph.nn.gin_conv import GINConv
from unigraph.nn.models.jumping_knowledge import JumpingKnowledge
from unigraph.nn.mlp import MLP, accepts_batch, norm_and_activate
from unigraph.nn.pna_conv import PNAConv
from unigraph.nn.resolver import activation_resolver, normalization_resolver
from unigraph.nn.sage_conv import SAGEConv

JK_MODES = (None, "last", "cat", "max", "lstm")


class BasicGNN(torch.nn.Module):
    """Base class: subclasses set ``supports_edge_weight``/``supports_edge_attr`` and build one
    convolution in ``init_conv`` (see the module docstring for the arguments and call forms)."""

    supports_edge_weight: bool = False
    supports_edge_attr: bool = False

    def __init__(self, in_channels: int | tuple[int, int], hidden_channels: int, num_layers: int,
                 out_channels: int | None = None, dropout: float = 0.0, act: str | Callable | None = "relu",
                 act_first: bool = False, act_kwargs: dict[str, Any] | None = None,
                 norm: str | Callable | None = None, norm_kwargs: dict[str, Any] | None = None,
                 jk: str | None = None, **kwargs: Any):
        super().__init__()
        who = type(self).__name__
        check_positive(hidden_channels, "hidden_channels", who)
        check_positive(num_layers, "num_layers", who)
        if out_channels is not None:
            check_positive(out_channels, "out_channels", who)
        if jk not in JK_MODES:
            raise ValueError(f"{who} jk must be one of {JK_MODES}, got {jk!r}")
        self.in_channels, self.hidden_channels, self.num_layers = in_channels, hidden_channels, num_layers
        self.dropout = torch.nn.Dropout(p=dropout)
        self.act = activation_resolver(act, **(act_kwargs or {}))
        self.jk_mode, self.act_first = jk, act_first
        self.norm = norm if isinstance(norm, str) else None  # what GIN's and EdgeCNN's MLPs use
        self.norm_kwargs = norm_kwargs
        self.out_channels = hidden_channels if out_channels is None else out_channels

        self.convs = torch.nn.ModuleList()
        width = in_channels
        for _ in range(num_layers - 1):
            self.convs.append(self.init_conv(width, hidden_channels, **kwargs))
            width = (hidden_channels, hidden_channels) if isinstance(width, (tuple, list)) else hidden_channels
        if out_channels is not None and jk is None:
            self._is_conv_to_out = True
            self.convs.append(self.init_conv(width, out_channels, **kwargs))
        else:
            self.convs.append(self.init_conv(width, hidden_channels, **kwargs))

        norm_layer = normalization_resolver(norm, hidden_channels, **(norm_kwargs or {}))
        if norm_layer is None:
            norm_layer = torch.nn.Identity()
        self.supports_norm_batch = accepts_batch(norm_layer)
        self.norms = torch.nn.ModuleList(copy.deepcopy(norm_layer) for _ in range(num_layers - 1))
        self.norms.append(copy.deepcopy(norm_layer) if jk is not None else torch.nn.Identity())

        if jk is not None and jk != "last":
            self.jk = JumpingKnowledge(jk, hidden_channels, num_layers)
        if jk is not None:
            self.lin = torch.nn.Linear(num_layers * hidden_channels if jk == "cat" else hidden_channels,
                                       self.out_channels)

    def init_conv(self, in_channels: int | tuple[int, int], out_channels: int, **kwargs: Any) -> torch.nn.Module:
        raise NotImplementedError

    def reset_parameters(self) -> None:
        for module in (*self.convs, *self.norms, getattr(self, "jk", None), getattr(self, "lin", None)):
            reset_module(module)

    def forward(self, x: Any, edge_index: Any, edge_weight: Tensor | None = None, edge_attr: Tensor | None = None,
                batch: Tensor | None = None, batch_size: int | None = None,
                num_sampled_nodes_per_hop: list[int] | None = None,
                num_sampled_edges_per_hop: list[int] | None = None) -> Tensor:
        x, graphs = self._graphs(x, edge_index)
        if num_sampled_nodes_per_hop is not None:
            if graphs is not None:
                raise ValueError(f"{type(self).__name__}: num_sampled_nodes_per_hop trims a PyG edge_index; it does "
                                 "not apply to a unigraph Graph or blocks")
            if edge_weight is not None and edge_attr is not None:
                raise NotImplementedError(f"{type(self).__name__}: trimming per hop cannot trim both edge_weight and "
                                          "edge_attr")
        xs: list[Tensor] = []
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            if num_sampled_nodes_per_hop is not None and i > 0:
                x, edge_index, edge_weight, edge_attr = _trim(
                    i, num_sampled_nodes_per_hop, num_sampled_edges_per_hop, x, edge_index, edge_weight, edge_attr)
            x = self._convolve(conv, x, edge_index if graphs is None else graphs[i], graphs is not None,
                               edge_weight, edge_attr)
            if i < self.num_layers - 1 or self.jk_mode is not None:
                x = norm_and_activate(x, norm, self.act, self.act_first, self.supports_norm_batch, batch, batch_size)
                x = self.dropout(x)
                if hasattr(self, "jk"):
                    xs.append(x)
        if hasattr(self, "jk"):
            rows = x.shape[0]  # blocks: every layer's first rows are the last block's destinations
            x = self.jk([h[:rows] for h in xs])
        return self.lin(x) if hasattr(self, "lin") else x

    @torch.no_grad()
    def inference_per_layer(self, layer: int, x: Tensor, edge_index: Any, batch_size: int) -> Tensor:
        """Layer ``layer`` (with its norm, activation, and ``lin`` after the last) for the first
        ``batch_size`` rows of a one-hop neighbourhood batch."""
        x = self.convs[layer](x, edge_index)[:batch_size]
        if layer == self.num_layers - 1 and self.jk_mode is None:
            return x
        x = norm_and_activate(x, self.norms[layer], self.act, self.act_first)
        if layer == self.num_layers - 1 and hasattr(self, "lin"):
            x = self.lin(x)
        return x

    @torch.no_grad()
    def inference(self, loader: Any, device: Any = None, embedding_device: Any = "cpu", progress_bar: bool = False,
                  cache: bool = False) -> Tensor:
        """Layer-wise inference over all nodes (PyG's): every layer runs over the whole graph,
        batch after batch of one-hop neighbourhoods (PyG's ``NeighborLoader(num_neighbors=[-1])``:
        each batch has ``n_id``, the seeds first, ``batch_size``, and ``edge_index`` or ``adj_t``
        in local ids), before the next layer starts; ``loader.data.x`` are the input features.
        Only for ``jk=None`` or ``"last"``, in eval mode. ``cache`` keeps the batches after the
        first pass; ``progress_bar`` is accepted and ignored."""
        who = type(self).__name__
        if self.jk_mode not in (None, "last"):
            raise ValueError(f"{who}.inference runs layer by layer, which jk={self.jk_mode!r} cannot (it combines "
                             "every layer's output); use jk=None or 'last'")
        if self.training:
            raise ValueError(f"{who}.inference needs eval mode (model.eval()): it applies no dropout")
        x_all = loader.data.x.to(embedding_device)
        batches = list(loader) if cache else None
        for layer in range(self.num_layers):
            outs = []
            for batch in (batches if cache else loader):
                edge_index = batch.adj_t if hasattr(batch, "adj_t") else batch.edge_index
                x = x_all[batch.n_id].to(device) if device is not None else x_all[batch.n_id]
                edge_index = edge_index.to(device) if device is not None else edge_index
                outs.append(self.inference_per_layer(layer, x, edge_index, batch.batch_size).to(embedding_device))
            x_all = torch.cat(outs, dim=0)
        return x_all

    def _convolve(self, conv, x, graph, graph_form: bool, edge_weight, edge_attr) -> Tensor:
        first, second = (graph, x) if graph_form else (x, graph)
        if self.supports_edge_weight and self.supports_edge_attr:
            return conv(first, second, edge_weight=edge_weight, edge_attr=edge_attr)
        if self.supports_edge_weight:
            return conv(first, second, edge_weight=edge_weight)
        if self.supports_edge_attr:
            return conv(first, second, edge_attr=edge_attr)
        return conv(first, second)

    def _graphs(self, x: Any, edge_index: Any) -> tuple[Any, list | None]:
        """``(features, one graph per layer)`` for unigraph's forms, ``(x, None)`` for PyG's."""
        if is_graph_object(x):
            return edge_index, [x] * self.num_layers
        if isinstance(x, (list, tuple)) and x and all(isinstance(b, Graph) for b in x):
            if len(x) != self.num_layers:
                raise ValueError(f"{type(self).__name__} has {self.num_layers} layers but got {len(x)} blocks; pass "
                                 "one block per layer or one graph")
            return edge_index, list(x)
        return x, None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, num_layers={self.num_layers})"


def _trim(layer: int, nodes: list[int], edges: list[int] | None, x: Tensor, edge_index: Any,
          edge_weight: Tensor | None, edge_attr: Tensor | None):
    """Drop the nodes and edges of hop ``-layer`` (the outermost one still present)."""
    if edges is None:
        raise ValueError("num_sampled_nodes_per_hop needs num_sampled_edges_per_hop too")
    if not (isinstance(edge_index, Tensor) and edge_index.layout == torch.strided):
        raise ValueError(f"trimming per hop needs edge_index as a [2, E] tensor, got {type(edge_index).__name__}")
    x = x.narrow(0, 0, x.shape[0] - nodes[-layer])
    kept = edge_index.shape[1] - edges[-layer]
    edge_index = edge_index.narrow(1, 0, kept)
    edge_weight = edge_weight.narrow(0, 0, kept) if edge_weight is not None else None
    edge_attr = edge_attr.narrow(0, 0, kept) if edge_attr is not None else None
    return x, edge_index, edge_weight, edge_attr


class GCN(BasicGNN):
    """:class:`~unigraph.nn.GCNConv` layers (``kwargs`` go to each); takes ``edge_weight``."""

    supports_edge_weight = True

    def init_conv(self, in_channels, out_channels, **kwargs):
        return GCNConv(in_channels, out_channels, **kwargs)


class GraphSAGE(BasicGNN):
    """:class:`~unigraph.nn.SAGEConv` layers (``kwargs`` go to each)."""

    def init_conv(self, in_channels, out_channels, **kwargs):
        return SAGEConv(in_channels, out_channels, **kwargs)


class GIN(BasicGNN):
    """:class:`~unigraph.nn.GINConv` layers, each with an ``MLP([in, out, out])`` using the model's
    activation and (string) norm; ``kwargs`` go to the convolutions (``eps``, ``train_eps``)."""

    def init_conv(self, in_channels, out_channels, **kwargs):
        mlp = MLP([in_channels, out_channels, out_channels], act=self.act, act_first=self.act_first,
                  norm=self.norm, norm_kwargs=self.norm_kwargs)
        return GINConv(mlp, **kwargs)


class GAT(BasicGNN):
    """:class:`~unigraph.nn.GATConv` layers, or :class:`~unigraph.nn.GATv2Conv` with ``v2=True``;
    takes ``edge_attr``. ``hidden_channels`` is the concatenated width (``heads`` divides it);
    the layer to ``out_channels`` averages its heads (``concat=False``). The attention dropout is
    the model's ``dropout``."""

    supports_edge_attr = True

    def init_conv(self, in_channels, out_channels, **kwargs):
        v2 = kwargs.pop("v2", False)
        heads = kwargs.pop("heads", 1)
        concat = kwargs.pop("concat", True)
        if getattr(self, "_is_conv_to_out", False):
            concat = False
        if concat and out_channels % heads != 0:
            raise ValueError(f"GAT: the hidden width {out_channels} must be divisible by heads={heads} (the heads' "
                             "outputs are concatenated)")
        if concat:
            out_channels //= heads
        conv = GATv2Conv if v2 else GATConv
        return conv(in_channels, out_channels, heads=heads, concat=concat, dropout=self.dropout.p, **kwargs)


class PNA(BasicGNN):
    """:class:`~unigraph.nn.PNAConv` layers (``aggregators``, ``scalers``, ``deg`` and the rest in
    ``kwargs``); takes ``edge_attr``."""

    supports_edge_attr = True

    def init_conv(self, in_channels, out_channels, **kwargs):
        return PNAConv(in_channels, out_channels, **kwargs)


class EdgeCNN(BasicGNN):
    """:class:`~unigraph.nn.EdgeConv` layers, each with an ``MLP([2 * in, out, out])`` using the
    model's activation and (string) norm; ``kwargs`` go to the convolutions (``aggr``)."""

    def init_conv(self, in_channels, out_channels, **kwargs):
        mlp = MLP([2 * in_channels, out_channels, out_channels], act=self.act, act_first=self.act_first,
                  norm=self.norm, norm_kwargs=self.norm_kwargs)
        return EdgeConv(mlp, **kwargs)


__all__ = ["BasicGNN", "GCN", "GraphSAGE", "GIN", "GAT", "PNA", "EdgeCNN"]
