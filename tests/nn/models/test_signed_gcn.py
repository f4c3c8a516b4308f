"""unigraph.nn.models.SignedGCN against PyG's in float64: embeddings and their gradients, the
classifier, the seeded parts (edge split, triplet losses, spectral features) exactly, the drawn
non-edges of nll_loss by their contract; str(), state_dict, refusals."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pyg_compare import TOL, assert_same, loaded, random_edges
from unigraph.nn.models import SignedGCN

pyg_models = pytest.importorskip("torch_geometric.nn.models", reason="PyG compares SignedGCN")

N = 15


def _pair(num_layers=2):
    torch.manual_seed(0)
    theirs = pyg_models.SignedGCN(6, 8, num_layers=num_layers, lamb=3)
    return theirs, loaded(theirs, SignedGCN(6, 8, num_layers=num_layers, lamb=3))


def _graph():
    x = torch.randn(N, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    return x, random_edges(N, 30, seed=2), random_edges(N, 25, seed=3)


@pytest.mark.parametrize("num_layers", [1, 3])
def test_embeddings_and_gradients_equal_pyg(num_layers):
    theirs, ours = _pair(num_layers)
    x, pos, neg = _graph()
    assert_same(theirs, ours, x, pos, neg)
    assert str(ours) == str(theirs) == f"SignedGCN(6, 8, num_layers={num_layers})"


def test_classifier_and_seeded_losses_equal_pyg():
    theirs, ours = _pair()
    x, pos, neg = _graph()
    z = theirs(x, pos, neg).detach()
    torch.testing.assert_close(ours.discriminate(z, pos), theirs.discriminate(z, pos), **TOL)
    for name, edges in [("pos_embedding_loss", pos), ("neg_embedding_loss", neg)]:
        torch.manual_seed(4)
        a = getattr(ours, name)(z, edges)
        torch.manual_seed(4)
        torch.testing.assert_close(a, getattr(theirs, name)(z, edges), **TOL)  # the same triplets
    assert ours.test(z, pos, neg) == theirs.test(z, pos, neg)


def test_nll_loss_non_edges_follow_the_contract(monkeypatch):
    from unigraph.nn.models import signed_gcn
    seen = []
    real = signed_gcn.negative_edges
    monkeypatch.setattr(signed_gcn, "negative_edges", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    theirs, ours = _pair()
    x, pos, neg = _graph()
    z = theirs(x, pos, neg).detach()
    loss = ours.nll_loss(z, pos, neg)
    none = seen[0]
    signed = torch.cat([pos, neg], dim=1)
    keys = none[0] * N + none[1]
    assert none.shape == (2, 55) and bool((none[0] != none[1]).all())
    assert keys.unique().numel() == 55 and not torch.isin(keys, signed[0] * N + signed[1]).any()
    expected = sum(F.nll_loss(theirs.discriminate(z, e), e.new_full((e.size(1),), c))
                   for c, e in enumerate((pos, neg, none))) / 3.0
    torch.testing.assert_close(loss, expected, **TOL)
    assert torch.isfinite(ours.loss(z, pos, neg))


def test_split_edges_and_spectral_features_equal_pyg_under_a_seed():
    theirs, ours = _pair()
    _, pos, neg = _graph()
    torch.manual_seed(5)
    a = ours.split_edges(pos, test_ratio=0.3)
    torch.manual_seed(5)
    b = theirs.split_edges(pos, test_ratio=0.3)
    assert all(torch.equal(u, v) for u, v in zip(a, b)) and a[1].size(1) == 9
    pytest.importorskip("sklearn")
    np.random.seed(6)
    f_ours = ours.create_spectral_features(pos, neg, num_nodes=N)
    np.random.seed(6)
    f_theirs = theirs.create_spectral_features(pos, neg, num_nodes=N)
    assert f_ours.dtype == torch.float32
    torch.testing.assert_close(f_ours, f_theirs)


def test_structured_negatives_avoid_the_edges():
    from unigraph.nn.models.signed_gcn import structured_negatives
    edges = torch.tensor([[0, 0, 0, 1, 1], [1, 2, 0, 0, 2]])  # node 0 misses only 3, node 1 misses 1 and 3
    k = structured_negatives(edges, 4)
    assert bool((k[:3] == 3).all()) and bool(((k[3:] == 1) | (k[3:] == 3)).all())
    with pytest.raises(ValueError, match="every node"):
        structured_negatives(torch.tensor([[0, 0], [0, 1]]), 2)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="even"):
        SignedGCN(4, 7, num_layers=2)
    with pytest.raises(ValueError, match="num_layers"):
        SignedGCN(4, 8, num_layers=0)
    with pytest.warns(UserWarning, match="bias"):
        model = SignedGCN(4, 8, num_layers=1, bias=False)
    assert model.conv1.lin_pos_r.bias is not None  # PyG's layers keep their biases too
    z = torch.randn(N, 8)
    with pytest.raises(ValueError, match="outside"):
        model.discriminate(z, torch.tensor([[0], [N]]))
    with pytest.raises(ValueError, match="test_ratio"):
        model.split_edges(random_edges(N, 10), test_ratio=1.5)


def test_sparse_tensor_adjacencies_equal_pyg():
    typing = pytest.importorskip("torch_geometric.typing")
    if not typing.WITH_TORCH_SPARSE:
        pytest.skip("torch_sparse is not installed")
    theirs, ours = _pair()
    x, pos, neg = _graph()
    adj_pos = typing.SparseTensor.from_edge_index(pos, sparse_sizes=(N, N)).t()
    adj_neg = typing.SparseTensor.from_edge_index(neg, sparse_sizes=(N, N)).t()
    assert_same(theirs, ours, x, adj_pos, adj_neg)
