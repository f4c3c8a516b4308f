"""Saving and loading datasets without unrestricted pickle, atomically and checksummed.

A dataset is a flat dict of tensors, strings and ints written with ``torch.save`` into a checked
file (:mod:`unigraph.data.checked_file`: written to a temporary file and renamed, so a crash
mid-save leaves the previous file; SHA-256 of every byte, so a damaged file is refused by name).
It is read back with ``torch.load(weights_only=True)``: PyTorch's restricted unpickler, which
rebuilds tensors and plain containers and refuses every other global. The loaded dict is then
checked field by field (format tag, version, types, tensors that own their storage), the graph
validates its indices and :class:`~unigraph.data.NodeDataset` its shapes, so a malformed file
fails with a :class:`~unigraph.data.errors.DataFileError` naming it.
"""
from __future__ import annotations

import os

import torch

from unigraph.data.checked_file import load_torch, save_torch
from unigraph.data.dataset import NodeDataset
from unigraph.data.errors import DataFileError
from unigraph.graph import Graph

FORMAT = "unigraph.NodeDataset"
VERSION = 2  # 2: checked file (atomic, checksummed); version 1 files were plain torch.save archives
_TENSOR_FIELDS = ("edge_index", "x", "y", "train_mask", "val_mask", "test_mask")


def save_dataset(dataset: NodeDataset, path: str | os.PathLike) -> None:
    """Write ``dataset`` to ``path`` (any extension; ``.pt`` is customary), atomically: until the
    new file is complete, ``path`` keeps its previous content."""
    if not isinstance(dataset, NodeDataset):
        raise TypeError(f"save_dataset expects a NodeDataset, got {type(dataset).__name__}")
    record = {"format": FORMAT, "version": VERSION, "name": dataset.name, "num_nodes": dataset.num_nodes,
              "edge_index": dataset.graph.edge_index.cpu()}
    for field in _TENSOR_FIELDS[1:]:
        record[field] = getattr(dataset, field).cpu().contiguous()
    save_torch(path, FORMAT, record)


def _check_owns_storage(path: str | os.PathLike, name: str, tensor: torch.Tensor) -> None:
    """A tensor of the file must be its own data, not a broadcast view: a stride-0 view of a
    few bytes could claim any size."""
    needed = tensor.numel() * tensor.element_size()
    if not tensor.is_contiguous() or tensor.untyped_storage().nbytes() < needed + tensor.storage_offset() * tensor.element_size():
        raise DataFileError(path, f"field {name!r} is a view of shape {list(tensor.shape)} over "
                                  f"{tensor.untyped_storage().nbytes()} bytes, not a saved tensor")


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
    for field in _TENSOR_FIELDS:
        _check_owns_storage(path, field, record[field])
    try:
        return NodeDataset(
            name=record["name"], graph=Graph(record["edge_index"], num_nodes=record["num_nodes"]),
            x=record["x"], y=record["y"], train_mask=record["train_mask"],
            val_mask=record["val_mask"], test_mask=record["test_mask"])
    except (ValueError, TypeError) as err:
        raise DataFileError(path, f"holds an inconsistent dataset: {err}") from None
