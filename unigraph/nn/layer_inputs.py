"""What the layers ported from PyG share when they read a call and size themselves: PyG's call
forms read into a graph and features (:func:`pyg_call`, :func:`square_call` for the layers that need one
node set, :func:`edge_feature_inputs` and :func:`edge_features` for edge features), the lazy widths
(``in_channels=-1``: :func:`sized_widths`, :func:`size_linear`, :func:`size_lazy`), a propagation over
``[..., N, F]`` features, and small checks. One place for each of these rules."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import torch
from torch import Tensor

from unigraph.call_forms import Call, is_graph_object, resolve
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.inputs import check_rows
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.checks import check_positive, check_width, edge_input, node_inputs
from unigraph.nn.lazy import LAZY, materialize
from unigraph.nn.projection import linear
from unigraph.nn.static_graph import refuse_static

SPARSE_FORMS = ("sparse_tensor", "torch_sparse")   # the call forms whose values can be edge features


def pyg_call(layer: MessagePassing, who: str, x: Any, edge_index: Any, *, size: Any = None,
             edge_weight: Tensor | None = None, values: str = "edge_attr") -> tuple[Call, Graph]:
    """``(call, g)``: the call in any accepted form (:mod:`unigraph.call_forms`) and its graph
    turned by ``layer.flow`` (read now, so a later change takes effect). ``values="edge_attr"``
    keeps a sparse adjacency's entries in storage order, one edge each, which is how PyG hands
    them to ``message`` (and the order a separately given ``edge_attr`` follows there). A
    reversed flow with a sparse adjacency is refused, as PyG refuses it."""
    refuse_static(who, x)
    call = resolve(who, x, edge_index, size=size, edge_weight=edge_weight, values=values)
    if layer.flow == "target_to_source" and call.form in SPARSE_FORMS:
        raise ValueError(f"{who}: flow='target_to_source' with a sparse adjacency is refused (as in PyG); pass the "
                         "transposed adjacency (adj_t.t()) with the default flow instead")
    return call, oriented(call.graph, layer.flow, who)


def sparse_values_as_features(call: Call) -> Tensor | None:
    """The edge features PyG reads from a sparse adjacency when none are given: a
    ``SparseTensor``'s values, a torch sparse tensor's values of more than one dimension (its
    one-dimensional values are weights, not features)."""
    value = call.edge_attr
    if value is None or call.form not in SPARSE_FORMS:
        return None
    if call.form == "torch_sparse" and value.dim() < 2:
        return None
    return value


def edge_features(who: str, call: Call, g: Graph, edge_attr: Tensor | None, edge_dim: int | None, *,
                  required: bool = True, from_values: bool = True) -> Tensor | None:
    """``[E, edge_dim]`` edge features (given, else with ``from_values`` a sparse adjacency's, see
    :func:`sparse_values_as_features`), rows in the graph's edge order (a sparse adjacency's
    storage order, as in PyG); None without ``edge_dim``, where a sparse adjacency's values are
    ignored and a given ``edge_attr`` is refused. ``required``: a layer built with ``edge_dim``
    refuses a call without edge features."""
    if edge_attr is None and edge_dim is not None and from_values:
        edge_attr = sparse_values_as_features(call)
    if edge_attr is None:
        if edge_dim is not None and required:
            raise ValueError(f"{who} was built with edge_dim={edge_dim} but got no edge_attr")
        return None
    if edge_dim is None:
        raise ValueError(f"{who} got edge_attr but was built without edge_dim; pass edge_dim=<features>")
    edge_attr = edge_input(g, edge_attr, who, "edge_attr")
    if edge_attr.dim() == 1:
        edge_attr = edge_attr.view(-1, 1)
    if edge_attr.dim() != 2 or edge_attr.shape[1] != edge_dim:
        raise ValueError(f"{who} expects edge_attr of shape [num_edges, edge_dim={edge_dim}], got {list(edge_attr.shape)}")
    return edge_attr


def check_edge_dim(edge_dim: Any, who: str) -> int | None:
    return None if edge_dim is None else check_positive(edge_dim, "edge_dim", who)


def edge_feature_inputs(layer: MessagePassing, x: Any, edge_index: Any, edge_attr: Tensor | None,
                        size: Any = None) -> tuple[Graph, Tensor, Tensor | None, Tensor | None]:
    """``(g, x_src, x_dst, edge_attr)`` of a call in any form, ``g`` oriented by ``layer.flow``,
    the features checked (and a lazy layer sized) by :func:`node_features`. As PyG's ``propagate``
    reads them, a given ``edge_attr`` beside a sparse adjacency follows its storage order; without
    one a ``SparseTensor``'s values are the edge features, and so are a torch sparse adjacency's
    when they are ``[E, D]`` (one value per entry is an edge weight, not read)."""
    who = type(layer).__name__
    # (edge_attr is not handed to resolve, which refuses it beside a sparse adjacency: with
    # values="edge_attr" the graph keeps the adjacency's storage order, the order PyG reads a given
    # edge_attr in there)
    call = resolve(who, x, edge_index, size=size, values="edge_attr")
    if edge_attr is None and call.edge_attr is not None and (call.form == "sparse_tensor" or call.edge_attr.dim() > 1):
        edge_attr = call.edge_attr
    g = oriented(call.graph, layer.flow, who)
    g, x_src, x_dst = node_features(layer, g, call.x)
    return g, x_src, x_dst, edge_input(g, edge_attr, who, "edge_attr")


def node_features(layer: MessagePassing, g: Graph, x: Any) -> tuple[Graph, Tensor, Tensor | None]:
    """``(g, x_src, x_dst)`` with the row counts checked, a lazy layer (``in_channels=-1``) sized
    by its own ``_materialize(x_src, x_dst)`` (which initializes only what it sizes, not a
    user-given network), then the widths checked against ``layer._widths``."""
    who = type(layer).__name__
    g, x_src, x_dst = node_inputs(g, x, who)
    if layer._lazy:
        for side in (x_src, x_dst):
            if side is not None and side.dim() != 2:
                raise ValueError(f"{who} infers in_channels from features of shape [num_nodes, F], got "
                                 f"{list(side.shape)}")
        layer._materialize(x_src, x_dst)
        layer._lazy = LAZY in layer._widths
    check_width(x_src, layer._widths[0], who, "x (source features)" if g.is_bipartite else "x")
    check_width(x_dst, layer._widths[1], who, "x (destination features)" if g.is_bipartite else "x")
    return g, x_src, x_dst


def sized_widths(widths: tuple[int, int], x_src: Tensor, x_dst: Tensor | None) -> tuple[int, int]:
    """``widths`` with each ``-1`` replaced by the width of the features seen (where given)."""
    src = x_src.shape[1] if widths[0] == LAZY else widths[0]
    dst = x_dst.shape[1] if widths[1] == LAZY and x_dst is not None else widths[1]
    return src, dst


def size_linear(lin: torch.nn.Module | None, width: int, init: Callable[[Tensor], None]) -> None:
    """Size a ``LazyLinear`` for inputs ``width`` wide (one empty batch through it) and initialize
    its weight with ``init``; anything else is left as it is."""
    if isinstance(lin, torch.nn.LazyLinear) and lin.has_uninitialized_params() and width != LAZY:
        lin(torch.zeros(0, width, dtype=lin.weight.dtype, device=lin.weight.device))
        init(lin.weight)


def uniform_(tensor: Tensor, fan: int) -> None:
    """PyG's ``uniform`` (and its ``Linear``'s ``"uniform"`` initializer): U(-1/sqrt(fan), 1/sqrt(fan));
    a lazy (still uninitialized) weight is left for its first call."""
    if isinstance(tensor, torch.nn.parameter.UninitializedParameter) or fan <= 0:
        return
    bound = 1.0 / math.sqrt(fan)
    with torch.no_grad():
        tensor.uniform_(-bound, bound)


def root_and_bias(out: Tensor, x_dst: Tensor | None, root: torch.nn.Module | None, bias: Tensor | None) -> Tensor:
    """``out + root(x_dst) + bias``, each term where it exists."""
    if x_dst is not None and root is not None:
        out = out + linear(x_dst, root.weight)
    return out + bias if bias is not None else out


def aggr_name(given: Any, resolved: Any) -> Any:
    """The aggregation as PyG's ``repr`` prints it: the name as given (``add``, not ``sum``)."""
    return given if isinstance(given, str) else resolved


