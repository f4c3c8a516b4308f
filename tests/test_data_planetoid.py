"""Planetoid loading: equal to PyG's processing, the standard splits, safe unpickling, clear errors."""
from __future__ import annotations

import builtins
import os
import pickle

import numpy as np
import pytest
import torch

from unigraph.data import Planetoid, UnsafePickleError, normalize_features
from unigraph.data.planetoid import PARTS
from unigraph.data.restricted_pickle import restricted_load

pytestmark = pytest.mark.dataset


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_planetoid_equals_pyg_processing(planetoid_root, name):
    pyg_planetoid = pytest.importorskip("torch_geometric.io.planetoid")
    ours = Planetoid(planetoid_root, name)
    reference = pyg_planetoid.read_planetoid_data(str(planetoid_root), name)
    assert torch.equal(ours.x, reference.x)
    assert torch.equal(ours.y, reference.y)
    assert torch.equal(ours.graph.edge_index, reference.edge_index)  # same edges in the same order
    for mask in ("train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(ours, mask), getattr(reference, mask)), mask


@pytest.mark.parametrize("name, nodes, edges, features, classes, train", [
    ("Cora", 2708, 10556, 1433, 7, 140), ("CITESEER", 3327, 9104, 3703, 6, 120)])
def test_planetoid_sizes_and_standard_split(planetoid_root, name, nodes, edges, features, classes, train):
    ds = Planetoid(planetoid_root, name)
    assert ds.name == name.lower()
    assert (ds.num_nodes, ds.graph.num_edges, ds.num_features, ds.num_classes) == (nodes, edges, features, classes)
    assert ds.x.dtype == torch.float32 and ds.y.dtype == torch.int64
    assert [int(m.sum()) for m in (ds.train_mask, ds.val_mask, ds.test_mask)] == [train, 500, 1000]
    assert not bool((ds.train_mask & ds.val_mask).any() or (ds.val_mask & ds.test_mask).any()
                    or (ds.train_mask & ds.test_mask).any())
    assert torch.equal(torch.bincount(ds.y[ds.train_mask], minlength=classes), torch.full((classes,), 20))
    g = ds.graph
    assert not bool((g.src == g.dst).any())                                   # no self-loops
    forward = set(zip(g.src.tolist(), g.dst.tolist()))
    assert len(forward) == g.num_edges and forward == {(d, s) for s, d in forward}  # simple, both directions
    assert set(ds.x.unique().tolist()) <= {0.0, 1.0}                          # raw bag-of-words


def test_citeseer_gaps_become_zero_feature_unlabelled_nodes(planetoid_root):
    ds = Planetoid(planetoid_root, "citeseer")
    test_index = torch.tensor([int(v) for v in (planetoid_root / "ind.citeseer.test.index").read_text().split()])
    gaps = torch.ones(ds.num_nodes, dtype=torch.bool)
    gaps[: test_index.min()] = False
    gaps[test_index] = False
    assert int(gaps.sum()) == 15
    assert bool((ds.x[gaps] == 0).all()) and bool((ds.y[gaps] == 0).all())
    assert not bool((ds.train_mask | ds.val_mask | ds.test_mask)[gaps].any())


def test_normalize_features_option_rows_sum_to_one(planetoid_root):
    raw = Planetoid(planetoid_root, "citeseer")
    normalized = Planetoid(planetoid_root, "citeseer", normalize_features=True)
    sums = normalized.x.sum(dim=1)
    nonzero = raw.x.sum(dim=1) > 0
    assert torch.allclose(sums[nonzero], torch.ones(int(nonzero.sum())), atol=1e-5)
    assert bool((sums[~nonzero] == 0).all()) and int((~nonzero).sum()) > 0  # the placeholder rows stay 0
    assert torch.allclose(raw.normalize_features().x, normalized.x)
    assert torch.allclose(normalize_features(raw.x), normalized.x)


def _folder_without(tmp_path, root, name, missing=None, replace=None):
    """A folder of links to the real files, one left out or replaced by other bytes."""
    for part in PARTS:
        target = tmp_path / f"ind.{name}.{part}"
        if part == missing:
            continue
        if replace and part in replace:
            target.write_bytes(replace[part])
        else:
            os.symlink(root / target.name, target)
    return tmp_path


def test_missing_file_is_named_with_where_to_get_it(planetoid_root, tmp_path):
    folder = _folder_without(tmp_path, planetoid_root, "cora", missing="graph")
    with pytest.raises(FileNotFoundError, match=r"ind\.cora\.graph.*github\.com/kimiyoung/planetoid"):
        Planetoid(folder, "cora")


class _OpensAFile:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (builtins.open, (self.path, "w"))


def test_malicious_planetoid_file_is_refused_before_running(planetoid_root, tmp_path):
    victim = tmp_path / "was_created"
    folder = tmp_path / "raw"
    folder.mkdir()
    _folder_without(folder, planetoid_root, "cora", replace={"x": pickle.dumps(_OpensAFile(str(victim)), protocol=2)})
    with pytest.raises(UnsafePickleError, match=r"refusing to load io\.open"):
        Planetoid(folder, "cora")
    assert not victim.exists()


def test_unknown_name_and_missing_folder(tmp_path):
    with pytest.raises(ValueError, match="unknown Planetoid dataset 'reddit'"):
        Planetoid(tmp_path, "reddit")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Planetoid(tmp_path / "nowhere", "cora")
    with pytest.raises(FileNotFoundError, match=r"ind\.pubmed\.x"):
        Planetoid(tmp_path, "pubmed")


# ---------------------------------------------------------------- the restricted unpickler itself
# (these need no dataset files)

def test_restricted_load_reads_numpy_and_csr_state():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    dense = np.array([[0, 1.5, 0], [2, 0, 0]], dtype=np.float32)
    assert np.array_equal(restricted_load(pickle.dumps(dense, protocol=2)), dense)
    loaded = restricted_load(pickle.dumps(scipy_sparse.csr_matrix(dense), protocol=2))
    assert np.array_equal(loaded.todense(max_elements=6), dense)


@pytest.mark.parametrize("payload", [
    pickle.dumps(_OpensAFile("/nonexistent/x"), protocol=2),
    pickle.dumps(os.getcwd, protocol=2),
    pickle.dumps({"a": torch.nn.Linear}, protocol=2),
])
def test_restricted_load_refuses_other_globals(payload):
    with pytest.raises(UnsafePickleError, match="refusing to load"):
        restricted_load(payload)


def test_restricted_load_refuses_object_arrays():
    with pytest.raises(UnsafePickleError, match=r"refusing numpy.dtype\(.O8."):
        restricted_load(pickle.dumps(np.array([1, "a"], dtype=object), protocol=2))
