"""FiLMConv: graph convolution with feature-wise linear modulation (Brockschmidt)."""
from __future__ import annotations

import copy
from typing import Any, Callable

import torch
from torch import Tensor

from unigraph import call_forms
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.checks import channels_pair, check_positive, node_inputs, reset_module
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.projection import dense
from unigraph.nn.static_graph import refuse_static


class FiLMConv(MessagePassing):
    r"""The FiLM graph convolution from the `"GNN-FiLM: Graph Neural Networks with Feature-wise
    Linear Modulation" <https://arxiv.org/abs/1906.12192>`_ paper.

    .. math::
        \mathbf{x}^{\prime}_i = \sigma \left( \boldsymbol{\gamma}_{0,i} \odot \mathbf{W}_0
        \mathbf{x}_i + \boldsymbol{\beta}_{0,i} \right) + \sum_{r \in \mathcal{R}}
        \bigoplus_{j \in \mathcal{N}_r(i)} \sigma \left(
        \boldsymbol{\gamma}_{r,i} \odot \mathbf{W}_r \mathbf{x}_j + \boldsymbol{\beta}_{r,i} \right)

    where :math:`\boldsymbol{\beta}_{r,i}, \boldsymbol{\gamma}_{r,i} = g_r(\mathbf{x}_i)` (a linear
    layer per relation, or copies of ``nn``), the first term is the node's own relation (``lin_skip``,
    ``film_skip``) and :math:`\bigoplus` the mean by default, taken per relation.

    All relations run as one ``propagate``: an edge of relation :math:`r` from :math:`j` to
    :math:`i` becomes an edge from copy :math:`r` of :math:`j` to copy :math:`r` of :math:`i` in a
    graph with :math:`|\mathcal{R}|` copies of each node, whose aggregations are then summed over
    the copies (the per-relation aggregations, whatever the reduce).

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes;
            ``-1`` infers it on the first call.
        out_channels (int): size of each output sample.
        num_relations (int, optional): number of relations. (default: ``1``)
        nn (torch.nn.Module, optional): the network :math:`g` mapping destination features to
            ``2 * out_channels`` (:math:`\boldsymbol{\beta}` then :math:`\boldsymbol{\gamma}`), copied
            per relation; ``None``: one linear layer. (default: ``None``)
        act (callable, optional): the activation :math:`\sigma` (``None``: none).
            (default: ``torch.nn.ReLU()``)
        aggr (str, optional): ``"mean"``, ``"add"``, ``"max"``, ... (default: ``"mean"``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index[, edge_type])`` (with more than one relation a
          ``SparseTensor`` or torch sparse ``adj_t`` holds the relation ids as its values) or
          ``(g, x[, edge_type])``; node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_s|, F_{s}), (|\mathcal{V}_t|, F_{t}))`, relation ids
          :math:`(|\mathcal{E}|)` *(with several relations)*
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, num_relations: int = 1,
                 nn: Callable | None = None, act: Callable | None = torch.nn.ReLU(), aggr: Any = "mean",
                 **kwargs: Any):
        who = "FiLMConv"
        super().__init__(aggr=aggr, **kwargs)
        self.in_channels = in_channels
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.num_relations = check_positive(num_relations, "num_relations", who)
        self._widths = channels_pair(in_channels, who, lazy=True)
        self._lazy = LAZY in self._widths
        self.act = act
        src, dst = self._widths
        self.lins = torch.nn.ModuleList(make_linear(src, out_channels, bias=False) for _ in range(num_relations))
        self.films = torch.nn.ModuleList(make_linear(dst, 2 * out_channels) if nn is None else copy.deepcopy(nn)
                                         for _ in range(num_relations))
        self.lin_skip = make_linear(dst, out_channels, bias=False)
        self.film_skip = make_linear(dst, 2 * out_channels, bias=False) if nn is None else copy.deepcopy(nn)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin, film in zip(self.lins, self.films):
            lin.reset_parameters()
            reset_module(film)
        self.lin_skip.reset_parameters()
        reset_module(self.film_skip)

    def _lazy_linears(self) -> tuple[tuple, tuple]:
        return (), ()   # the lazy linear maps size themselves on their first call (LazyLinear)

    def forward(self, x: Any, edge_index: Any, edge_type: Tensor | None = None) -> Tensor:
        who = "FiLMConv"
        g, x, edge_type = self._read_call(x, edge_index, edge_type)
        g, x_src, x_dst = node_inputs(oriented(g, self.flow, who), x, who, layer=self)
        if x_dst is None:
            raise ValueError(f"{who} modulates by the destination features: pass (x_src, x_dst) with x_dst a tensor")
        x_src, x_dst = dense(x_src), dense(x_dst)
        out = self._modulated(self.film_skip, x_dst, self.lin_skip(x_dst))
        if self.num_relations == 1:
            films = self._film(self.films[0], x_dst)
            return out + self.propagate(g, x=(self.lins[0](x_src), films))
        edge_type = self._checked_types(g, edge_type)
        return out + self._relational(g, x_src, x_dst, edge_type)

    def _read_call(self, x: Any, edge_index: Any, edge_type: Tensor | None) -> tuple[Graph, Any, Tensor | None]:
        """The graph, the features and (with several relations) the relation ids, from any call form."""
        who = "FiLMConv"
        graph_first = call_forms.is_graph_object(x)
        refuse_static(who, edge_index if graph_first else x)
        if self.num_relations > 1:
            return call_forms.resolve_typed(who, x, edge_index, edge_type)
        # one relation: every edge is of it, and a sparse adjacency's values are not read (as in PyG)
        call = call_forms.resolve(who, x, edge_index, values="edge_attr")
        return call.graph, call.x, None

    def _checked_types(self, g: Graph, edge_type: Any) -> Tensor:
        who = "FiLMConv"
        if edge_type is None:
            raise ValueError(f"{who}(num_relations={self.num_relations}) needs edge_type (the relation id of each "
                             "edge), or a sparse adjacency holding the ids as its values")
        if not isinstance(edge_type, Tensor):
            raise TypeError(f"{who} edge_type must be a tensor, got {type(edge_type).__name__}")
        if edge_type.dtype == torch.bool or edge_type.is_floating_point() or edge_type.is_complex():
            raise TypeError(f"{who} edge_type must hold integer relation ids, got {edge_type.dtype}")
        if edge_type.shape != (g.num_edges,):
            raise ValueError(f"{who} edge_type must have shape [{g.num_edges}] (one id per edge), got "
                             f"{list(edge_type.shape)}")
        if torch.compiler.is_compiling():   # (the values are data there: checked when the program runs)
            torch._assert_async(((edge_type >= 0) & (edge_type < self.num_relations)).all(),
                                f"{who} edge_type holds a relation id outside 0..{self.num_relations - 1}")
        elif edge_type.numel():
            low, high = int(edge_type.min()), int(edge_type.max())
            if low < 0 or high >= self.num_relations:
                raise ValueError(f"{who} edge_type holds relation id {low if low < 0 else high}, outside 0.."
                                 f"{self.num_relations - 1} (num_relations={self.num_relations})")
        return edge_type.to(device=g.device, dtype=torch.int64)

    def _relational(self, g: Graph, x_src: Tensor, x_dst: Tensor, edge_type: Tensor) -> Tensor:
        """Every relation's aggregation, summed: one ``propagate`` over the graph whose nodes are
        (node, relation) pairs, node-major (row ``n * R + r``)."""
        R = self.num_relations
        projected = torch.stack([lin(x_src) for lin in self.lins], dim=1)    # [N_src, R, C]
        films = torch.stack([self._film(film, x_dst) for film in self.films], dim=1)   # [N_dst, R, 2C]
        copies = Graph(torch.stack([g.src * R + edge_type, g.dst * R + edge_type]),
                       num_src_nodes=g.num_src_nodes * R, num_dst_nodes=g.num_dst_nodes * R)
        out = self.propagate(copies, x=(projected.reshape(-1, self.out_channels),
                                        films.reshape(-1, films.shape[-1])))
        return out.view(g.num_dst_nodes, R, -1).sum(dim=1)

    def _film(self, film: Callable, x_dst: Tensor) -> Tensor:
        """``[beta | gamma]`` of each destination, checked to be ``2 * out_channels`` wide."""
        out = film(x_dst)
        if not isinstance(out, Tensor) or out.dim() != 2 or out.shape != (x_dst.shape[0], 2 * self.out_channels):
            got = list(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise ValueError(f"FiLMConv nn must map x_dst to [num_dst_nodes={x_dst.shape[0]}, 2 * out_channels="
                             f"{2 * self.out_channels}] (beta, then gamma), got {got}")
        return out

    def _modulated(self, film: Callable, x_dst: Tensor, h: Tensor) -> Tensor:
        beta, gamma = self._film(film, x_dst).split(self.out_channels, dim=-1)
        out = gamma * h + beta
        return out if self.act is None else self.act(out)

    def message(self, x_j: Tensor, x_i: Tensor) -> Tensor:
        # x_i: the destination's [beta | gamma] of the edge's relation
        beta, gamma = x_i.split(x_j.shape[-1], dim=-1)
        out = gamma * x_j + beta
        return out if self.act is None else self.act(out)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, num_relations={self.num_relations})"