@dataclasses.dataclass(frozen=True)
class SquareCall:
    """One call of a layer that runs on a square adjacency."""
    graph: Graph                 # oriented by the layer's flow
    x: Tensor                    # [..., N, F]: nodes in dimension -2
    edge_weight: Tensor | None   # given, or a sparse adjacency's values
    form: str                    # how the graph came (unigraph.call_forms.Call.form)
    adjacency: Any               # what the caller passed as the graph


def static_features(who: str, x: Any, node_dim: int = -2, *, static: bool = True) -> Tensor:
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
    features = static_features(who, edge_index if graph_first else x, layer.node_dim, static=static)
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


def weight_source(call: SquareCall) -> Any:
    """What a call's edge weights are read from, for a cache key: a torch sparse adjacency's values
    are a new alias each call, but share the adjacency's version counter."""
    if call.edge_weight is None:
        return None
    return call.adjacency if call.form == "torch_sparse" else call.edge_weight


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


def pseudo_coordinates(edge_attr: Tensor | None, dim: int, who: str, note: str = "") -> Tensor:
    """The ``[E, dim]`` pseudo-coordinates of GMMConv and SplineConv (a 1-D tensor when ``dim`` is
    1), required; ``note`` adds what the layer's range is to the error."""
    if edge_attr is None:
        raise ValueError(f"{who} needs edge_attr: the pseudo-coordinates [num_edges, dim={dim}]{note}")
    if edge_attr.dim() == 1 and dim == 1:
        edge_attr = edge_attr.view(-1, 1)
    check_width(edge_attr, dim, who, "edge_attr", "dim", "num_edges")
    return edge_attr
