"""RECT_L against PyG's: forward (normalize, edge weights, sparse adj_t), embed,
get_semantic_labels in float64; str()."""
import pytest
import torch

from pyg_compare import TOL, assert_same, loaded, random_edges
from unigraph.nn.models import RECT_L

pyg_models = pytest.importorskip("torch_geometric.nn.models", reason="PyG is the reference")


def _pair(normalize=True, dropout=0.0):
    torch.manual_seed(0)
    theirs = pyg_models.RECT_L(5, 8, normalize=normalize, dropout=dropout)
    return theirs, loaded(theirs, RECT_L(5, 8, normalize=normalize, dropout=dropout))


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_matches_pyg(normalize, weighted):
    theirs, ours = _pair(normalize)
    ei = random_edges(7, 20)
    ew = torch.rand(20, dtype=torch.float64) if weighted else None
    x = torch.randn(7, 5, dtype=torch.float64)
    assert_same(theirs, ours, x, ei, ew)
    torch.testing.assert_close(ours.embed(x, ei, ew), theirs.embed(x, ei, ew), **TOL)
    assert str(ours) == str(theirs) == "RECT_L(5, 8)"


def test_sparse_adj_t():
    torch_sparse = pytest.importorskip("torch_sparse")
    theirs, ours = _pair()
    ei, x = random_edges(7, 20, seed=2), torch.randn(7, 5, dtype=torch.float64)
    adj_t = torch_sparse.SparseTensor.from_edge_index(ei, sparse_sizes=(7, 7)).t()
    torch.testing.assert_close(ours(x, adj_t), theirs(x, ei), **TOL)


def test_dropout_in_training_matches_with_same_seed():
    theirs, ours = _pair(dropout=0.5)
    ei, x = random_edges(7, 20), torch.randn(7, 5, dtype=torch.float64)
    torch.manual_seed(1)
    expected = theirs(x, ei)
    torch.manual_seed(1)
    torch.testing.assert_close(ours(x, ei), expected, **TOL)


def test_semantic_labels():
    theirs, ours = _pair()
    x = torch.randn(8, 5, dtype=torch.float64)
    y = torch.tensor([1, 0, 3, 2, 1, 1, 0, 3])
    mask = torch.tensor([True, True, False, True, True, False, True, True])
    torch.testing.assert_close(ours.get_semantic_labels(x, y, mask),
                               theirs.get_semantic_labels(x, y, mask), **TOL)
