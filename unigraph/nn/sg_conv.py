"""SGConv: the simplified graph convolution of Wu et al., and what the layers that propagate with
PyG's ``gcn_norm`` share (ChebConv, SSGConv, APPNP, TAGConv, ARMAConv, GCN2Conv, LGConv, MixHopConv,
ClusterGCNConv, LEConv import it from here):

- :func:`square_call`: a call's graph (oriented by ``flow``, square), features and edge weights;
- :func:`gcn_norm`: :math:`\\hat{D}^{-1/2} \\hat{A} \\hat{D}^{-1/2}` as PyG's ``gcn_norm`` computes it,
  self-loop weights included, per call form (see its docstring);
- :func:`propagate_nodes`: ``propagate`` on features ``[..., N, F]`` (nodes in dimension -2, as PyG's
  ``node_dim=-2``): the leading dimensions ride along as columns of one ``[N, ...*F]`` product;
- :class:`InputCache`: PyG's ``cached=True``, keyed on the inputs the value was computed from.
"""
from __future__ import annotations

import dataclasses
import weakref
from typing import Any

import torch
from torch import Tensor

from unigraph.call_forms import is_graph_object, resolve
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.inputs import check_rows
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.checks import check_positive, edge_input
from unigraph.nn.gcn_conv import _inverse_sqrt, loop_weights
from unigraph.nn.lazy import LAZY, make_linear, materialize
from unigraph.self_loops import with_self_loops


# ---------------------------------------------------------------------- shared helpers
@dataclasses.dataclass(frozen=True)
class SquareCall:
    """One call of a layer that runs on a square adjacency."""
    graph: Graph                 # oriented by the layer's flow
    x: Tensor                    # [..., N, F]: nodes in dimension -2
    edge_weight: Tensor | None   # given, or a sparse adjacency's values
    form: str                    # how the graph came (unigraph.call_forms.Call.form)
    adjacency: Any               # what the caller passed as the graph


def node_features(who: str, x: Any, node_dim: int = -2, *, static: bool = True) -> Tensor:
    """``x`` checked: one dense floating tensor ``[N, F]``, or ``[..., N, F]`` where ``static``."""
    if isinstance(x, (tuple, list)):
        raise ValueError(f"{who} takes one node feature tensor, not a (source, destination) pair (as in PyG): it "
                         "runs on a square adjacency")
    if not isinstance(x, Tensor):
        raise TypeError(f"{who} expects node features x as a torch.Tensor, got {type(x).__name__}")
    if x.layout != torch.strided:
        raise TypeError(f"{who} expects dense node features, got a {x.layout} tensor")
    if not x.is_floating_point():
        raise TypeError(f"{who} expects floating point node features, got {x.dtype}")
    if x.dim() < 2 or (x.dim() > 2 and not (static and node_dim == -2)):
        shapes = "[num_nodes, F] or [..., num_nodes, F] (node_dim=-2)" if static else "[num_nodes, F]"
        raise ValueError(f"{who} expects x of shape {shapes}, got {list(x.shape)}")
    return x


def square_call(layer: MessagePassing, x: Any, edge_index: Any, edge_weight: Tensor | None = None, *,
                static: bool = True) -> SquareCall:
    """The call ``layer(x, edge_index, edge_weight)`` (or ``layer(g, x, ...)``) read and checked:
    PyG's forms through :func:`unigraph.call_forms.resolve`, the graph oriented by ``layer.flow``
    and refused unless square (PyG normalizes a square adjacency only)."""
    who = type(layer).__name__
    graph_first = is_graph_object(x)   # unigraph's conv(g, x)
    features = node_features(who, edge_index if graph_first else x, layer.node_dim, static=static)
    rows = features.movedim(-2, 0)      # nodes first: what resolve counts
    if graph_first:
        call = resolve(who, x, rows, edge_weight=edge_weight)
    else:
        call = resolve(who, rows, edge_index, edge_weight=edge_weight)
    g = oriented(call.graph, layer.flow, who)
    if g.is_bipartite:
        raise ValueError(f"{who} needs a square adjacency, got {g.num_src_nodes} source and {g.num_dst_nodes} "
                         "destination nodes (a size, a sparse shape or a block)")
    check_rows(rows, g.num_src_nodes, "x", "nodes")
    weight = edge_input(g, call.edge_weight, who, "edge_weight", vector=True)
    return SquareCall(g, features, weight, call.form, call.adjacency)


def propagate_nodes(layer: MessagePassing, g: Graph, x: Tensor, **edge_inputs: Any) -> Tensor:
    """``layer.propagate(g, x=x, **edge_inputs)`` for ``x`` of shape ``[..., N, F]``: a linear message
    acts on every column alike, so the leading dimensions travel as columns of ``[N, ...*F]`` and the
    graph is read once."""
    if x.dim() == 2:
        return layer.propagate(g, x=x, **edge_inputs)
    moved = x.movedim(-2, 0)
    out = layer.propagate(g, x=moved.reshape(moved.shape[0], -1), **edge_inputs)
    return out.reshape(out.shape[0], *moved.shape[1:]).movedim(0, -2)


