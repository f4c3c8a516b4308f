"""CorrectAndSmooth against PyG's: correct, smooth and forward, with and without autoscale, bool
and index masks, class ids and one-hot labels, edge weights and a SparseTensor; str; the errors."""
import pytest
import torch

from pyg_compare import TOL, random_edges
from unigraph.nn.models import CorrectAndSmooth

pyg_models = pytest.importorskip("torch_geometric.nn.models", reason="PyG is the reference")
N, E, C = 20, 70, 4


def _inputs():
    gen = torch.Generator().manual_seed(4)
    y_soft = torch.rand(N, C, generator=gen, dtype=torch.float64).softmax(-1)
    labels = torch.randint(0, C, (N,), generator=gen)
    mask = torch.rand(N, generator=gen) < 0.5
    return y_soft, labels, mask, random_edges(N, E, seed=5)


@pytest.mark.parametrize("autoscale", [True, False])
@pytest.mark.parametrize("mask_kind", ["bool", "index"])
@pytest.mark.parametrize("weighted", [False, True])
def test_same_as_pyg(autoscale, mask_kind, weighted):
    y_soft, labels, mask, edge_index = _inputs()
    mask = mask if mask_kind == "bool" else mask.nonzero().view(-1)
    extra = (torch.rand(E, dtype=torch.float64),) if weighted else ()
    theirs = pyg_models.CorrectAndSmooth(2, 0.6, 3, 0.8, autoscale=autoscale, scale=0.7)
    ours = CorrectAndSmooth(2, 0.6, 3, 0.8, autoscale=autoscale, scale=0.7)
    for y_true in (labels[mask], torch.nn.functional.one_hot(labels[mask], C).double()):
        for step in ("correct", "smooth", "forward"):
            expected = getattr(theirs, step)(y_soft, y_true, mask, edge_index, *extra)
            out = getattr(ours, step)(y_soft, y_true, mask, edge_index, *extra)
            torch.testing.assert_close(out, expected, **TOL, msg=step)


def test_sparse_tensor():
    torch_sparse = pytest.importorskip("torch_sparse")
    y_soft, labels, mask, edge_index = _inputs()
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t()
    theirs, ours = pyg_models.CorrectAndSmooth(2, 0.5, 2, 0.5), CorrectAndSmooth(2, 0.5, 2, 0.5)
    for step in ("correct", "smooth"):
        expected = getattr(theirs, step)(y_soft, labels[mask], mask, adj)
        torch.testing.assert_close(getattr(ours, step)(y_soft, labels[mask], mask, adj), expected, **TOL)
        torch.testing.assert_close(getattr(ours, step)(y_soft, labels[mask], mask, edge_index), expected, **TOL)


def test_repr():
    for kwargs in ({}, {"autoscale": False, "scale": 0.3}):
        assert str(CorrectAndSmooth(2, 0.5, 3, 0.25, **kwargs)) == str(
            pyg_models.CorrectAndSmooth(2, 0.5, 3, 0.25, **kwargs))


def test_errors():
    y_soft, labels, mask, edge_index = _inputs()
    model = CorrectAndSmooth(2, 0.5, 2, 0.5)
    with pytest.raises(ValueError, match="y_true"):
        model.correct(y_soft, labels, mask, edge_index)        # not restricted to the mask
    with pytest.raises(ValueError, match="class ids"):
        model.smooth(y_soft, labels[mask] + C, mask, edge_index)
    with pytest.raises(TypeError, match="y_soft"):
        model.correct(labels, labels[mask], mask, edge_index)
    with pytest.raises(ValueError, match="mask"):
        model.smooth(y_soft, labels[mask], mask[:-1], edge_index)
    with pytest.raises(ValueError, match="num_layers"):
        CorrectAndSmooth(-2, 0.5, 2, 0.5)
