"""PNAConv: principal neighbourhood aggregation."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor
from torch.nn import Linear, ModuleList, Sequential

from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.aggr.scaler import DegreeScalerAggregation
from unigraph.call_forms import resolve
from unigraph.nn.checks import check_positive, check_width, edge_input, node_inputs, reset_module
from unigraph.nn.resolver import activation_resolver
from unigraph.nn.static_graph import is_static, static_copies


class PNAConv(MessagePassing):
    r"""The principal neighbourhood aggregation operator from `"Principal Neighbourhood
    Aggregation for Graph Nets" <https://arxiv.org/abs/2004.05718>`_.

    .. math::
        \mathbf{x}_i^{\prime} = \mathbf{W}\Big(\Big\Vert_{t=1}^{T} \gamma_t\Big(
        \mathbf{x}_i^{(t)}, \underset{j \in \mathcal{N}(i)}{\bigoplus}
        h_t\big(\mathbf{x}_i^{(t)}, \mathbf{x}_j^{(t)}, \mathbf{e}_{j,i}\big)\Big)\Big) + \mathbf{b},
        \qquad
        \bigoplus = \underbrace{\begin{bmatrix} 1 \\ S(\mathbf{D}, \alpha=1) \\ S(\mathbf{D}, \alpha=-1)
        \end{bmatrix}}_{\text{scalers}} \otimes \underbrace{\begin{bmatrix} \mu \\ \sigma \\ \max \\ \min
        \end{bmatrix}}_{\text{aggregators}}

    for towers :math:`t = 1..T`: tower :math:`t` reads the whole input (or its :math:`t`-th slice
    with ``divide_input``), its message network :math:`h_t` (``pre_nns[t]``) maps
    :math:`[\mathbf{x}_i \Vert \mathbf{x}_j \Vert \mathrm{enc}(\mathbf{e}_{j,i})]` to ``F_in``
    features, every aggregator then every scaler (:mod:`unigraph.nn.aggr.scaler`) reduces them per
    destination, and :math:`\gamma_t` (``post_nns[t]``) maps :math:`[\mathbf{x}_i \Vert
    \text{aggregations}]` to ``out_channels / towers``; ``lin`` mixes the towers. The messages
    are built per edge (the message networks see both endpoints).

    Args:
        in_channels (int): size of each input sample.
        out_channels (int): size of each output sample (divisible by ``towers``).
        aggregators (list of str): of ``"sum"``, ``"mean"``, ``"min"``, ``"max"``, ``"var"``,
            ``"std"`` (or aggregation modules).
        scalers (list of str): of ``"identity"``, ``"amplification"``, ``"attenuation"``,
            ``"linear"``, ``"inverse_linear"``.
        deg (Tensor): in-degree histogram of the training graphs (:meth:`get_degree_histogram`).
        edge_dim (int, optional): edge feature size; edge features are encoded by ``edge_encoder``
            to ``F_in`` and enter every message. (default: ``None``)
        towers (int, optional): number of towers. (default: ``1``)
        pre_layers, post_layers (int, optional): layers of each message / update network, with
            ``act`` between them. (default: ``1``)
        divide_input (bool, optional): split the input features among the towers (else each tower
            reads all of them). (default: ``False``)
        act (str or callable, optional), act_kwargs (dict, optional): the activation inside the
            networks. (default: ``"relu"``)
        train_norm (bool, optional): learn the scalers' degree averages. (default: ``False``)

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index, edge_attr)`` (a ``SparseTensor``'s values
          are the edge features), node features :math:`(|\mathcal{V}|, F_{in})`, edge features
          :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True  # forward orients the graph (it builds the messages itself, not through propagate)

    def __init__(self, in_channels: int, out_channels: int, aggregators: list[Any], scalers: list[str],
                 deg: Tensor, edge_dim: int | None = None, towers: int = 1, pre_layers: int = 1,
                 post_layers: int = 1, divide_input: bool = False, act: str | Callable | None = "relu",
                 act_kwargs: dict[str, Any] | None = None, train_norm: bool = False, **kwargs: Any):
        super().__init__(aggr=None, **kwargs)
        who = "PNAConv"
        self.in_channels = check_positive(in_channels, "in_channels", who)
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self.towers = check_positive(towers, "towers", who)
        if divide_input and in_channels % towers:
            raise ValueError(f"{who}(divide_input=True) splits in_channels={in_channels} among towers={towers}: it "
                             "must divide evenly")
        if out_channels % towers:
            raise ValueError(f"{who}: out_channels={out_channels} must be divisible by towers={towers}")
        self.aggr_module = DegreeScalerAggregation(aggregators, scalers, deg, train_norm)
        self.edge_dim, self.divide_input = edge_dim, divide_input
        self.F_in = in_channels // towers if divide_input else in_channels
        self.F_out = out_channels // towers
        if edge_dim is not None:
            self.edge_encoder = Linear(check_positive(edge_dim, "edge_dim", who), self.F_in)
        aggregated = (len(aggregators) * len(scalers) + 1) * self.F_in
        self.pre_nns = ModuleList(self._network((3 if edge_dim else 2) * self.F_in, self.F_in, pre_layers, act,
                                                act_kwargs) for _ in range(towers))
        self.post_nns = ModuleList(self._network(aggregated, self.F_out, post_layers, act, act_kwargs)
                                   for _ in range(towers))
        self.lin = Linear(out_channels, out_channels)
        self.reset_parameters()

    @staticmethod
    def _network(width_in: int, width: int, layers: int, act, act_kwargs) -> Sequential:
        modules = [Linear(width_in, width)]
        for _ in range(layers - 1):
            modules += [activation_resolver(act, **(act_kwargs or {})), Linear(width, width)]
        return Sequential(*modules)

    def reset_parameters(self) -> None:
        self.aggr_module.reset_parameters()
        if self.edge_dim is not None:
            self.edge_encoder.reset_parameters()
        for nn in list(self.pre_nns) + list(self.post_nns):
            reset_module(nn)
        self.lin.reset_parameters()

    def forward(self, x: Tensor | Any, edge_index: Any, edge_attr: Tensor | None = None) -> Tensor:
        who = "PNAConv"
        if is_static(x):  # [B, N, F]: B copies of the graph (the message networks mix channels per edge)
            g, x_flat, edge_attr = static_copies(who, x, edge_index, edge_attr=edge_attr, values="edge_attr")
            return self(g, x_flat, edge_attr).view(x.shape[0], x.shape[1], -1)
        call = resolve(who, x, edge_index, edge_attr=edge_attr, values="edge_attr")
        edge_attr = edge_attr if edge_attr is not None else call.edge_attr
        g = oriented(call.graph, self.flow, who)
        g, x_src, x_dst = node_inputs(g, call.x, who, widths=(self.in_channels, self.in_channels))
        if x_dst is None:
            raise ValueError(f"{who} needs destination features: its messages and updates read x_i")
        edge_attr = edge_input(g, edge_attr, who, "edge_attr")
        if edge_attr is not None:
            if self.edge_dim is None:
                raise ValueError(f"{who} got edge_attr but was built without edge_dim; pass edge_dim=<features>")
            edge_attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
            check_width(edge_attr, self.edge_dim, who, "edge_attr", "edge_dim", "num_edges")
        h_src, h_dst = self._per_tower(x_src), self._per_tower(x_dst)
        messages = self.message(h_dst.index_select(0, g.dst), h_src.index_select(0, g.src), edge_attr)
        out = self.aggregate(messages, g)
        out = torch.cat([h_dst, out], dim=-1)
        out = torch.cat([nn(out[:, t]) for t, nn in enumerate(self.post_nns)], dim=1)
        return self.lin(out)

    def _per_tower(self, x: Tensor) -> Tensor:
        """``[N, towers, F_in]``: the tower's slice, or the whole input for every tower."""
        if self.divide_input:
            return x.view(-1, self.towers, self.F_in)
        return x.view(-1, 1, self.F_in).expand(-1, self.towers, -1)

    def message(self, x_i: Tensor, x_j: Tensor, edge_attr: Tensor | None) -> Tensor:
        parts = [x_i, x_j]
        if edge_attr is not None:
            parts.append(self.edge_encoder(edge_attr).view(-1, 1, self.F_in).expand(-1, self.towers, -1))
        h = torch.cat(parts, dim=-1)
        return torch.stack([nn(h[:, t]) for t, nn in enumerate(self.pre_nns)], dim=1)

    def aggregate(self, inputs: Tensor, g: Graph) -> Tensor:
        return self.aggr_module(inputs, g.dst, dim_size=g.num_dst_nodes, dim=0)

    @staticmethod
    def get_degree_histogram(loader: Any) -> Tensor:
        """The in-degree histogram (``hist[k]`` = nodes with ``k`` in-edges) over every graph a
        loader yields (PyG ``Data``/``Batch``, or anything with ``edge_index`` and
        ``num_nodes``), for ``deg``."""
        hist = torch.zeros(1, dtype=torch.int64)
        for data in loader:
            edge_index, num_nodes = data.edge_index, int(data.num_nodes)
            degree = torch.bincount(edge_index[1].to(torch.int64).cpu(), minlength=num_nodes)
            counts = torch.bincount(degree, minlength=hist.numel())
            if counts.numel() > hist.numel():
                hist = torch.cat([hist, hist.new_zeros(counts.numel() - hist.numel())])
            hist = hist + counts
        return hist

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, towers={self.towers}, "
                f"edge_dim={self.edge_dim})")
