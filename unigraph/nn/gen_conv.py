"""GENConv: the generalized graph convolution of DeeperGCN (Li et al.)."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from unigraph.message_passing import MessagePassing
from unigraph.nn.checks import check_positive, check_width, channels_pair, reset_module
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.layer_inputs import edge_feature_inputs, sized_widths
from unigraph.nn.projection import dense
from unigraph.nn.static_graph import refuse_static

#: the norm layers between the MLP's linear maps, by PyG's names
MLP_NORMS = ("batch", "layer", "instance")


def gen_mlp(channels: list[int], norm: str | None, bias: bool) -> torch.nn.Sequential:
    """GENConv's MLP: ``Linear`` maps between ``channels``, each but the last followed by the norm
    (when given), ``ReLU`` and ``Dropout(0)``; the module order (and so the ``state_dict`` names
    ``mlp.0.weight``, ``mlp.1.running_mean``, ...) is PyG's."""
    modules: list[torch.nn.Module] = []
    for i in range(1, len(channels)):
        modules.append(torch.nn.Linear(channels[i - 1], channels[i], bias=bias))
        if i == len(channels) - 1:
            break
        if norm == "batch":
            modules.append(torch.nn.BatchNorm1d(channels[i], affine=True))
        elif norm == "layer":
            modules.append(torch.nn.LayerNorm(channels[i], elementwise_affine=True))
        elif norm == "instance":
            modules.append(torch.nn.InstanceNorm1d(channels[i], affine=False))
        modules.append(torch.nn.ReLU())
        modules.append(torch.nn.Dropout(0.0))
    return torch.nn.Sequential(*modules)


class MessageNorm(torch.nn.Module):
    r"""Message normalization (`"DeeperGCN" <https://arxiv.org/abs/2006.07739>`_):
    :math:`\mathbf{x}_i + s \cdot \|\mathbf{x}_i\|_p \cdot \mathbf{m}_i / \|\mathbf{m}_i\|_p`
    without the residual, i.e. the aggregated message rescaled to the norm of the node's features,
    times ``scale`` :math:`s` (a parameter, learned with ``learn_scale=True``; PyG's name)."""

    def __init__(self, learn_scale: bool = False):
        super().__init__()
        self.scale = Parameter(torch.empty(1), requires_grad=learn_scale)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.scale.fill_(1.0)

    def forward(self, x: Tensor, msg: Tensor, p: float = 2.0) -> Tensor:
        return F.normalize(msg, p=p, dim=-1) * x.norm(p=p, dim=-1, keepdim=True) * self.scale

    def __repr__(self) -> str:
        return f"{type(self).__name__}(learn_scale={self.scale.requires_grad})"


def _aggregation_arguments(aggr: Any, t: float, learn_t: bool, p: float, learn_p: bool,
                           kwargs: dict) -> tuple[Any, dict]:
    """PyG's old names (``softmax_sg``: softmax without gradient through the weights; ``power``)
    and the softmax/power-mean settings as ``aggr_kwargs``, unless the caller gave their own."""
    semi_grad = aggr == "softmax_sg"
    aggr = {"softmax_sg": "softmax", "power": "powermean"}.get(aggr, aggr) if isinstance(aggr, str) else aggr
    if "aggr_kwargs" not in kwargs:
        if aggr == "softmax":
            kwargs["aggr_kwargs"] = dict(t=t, learn=learn_t, semi_grad=semi_grad)
        elif aggr == "powermean":
            kwargs["aggr_kwargs"] = dict(p=p, learn=learn_p)
    return aggr, kwargs


