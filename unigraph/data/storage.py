"""Saving and loading datasets without unrestricted pickle, atomically and checksummed.

A dataset is a flat dict of tensors, strings and ints written with ``torch.save`` into a checked
file (:mod:`unigraph.data.checked_file`: written to a temporary file and renamed, so a crash
mid-save leaves the previous file; SHA-256 of every byte, so a damaged file is refused by name).
It is read back with ``torch.load(weights_only=True)``: PyTorch's restricted unpickler, which
rebuilds tensors and plain containers and refuses every other global. The loaded dict is then
checked field by field (format tag, version, types, tensors that own their storage), the graph
validates its indices and :class:`~unigraph.data.NodeDataset` its shapes; the content is checked
too (labels within ``0..num_classes-1``, disjoint splits, finite features), so a malformed file
fails with a :class:`~unigraph.data.errors.DataFileError` naming it and the field. Every tensor must
be data the file holds (:mod:`unigraph.data.torch_file`: no stride-0 views, no compressed members).
"""
from __future__ import annotations

import os

import torch

from unigraph.data.checked_file import load_torch, save_torch
from unigraph.data.dataset import NodeDataset
from unigraph.data.errors import DataFileError
from unigraph.user_graph import Graph

FORMAT = "unigraph.NodeDataset"
VERSION = 2  # 2: checked file (atomic, checksummed); version 1 files were plain torch.save archives
_TENSOR_FIELDS = ("edge_index", "x", "y", "train_mask", "val_mask", "test_mask")


def save_dataset(dataset: NodeDataset, path: str | os.PathLike) -> None:
    """Write ``dataset`` to ``path`` (any extension; ``.pt`` is customary), atomically: until the
    new file is complete, ``path`` keeps its previous content."""
    if not isinstance(dataset, NodeDataset):
        raise TypeError(f"save_dataset expects a NodeDataset, got {type(dataset).__name__}")
    record = {"format": FORMAT, "version": VERSION, "name": dataset.name, "num_nodes": dataset.num_nodes,
              "num_classes": dataset.num_classes, "edge_index": dataset.graph.edge_index.cpu()}
    for field in _TENSOR_FIELDS[1:]:
        record[field] = getattr(dataset, field).cpu().contiguous()
    save_torch(path, FORMAT, record)


def _check_content(path: str | os.PathLike, record: dict) -> None:
    """What a writer could get wrong (or an attacker choose, recomputing the checksum) that the
    types and shapes do not show: labels outside ``0..num_classes-1`` (a label of 10**9 would make
    a model with 10**9 outputs), splits that share nodes (a model tested on its training nodes),
    non-finite features."""
    num_nodes, y = record["num_nodes"], record["y"]
    if record["x"].dim() < 1 or record["x"].shape[0] != num_nodes:  # before a Graph of num_nodes nodes is built
        raise DataFileError(path, f"field 'num_nodes' says {num_nodes} but 'x' has shape {list(record['x'].shape)}")
    num_classes = record.get("num_classes")
    if num_classes is not None and (type(num_classes) is not int or not 0 <= num_classes <= num_nodes):  # noqa: E721
        raise DataFileError(path, f"field 'num_classes' must be an int in 0..num_nodes ({num_nodes}), got {num_classes!r}")
    bound = num_classes if num_classes is not None else num_nodes
    if y.dtype == torch.int64 and y.numel() and (int(y.min()) < 0 or int(y.max()) >= bound):
        what = f"num_classes-1 = {bound - 1}" if num_classes is not None else \
            f"num_nodes-1 = {bound - 1} (a dataset cannot have more classes than nodes)"
        raise DataFileError(path, f"field 'y' holds labels {int(y.min())}..{int(y.max())}, outside 0..{what}")
    masks = ("train_mask", "val_mask", "test_mask")
    for i, first in enumerate(masks):
        for second in masks[i + 1:]:
            a, b = record[first], record[second]
            if a.dtype == b.dtype == torch.bool and a.shape == b.shape and bool((a & b).any()):
                raise DataFileError(path, f"fields {first!r} and {second!r} share {int((a & b).sum())} nodes; the "
                                          "splits must be disjoint")
    x = record["x"]
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        raise DataFileError(path, "field 'x' holds non-finite features (NaN or infinity)")


def load_dataset(path: str | os.PathLike) -> NodeDataset:
    """Read a dataset written by :func:`save_dataset`.

    Raises ``FileNotFoundError`` for a missing file and :class:`~unigraph.data.errors.DataFileError`
    (a ``ValueError`` naming the file) for one that is truncated, corrupted, not a unigraph dataset
    (including any pickle that names a global other than tensors) or inconsistent.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"dataset file {path} does not exist")
    record = load_torch(path, FORMAT)
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise DataFileError(path, f"is not a unigraph dataset file (no {FORMAT!r} format tag)")
    if record.get("version") != VERSION:
        raise DataFileError(path, f"has format version {record.get('version')!r}; this unigraph reads version {VERSION}")
    missing = [f for f in _TENSOR_FIELDS if not isinstance(record.get(f), torch.Tensor)]
    if missing or not isinstance(record.get("name"), str) or type(record.get("num_nodes")) is not int:  # noqa: E721
        raise DataFileError(path, f"is a damaged dataset file: missing or mistyped fields {missing or ['name/num_nodes']}")
    _check_content(path, record)
    try:
        return NodeDataset(
            name=record["name"], graph=Graph(record["edge_index"], num_nodes=record["num_nodes"]),
            x=record["x"], y=record["y"], train_mask=record["train_mask"],
            val_mask=record["val_mask"], test_mask=record["test_mask"])
    except (ValueError, TypeError) as err:
        raise DataFileError(path, f"holds an inconsistent dataset: {err}") from None
