"""The Planetoid citation graphs (Cora, CiteSeer, PubMed) from their raw ``ind.<name>.*`` files.

File format (Yang, Cohen and Salakhutdinov, ICML 2016; https://github.com/kimiyoung/planetoid):

========================  ==============================================================
``ind.<name>.x``          features of the labelled training nodes (scipy CSR, pickled)
``ind.<name>.y``          their one-hot labels (numpy)
``ind.<name>.allx``       features of every node that is not a test node, training nodes first
``ind.<name>.ally``       their one-hot labels
``ind.<name>.tx/.ty``     features / one-hot labels of the test nodes, in ``test.index`` order
``ind.<name>.test.index`` the node id of each test row (plain text, one per line)
``ind.<name>.graph``      ``{node: [neighbours]}`` (a pickled ``defaultdict`` of lists)
========================  ==============================================================

The split is the standard one of the GCN and GAT papers: the ``len(y)`` first nodes train (20 per
class), the next 500 validate, the nodes of ``test.index`` test. Processing matches PyG's
``read_planetoid_data`` node for node: node ``test.index[i]`` gets row ``i`` of ``tx``/``ty``;
CiteSeer's test index has gaps (15 nodes absent from every file), which get zero features and
label 0 (the argmax of an all-zero row) and are in no mask. Edges: self-loops dropped,
duplicates merged, both directions present, sorted by (destination, source).

Features are the raw bag-of-words (0/1); pass ``normalize_features=True`` (or call
:func:`~unigraph.data.normalize_features`) for the row-normalized features the papers train on.

The pickles are read with :mod:`unigraph.data.restricted_pickle`, which admits only the numpy /
scipy-CSR / defaultdict types of the format and refuses anything else.
"""
from __future__ import annotations

import os
import pathlib

import numpy as np
import torch

from unigraph.data.dataset import NodeDataset, mask_from_index, normalize_features as _row_normalize
from unigraph.data.edges import undirected_simple_graph
from unigraph.data.restricted_pickle import PickledCSR, restricted_load

NAMES = ("cora", "citeseer", "pubmed")
PARTS = ("x", "y", "allx", "ally", "tx", "ty", "graph", "test.index")
WHERE_TO_GET = ("The Planetoid files are published with the Planetoid paper at "
                "https://github.com/kimiyoung/planetoid (folder data/); PyG's Planetoid dataset "
                "downloads the same files.")
NUM_VAL = 500


def _path(root: pathlib.Path, name: str, part: str) -> pathlib.Path:
    path = root / f"ind.{name}.{part}"
    if not path.is_file():
        raise FileNotFoundError(f"Planetoid file {path.name} not found in {root} (looked for {path}). "
                                f"{name!r} needs the files ind.{name}.{{{','.join(PARTS)}}}. {WHERE_TO_GET}")
    return path


def _load_matrix(root: pathlib.Path, name: str, part: str) -> np.ndarray:
    path = _path(root, name, part)
    with open(path, "rb") as file:
        obj = restricted_load(file, where=str(path))
    if isinstance(obj, PickledCSR):
        return obj.todense()
    if isinstance(obj, np.ndarray) and obj.ndim == 2:
        return obj
    raise ValueError(f"{path} should hold a 2-D matrix (numpy array or CSR matrix), got {type(obj).__name__}")


