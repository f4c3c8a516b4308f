"""PointNetConv: the PointNet / PointNet++ set layer, and the call handling the point-cloud layers
of this group share (PPFConv, PointTransformerConv, PointGNNConv)."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor

from unigraph.call_forms import is_graph_object, resolve
from unigraph.graph import Graph
from unigraph.message_passing import MessagePassing
from unigraph.message_passing.inputs import check_rows, split_pair
from unigraph.message_passing.pyg_arguments import oriented
from unigraph.nn.checks import reset_module
from unigraph.self_loops import with_self_loops

_SPARSE_FORMS = ("sparse_tensor", "torch_sparse")


# ---------------------------------------------------------------------- shared by the point layers
def check_network(network: Any, name: str, who: str, optional: bool = True) -> Any:
    if network is None and optional:
        return None
    if not callable(network):
        raise TypeError(f"{who} {name} must be a callable network{' or None' if optional else ''}, "
                        f"got {type(network).__name__}")
    return network


def node_pair(value: Any, name: str, who: str, *, optional_dst: bool = False) -> tuple[Tensor | None, Tensor | None]:
    """``(source, destination)`` of a per-node input given as one tensor (both sides) or a pair,
    each a floating-point ``[nodes, F]`` tensor; ``None`` is allowed where PyG allows it."""
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2:
        raise ValueError(f"{who}: {name} must be one tensor or a (source, destination) pair, got a sequence "
                         f"of {len(pair)}")
    for side, part in zip(("source", "destination"), pair):
        if part is None and (optional_dst and side == "destination"):
            continue
        if not isinstance(part, Tensor):
            raise TypeError(f"{who}: {name} ({side}) must be a tensor, got {type(part).__name__}")
        if part.dim() != 2 or not part.is_floating_point():
            raise ValueError(f"{who}: {name} ({side}) must be a floating-point [num_nodes, F] tensor, got "
                             f"{part.dtype} of shape {list(part.shape)}")
    return pair


def point_graph(layer: MessagePassing, who: str, pos: Any, edge_index: Any, *,
                loops_past_sources: bool = True) -> tuple[Graph, Tensor, Tensor]:
    r"""``(g, pos_src, pos_dst)``: the graph a point layer aggregates over and the positions of
    its source and destination nodes.

    The node counts come from ``pos`` (one tensor: ``N`` nodes; a pair: a bipartite graph), as PyG
    infers them, or from a sparse adjacency's shape / a graph object. ``edge_index`` is any PyG
    form (:mod:`unigraph.call_forms`; a sparse adjacency's values are ignored, as PyG's point
    layers ignore them) or a unigraph/DGL/PyG graph object. The graph is turned by ``layer.flow``
    (read now); with ``layer.add_self_loops`` every existing self-loop is replaced by one loop
    ``i -> i`` per node ``i < min(num_src, num_dst)`` (PyG's ``remove_self_loops`` +
    ``add_self_loops`` / ``set_diag``). ``loops_past_sources=False`` refuses an ``edge_index``
    with more destinations than sources, for which PyG's PPFConv adds loops from sources that
    do not exist (an index error there)."""
    node_pair(pos, "pos", who)
    if is_graph_object(edge_index):
        call = resolve(who, edge_index, pos)
    else:
        call = resolve(who, pos, edge_index, values="edge_attr")
    if layer.flow == "target_to_source" and call.form in _SPARSE_FORMS:
        raise ValueError(f"{who}: flow='target_to_source' with a sparse adjacency is refused (as in PyG); pass the "
                         "transposed adjacency (adj_t.t()) with the default flow instead")
    g = oriented(call.graph, layer.flow, who)
    pos_src, pos_dst = split_pair(g, pos, "pos")
    if pos_src.shape[1] != pos_dst.shape[1]:
        raise ValueError(f"{who}: source and destination positions differ in width ({pos_src.shape[1]} and "
                         f"{pos_dst.shape[1]})")
    if getattr(layer, "add_self_loops", False):
        if not loops_past_sources and call.form == "edge_index" and g.num_dst_nodes > g.num_src_nodes:
            raise ValueError(f"{who}(add_self_loops=True) adds a loop i -> i for each of the {g.num_dst_nodes} "
                             f"destination nodes, but there are only {g.num_src_nodes} source nodes (PyG fails "
                             "here too); pass add_self_loops=False or a graph with at least as many sources")
        g = with_self_loops(g).graph
    return g, pos_src, pos_dst


def source_rows(g: Graph, x: Tensor | None, name: str) -> Tensor | None:
    """``x`` (source features, or None) checked against the graph's source count."""
    if x is not None:
        check_rows(x, g.num_src_nodes, f"{name} (source features)" if g.is_bipartite else name,
                   "source nodes" if g.is_bipartite else "nodes")
    return x


