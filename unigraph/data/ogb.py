"""OGB node-property datasets read from their on-disk folder, without the ``ogb`` package or a download.

An OGB node dataset (https://ogb.stanford.edu) unpacks to this layout (``ogbn-arxiv`` shown)::

    ogbn_arxiv/
        raw/edge.csv.gz            one "src,dst" row per edge (0-based)
        raw/num-node-list.csv.gz   one row: the number of nodes
        raw/num-edge-list.csv.gz   one row: the number of edges
        raw/node-feat.csv.gz       one row of floats per node (optional)
        raw/edge-feat.csv.gz       one row per edge (optional)
        raw/node-label.csv.gz      one row per node: a class, or one column per task (NaN: unlabelled)
        raw/node_<name>.csv.gz     extra per-node arrays some datasets have (ogbn-proteins: node_species)
        split/<split>/{train,valid,test}.csv.gz   one node id per row

:func:`read_ogb_node` reads it as OGB's ``NodePropPredDataset`` does: with ``add_inverse_edge``
(ogbn-products, ogbn-proteins) every edge is followed by its reverse (edge ``i`` becomes edges
``2i`` and ``2i+1``, features repeated), as OGB orders them. Every file goes through the strict,
size-bounded reader of :mod:`unigraph.data.text_table` (a gzip file inflates at most to
:func:`unigraph.data.limits.allowance` of its size; the two count files hold at most 4 KiB of
text), and the counts are checked against each other (edges against ``num-edge-list``, rows
against ``num-node-list``, node ids and split ids in range) and against what the files can hold. Pass the folder that holds ``ogbn_arxiv/`` (what ``root`` is to OGB), or that folder itself.
The metric of each dataset is available as :class:`unigraph.tasks.metrics.Evaluator`.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

import numpy as np
import torch
from torch import Tensor

from unigraph.data import limits
from unigraph.data.dataset import NodeDataset, mask_from_index
from unigraph.data.text_table import DEFAULT_MAX_BYTES, DataFormatError, read_table
from unigraph.user_graph import Graph


@dataclasses.dataclass(frozen=True)
class OGBNodeInfo:
    """What OGB's ``master.csv`` says of a node dataset (the fields this reader needs)."""

    add_inverse_edge: bool
    split: str
    eval_metric: str
    extra_node_files: tuple[str, ...] = ()
    unsupported: str | None = None  # why this reader cannot read it


OGB_NODE_DATASETS = {
    "ogbn-arxiv": OGBNodeInfo(False, "time", "acc", ("node_year",)),
    "ogbn-products": OGBNodeInfo(True, "sales_ranking", "acc"),
    "ogbn-proteins": OGBNodeInfo(True, "species", "rocauc", ("node_species",)),
    "ogbn-papers100M": OGBNodeInfo(False, "time", "acc", unsupported="it ships as binary .npz files, not csv.gz"),
    "ogbn-mag": OGBNodeInfo(False, "time", "acc", unsupported="it is heterogeneous (typed nodes and relations)"),
}


