r"""PyG's first argument of ``propagate``: ``self.propagate(edge_index, x=x, size=None)``.

A PyG layer written as PyG's docs write it passes its adjacency to ``propagate`` as it got it:
a ``[2, E]`` integer ``edge_index`` (or an ``EdgeIndex``), a ``SparseTensor`` or a torch sparse
``adj_t``. :func:`graph_and_inputs` turns it into the :class:`~unigraph.Graph` that ``propagate``
runs on, with PyG's rules for what PyG's ``propagate`` infers:

- **Node counts** (PyG's ``_check_input`` / ``_set_size``): ``size = (N, M)`` counts the nodes
  that ``edge_index[0]`` and ``edge_index[1]`` index; an ``EdgeIndex`` gives its ``sparse_size``,
  a sparse ``adj_t`` of shape ``[M, N]`` gives ``(N, M)`` (a ``size`` argument is then ignored, as
  in PyG). Every ``*_i`` / ``*_j`` input the hooks read sets the count of its side from its rows
  (``x_j`` the source side, ``x_i`` the destination side; a ``(src, dst)`` pair sets both), and
  a count that contradicts one already set is refused, as PyG refuses it. A side still unknown
  takes the other's count (a square graph); with neither known, each side counts up to its
  largest index (PyG's aggregation then has ``index.max() + 1`` rows).
- **Direction**: the graph is built as the adjacency reads (row 0 the sources); ``propagate``
  turns it for ``flow="target_to_source"`` as it turns any graph. A sparse adjacency with that
  flow is refused, as PyG refuses it.
- **Values of a sparse adjacency**: handed to the hooks as ``edge_weight``, ``edge_attr`` (a torch
  sparse matrix's only where they are not one scalar per entry) and ``edge_type`` where a hook
  reads that name and ``propagate`` got none (or None), one per stored entry in storage order, as
  PyG's ``_collect`` does; the graph's edges follow that order.
- ``size``, where ``message`` or ``update`` reads it, is the list of counts as set above (PyG's).

The graph comes from the layers' call-form cache (:mod:`unigraph.call_forms`: keyed on the
adjacency's identity, version and probes), so a full-batch loop builds it once. A
``unigraph.Graph`` is taken as it is.
"""
from __future__ import annotations

from typing import Any

from torch import Tensor

from unigraph import call_forms
from unigraph.graph import Graph, _as_edge_index
from unigraph.message_passing.pyg_arguments import check_node_dim

_VALUE_NAMES = ("edge_weight", "edge_attr", "edge_type")


def is_adjacency(obj: Any) -> bool:
    """Whether ``obj`` is one of PyG's adjacency forms (not a ``Graph``): a tensor or a ``SparseTensor``."""
    return isinstance(obj, Tensor) or call_forms.is_sparse_adjacency(obj)


def graph_and_inputs(adj: Any, kwargs: dict, read: frozenset, flow: str, node_dim: int,
                     who: str) -> tuple[Graph, dict]:
    """``(graph, kwargs)`` for ``propagate(adj, **kwargs)`` in PyG's form (module docstring):
    ``read`` names the parameters of ``message`` and ``update`` (of ``edge_update`` for
    ``edge_updater``); ``node_dim`` is the layer's (PyG's ``-2`` refuses features that are not
    2-D before their rows are counted); ``kwargs`` comes back without the
    ``size`` it was given (with the inferred one where a hook reads ``size``) and with a sparse
    adjacency's values where a hook reads them."""
    size = kwargs.pop("size", None)
    if call_forms.is_sparse_adjacency(adj):
        if flow == "target_to_source":
            raise ValueError(f"{who}.propagate: flow='target_to_source' is invalid with a sparse adjacency (as in "
                             "PyG); pass the transposed adjacency, adj_t.t()")
        rows, cols = (tuple(adj.shape) if isinstance(adj, Tensor) else tuple(adj.sizes()))[:2]
        counts = [cols, rows]
    else:
        counts = _edge_index_counts(adj, size, who)
    i, j = (1, 0) if flow == "source_to_target" else (0, 1)
    for name in read:
        if name[-2:] in ("_i", "_j") and name[:-2] in kwargs:
            side = j if name[-2:] == "_j" else i
            data = kwargs[name[:-2]]
            check_node_dim(node_dim, data, name[:-2], who)
            if isinstance(data, (tuple, list)):
                if len(data) != 2:
                    raise ValueError(f"{who}.propagate: {name[:-2]} must be one tensor or a (source, destination) "
                                     f"pair, got a sequence of {len(data)}")
                if isinstance(data[1 - side], Tensor):
                    _set_count(counts, 1 - side, data[1 - side], name[:-2], who)
                data = data[side]
            if isinstance(data, Tensor):
                _set_count(counts, side, data, name[:-2], who)
    filled = (counts[0] if counts[0] is not None else counts[1], counts[1] if counts[1] is not None else counts[0])
    if filled[0] is None:   # nothing says: each side up to its largest index (PyG's index.max() + 1)
        filled = _largest_indices(adj)
    graph, values = call_forms.propagate_structure(who, adj, filled)
    if values is not None:
        for name in _VALUE_NAMES:
            if name in read and kwargs.get(name) is None:
                attr_of_scalars = name == "edge_attr" and isinstance(adj, Tensor) and values.dim() == 1
                kwargs[name] = None if attr_of_scalars else values
    if "size" in read:
        kwargs["size"] = counts
    return graph, kwargs


def _edge_index_counts(edge_index: Tensor, size: Any, who: str) -> list:
    """PyG's ``_check_input`` for an ``edge_index``: the counts ``size`` or an ``EdgeIndex``'s
    ``sparse_size`` give (None where unknown), after the graph's own dtype and shape checks."""
    try:
        _as_edge_index(edge_index)
    except (TypeError, ValueError) as err:   # the graph's rule and words; say who was called
        raise type(err)(f"{who}.propagate: {err}") from None
    if type(edge_index).__name__ == "EdgeIndex" and type(edge_index).__module__.split(".")[0] == "torch_geometric":
        return list(edge_index.sparse_size())
    if size is None:
        return [None, None]
    if (not isinstance(size, (tuple, list)) or len(size) != 2
            or not all(n is None or (isinstance(n, int) and not isinstance(n, bool) and n >= 0) for n in size)):
        raise ValueError(f"{who}.propagate: size must be a pair (N, M) of node counts (ints >= 0 or None), "
                         f"got {size!r}")
    return list(size)


def _set_count(counts: list, side: int, data: Tensor, name: str, who: str) -> None:
    """PyG's ``_set_size``: the count of ``side`` from ``data``'s rows, or a contradiction refused."""
    if data.dim() == 0:
        raise ValueError(f"{who}.propagate: {name} must have one row per node, got a scalar")
    if counts[side] is None:
        counts[side] = data.shape[0]
    elif counts[side] != data.shape[0]:
        raise ValueError(f"{who}.propagate: {name} has {data.shape[0]} rows but the graph's "
                         f"{'source' if side == 0 else 'destination'} side (edge_index[{side}]) counts "
                         f"{counts[side]} nodes")


def _largest_indices(edge_index: Tensor) -> tuple[int, int]:
    """Each row's largest index plus one (0 for no edges): the counts where nothing else gives them."""
    if edge_index.shape[1] == 0:
        return 0, 0
    top = edge_index.amax(dim=1)
    return int(top[0]) + 1, int(top[1]) + 1
