"""LabelPropagation against PyG's: class ids and float scores, masks (bool and index), edge
weights, post steps, every adjacency form (edge_index, SparseTensor with and without values,
torch sparse), str, and the errors."""
import pytest
import torch

from pyg_compare import TOL, random_edges
from unigraph.nn.models import LabelPropagation

pyg_models = pytest.importorskip("torch_geometric.nn.models", reason="PyG is the reference")
N, E = 20, 70


def _inputs():
    gen = torch.Generator().manual_seed(1)
    edge_index = random_edges(N, E, seed=2)
    mask = torch.rand(N, generator=gen) < 0.5
    return edge_index, mask, torch.randint(0, 4, (N,), generator=gen), torch.rand(N, 4, generator=gen,
                                                                             dtype=torch.float64)


def _same(*args, **kwargs):
    theirs, ours = pyg_models.LabelPropagation(3, 0.7), LabelPropagation(3, 0.7)
    expected, out = theirs(*args, **kwargs), ours(*args, **kwargs)
    assert out.dtype == expected.dtype
    torch.testing.assert_close(out, expected, **TOL)
    return out


@pytest.mark.parametrize("mask_kind", [None, "bool", "index"])
def test_edge_index(mask_kind):
    edge_index, mask, labels, scores = _inputs()
    mask = {None: None, "bool": mask, "index": mask.nonzero().view(-1)}[mask_kind]
    _same(labels, edge_index, mask)
    _same(scores, edge_index, mask)
    _same(scores, edge_index, mask, torch.rand(E, dtype=torch.float64))
    _same(scores - 0.5, edge_index, mask, post_step=lambda y: y.clamp_(-1.0, 1.0))


def test_sparse_forms():
    torch_sparse = pytest.importorskip("torch_sparse")
    edge_index, mask, labels, scores = _inputs()
    w = torch.rand(E, dtype=torch.float64)
    plain = torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t()
    valued = torch_sparse.SparseTensor.from_edge_index(edge_index, w, sparse_sizes=(N, N)).t()
    coo = torch.sparse_coo_tensor(edge_index.flip(0), w, (N, N)).coalesce()
    for adj in (plain, valued, coo):
        _same(scores, adj, mask)
    # class ids become float32 one-hot rows (PyG's default dtype): float32 sums, in another order
    torch.testing.assert_close(LabelPropagation(3, 0.7)(labels, plain),
                               pyg_models.LabelPropagation(3, 0.7)(labels, plain))
    # an unweighted adjacency gives what its edge_index gives
    torch.testing.assert_close(LabelPropagation(2, 0.5)(scores, plain, mask),
                               LabelPropagation(2, 0.5)(scores, edge_index, mask), **TOL)


def test_post_step_and_no_grad():
    edge_index, mask, labels, scores = _inputs()
    out = LabelPropagation(2, 0.5)(labels, edge_index, mask, post_step=torch.zeros_like)
    assert out.sum() == 0
    out = LabelPropagation(2, 0.5)(scores.requires_grad_(), edge_index)
    assert not out.requires_grad
    assert LabelPropagation(0, 0.5)(labels, edge_index).shape == (N, 4)


def test_repr():
    assert str(LabelPropagation(2, 0.5)) == str(pyg_models.LabelPropagation(2, 0.5))


def test_errors():
    edge_index, mask, labels, scores = _inputs()
    model = LabelPropagation(2, 0.5)
    with pytest.raises(ValueError, match="num_layers"):
        LabelPropagation(-1, 0.5)
    with pytest.raises(TypeError, match="alpha"):
        LabelPropagation(2, "0.5")
    with pytest.raises(TypeError, match="y"):
        model(labels.int(), edge_index)
    with pytest.raises(ValueError, match="mask"):
        model(scores, edge_index, mask[:-1])
    with pytest.raises(ValueError, match="mask"):
        model(scores, edge_index, torch.tensor([0, N]))
    with pytest.raises(ValueError, match="edge_weight"):
        model(scores, edge_index, edge_weight=torch.rand(E - 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="num_nodes"):
        model(scores[:5], edge_index)
    torch_sparse = pytest.importorskip("torch_sparse")
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t()
    with pytest.raises(ValueError, match="edge_weight"):
        model(scores, adj, edge_weight=torch.rand(E, dtype=torch.float64))
