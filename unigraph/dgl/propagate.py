r"""DGL's message propagation along traversal frontiers: :func:`prop_nodes`, :func:`prop_edges`,
:func:`prop_nodes_bfs`, :func:`prop_nodes_topo` and :func:`prop_edges_dfs`.

Propagation runs one message-passing step per frontier, in order, each step seeing the features
the previous ones wrote. With node frontiers :math:`F_1, F_2, \dots` every node :math:`v \in F_k`
pulls from all its in-edges (``g.pull``):

.. math::
    h_v \leftarrow \phi\Big(v, \rho\big(\{\psi(e) : e = (u, v) \in E\}\big)\Big), \quad v \in F_k

(:math:`\psi` the message function, :math:`\rho` the reduce function, :math:`\phi` the optional
``apply_node_func``); with edge frontiers, only the frontier's edges send and their destinations
receive (``g.send_and_recv``). Message and reduce functions are DGL's built-ins
(``unigraph.dgl.function``) or user-defined functions of the edge / node batch, as for the graph's
own methods. An empty frontier does nothing (as in DGL).

:func:`prop_nodes_bfs`, :func:`prop_nodes_topo` and :func:`prop_edges_dfs` take their frontiers
from :mod:`unigraph.dgl.traversal` (computed on the CPU, moved to the graph's device).

Differs from DGL: ``message_func`` / ``reduce_func`` left at ``"default"`` raise by name (DGL 2
has no default functions and fails later), and ``apply_node_func="default"`` means none (DGL
fails on it).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from unigraph.dgl import traversal
from unigraph.dgl.base import DGLError

__all__ = ["prop_nodes", "prop_edges", "prop_nodes_bfs", "prop_nodes_topo", "prop_edges_dfs"]


def _functions(what: str, message_func: Any, reduce_func: Any, apply_node_func: Any) -> tuple:
    for name, func in (("message_func", message_func), ("reduce_func", reduce_func)):
        if isinstance(func, str) and func == "default":
            raise DGLError(f"{what}: {name} must be given (a unigraph.dgl.function built-in or a function); DGL 2 has "
                           "no default")
    return message_func, reduce_func, None if isinstance(apply_node_func, str) and apply_node_func == "default" \
        else apply_node_func


def _homogeneous(graph, what: str):
    from unigraph.dgl.graph import DGLGraph
    if not isinstance(graph, DGLGraph) or graph.is_bipartite:
        raise DGLError(f"{what} needs a homogeneous unigraph.dgl graph (one node type, one relation), got "
                       f"{type(graph).__name__}" + (" (bipartite)" if isinstance(graph, DGLGraph) else ""))
    return graph


def prop_nodes(graph, nodes_generator: Iterable, message_func: Any = "default", reduce_func: Any = "default",
               apply_node_func: Callable | None = "default") -> None:
    """DGL's ``prop_nodes``: ``graph.pull`` on each node frontier of ``nodes_generator`` in turn
    (module docstring); the graph's node features are updated in place."""
    message_func, reduce_func, apply_node_func = _functions("prop_nodes", message_func, reduce_func, apply_node_func)
    for frontier in nodes_generator:
        if len(frontier):
            graph.pull(frontier, message_func, reduce_func, apply_node_func)


def prop_edges(graph, edges_generator: Iterable, message_func: Any = "default", reduce_func: Any = "default",
               apply_node_func: Callable | None = "default") -> None:
    """DGL's ``prop_edges``: ``graph.send_and_recv`` on each edge frontier of ``edges_generator``
    in turn (edge ids, or ``(u, v)`` pairs); the graph's node features are updated in place."""
    message_func, reduce_func, apply_node_func = _functions("prop_edges", message_func, reduce_func, apply_node_func)
    for frontier in edges_generator:
        if len(frontier) and not (isinstance(frontier, tuple) and len(frontier[0]) == 0):
            graph.send_and_recv(frontier, message_func, reduce_func, apply_node_func)


def _on_device(frontiers: tuple, graph) -> list:
    return [frontier.to(graph.device) for frontier in frontiers]


def prop_nodes_bfs(graph, source, message_func, reduce_func, reverse: bool = False,
                   apply_node_func: Callable | None = None) -> None:
    """DGL's ``prop_nodes_bfs``: :func:`prop_nodes` over the BFS frontiers from ``source``
    (:func:`~unigraph.dgl.traversal.bfs_nodes_generator`; in-edges with ``reverse``)."""
    _homogeneous(graph, "prop_nodes_bfs")
    frontiers = traversal.bfs_nodes_generator(graph, source, reverse)
    prop_nodes(graph, _on_device(frontiers, graph), message_func, reduce_func, apply_node_func)


def prop_nodes_topo(graph, message_func, reduce_func, reverse: bool = False,
                    apply_node_func: Callable | None = None) -> None:
    """DGL's ``prop_nodes_topo``: :func:`prop_nodes` over the topological frontiers
    (:func:`~unigraph.dgl.traversal.topological_nodes_generator`); a cyclic graph raises DGLError."""
    _homogeneous(graph, "prop_nodes_topo")
    frontiers = traversal.topological_nodes_generator(graph, reverse)
    prop_nodes(graph, _on_device(frontiers, graph), message_func, reduce_func, apply_node_func)


def prop_edges_dfs(graph, source, message_func, reduce_func, reverse: bool = False, has_reverse_edge: bool = False,
                   has_nontree_edge: bool = False, apply_node_func: Callable | None = None) -> None:
    """DGL's ``prop_edges_dfs``: :func:`prop_edges` over the labelled DFS frontiers from
    ``source`` (:func:`~unigraph.dgl.traversal.dfs_labeled_edges_generator`, with reverse and
    non-tree edges as asked)."""
    _homogeneous(graph, "prop_edges_dfs")
    frontiers = traversal.dfs_labeled_edges_generator(graph, source, reverse, has_reverse_edge, has_nontree_edge,
                                                      return_labels=False)
    prop_edges(graph, _on_device(frontiers, graph), message_func, reduce_func, apply_node_func)
