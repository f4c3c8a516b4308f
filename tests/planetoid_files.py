"""A tiny, consistent Planetoid set written as cora's raw files (for hostile-file and CLI tests)."""
from __future__ import annotations

import collections
import pickle

import numpy as np
import scipy.sparse as scipy_sparse

NUM_TRAIN, NUM_ALL, NUM_TEST, FEATURES, CLASSES = 6, 520, 12, 5, 3


def one_hot(labels):
    return np.eye(CLASSES, dtype=np.int32)[labels]


def tiny_parts(seed=0) -> dict:
    """A consistent Planetoid set (as the objects its files pickle)."""
    rng = np.random.default_rng(seed)
    all_x = (rng.random((NUM_ALL, FEATURES)) < 0.3).astype(np.float32)
    all_y = one_hot(rng.integers(0, CLASSES, NUM_ALL))
    test_index = rng.permutation(np.arange(NUM_ALL, NUM_ALL + NUM_TEST + 2))[:NUM_TEST]  # two gaps
    graph = collections.defaultdict(list)
    for u, v in rng.integers(0, NUM_ALL + NUM_TEST + 2, (2, 900)).T:
        graph[int(u)].append(int(v))
    return {"x": scipy_sparse.csr_matrix(all_x[:NUM_TRAIN]), "y": all_y[:NUM_TRAIN],
            "allx": scipy_sparse.csr_matrix(all_x), "ally": all_y,
            "tx": scipy_sparse.csr_matrix((rng.random((NUM_TEST, FEATURES)) < 0.3).astype(np.float32)),
            "ty": one_hot(rng.integers(0, CLASSES, NUM_TEST)), "graph": graph,
            "test.index": "\n".join(map(str, test_index)).encode()}


def write_planetoid(folder, **replace) -> str:
    """Write the tiny set as cora's files; ``replace`` maps a part to an object or to raw bytes."""
    folder.mkdir(exist_ok=True)
    for part, value in {**tiny_parts(), **replace}.items():
        data = value if isinstance(value, bytes) else pickle.dumps(value, protocol=2)
        (folder / f"ind.cora.{part}").write_bytes(data)
    return str(folder)