@dataclasses.dataclass
class OGBNodeData:
    """An OGB node-property dataset.

    Fields:
        name: OGB's name (``"ogbn-arxiv"``).
        graph: the homogeneous :class:`~unigraph.Graph` (edge features in ``edata["edge_attr"]``,
            extra per-node arrays such as ``node_species`` in ``ndata``).
        x: node features ``[N, F]`` float32, or ``None``.
        y: labels ``[N, T]`` (int64 classes; float32 when a task has NaN for unlabelled nodes).
        split_idx: ``{"train", "valid", "test"}`` node ids (OGB's ``get_idx_split()``).
        eval_metric: OGB's metric (``"acc"``, ``"rocauc"``).
    """

    name: str
    graph: Graph
    x: Tensor | None
    y: Tensor
    split_idx: dict[str, Tensor]
    eval_metric: str

    @property
    def num_tasks(self) -> int:
        return self.y.shape[1]

    def to_node_dataset(self) -> NodeDataset:
        """A :class:`~unigraph.data.NodeDataset` (train/valid/test as masks) for the node trainer;
        needs node features and one integer class per node."""
        if self.x is None:
            raise ValueError(f"{self.name} has no node features (x); a NodeDataset needs them")
        if self.y.shape[1] != 1 or self.y.is_floating_point():
            raise ValueError(f"{self.name} has {self.y.shape[1]} label column(s) of {self.y.dtype}; a NodeDataset needs "
                             "one integer class per node (multi-task data: use graph, x, y and split_idx directly)")
        n = self.graph.num_nodes
        masks = [mask_from_index(self.split_idx[part], n) for part in ("train", "valid", "test")]
        return NodeDataset(self.name, self.graph, self.x, self.y[:, 0], *masks)

    def __repr__(self) -> str:
        sizes = "/".join(str(self.split_idx[p].numel()) for p in ("train", "valid", "test"))
        return (f"OGBNodeData({self.name!r}, {self.graph!r}, features={None if self.x is None else self.x.shape[1]}, "
                f"tasks={self.num_tasks}, train/valid/test={sizes}, metric={self.eval_metric!r})")


def _dataset_folder(root: pathlib.Path, name: str) -> pathlib.Path:
    for folder in (root / name.replace("-", "_"), root):
        if (folder / "raw" / "edge.csv.gz").is_file():
            return folder
    raise DataFormatError(f"no OGB dataset {name!r} under {root}: looked for {root / name.replace('-', '_')}/raw/edge.csv.gz "
                          f"and {root}/raw/edge.csv.gz. Unpack OGB's {name} archive there (the folder holding raw/ "
                          "and split/)")


COUNT_FILE_BYTES = 4096  # num-node-list / num-edge-list hold one number: more text than this is not a count file


def _single_count(path: pathlib.Path, max_bytes: int) -> int:
    table = read_table(path, integer=True, max_bytes=min(max_bytes, COUNT_FILE_BYTES))
    if table.shape != (1, 1) or int(table[0, 0]) < 0:
        raise DataFormatError(f"{path.name} must hold one count for the one graph of a node dataset, got shape "
                              f"{list(table.shape)}")
    return int(table[0, 0])


def _check_counts(raw: pathlib.Path, num_nodes: int, num_edges: int) -> None:
    """The counts against what the folder's files can hold: every node and edge is a row of text of
    at least two bytes, inflated at most to the allowance of the files (:mod:`unigraph.data.limits`);
    a count beyond that would size arrays (labels, masks, row pointers) no file fills."""
    stored = sum(limits.regular_size(path) for path in raw.glob("*.csv.gz") if path.is_file())
    for what, count in (("num-node-list.csv.gz", num_nodes), ("num-edge-list.csv.gz", num_edges)):
        if 2 * count > limits.allowance(stored):
            raise DataFormatError(f"{what} says {count:,}, more rows than the folder's files can hold "
                                  f"({stored:,} bytes of gzip text; {limits.describe_allowance(stored)})")


def _check_rows(path: pathlib.Path, table: np.ndarray, expected: int, what: str) -> None:
    if table.shape[0] != expected:
        raise DataFormatError(f"{path.name} has {table.shape[0]} rows but the dataset has {expected} {what}")


def _ids(path: pathlib.Path, num_nodes: int, max_bytes: int) -> Tensor:
    table = read_table(path, integer=True, max_bytes=max_bytes)
    if table.shape[1] != 1:
        raise DataFormatError(f"{path.name} must hold one node id per row, got {table.shape[1]} fields")
    bad = (table[:, 0] < 0) | (table[:, 0] >= num_nodes)
    if bool(bad.any()):
        at = int(np.nonzero(bad)[0][0])
        raise DataFormatError(f"{path.name}: row {at + 1}: node id {table[at, 0]} is outside 0..{num_nodes - 1}")
    return torch.from_numpy(table[:, 0].copy())


