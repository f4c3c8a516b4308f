"""DGL's constants, error and warning types (``dgl.NID``, ``dgl.EID``, ``dgl.ALL``, ``dgl.DGLError``,
``dgl.DGLWarning``)."""
from __future__ import annotations

NID = "_ID"      # ndata key: a node's id in the graph a subgraph/block was taken from
EID = "_ID"      # edata key: an edge's id in the graph a subgraph/block was taken from
NTYPE = "_TYPE"  # ndata key of a homogeneous graph made from a heterograph: the node type id
ETYPE = "_TYPE"  # edata key of the same: the edge type id
ALL = "__ALL__"  # "every node / every edge" where DGL takes ids
DEFAULT_NTYPE = "_N"
DEFAULT_ETYPE = "_E"
CROSS_REDUCERS = ("sum", "mean", "max", "min", "stack")   # multi_update_all's ways to combine relations


class DGLWarning(UserWarning):
    """DGL's warning category (e.g. ``k`` larger than a point set in ``knn_graph``)."""


class DGLError(ValueError):
    """DGL's error type. A ValueError here, so unigraph's own bad-input errors and DGL's meet in one
    ``except ValueError``."""


def is_internal_column(name: str) -> bool:
    """Whether ``name`` is a feature key DGL writes itself (ids, type ids)."""
    return name in (NID, EID, NTYPE, ETYPE)


def is_all(value) -> bool:
    return isinstance(value, str) and value == ALL
