"""SAGEConv: GraphSAGE's neighbourhood aggregation."""
from __future__ import annotations

import torch.nn.functional as F
from typing import Any

import torch
from torch import Tensor
from torch.nn import Linear

from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph import ops
from unigraph.finite import all_finite
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.call_forms import resolve
from unigraph.nn.checks import channels_pair, check_positive, node_inputs
from unigraph.nn.lazy import LAZY, make_linear
from unigraph.nn.pooled_linear import transposed_product_over_rows
from unigraph.nn.projection import dense, linear
from unigraph.nn.aggr.resolver import aggregation_resolver
from unigraph.nn.resolver import normalize_name
from unigraph.nn.static_graph import is_static, static_copies

SIMPLE_AGGREGATORS = ("mean", "sum", "add", "max", "min")
DGL_AGGREGATORS = ("pool", "gcn", "dgl_lstm")
# The product rows_with_messages could shorten (rows x in x out multiply-adds) below which its reads
# and checks cost more than the rows they save (~25 us of a ~140 us call on a PyG batch of 32 small
# graphs, 850 x 32 x 32, 1 thread, where at most a few us could be saved; a 2-hop NeighborLoader
# batch of GraphSAGE is thousands of rows x 128 x 128, far above)
MIN_SKIP_WORK = 1 << 21