class GENConv(MessagePassing):
    r"""The generalized graph convolution (GENConv) from the `"DeeperGCN: All You Need to Train
    Deeper GCNs" <https://arxiv.org/abs/2006.07739>`_ paper.

    .. math::
        \mathbf{x}_i^{\prime} = \mathrm{MLP} \left( \mathbf{x}_i +
        \mathrm{AGG} \left( \left\{ \mathrm{ReLU} \left( \mathbf{x}_j + \mathbf{e}_{j,i} \right)
        + \epsilon : j \in \mathcal{N}(i) \right\} \right) \right)

    with :math:`\mathrm{AGG}` a softmax (:class:`~unigraph.nn.aggr.SoftmaxAggregation`, inverse
    temperature ``t``), a power mean (:class:`~unigraph.nn.aggr.PowerMeanAggregation`, power
    ``p``) or any other aggregation. Source, destination and edge features are first projected to
    ``out_channels`` where their width differs (``lin_src``, ``lin_dst``, ``lin_edge``), and
    several aggregations (a list) are projected back by ``lin_aggr_out``. With ``msg_norm`` the
    aggregation is rescaled before the residual:
    :math:`s \, \|\mathbf{x}_i\|_2 \, \mathbf{m}_i / \|\mathbf{m}_i\|_2` (:class:`MessageNorm`).

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes;
            ``-1`` infers it on the first call.
        out_channels (int): size of each output sample.
        aggr (str or list or Aggregation, optional): the aggregation: ``"softmax"``,
            ``"powermean"``, ``"add"``, ``"mean"``, ``"max"``, a list of them or a module
            (PyG's old names ``"softmax_sg"`` and ``"power"`` too). (default: ``"softmax"``)
        t (float, optional): initial inverse temperature of the softmax. (default: ``1.0``)
        learn_t (bool, optional): learn ``t``. (default: ``False``)
        p (float, optional): initial power of the power mean. (default: ``1.0``)
        learn_p (bool, optional): learn ``p``. (default: ``False``)
        msg_norm (bool, optional): apply message normalization. (default: ``False``)
        learn_msg_scale (bool, optional): learn its scale :math:`s`. (default: ``False``)
        norm (str, optional): the MLP's norm layers: ``"batch"``, ``"layer"``, ``"instance"`` or
            ``None``. (default: ``"batch"``)
        num_layers (int, optional): linear layers in the MLP. (default: ``2``)
        expansion (int, optional): hidden width of the MLP, in multiples of ``out_channels``.
            (default: ``2``)
        eps (float, optional): :math:`\epsilon` added to every message. (default: ``1e-7``)
        bias (bool, optional): biases in the projections and the MLP. (default: ``False``)
        edge_dim (int, optional): edge feature size (``-1``: inferred); ``None`` means the edge
            features are ``out_channels`` wide. (default: ``None``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``,
            ``aggr_kwargs``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index[, edge_attr], size=...)`` (an ``edge_index``,
          ``SparseTensor`` or torch sparse ``adj_t``, whose ``[E, D]`` values are the edge
          features) or ``(g, x[, edge_attr])``; node features :math:`(|\mathcal{V}|, F_{in})` or a
          pair :math:`((|\mathcal{V}_s|, F_{s}), (|\mathcal{V}_t|, F_{t}))` (the destination may be
          ``None``), edge features :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, aggr: Any = "softmax",
                 t: float = 1.0, learn_t: bool = False, p: float = 1.0, learn_p: bool = False,
                 msg_norm: bool = False, learn_msg_scale: bool = False, norm: str | None = "batch",
                 num_layers: int = 2, expansion: int = 2, eps: float = 1e-7, bias: bool = False,
                 edge_dim: int | None = None, **kwargs: Any):
        who = "GENConv"
        aggr, kwargs = _aggregation_arguments(aggr, t, learn_t, p, learn_p, kwargs)
        super().__init__(aggr=aggr, **kwargs)
        # PyG's spelling of the aggregation for repr (the base class says "sum" for "add")
        self._aggr_name = [str(a) for a in aggr] if isinstance(aggr, (list, tuple)) else str(aggr)
        if norm is not None and norm not in MLP_NORMS:
            raise ValueError(f"{who} norm must be one of {', '.join(MLP_NORMS)} or None, got {norm!r}")
        if edge_dim is not None and edge_dim != LAZY:
            check_positive(edge_dim, "edge_dim", who)
        self.in_channels = in_channels
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self._widths = channels_pair(in_channels, who, lazy=True)
        self._lazy = LAZY in self._widths
        self.eps = float(eps)
        self.edge_dim = edge_dim
        src, dst = self._widths
        # projections only where a width differs from out_channels (PyG's rule: -1 always differs)
        if src != out_channels:
            self.lin_src = make_linear(src, out_channels, bias=bias)
        if edge_dim is not None and edge_dim != out_channels:
            self.lin_edge = make_linear(edge_dim, out_channels, bias=bias)
        width = out_channels
        if hasattr(self.aggr_module, "get_out_channels"):
            width = self.aggr_module.get_out_channels(out_channels)
        if width != out_channels:
            self.lin_aggr_out = torch.nn.Linear(width, out_channels, bias=bias)
        if dst != out_channels:
            self.lin_dst = make_linear(dst, out_channels, bias=bias)
        hidden = check_positive(expansion, "expansion", who) * out_channels
        channels = [out_channels] + [hidden] * (check_positive(num_layers, "num_layers", who) - 1) + [out_channels]
        self.mlp = gen_mlp(channels, norm, bias)
        if msg_norm:
            self.msg_norm = MessageNorm(learn_msg_scale)

    def reset_parameters(self) -> None:
        if self.aggr_module is not None and hasattr(self.aggr_module, "reset_parameters"):
            self.aggr_module.reset_parameters()
        reset_module(self.mlp)
        for name in ("msg_norm", "lin_src", "lin_edge", "lin_aggr_out", "lin_dst"):
            module = getattr(self, name, None)
            if module is not None:   # (a LazyLinear not yet sized skips its reset)
                module.reset_parameters()

    def _materialize(self, x_src: Tensor, x_dst: Tensor | None) -> None:
        # the lazy projections size themselves on their first call (LazyLinear, PyG's initializer)
        self._widths = sized_widths(self._widths, x_src, x_dst)

    def forward(self, x: Any, edge_index: Any, edge_attr: Tensor | None = None, size: Any = None) -> Tensor:
        who = "GENConv"
        refuse_static(who, x)
        g, x_src, x_dst, edge_attr = edge_feature_inputs(self, x, edge_index, edge_attr, size)
        x_src = dense(x_src)
        if hasattr(self, "lin_src"):
            x_src = self.lin_src(x_src)
        out = self.propagate(g, x=x_src, edge_attr=self._edge_features(edge_attr), eps=self.eps)
        if hasattr(self, "lin_aggr_out"):
            out = self.lin_aggr_out(out)
        if hasattr(self, "msg_norm"):
            out = self._normalized(out, x_src if x_dst is None else dense(x_dst))
        if x_dst is not None:
            x_dst = dense(x_dst)
            out = out + (self.lin_dst(x_dst) if hasattr(self, "lin_dst") else x_dst)
        return self.mlp(out)

    def _edge_features(self, edge_attr: Tensor | None) -> Tensor | None:
        """The edge features projected to ``out_channels`` (when ``edge_dim`` differs), checked."""
        who = "GENConv"
        if edge_attr is None:
            return None
        if edge_attr.dim() != 2:
            raise ValueError(f"{who} expects edge_attr of shape [num_edges, D], got {list(edge_attr.shape)} (a "
                             "sparse adjacency's one value per edge is a weight, which GENConv does not take)")
        if hasattr(self, "lin_edge"):
            if self.edge_dim != LAZY:
                check_width(edge_attr, self.edge_dim, who, "edge_attr", "edge_dim", "num_edges")
            return self.lin_edge(edge_attr)
        if edge_attr.shape[1] != self.out_channels:
            raise ValueError(f"{who} expects edge_attr with {self.out_channels} features (out_channels; set edge_dim "
                             f"to project other widths), got {edge_attr.shape[1]}")
        return edge_attr

    def _normalized(self, out: Tensor, h: Tensor) -> Tensor:
        if h.shape[0] != out.shape[0]:
            raise ValueError(f"GENConv(msg_norm=True) scales each destination's message by the norm of its own "
                             f"features, but got {h.shape[0]} feature rows for {out.shape[0]} destinations: pass "
                             "(x_src, x_dst) with destination features")
        return self.msg_norm(h, out)

    def message(self, x_j: Tensor, edge_attr: Tensor | None, eps: float) -> Tensor:
        msg = x_j if edge_attr is None else x_j + edge_attr
        return msg.relu() + eps

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, aggr={self._aggr_name})"
