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
import pickle

import numpy as np
import torch

from unigraph.data.dataset import NodeDataset, mask_from_index, normalize_features as _row_normalize
from unigraph.data.edges import undirected_simple_graph
from unigraph.data import limits
from unigraph.data.errors import DataFileError
from unigraph.data.restricted_pickle import PickledCSR, restricted_load

NAMES = ("cora", "citeseer", "pubmed")
PARTS = ("x", "y", "allx", "ally", "tx", "ty", "graph", "test.index")
WHERE_TO_GET = ("The Planetoid files are published with the Planetoid paper at "
                "https://github.com/kimiyoung/planetoid (folder data/); PyG's Planetoid dataset "
                "downloads the same files.")
NUM_VAL = 500

# What a file of n bytes can describe, to refuse memory bombs before allocating. A CSR matrix is
# densified, so its shape is bounded by the file's size: Cora's and CiteSeer's feature files
# expand about 10-15 dense entries per byte, PubMed's less than 1; 1024 leaves room for sparser
# data and refuses a shape of (1708, 1e7) in a 22 kB file.
DENSE_ENTRIES_PER_BYTE = 1024
MIN_DENSE_ENTRIES = 1 << 22
MAX_FILE_BYTES = 1 << 30
# what a damaged pickle makes the unpickler raise (hostile ones raise UnsafePickleError first)
_UNREADABLE = (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, KeyError, IndexError,
               OverflowError, MemoryError, RecursionError)


def _file(root: pathlib.Path, name: str, part: str) -> pathlib.Path:
    return root / f"ind.{name}.{part}"


def _path(root: pathlib.Path, name: str, part: str) -> pathlib.Path:
    path = _file(root, name, part)
    if not path.is_file():
        raise FileNotFoundError(f"Planetoid file {path.name} not found in {root} (looked for {path}). "
                                f"{name!r} needs the files ind.{name}.{{{','.join(PARTS)}}}. {WHERE_TO_GET}")
    return path


def _read(root: pathlib.Path, name: str, part: str) -> tuple[pathlib.Path, bytes]:
    path = _path(root, name, part)
    try:
        with limits.open_regular(path) as file:   # never blocks on a fifo swapped in after the check
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise DataFileError(path, f"cannot be read ({err.strerror or err})") from None
    if len(data) > MAX_FILE_BYTES:
        raise DataFileError(path, f"is larger than {MAX_FILE_BYTES} bytes; no Planetoid file is")
    return path, data


def _unpickle(path: pathlib.Path, data: bytes):
    try:
        return restricted_load(data, where=str(path))
    except DataFileError:
        raise
    except _UNREADABLE as err:
        raise DataFileError(path, f"is not a readable Planetoid pickle (damaged or truncated: "
                                  f"{type(err).__name__}: {err})") from None


def _load_matrix(root: pathlib.Path, name: str, part: str, *, labels: bool) -> np.ndarray:
    """A 2-D matrix of finite numbers (features) or of one-hot rows (``labels``; a row may be all
    zero, as for nodes without a label)."""
    path, data = _read(root, name, part)
    obj = _unpickle(path, data)
    if isinstance(obj, PickledCSR):
        try:
            obj = obj.todense(max_elements=max(MIN_DENSE_ENTRIES, DENSE_ENTRIES_PER_BYTE * len(data)))
        except ValueError as err:
            raise DataFileError(path, str(err)) from None
    if not isinstance(obj, np.ndarray) or obj.ndim != 2:
        raise DataFileError(path, f"should hold a 2-D matrix (numpy array or CSR matrix), got "
                                  f"{type(obj).__name__} of shape {getattr(obj, 'shape', None)}")
    if obj.dtype.kind not in "biuf":
        raise DataFileError(path, f"should hold real numbers, got dtype {obj.dtype}")
    if labels:
        if not np.isin(obj, (0, 1)).all() or (obj.sum(axis=1) > 1).any():
            raise DataFileError(path, "should hold one-hot label rows (entries 0 or 1, at most one 1 per row)")
    elif not np.isfinite(obj).all():
        raise DataFileError(path, "holds NaN or infinite feature values")
    return obj