def gcn_norm(g: Graph, edge_weight: Tensor | None, dtype: torch.dtype, form: str = "edge_index", *,
             add_self_loops: bool = True) -> tuple[Graph, Tensor]:
    """The graph to propagate on and its weights :math:`e_{j,i} / \\sqrt{\\hat{d}_j \\hat{d}_i}`, with
    :math:`\\hat{d}` the weighted in-degree after the self-loops: PyG's ``gcn_norm`` (``improved=False``).

    With ``add_self_loops`` every node gets one loop, and its weight is PyG's for the call form:
    an ``edge_index`` (or a graph object) keeps an existing loop's weight (``add_remaining_self_loops``),
    a ``SparseTensor`` replaces it by 1 (``fill_diag``), a torch sparse adjacency adds 1 to it
    (``add_self_loops``, then coalesced); 1 where a node had none, and always 1 without weights.
    Degrees are summed in float32 at least (GCNConv's rule). Without weights the result is a
    function of the structure: kept on the graph (not while compiling, as GCNConv)."""
    if edge_weight is None and not torch.compiler.is_compiling():
        def build() -> tuple[Graph, Tensor]:
            with torch.inference_mode(False):  # kept on the graph: a normal tensor whatever mode asked first
                return _gcn_norm(g, None, dtype, form, add_self_loops)
        return g.memo(("unigraph.nn", "pyg_gcn_norm", add_self_loops, dtype), build)
    return _gcn_norm(g, edge_weight, dtype, form, add_self_loops)


def _gcn_norm(g: Graph, edge_weight: Tensor | None, dtype: torch.dtype, form: str,
              add_self_loops: bool) -> tuple[Graph, Tensor]:
    exact = torch.promote_types(dtype, torch.float32)
    if edge_weight is None:
        weights = torch.ones(g.num_edges, dtype=exact, device=g.device)
    else:
        weights = edge_weight.to(exact)
    if add_self_loops:
        looped = with_self_loops(g)
        weights = looped.edge_values(weights, loop_weights(looped, weights, form))
        g = looped.graph
    inv = _inverse_sqrt(weights.new_zeros(g.num_dst_nodes).index_add(0, g.dst, weights))
    return g, (inv.index_select(0, g.src) * weights * inv.index_select(0, g.dst)).to(dtype)


def weight_source(call: SquareCall) -> Any:
    """What a call's edge weights are read from, for a cache key: a torch sparse adjacency's values
    are a new alias each call, but share the adjacency's version counter."""
    if call.edge_weight is None:
        return None
    return call.adjacency if call.form == "torch_sparse" else call.edge_weight


class InputCache:
    """One cached value with the inputs it was computed from (PyG's ``cached=True``).

    :meth:`get` hits only while every input tensor or object is the *same object* as at
    :meth:`put` (a weak reference, so nothing is kept alive) and each tensor's in-place version,
    storage address, shape, dtype and device are unchanged, and every plain setting (``K``, a
    dtype, ...) is equal. What it cannot see: a write that bypasses the version counter
    (``.data``, numpy or DLPack views). Inference tensors carry no version: nothing is cached for
    them. Nothing is read or written while torch.compile traces (the value is computed there)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.value: Any = None
        self._refs: tuple = ()
        self._stamp: tuple | None = None

    def get(self, inputs: tuple) -> Any:
        if self.value is None or torch.compiler.is_compiling():
            return None
        stamp = _stamp(inputs)
        if stamp is None or stamp != self._stamp:
            return None
        for ref, obj in zip(self._refs, inputs):
            if ref is not None and ref() is not obj:
                return None
        return self.value

    def put(self, inputs: tuple, value: Any) -> None:
        if torch.compiler.is_compiling():
            return
        stamp = _stamp(inputs)
        if stamp is None:
            self.clear()
            return
        self._refs = tuple(None if _plain(obj) else weakref.ref(obj) for obj in inputs)
        self._stamp, self.value = stamp, value

    # a cache is not state: pickling or copying a layer drops it (weak references do not pickle)
    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.clear()


def _plain(obj: Any) -> bool:
    return obj is None or isinstance(obj, (bool, int, float, str, torch.dtype, torch.device))


def _stamp(inputs: tuple) -> tuple | None:
    stamp = []
    for obj in inputs:
        if _plain(obj):
            stamp.append(obj)
        elif isinstance(obj, Tensor):
            if obj.is_inference():
                return None
            address = obj.data_ptr() if obj.layout == torch.strided else None
            stamp.append((id(obj), obj._version, address, tuple(obj.shape), obj.dtype, obj.device))
        else:
            stamp.append(id(obj))
    return tuple(stamp)


def refuse_cache_value(who: str, name: str, value: Any) -> None:
    """PyG's cache attributes may be cleared (``= None``), not filled by hand."""
    if value is not None:
        raise ValueError(f"{who}.{name} can only be set to None (to drop the cache); the layer fills it itself")