def _load_adjacency(root: pathlib.Path, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    path = _path(root, name, "graph")
    with open(path, "rb") as file:
        adjacency = restricted_load(file, where=str(path))
    if not isinstance(adjacency, dict):
        raise ValueError(f"{path} should hold a dict of neighbour lists, got {type(adjacency).__name__}")
    src, dst = [], []
    for node, neighbours in adjacency.items():
        if not isinstance(neighbours, list):
            raise ValueError(f"{path}: the neighbours of node {node!r} should be a list, got {type(neighbours).__name__}")
        src += [node] * len(neighbours)
        dst += neighbours
    try:
        return torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{path}: node ids must be integers ({err})") from None


def _load_test_index(root: pathlib.Path, name: str) -> torch.Tensor:
    path = _path(root, name, "test.index")
    try:
        values = [int(line) for line in path.read_text().split()]
    except ValueError as err:
        raise ValueError(f"{path} must hold one integer node id per line ({err})") from None
    return torch.tensor(values, dtype=torch.int64)


def Planetoid(root: str | os.PathLike, name: str, *, normalize_features: bool = False) -> "NodeDataset":  # noqa: N802 - reads as a dataset class, like PyG's
    """Load Cora, CiteSeer or PubMed (``name``, case-insensitive) from the folder ``root`` holding
    the raw ``ind.<name>.*`` files; see the module docstring for the processing.

    Raises ``ValueError`` for an unknown name, ``FileNotFoundError`` naming a missing file (and where
    to get the files), :class:`~unigraph.data.restricted_pickle.UnsafePickleError` for a pickle
    that names anything outside the format's types.
    """
    if not isinstance(name, str) or name.lower() not in NAMES:
        raise ValueError(f"unknown Planetoid dataset {name!r}; choose one of {', '.join(NAMES)}")
    name = name.lower()
    root = pathlib.Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"Planetoid folder {root} does not exist. {WHERE_TO_GET}")

    train_x, train_y = _load_matrix(root, name, "x"), _load_matrix(root, name, "y")
    all_x, all_y = _load_matrix(root, name, "allx"), _load_matrix(root, name, "ally")
    test_x, test_y = _load_matrix(root, name, "tx"), _load_matrix(root, name, "ty")
    test_index = _load_test_index(root, name)
    src, dst = _load_adjacency(root, name)

    if test_index.numel() != test_x.shape[0] or test_y.shape[0] != test_x.shape[0]:
        raise ValueError(f"{name}: test.index has {test_index.numel()} entries but tx/ty have "
                         f"{test_x.shape[0]}/{test_y.shape[0]} rows")
    if int(test_index.min()) < all_x.shape[0]:
        raise ValueError(f"{name}: test node ids must follow the {all_x.shape[0]} allx nodes, found {int(test_index.min())}")
    num_nodes = int(test_index.max()) + 1
    x = torch.zeros(num_nodes, all_x.shape[1], dtype=torch.float32)
    x[: all_x.shape[0]] = torch.from_numpy(all_x.astype(np.float32))
    x[test_index] = torch.from_numpy(test_x.astype(np.float32))
    one_hot = torch.zeros(num_nodes, all_y.shape[1], dtype=torch.float32)
    one_hot[: all_y.shape[0]] = torch.from_numpy(all_y.astype(np.float32))
    one_hot[test_index] = torch.from_numpy(test_y.astype(np.float32))
    y = one_hot.argmax(dim=1)  # the first maximum: 0 for CiteSeer's all-zero placeholder rows

    if src.numel() and (int(torch.cat([src, dst]).min()) < 0 or int(torch.cat([src, dst]).max()) >= num_nodes):
        raise ValueError(f"{name}: the adjacency refers to node ids outside 0..{num_nodes - 1}")
    num_train = train_x.shape[0]
    if train_y.shape[0] != num_train or num_train + NUM_VAL > all_x.shape[0]:
        raise ValueError(f"{name}: x/y have {num_train}/{train_y.shape[0]} rows, allx {all_x.shape[0]}: "
                         f"too few for {num_train} training and {NUM_VAL} validation nodes")
    dataset = NodeDataset(
        name=name,
        graph=undirected_simple_graph(src, dst, num_nodes),
        x=_row_normalize(x) if normalize_features else x,
        y=y,
        train_mask=mask_from_index(torch.arange(num_train), num_nodes),
        val_mask=mask_from_index(torch.arange(num_train, num_train + NUM_VAL), num_nodes),
        test_mask=mask_from_index(test_index, num_nodes),
    )
    return dataset