def _load_adjacency(root: pathlib.Path, name: str) -> tuple[pathlib.Path, torch.Tensor, torch.Tensor]:
    path, data = _read(root, name, "graph")
    adjacency = _unpickle(path, data)
    if not isinstance(adjacency, dict):
        raise DataFileError(path, f"should hold a dict of neighbour lists, got {type(adjacency).__name__}")
    src, dst, seen = [], [], set()
    for node, neighbours in adjacency.items():
        if type(neighbours) is not list:  # noqa: E721 - exactly a list
            raise DataFileError(path, f"the neighbours of node {node!r:.50} should be a list, got "
                                      f"{type(neighbours).__name__}")
        if id(neighbours) in seen:  # a pickle can give many nodes one list: the edges would multiply
            raise DataFileError(path, f"node {node!r:.50} shares its neighbour list with another node; a "
                                      "Planetoid file has one list per node")
        seen.add(id(neighbours))
        if not all(type(v) is int for v in neighbours) or type(node) is not int:  # noqa: E721 - no floats, bools
            bad = next((v for v in [node, *neighbours] if type(v) is not int), None)  # noqa: E721
            raise DataFileError(path, f"node ids must be integers, found {bad!r:.50} ({type(bad).__name__})")
        src += [node] * len(neighbours)
        dst += neighbours
    if len(src) > len(data):  # cannot happen with distinct lists: each entry costs a byte or more
        raise DataFileError(path, f"describes {len(src)} edges in {len(data)} bytes")
    try:
        return path, torch.tensor(src, dtype=torch.int64), torch.tensor(dst, dtype=torch.int64)
    except (OverflowError, ValueError, RuntimeError):
        raise DataFileError(path, "holds node ids beyond the int64 range") from None


def _load_test_index(root: pathlib.Path, name: str) -> tuple[pathlib.Path, torch.Tensor]:
    path, data = _read(root, name, "test.index")
    try:
        values = [int(line) for line in data.decode("ascii").split()]
    except (UnicodeDecodeError, ValueError) as err:
        raise DataFileError(path, f"must hold one integer node id per line ({err})") from None
    if not values:
        raise DataFileError(path, "holds no test node ids")
    if min(values) < 0 or max(values) >= 2 ** 62:
        raise DataFileError(path, f"holds node ids outside 0..2**62, from {min(values)} to {max(values)}")
    index = torch.tensor(values, dtype=torch.int64)
    if torch.unique(index).numel() != index.numel():
        raise DataFileError(path, f"lists {index.numel() - torch.unique(index).numel()} test node ids more than once")
    return path, index


def _check_rows(path: pathlib.Path, matrix: np.ndarray, rows: int, what: str) -> None:
    if matrix.shape[0] != rows:
        raise DataFileError(path, f"has {matrix.shape[0]} rows but {what} has {rows}")


def _check_columns(path: pathlib.Path, matrix: np.ndarray, columns: int, what: str) -> None:
    if matrix.shape[1] != columns:
        raise DataFileError(path, f"has {matrix.shape[1]} columns but {what} has {columns}")


