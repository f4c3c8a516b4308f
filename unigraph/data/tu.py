"""The TU graph-classification format (Morris et al., https://chrsmrrs.github.io/datasets/).

A dataset ``NAME`` is a folder of comma-separated text files, one row per line:

=================================  ==========  =====================================================
file                               rows        content
=================================  ==========  =====================================================
``NAME_A.txt``                     edges       ``row, col``: an edge between 1-based global node ids
``NAME_graph_indicator.txt``       nodes       the 1-based graph id of each node (non-decreasing)
``NAME_graph_labels.txt``          graphs      a class label per graph (any integers)
``NAME_graph_attributes.txt``      graphs      regression targets (optional; preferred over labels)
``NAME_node_labels.txt``           nodes       integer label(s) per node (optional)
``NAME_node_attributes.txt``       nodes       float attribute(s) per node (optional)
``NAME_edge_labels.txt``           edges       integer label(s) per line of ``_A`` (optional)
``NAME_edge_attributes.txt``       edges       float attribute(s) per line of ``_A`` (optional)
=================================  ==========  =====================================================

Processing matches PyG's ``TUDataset`` (so a model ported from PyG sees the same tensors): graph
labels are renumbered ``0..C-1`` in sorted order; each column of node (edge) labels is shifted
to start at 0 and one-hot encoded; ``x`` is the node attributes (when ``use_node_attr``) followed
by the node-label one-hots, ``edge_attr`` likewise; self-loops are dropped and duplicate edges
merged (their attributes summed), edges sorted by (source, target).

Reading is strict: every file is size-bounded (``max_bytes``) and checked (column counts, integer
and finite values, row counts that agree across files, node ids in range, edges that stay inside
one graph, graph ids in order), and every error names the file and, where it applies, the line.
"""
from __future__ import annotations

import os
import pathlib

import numpy as np
import torch

from unigraph.data.graph_dataset import GraphDataset
from unigraph.data.text_table import DEFAULT_MAX_BYTES, DataFormatError, read_table

TUFormatError = DataFormatError  # the name TU users look for; raised for every malformed or missing file


def _one_hot_columns(labels: np.ndarray) -> np.ndarray:
    """PyG's encoding: each column shifted to start at 0, one-hot, columns side by side."""
    labels = labels - labels.min(axis=0)
    return np.concatenate([np.eye(int(col.max()) + 1, dtype=np.float32)[col] for col in labels.T], axis=1)


def _check_rows(path: pathlib.Path, table: np.ndarray, expected: int, what: str) -> None:
    if table.shape[0] != expected:
        raise DataFormatError(f"{path.name} has {table.shape[0]} lines but there are {expected} {what}")


def _features(parts: list[np.ndarray]) -> torch.Tensor | None:
    parts = [p for p in parts if p is not None and p.shape[1]]
    return torch.from_numpy(np.concatenate(parts, axis=1).astype(np.float32)) if parts else None


