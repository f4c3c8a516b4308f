"""Saving and loading datasets without unrestricted pickle.

A dataset is written with ``torch.save`` as a flat dict of tensors, strings and ints, and read
back with ``torch.load(weights_only=True)``: PyTorch's restricted unpickler, which rebuilds
tensors and plain containers and refuses every other global. The loaded dict is then checked
field by field (format tag, version, types), and :class:`~unigraph.data.NodeDataset` validates
shapes, so a malformed file fails with a message instead of producing a broken dataset.
"""
from __future__ import annotations

import os
import pickle

import torch

from unigraph.data.dataset import NodeDataset
from unigraph.graph import Graph

FORMAT = "unigraph.NodeDataset"
VERSION = 1
_TENSOR_FIELDS = ("edge_index", "x", "y", "train_mask", "val_mask", "test_mask")


def save_dataset(dataset: NodeDataset, path: str | os.PathLike) -> None:
    """Write ``dataset`` to ``path`` (any extension; ``.pt`` is customary)."""
    if not isinstance(dataset, NodeDataset):
        raise TypeError(f"save_dataset expects a NodeDataset, got {type(dataset).__name__}")
    record = {"format": FORMAT, "version": VERSION, "name": dataset.name, "num_nodes": dataset.num_nodes,
              "edge_index": dataset.graph.edge_index.cpu()}
    for field in _TENSOR_FIELDS[1:]:
        record[field] = getattr(dataset, field).cpu()
    torch.save(record, path)


def load_dataset(path: str | os.PathLike) -> NodeDataset:
    """Read a dataset written by :func:`save_dataset`.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for a file that is not a
    unigraph dataset (including any pickle that names a global other than tensors).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"dataset file {path} does not exist")
    try:
        record = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise ValueError(f"{path} is not a unigraph dataset file (refused by the safe loader: {err})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ValueError(f"{path} is not a unigraph dataset file (no {FORMAT!r} format tag)")
    if record.get("version") != VERSION:
        raise ValueError(f"{path} has format version {record.get('version')!r}; this unigraph reads version {VERSION}")
    missing = [f for f in _TENSOR_FIELDS if not isinstance(record.get(f), torch.Tensor)]
    if missing or not isinstance(record.get("name"), str) or not isinstance(record.get("num_nodes"), int):
        raise ValueError(f"{path} is a damaged dataset file: missing or mistyped fields {missing or ['name/num_nodes']}")
    return NodeDataset(
        name=record["name"], graph=Graph(record["edge_index"], num_nodes=record["num_nodes"]),
        x=record["x"], y=record["y"], train_mask=record["train_mask"],
        val_mask=record["val_mask"], test_mask=record["test_mask"])