def check_hops(K: Any, who: str, minimum: int = 0) -> int:
    if isinstance(K, bool) or not isinstance(K, int) or K < minimum:
        raise ValueError(f"{who} K (the number of hops) must be an int >= {minimum}, got {K!r}")
    return K


def size_lazy(layer: MessagePassing, x: Tensor, linears: tuple) -> None:
    """A lazy layer (``in_channels=-1``) sized from ``x`` (``[..., N, F]``) on its first call; then
    ``x``'s width checked against the layer's."""
    if layer._lazy:
        materialize(layer, x.reshape(-1, x.shape[-1]), None, linears, ())
    if x.shape[-1] != layer._widths[0]:
        raise ValueError(f"{type(layer).__name__} expects x with {layer._widths[0]} features (its in_channels), got "
                         f"{x.shape[-1]}")


# ---------------------------------------------------------------------- SGConv
class SGConv(MessagePassing):
    r"""The simple graph convolution from the `"Simplifying Graph Convolutional Networks"
    <https://arxiv.org/abs/1902.07153>`_ paper.

    .. math::
        \mathbf{X}^{\prime} = {\left(\mathbf{\hat{D}}^{-1/2} \mathbf{\hat{A}}
        \mathbf{\hat{D}}^{-1/2} \right)}^K \mathbf{X} \mathbf{\Theta} + \mathbf{b},

    where :math:`\mathbf{\hat{A}} = \mathbf{A} + \mathbf{I}` (the edge weights, with one self-loop
    per node) and :math:`\hat{D}_{ii} = \sum_{j} \hat{A}_{ji}`: ``K`` hops of PyG's ``gcn_norm``
    (:func:`gcn_norm`, its self-loop weights per call form), each one g-SpMM, then one linear layer.

    Args:
        in_channels (int): size of each input sample, or ``-1`` to infer it on the first call.
        out_channels (int): size of each output sample.
        K (int, optional): number of hops :math:`K`. (default: ``1``)
        cached (bool, optional): keep :math:`\mathbf{S}^K \mathbf{X}` of the last call and return it
            (detached, as PyG does) while the same graph, the same unchanged features ``x`` and edge
            weights come back with the same ``K`` (transductive learning); any other call computes
            it again and keeps that instead (:class:`InputCache` says what is compared). PyG's
            ``_cached_x`` reads it; set it to ``None`` to drop it. (default: ``False``)
        add_self_loops (bool, optional): add self-loops before normalizing. (default: ``True``)
        bias (bool, optional): learn an additive bias. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, ``flow``, ...).

    Shapes:
        - **input:** PyG's ``(x, edge_index)`` (an ``edge_index``, ``EdgeIndex``, ``SparseTensor`` or
          torch sparse ``adj_t``, whose values are the edge weights) or ``(g, x)``; node features
          :math:`(|\mathcal{V}|, F_{in})` or :math:`(*, |\mathcal{V}|, F_{in})`, edge weights
          :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(*, |\mathcal{V}|, F_{out})`
    """

    resolves_flow = True

    def __init__(self, in_channels: int, out_channels: int, K: int = 1, cached: bool = False,
                 add_self_loops: bool = True, bias: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "add")
        super().__init__(**kwargs)
        self.in_channels = in_channels if in_channels == LAZY else check_positive(in_channels, "in_channels", "SGConv")
        self.out_channels = check_positive(out_channels, "out_channels", "SGConv")
        self.K = check_hops(K, "SGConv")
        self.cached, self.add_self_loops = cached, add_self_loops
        self._widths, self._lazy = (in_channels, in_channels), in_channels == LAZY
        self._kept = InputCache()
        self.lin = make_linear(in_channels, out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()
        self._kept.clear()

    @property
    def _cached_x(self) -> Tensor | None:
        """PyG's name: the cached :math:`\\mathbf{S}^K \\mathbf{X}`, or None."""
        return self._kept.value

    @_cached_x.setter
    def _cached_x(self, value: None) -> None:
        refuse_cache_value("SGConv", "_cached_x", value)
        self._kept.clear()

    def forward(self, x: Tensor | Any, edge_index: Any, edge_weight: Tensor | None = None) -> Tensor:
        call = square_call(self, x, edge_index, edge_weight)
        size_lazy(self, call.x, (self.lin,))
        key = (call.graph, call.x, weight_source(call), self.K, self.add_self_loops)
        h = self._kept.get(key) if self.cached else None
        if h is None:
            g, weights = gcn_norm(call.graph, call.edge_weight, call.x.dtype, call.form,
                                  add_self_loops=self.add_self_loops)
            h = call.x
            for _ in range(self.K):
                h = propagate_nodes(self, g, h, edge_weight=weights)
            if self.cached:
                self._kept.put(key, h.detach())
        return self.lin(h)

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return edge_weight.view(-1, 1) * x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, K={self.K})"