def Planetoid(root: str | os.PathLike, name: str, *, normalize_features: bool = False) -> "NodeDataset":  # noqa: N802 - reads as a dataset class, like PyG's
    """Load Cora, CiteSeer or PubMed (``name``, case-insensitive) from the folder ``root`` holding
    the raw ``ind.<name>.*`` files; see the module docstring for the processing.

    Raises ``ValueError`` for an unknown name, ``FileNotFoundError`` naming a missing file (and where
    to get the files), and :class:`~unigraph.data.errors.DataFileError` (a ``ValueError`` whose
    message starts with the file's path) for a file that is damaged, inconsistent with the others
    or hostile: :class:`~unigraph.data.restricted_pickle.UnsafePickleError` for a pickle that
    names anything outside the format's types, shapes or rows that do not pair up, labels that
    are not one-hot, NaN features, float or shared neighbour lists, duplicate test ids, sizes a
    file of its length cannot describe (see ``DENSE_ENTRIES_PER_BYTE``). Nothing is allocated
    beyond what the files can hold before these checks pass.
    """
    if not isinstance(name, str) or name.lower() not in NAMES:
        raise ValueError(f"unknown Planetoid dataset {name!r}; choose one of {', '.join(NAMES)}")
    name = name.lower()
    root = pathlib.Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"Planetoid folder {root} does not exist. {WHERE_TO_GET}")

    def part(p: str) -> pathlib.Path:
        return _file(root, name, p)

    train_x, train_y = _load_matrix(root, name, "x", labels=False), _load_matrix(root, name, "y", labels=True)
    all_x, all_y = _load_matrix(root, name, "allx", labels=False), _load_matrix(root, name, "ally", labels=True)
    test_x, test_y = _load_matrix(root, name, "tx", labels=False), _load_matrix(root, name, "ty", labels=True)
    index_path, test_index = _load_test_index(root, name)
    graph_path, src, dst = _load_adjacency(root, name)

    # every file against the format: rows pair up, columns agree, y repeats the first rows of ally
    num_train, num_all, num_test = train_x.shape[0], all_x.shape[0], test_x.shape[0]
    for features_part, features, labels_part, labels in (("x", train_x, "y", train_y), ("allx", all_x, "ally", all_y),
                                                         ("tx", test_x, "ty", test_y)):
        _check_rows(part(labels_part), labels, features.shape[0], part(features_part).name)
        _check_columns(part(features_part), features, all_x.shape[1], part("allx").name)
        _check_columns(part(labels_part), labels, all_y.shape[1], part("ally").name)
    if test_index.numel() != num_test:
        raise DataFileError(index_path, f"lists {test_index.numel()} test nodes but {part('tx').name} has {num_test} rows")
    if num_train + NUM_VAL > num_all:
        raise DataFileError(part("allx"), f"has {num_all} rows: too few for {num_train} training and {NUM_VAL} "
                                          "validation nodes")
    if not np.array_equal(train_y, all_y[:num_train]):
        raise DataFileError(part("y"), f"should repeat the first {num_train} rows of {part('ally').name}, but differs")
    first, last = int(test_index.min()), int(test_index.max())
    if first < num_all:
        raise DataFileError(index_path, f"test node ids must follow the {num_all} allx nodes, found {first}")
    gaps = last + 1 - num_all - num_test  # nodes in no file (CiteSeer has 15)
    if gaps > num_test:
        raise DataFileError(index_path, f"its largest test node id {last} leaves {gaps} nodes without data, more "
                                        f"than the {num_test} test nodes; not a Planetoid test index")
    num_nodes = last + 1
    ids = torch.cat([src, dst])
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
        raise DataFileError(graph_path, f"refers to node ids outside 0..{num_nodes - 1} (from {int(ids.min())} to "
                                        f"{int(ids.max())})")

    x = torch.zeros(num_nodes, all_x.shape[1], dtype=torch.float32)
    x[: num_all] = torch.from_numpy(all_x.astype(np.float32))
    x[test_index] = torch.from_numpy(test_x.astype(np.float32))
    one_hot = torch.zeros(num_nodes, all_y.shape[1], dtype=torch.float32)
    one_hot[: num_all] = torch.from_numpy(all_y.astype(np.float32))
    one_hot[test_index] = torch.from_numpy(test_y.astype(np.float32))
    y = one_hot.argmax(dim=1)  # the first maximum: 0 for CiteSeer's all-zero placeholder rows
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