def read_ogb_node(root: str | os.PathLike, name: str, *, split: str | None = None, add_inverse_edge: bool | None = None,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> OGBNodeData:
    """Read OGB node dataset ``name`` from ``root`` (see the module docstring).

    ``split`` and ``add_inverse_edge`` default to OGB's settings for the known datasets; a dataset
    in OGB's layout under another name needs both given.
    """
    info = OGB_NODE_DATASETS.get(name)
    if info is None:
        if split is None or add_inverse_edge is None:
            raise ValueError(f"unknown OGB node dataset {name!r} (known: {', '.join(OGB_NODE_DATASETS)}); for a "
                             "dataset in OGB's layout under another name pass split= and add_inverse_edge=")
        info = OGBNodeInfo(add_inverse_edge, split, "acc")
    if info.unsupported:
        raise ValueError(f"{name} cannot be read from its raw folder here: {info.unsupported}")
    inverse = info.add_inverse_edge if add_inverse_edge is None else add_inverse_edge
    folder = _dataset_folder(pathlib.Path(root), name)
    raw = folder / "raw"

    def read(part: str, integer: bool, allow_nan: bool = False) -> np.ndarray:
        return read_table(raw / f"{part}.csv.gz", integer=integer, allow_nan=allow_nan, max_bytes=max_bytes)

    num_nodes = _single_count(raw / "num-node-list.csv.gz", max_bytes)
    num_edges = _single_count(raw / "num-edge-list.csv.gz", max_bytes)
    _check_counts(raw, num_nodes, num_edges)
    edges = read("edge", True)
    if edges.shape[1] != 2:
        raise DataFormatError(f"edge.csv.gz must hold two node ids per row, got {edges.shape[1]} fields")
    _check_rows(raw / "edge.csv.gz", edges, num_edges, "edges (num-edge-list.csv.gz)")
    bad = (edges < 0) | (edges >= num_nodes)
    if bool(bad.any()):
        at = int(np.nonzero(bad.any(1))[0][0])
        raise DataFormatError(f"edge.csv.gz: row {at + 1}: node id {edges[at][bad[at]][0]} is outside "
                              f"0..{num_nodes - 1} (num-node-list.csv.gz says {num_nodes} nodes)")
    edge_feat = read("edge-feat", False) if (raw / "edge-feat.csv.gz").is_file() else None
    if edge_feat is not None:
        _check_rows(raw / "edge-feat.csv.gz", edge_feat, num_edges, "edges")
    if inverse:  # OGB's order: edge i, then its reverse
        edges = np.stack([edges, edges[:, ::-1]], axis=1).reshape(-1, 2)
        edge_feat = None if edge_feat is None else np.repeat(edge_feat, 2, axis=0)
    graph = Graph(torch.from_numpy(np.ascontiguousarray(edges.T)), num_nodes=num_nodes)
    if edge_feat is not None:
        graph.edata["edge_attr"] = torch.from_numpy(edge_feat.astype(np.float32))
    for extra in info.extra_node_files:
        if (raw / f"{extra}.csv.gz").is_file():
            values = read(extra, True)
            _check_rows(raw / f"{extra}.csv.gz", values, num_nodes, "nodes")
            graph.ndata[extra] = torch.from_numpy(values)

    x = None
    if (raw / "node-feat.csv.gz").is_file():
        features = read("node-feat", False)
        _check_rows(raw / "node-feat.csv.gz", features, num_nodes, "nodes")
        x = torch.from_numpy(features.astype(np.float32))
    labels = read("node-label", False, allow_nan=True)
    _check_rows(raw / "node-label.csv.gz", labels, num_nodes, "nodes")
    integral = bool(np.isfinite(labels).all()) and bool((labels == np.round(labels)).all())
    y = torch.from_numpy(labels.astype(np.int64) if integral else labels.astype(np.float32))

    split_dir = folder / "split" / (split or info.split)
    if not split_dir.is_dir():
        raise DataFormatError(f"split folder {split_dir} not found (OGB's split for {name} is {info.split!r})")
    split_idx = {part: _ids(split_dir / f"{part}.csv.gz", num_nodes, max_bytes) for part in ("train", "valid", "test")}
    return OGBNodeData(name, graph, x, y, split_idx, info.eval_metric)