def source_features(x: Any, who: str) -> Tensor | None:
    """The source side of PyG's ``x``: one tensor, None, or ``(x_src, x_dst)`` whose ``x_dst`` the
    layer does not read."""
    if isinstance(x, (tuple, list)):
        if len(x) != 2:
            raise ValueError(f"{who}: x must be one tensor, None or a (source, destination) pair, got a sequence "
                             f"of {len(x)}")
        x = x[0]
    if x is not None and (not isinstance(x, Tensor) or x.dim() != 2):
        raise ValueError(f"{who}: x must be a [num_nodes, F] tensor or None, got "
                         f"{list(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
    return x


class EdgeMessages(MessagePassing):
    """A point layer whose messages are computed per edge in ``forward`` (they go through the
    user's networks, which need one row per edge, batch norm included, so nothing can be moved to
    node rows) and handed to ``propagate`` as an edge input: ``message`` returns them unchanged,
    and the aggregation (``aggr``, a name or PyG's aggregation modules) reduces them."""

    resolves_flow = True

    def message(self, msg: Tensor) -> Tensor:
        return msg


class LocalGlobal(EdgeMessages):
    r""":math:`\gamma(\operatorname{AGG}_j\, h(\mathbf{x}_j \,\Vert\, \mathbf{g}_{j,i}))`, PointNet's
    form, which PPFConv shares with its own per-edge geometry :math:`\mathbf{g}`: ``local_nn``
    (:math:`h`) and ``global_nn`` (:math:`\gamma`; a missing one is the identity), max by default."""

    def __init__(self, local_nn: Callable | None = None, global_nn: Callable | None = None,
                 add_self_loops: bool = True, **kwargs: Any):
        kwargs.setdefault("aggr", "max")
        super().__init__(**kwargs)
        self.local_nn = check_network(local_nn, "local_nn", type(self).__name__)
        self.global_nn = check_network(global_nn, "global_nn", type(self).__name__)
        self.add_self_loops = add_self_loops
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.aggr_module is not None:
            reset_module(self.aggr_module)
        reset_module(self.local_nn)
        reset_module(self.global_nn)

    def _local_global(self, g: Graph, x_src: Tensor | None, geometry: Tensor) -> Tensor:
        """The source features (when given) beside each edge's ``geometry``, through ``local_nn``,
        aggregated, through ``global_nn``."""
        msg = geometry if x_src is None else torch.cat([x_src.index_select(0, g.src), geometry], dim=1)
        if self.local_nn is not None:
            msg = self.local_nn(msg)
        out = self.propagate(g, msg=msg)
        return self.global_nn(out) if self.global_nn is not None else out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(local_nn={self.local_nn}, global_nn={self.global_nn})"


class PointNetConv(LocalGlobal):
    r"""The PointNet set layer from the `"PointNet: Deep Learning on Point Sets for 3D
    Classification and Segmentation" <https://arxiv.org/abs/1612.00593>`_ and `"PointNet++: Deep
    Hierarchical Feature Learning on Point Sets in a Metric Space"
    <https://arxiv.org/abs/1706.02413>`_ papers.

    .. math::
        \mathbf{x}^{\prime}_i = \gamma_{\mathbf{\Theta}} \left( \max_{j \in
        \mathcal{N}(i) \cup \{ i \}} h_{\mathbf{\Theta}} ( \mathbf{x}_j \,\Vert\,
        \mathbf{p}_j - \mathbf{p}_i) \right)

    with :math:`\mathbf{p}` the node positions, :math:`h_{\mathbf{\Theta}}` (``local_nn``) run on
    one row per edge and :math:`\gamma_{\mathbf{\Theta}}` (``global_nn``) on the aggregated rows;
    a missing network is the identity, missing features leave :math:`\mathbf{p}_j -
    \mathbf{p}_i` alone. In matrix form, with :math:`\mathbf{S}, \mathbf{T}` the source and target
    incidence matrices (:math:`|\mathcal{E}| \times |\mathcal{V}|`) of the graph with its
    self-loops: :math:`\mathbf{X}' = \gamma(\operatorname{AGG}_{\mathbf{T}}\, h([\mathbf{S}\mathbf{X}
    \,\Vert\, \mathbf{S}\mathbf{P}_s - \mathbf{T}\mathbf{P}_t]))`.

    Args:
        local_nn (torch.nn.Module, optional): :math:`h_{\mathbf{\Theta}}`, ``[-1, F_in + D]`` to
            ``[-1, F_out]``. (default: ``None``)
        global_nn (torch.nn.Module, optional): :math:`\gamma_{\mathbf{\Theta}}`, ``[-1, F_out]`` to
            ``[-1, F_final]``. (default: ``None``)
        add_self_loops (bool, optional): replace the self-loops by one per node. (default: ``True``)
        **kwargs: :class:`~unigraph.message_passing.MessagePassing` arguments (``aggr``, default
            ``"max"``; ``flow``; ...), as PyG's.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})`, ``None``, or a pair
          :math:`((|\mathcal{V}_s|, F_{in}), \cdot)` whose destination part is not read;
          positions :math:`(|\mathcal{V}|, D)` or a pair :math:`((|\mathcal{V}_s|, D),
          (|\mathcal{V}_t|, D))` (bipartite); ``edge_index`` in any of PyG's forms or a graph
          object (:func:`point_graph`)
        - **output:** node features :math:`(|\mathcal{V}_t|, F_{out})`
    """

    def forward(self, x: Any, pos: Any, edge_index: Any) -> Tensor:
        who = type(self).__name__
        g, pos_src, pos_dst = point_graph(self, who, pos, edge_index)
        x_src = source_rows(g, source_features(x, who), "x")
        msg = pos_src.index_select(0, g.src) - pos_dst.index_select(0, g.dst)
        return self._local_global(g, x_src, msg)