def read_tu(folder: str | os.PathLike, name: str, *, use_node_attr: bool = False, use_edge_attr: bool = False,
            max_bytes: int = DEFAULT_MAX_BYTES) -> GraphDataset:
    """Read dataset ``name`` from ``folder`` (the folder holding ``name_A.txt``; PyG's
    ``root/NAME/raw`` is found too). ``use_node_attr``/``use_edge_attr`` include the float
    attributes in ``x``/``edge_attr`` (PyG's ``TUDataset`` flags, default off as there)."""
    folder = pathlib.Path(folder)
    if not (folder / f"{name}_A.txt").is_file() and (folder / name / "raw" / f"{name}_A.txt").is_file():
        folder = folder / name / "raw"

    def path(part: str) -> pathlib.Path:
        return folder / f"{name}_{part}.txt"

    def optional(part: str, integer: bool) -> np.ndarray | None:
        return read_table(path(part), integer=integer, max_bytes=max_bytes) if path(part).is_file() else None

    indicator_table = read_table(path("graph_indicator"), integer=True, max_bytes=max_bytes)
    if indicator_table.shape[1] != 1:
        raise DataFormatError(f"{path('graph_indicator').name} must have one graph id per line, "
                            f"got {indicator_table.shape[1]} fields")
    indicator = indicator_table[:, 0]
    num_nodes = indicator.size
    if bool((np.diff(indicator) < 0).any()):
        at = int(np.nonzero(np.diff(indicator) < 0)[0][0]) + 2
        raise DataFormatError(f"{path('graph_indicator').name}: line {at}: graph ids must not decrease (the nodes of "
                            f"each graph are listed together), got {indicator[at - 2]} then {indicator[at - 1]}")

    targets = optional("graph_attributes", False)
    labels = optional("graph_labels", True) if targets is None else None
    label_file = path("graph_attributes" if targets is not None else "graph_labels")
    if targets is None and labels is None:
        raise DataFormatError(f"neither {label_file.name} nor {path('graph_attributes').name} found in {folder}: "
                            "a graph-classification dataset needs a label per graph")
    graph_values = targets if targets is not None else labels
    num_graphs = graph_values.shape[0]
    if int(indicator.min()) < 1 or int(indicator.max()) > num_graphs:
        bad = int(indicator.min()) if int(indicator.min()) < 1 else int(indicator.max())
        at = int(np.nonzero(indicator == bad)[0][0]) + 1
        raise DataFormatError(f"{path('graph_indicator').name}: line {at}: graph id {bad} is outside 1..{num_graphs} "
                            f"({label_file.name} has {num_graphs} lines)")

    edges = read_table(path("A"), integer=True, max_bytes=max_bytes)
    if edges.shape[1] != 2:
        raise DataFormatError(f"{path('A').name} must have two node ids per line, got {edges.shape[1]} fields")
    out_of_range = (edges < 1) | (edges > num_nodes)
    if bool(out_of_range.any()):
        at = int(np.nonzero(out_of_range.any(1))[0][0])
        raise DataFormatError(f"{path('A').name}: line {at + 1}: node id {edges[at][out_of_range[at]][0]} is outside "
                            f"1..{num_nodes} ({path('graph_indicator').name} lists {num_nodes} nodes)")
    edges = edges - 1
    crossing = indicator[edges[:, 0]] != indicator[edges[:, 1]]
    if bool(crossing.any()):
        at = int(np.nonzero(crossing)[0][0])
        u, v = edges[at]
        raise DataFormatError(f"{path('A').name}: line {at + 1}: edge {u + 1}, {v + 1} joins graph {indicator[u]} "
                            f"to graph {indicator[v]}; edges must stay inside one graph")

    node_labels, node_attrs = optional("node_labels", True), optional("node_attributes", False)
    edge_labels, edge_attrs = optional("edge_labels", True), optional("edge_attributes", False)
    for part, table, rows, what in (("node_labels", node_labels, num_nodes, "nodes"),
                                    ("node_attributes", node_attrs, num_nodes, "nodes"),
                                    ("edge_labels", edge_labels, len(edges), f"edges in {path('A').name}"),
                                    ("edge_attributes", edge_attrs, len(edges), f"edges in {path('A').name}")):
        if table is not None:
            _check_rows(path(part), table, rows, what)
    x = _features([node_attrs if use_node_attr else None,
                   None if node_labels is None else _one_hot_columns(node_labels)])
    edge_attr = _features([edge_attrs if use_edge_attr else None,
                           None if edge_labels is None else _one_hot_columns(edge_labels)])

    if targets is not None:
        y = torch.from_numpy(targets.astype(np.float32))
    else:
        if labels.shape[1] != 1:
            raise DataFormatError(f"{label_file.name} must have one label per line, got {labels.shape[1]} fields")
        y = torch.from_numpy(np.unique(labels[:, 0], return_inverse=True)[1].reshape(-1).astype(np.int64))

    edge_index, edge_attr = _coalesce(torch.from_numpy(edges.T.copy()), edge_attr, num_nodes)
    graph_of_node = torch.from_numpy(indicator - 1)
    node_counts = torch.bincount(graph_of_node, minlength=num_graphs)
    node_ptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(node_counts, 0)])
    graph_of_edge = graph_of_node[edge_index[0]]
    edge_ptr = torch.cat([torch.zeros(1, dtype=torch.int64),
                          torch.cumsum(torch.bincount(graph_of_edge, minlength=num_graphs), 0)])
    local = edge_index - node_ptr[graph_of_edge]
    return GraphDataset(name, local, node_ptr, edge_ptr, y, x, edge_attr)


def _coalesce(edge_index: torch.Tensor, edge_attr: torch.Tensor | None,
              num_nodes: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Drop self-loops, merge duplicate edges (attributes summed), sort by (source, target). Since
    each graph's nodes are contiguous, the sort also groups the edges graph by graph."""
    keep = edge_index[0] != edge_index[1]
    edge_index = edge_index[:, keep]
    key = edge_index[0] * max(num_nodes, 1) + edge_index[1]
    unique, inverse = torch.unique(key, sorted=True, return_inverse=True)
    if edge_attr is not None:
        edge_attr = torch.zeros(unique.numel(), edge_attr.shape[1]).index_add_(0, inverse, edge_attr[keep])
    return torch.stack([unique // max(num_nodes, 1), unique % max(num_nodes, 1)]), edge_attr