class SAGEConv(MessagePassing):
    r"""The GraphSAGE operator from the `"Inductive Representation Learning on Large Graphs"
    <https://arxiv.org/abs/1706.02216>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = \mathbf{X}_{dst} \mathbf{W}_2^{\top} +
        \operatorname{AGG}(\mathbf{A}, \mathbf{X}) \mathbf{W}_1^{\top} + \mathbf{b}

    per node:

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{W}_2 \mathbf{x}_i + \mathbf{W}_1 \cdot
        \bigoplus_{j \in \mathcal{N}(i)} \mathbf{x}_j + \mathbf{b}

    with :math:`\bigoplus` the mean, sum, max or min, or a list of them (PyG's multi-aggregation:
    each aggregation of the neighbours, concatenated in list order, so :math:`\mathbf{W}_1` has
    ``len(aggr) * in_channels`` inputs).

    Other aggregations run on the per-edge messages through an aggregation module
    (``self.aggr_module``, PyG's contract, :mod:`unigraph.nn.aggr`): ``aggr`` a name PyG knows
    (``"std"``, ``"var"``, ``"softmax"``, ``"powermean"``, ``"lstm"``, ...), a list of names or
    modules combined as ``aggr_kwargs`` says (``mode="cat"``, ``"proj"``, ``"attn"``, ``"sum"``, ...:
    :class:`~unigraph.nn.aggr.MultiAggregation`), or a module (unigraph's or PyG's own), called as
    ``aggr(x_j, index=dst, dim_size=num_dst)``. ``"lstm"`` is PyG's
    :class:`~unigraph.nn.aggr.LSTMAggregation` (each node's neighbours zero-padded to the largest
    degree, edges sorted by destination, as PyG requires).

    DGL's aggregators:

    - ``"pool"``: :math:`\max_j \mathrm{ReLU}(\mathbf{W}_3 \mathbf{x}_j + \mathbf{b}_3)`, the same
      as ``aggr="max", project=True``.
    - ``"gcn"``: :math:`\mathbf{x}^{\prime}_i = \mathbf{W}_1 \frac{\mathbf{x}_i + \sum_{j \in
      \mathcal{N}(i)} \mathbf{x}_j}{d_i + 1} + \mathbf{b}` (no root weight: ``root_weight`` is
      ignored), :math:`d_i` the in-degree.
    - ``"dgl_lstm"`` (DGL's ``"lstm"``): an LSTM (``in_channels`` wide, zero initial state) reads
      each node's in-neighbours' features in edge order; its hidden state after the node's own last
      neighbour is the aggregation (0 for a node without in-edges). Nodes are batched by in-degree,
      as DGL does. It differs from PyG's ``"lstm"`` for nodes below the largest degree (PyG's
      state is read after the padding).

    With ``project=True`` the neighbours are first
    projected, :math:`\mathbf{x}_j \leftarrow \mathrm{ReLU}(\mathbf{W}_3 \mathbf{x}_j + \mathbf{b}_3)`;
    ``aggr="max", project=True`` is the paper's max-pooling aggregator. With ``normalize=True`` the
    output is :math:`\ell_2`-normalized, :math:`\mathbf{x}^{\prime}_i / \| \mathbf{x}^{\prime}_i \|_2`.

    For sum and mean (linear aggregations) with ``in_channels > out_channels`` the projection
    :math:`\mathbf{W}_1` runs before the aggregation, on N rows of the narrower width (the same
    function; DGL does the same).

    Args:
        in_channels (int or tuple): size of each input sample, or (source, destination) sizes;
            ``-1`` infers it on the first call (not with ``project``, ``"pool"``, ``"lstm"`` or
            ``"dgl_lstm"``, whose inner width is the input width).
        out_channels (int): size of each output sample.
        aggr (str, list or module, optional): ``"mean"``, ``"sum"`` (``"add"``), ``"max"``,
            ``"min"``, any aggregation name or module (see above), a list of them, or DGL's
            ``"pool"``, ``"gcn"``, ``"dgl_lstm"``. (default: ``"mean"``)
        normalize (bool, optional): :math:`\ell_2`-normalize the output. (default: ``False``)
        root_weight (bool, optional): add the transformed destination features
            :math:`\mathbf{W}_2 \mathbf{x}_i`. (default: ``True``)
        project (bool, optional): project neighbours first (see above). (default: ``False``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        aggr_kwargs (dict, optional): arguments of the aggregation module (PyG's).
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``flow``, ...).

    Shapes:
        - **input:** ``(g, x)`` or PyG's ``(x, edge_index)`` with ``size``
          (:mod:`unigraph.call_forms`); node features :math:`(|\mathcal{V}|, F_{in})` or a pair
          :math:`((|\mathcal{V}_{src}|, F_{s}), (|\mathcal{V}_{dst}|, F_{t}))` for a block
        - **output:** node features :math:`(|\mathcal{V}_{dst}|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, aggr: Any = "mean",
                 normalize: bool = False, root_weight: bool = True, project: bool = False, bias: bool = True,
                 aggr_kwargs: dict | None = None, **kwargs: Any):
        who = "SAGEConv"
        self.aggregators = _check_aggregators(aggr, aggr_kwargs, who)
        kind = self.aggregators[0] if self.aggregators else "module"
        # propagate's reduce: pool is max over projected neighbours, gcn a sum divided afterwards;
        # a module aggregates the messages itself (the reduce is then unused)
        super().__init__(aggr={"pool": "max", "gcn": "sum", "dgl_lstm": "sum", "module": "sum"}.get(kind, kind),
                         **kwargs)
        self.in_channels = in_channels
        self.out_channels = check_positive(out_channels, "out_channels", who)
        self._widths = channels_pair(in_channels, who, lazy=True)
        self._lazy = LAZY in self._widths
        project = project or kind == "pool"
        if self._widths[0] == LAZY and (project or kind == "dgl_lstm" or _is_name(aggr, "lstm")):
            raise ValueError(f"{who} does not support lazy initialization (in_channels=-1) with project=True or "
                             "aggr='pool'/'lstm'/'dgl_lstm': their inner layers are as wide as the input, so it "
                             "cannot infer in_channels; give in_channels")
        self.normalize, self.project = normalize, project
        self.root_weight = root_weight and kind != "gcn"
        self._aggr_repr = str(aggr)  # as given (a module would register as a submodule if kept)
        if project:
            self.lin = Linear(self._widths[0], self._widths[0], bias=True)
        self.aggr_module = None
        aggregated = len(self.aggregators) * self._widths[0] if self._widths[0] != LAZY else LAZY
        if kind == "module":
            self.aggr_module = _aggregation_module(aggr, aggr_kwargs, self._widths[0])
            if self._widths[0] != LAZY:
                width = getattr(self.aggr_module, "get_out_channels", None)
                aggregated = width(self._widths[0]) if width is not None else self._widths[0]
        self.lstm = torch.nn.LSTM(self._widths[0], self._widths[0], batch_first=True) if kind == "dgl_lstm" else None
        self.lin_l = make_linear(aggregated, out_channels, bias=bias)
        if self.root_weight:
            self.lin_r = make_linear(self._widths[1], out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.project:
            self.lin.reset_parameters()
        if self.lstm is not None:
            self.lstm.reset_parameters()
        if self.aggr_module is not None and hasattr(self.aggr_module, "reset_parameters"):
            self.aggr_module.reset_parameters()
        self.lin_l.reset_parameters()
        if self.root_weight:
            self.lin_r.reset_parameters()

    def _lazy_linears(self) -> tuple[tuple, tuple]:
        # lin_l reads len(aggr) aggregations of the input, concatenated; after a module, whatever
        # width the module returns (lin_l then sizes itself on its first call)
        source = ((self.lin_l, len(self.aggregators)),) if self.aggr_module is None else ()
        return source, (self.lin_r if self.root_weight else None,)

    def forward(self, x: Any, edge_index: Any, size: Any = None) -> Tensor:
        who = "SAGEConv"
        if is_static(x):  # [B, N, F]: B copies of the graph (pool, lstm and learned aggregations mix channels)
            g, x_flat, _ = static_copies(who, x, edge_index, size=size)
            return self(g, x_flat).view(x.shape[0], x.shape[1], -1)
        call = resolve(who, x, edge_index, size=size)
        g, x_src, x_dst = node_inputs(oriented(call.graph, self.flow, who), call.x, who, layer=self)
        if self.project:
            x_src = F.relu(linear(x_src, self.lin.weight, self.lin.bias))
        kind = self.aggregators[0] if self.aggregators else "module"
        has_root = self.root_weight and x_dst is not None
        if kind == "module":
            messages = dense(x_src).index_select(0, g.src)
            out = self.lin_l(self.aggr_module(messages, g.dst, dim_size=g.num_dst_nodes, dim=0))
        elif kind == "dgl_lstm":
            out = self.lin_l(self._lstm_aggregate(g, dense(x_src)))
        elif kind == "gcn":
            out = self._gcn(g, x_src, x_dst)
        elif len(self.aggregators) > 1:
            h = dense(x_src)
            out = self.lin_l(torch.cat([ops.gspmm(g, "copy_u", reduce, u=h) for reduce in self._reduces()], dim=-1))
        else:
            out = self._one_aggregation(g, x_src, x_dst if has_root else None)
            has_root = False  # included
        if has_root:
            out = out + linear(x_dst, self.lin_r.weight)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def _one_aggregation(self, g: Graph, x_src: Tensor, x_dst: Tensor | None) -> Tensor:
        """``W_1 AGG(x) + W_2 x_dst + b`` for one sum/mean/max/min aggregation. The root term
        carries the bias and the aggregation's projection accumulates into it in place (addmm_): no
        separate pass over the output for either."""
        if self.aggr in ("sum", "mean") and self._widths[0] > self.out_channels:  # narrower: project first
            if x_dst is x_src:
                # both weights in one product, [W_1; W_2] x: x is read once, and the backward's
                # input gradient is one product [g_1 g_2] [W_1; W_2] instead of two and a sum
                return self._project_both_first(g, x_src)
            out = self.propagate(g, x=linear(x_src, self.lin_l.weight))
            if x_dst is not None:
                return out + linear(x_dst, self.lin_r.weight, self.lin_l.bias)
            return out + self.lin_l.bias if self.lin_l.bias is not None else out
        aggregated = self.propagate(g, x=dense(x_src))
        if x_dst is None or aggregated.dim() != 2:
            out = self.lin_l(aggregated)
            return out + linear(x_dst, self.lin_r.weight) if x_dst is not None else out
        root = linear(x_dst, self.lin_r.weight, self.lin_l.bias)
        if torch.is_autocast_enabled(aggregated.device.type):  # in-place ops are not autocast: let addmm cast
            return torch.addmm(root, aggregated, self.lin_l.weight.t())
        # only for the default hooks: an update hook could give rows without in-edges zero values
        # that still depend on its parameters (a bias initialised to zeros), whose gradient the
        # skipped rows would drop
        rows = rows_with_messages(g, aggregated, self.lin_l.weight) if self.propagates_default_hooks() else None
        if rows is not None:
            return _AddProjectedRows.apply(root, aggregated, self.lin_l.weight, rows)
        return root.addmm_(aggregated, self.lin_l.weight.t())  # root is this call's own fresh tensor

    def _project_both_first(self, g: Graph, x: Tensor) -> Tensor:
        c, bias = self.out_channels, self.lin_l.bias
        weight = torch.cat([self.lin_l.weight, self.lin_r.weight])
        bias = torch.cat([torch.zeros_like(bias), bias]) if bias is not None else None  # on the root half
        to_neighbours, root = linear(x, weight, bias).split(c, dim=-1)
        return self.propagate(g, x=to_neighbours) + root

    # ------------------------------------------------------------------ aggregators
    def _reduces(self) -> list[str]:
        return ["sum" if name == "add" else name for name in self.aggregators]

    def _gcn(self, g: Graph, x_src: Tensor, x_dst: Tensor | None) -> Tensor:
        """DGL's gcn aggregator, projected first when that narrows the features (a linear map
        commutes with the sum and the division)."""
        if x_dst is None:
            raise ValueError("SAGEConv(aggr='gcn') averages each node with its neighbours: pass destination features")
        narrow = self._widths[0] > self.out_channels
        h_src = linear(x_src, self.lin_l.weight) if narrow else dense(x_src)
        if x_dst is x_src:   # a homogeneous graph: one product, not the same one twice
            h_dst = h_src
        else:
            h_dst = linear(x_dst, self.lin_l.weight) if narrow else dense(x_dst)
        total = self.propagate(g, x=h_src) + h_dst
        out = total / (g.in_degrees().to(total.dtype) + 1).unsqueeze(-1)
        if not narrow:
            return self.lin_l(out)
        return out + self.lin_l.bias if self.lin_l.bias is not None else out

    def _lstm_aggregate(self, g: Graph, x: Tensor) -> Tensor:
        """The LSTM's last hidden state over each node's in-neighbours in edge order, nodes batched
        by in-degree (one LSTM call per distinct degree)."""
        order = torch.argsort(g.dst, stable=True)  # edges grouped by destination, in edge order within
        sources = g.src.index_select(0, order)
        degree = torch.bincount(g.dst, minlength=g.num_dst_nodes)
        starts = torch.cumsum(degree, 0) - degree
        out = x.new_zeros((g.num_dst_nodes, self.lstm.hidden_size))
        for d in torch.unique(degree[degree > 0]).tolist():
            nodes = (degree == d).nonzero().flatten()
            edges = starts.index_select(0, nodes).unsqueeze(1) + torch.arange(d, device=x.device)
            _, (hidden, _) = self.lstm(x.index_select(0, sources[edges].flatten()).view(nodes.numel(), d, -1))
            out = out.index_copy(0, nodes, hidden[-1])
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, aggr={self._aggr_repr})"


def rows_with_messages(g: Graph, aggregated: Tensor, weight: Tensor) -> int | None:
    """``R`` when only the first ``R`` destination rows of ``aggregated`` can be non-zero and skipping
    the others' product with ``weight`` is exact and worth it; else ``None``.

    PyG's ``NeighborLoader`` numbers a batch's nodes hop by hop and gives the last hop's nodes (about
    three quarters of them in a 2-hop GraphSAGE batch) no in-edges, yet ``conv(x, edge_index)``
    outputs a row for each. ``R`` is one past the last destination with an in-edge (from the in-CSR
    the aggregation built, or the largest destination index where none was built; kept on the
    graph); the rows from ``R`` on are then *checked* to be zero
    (~1 ms per 10 MB), and ``weight`` to be finite (``0 * inf`` would make them NaN in the full
    product). The caller asks only for the default hooks (:meth:`MessagePassing.propagates_default_hooks`):
    zero values alone do not show that a row depends on no parameter.

    Not for a product under :data:`MIN_SKIP_WORK` multiply-adds (the checks would cost more than
    they save). CPU tensors only: on a GPU the largest-destination read and the two checks each make the host
    wait for the device (~50-100 us a read in the H200 run's mini-batch step, where a layer's
    product over all rows takes microseconds and the host is the limit)."""
    if (aggregated.dim() != 2 or aggregated.shape[0] * weight.numel() < MIN_SKIP_WORK or torch.compiler.is_compiling()
            or aggregated.device.type != "cpu" or aggregated.layout != torch.strided):
        return None
    rows = g.memo(("unigraph.nn", "rows_with_in_edges"), lambda: _last_row_with_edges(g))
    if 8 * (aggregated.shape[0] - rows) < aggregated.shape[0]:   # under an eighth to skip: not worth the checks
        return None
    if not all_finite(weight) or bool(aggregated[rows:].any()):
        return None
    return rows


def _last_row_with_edges(g: Graph) -> int:
    """One past the last destination with an in-edge: from the in-CSR where the graph has one,
    else the largest destination index (a graph of the small-graph rule has no CSR, and building
    one only for this cost more than the whole aggregation)."""
    if not g.has_memo("in_csr"):
        return int(g.dst.max()) + 1 if g.num_edges else 0
    ptr = g.in_csr()[0]
    return int(torch.searchsorted(ptr, ptr[-1:])) if ptr.numel() > 1 else 0


class _AddProjectedRows(torch.autograd.Function):
    r"""``root[:R] += aggregated[:R] W^T`` in place, for an ``aggregated`` whose rows from ``R`` on are
    zero (:func:`rows_with_messages`): the same values as ``root + aggregated W^T`` (adding ``0 W``
    changes nothing when ``W`` is finite), with the products over ``R`` rows instead of all.

    Backward, with :math:`g` the output's gradient: :math:`\partial root = g`; :math:`\partial W =
    g_{:R}^\top A_{:R}` (the other rows' terms are :math:`g_i \cdot 0`; if any of those :math:`g_i`
    is inf/NaN the full product runs, so NaN appears as it would there); :math:`\partial A =
    [g_{:R} W; 0]`: rows from ``R`` on are nodes without in-edges, whose aggregation gradient reaches
    no input. Written with differentiable operations (double backward works)."""

    @staticmethod
    def forward(ctx, root: Tensor, aggregated: Tensor, weight: Tensor, rows: int) -> Tensor:
        ctx.save_for_backward(aggregated, weight)
        ctx.rows = rows
        root[:rows].addmm_(aggregated[:rows], weight.t())
        ctx.mark_dirty(root)
        return root

    @staticmethod
    def backward(ctx, grad: Tensor):
        aggregated, weight = ctx.saved_tensors
        rows = ctx.rows
        grad_aggregated = grad_weight = None
        if ctx.needs_input_grad[1]:
            grad_aggregated = torch.cat([grad[:rows] @ weight,
                                         grad.new_zeros((grad.shape[0] - rows, weight.shape[1]))])
        if ctx.needs_input_grad[2]:
            grad_weight = transposed_product_over_rows(grad, aggregated, rows, zero="b")
        return grad, grad_aggregated, grad_weight, None


def _is_name(aggr: Any, name: str) -> bool:
    return isinstance(aggr, str) and normalize_name(aggr) == normalize_name(name)


def _check_aggregators(aggr: Any, aggr_kwargs: dict | None, who: str) -> tuple[str, ...]:
    """The names of the built-in paths (one simple reduce, a list of them concatenated, or one of
    DGL's), or ``()`` when an aggregation module does the work."""
    names = tuple(aggr) if isinstance(aggr, (list, tuple)) else (aggr,)
    if not names:
        raise ValueError(f"{who} aggr must name at least one aggregation, got {aggr!r}")
    if len(names) > 1 and any(isinstance(n, str) and n in DGL_AGGREGATORS for n in names):
        raise ValueError(f"{who}: DGL's aggregators {', '.join(DGL_AGGREGATORS)} cannot be combined in a list; "
                         f"got {list(names)}")
    if len(names) == 1 and names[0] in DGL_AGGREGATORS:
        if aggr_kwargs:
            raise ValueError(f"{who}: aggr_kwargs configure an aggregation module; DGL's {names[0]!r} takes none")
        return names
    plain = not aggr_kwargs or (dict(aggr_kwargs) == {"mode": "cat"} and len(names) > 1)
    if plain and all(isinstance(n, str) and n in SIMPLE_AGGREGATORS for n in names):
        return names
    for name in names:
        if not (isinstance(name, (str, torch.nn.Module)) or callable(name)):
            raise ValueError(f"{who} aggr must be a name, an aggregation module or a list of them; got {name!r}")
    return ()


def _aggregation_module(aggr: Any, aggr_kwargs: dict | None, width: int) -> torch.nn.Module:
    """The aggregation module for ``aggr`` (PyG's defaults: an LSTM as wide as the input)."""
    kwargs = dict(aggr_kwargs or {})
    if _is_name(aggr, "lstm"):
        kwargs.setdefault("in_channels", width)
        kwargs.setdefault("out_channels", width)
    try:
        return aggregation_resolver(aggr, **kwargs)
    except ValueError as err:
        raise ValueError(f"SAGEConv aggr: {err}; or one of DGL's {', '.join(DGL_AGGREGATORS)}") from None
