"""LightGCN against PyG's: scores, embeddings, predict_link, recommend, both losses, in float64
(outputs and gradients), over alpha forms, edge weights and the sparse call forms; str(); errors."""
import pytest
import torch

from pyg_compare import TOL, assert_same, loaded, random_edges
from unigraph.nn.models import LightGCN
from unigraph.nn.models.lightgcn import BPRLoss

pyg_models = pytest.importorskip("torch_geometric.nn.models", reason="PyG is the reference")
pyg_lightgcn = pytest.importorskip("torch_geometric.nn.models.lightgcn")

N = 9


def _pair(alpha=None):
    torch.manual_seed(0)
    theirs = pyg_models.LightGCN(N, 6, num_layers=2, alpha=alpha)
    return theirs, loaded(theirs, LightGCN(N, 6, num_layers=2, alpha=alpha))


ALPHAS = [None, 0.3, torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)]


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("with_label_index", [True, False])
def test_scores_match_pyg(alpha, weighted, with_label_index):
    theirs, ours = _pair(alpha)
    ei = random_edges(N, 25)
    ew = torch.rand(25, dtype=torch.float64) if weighted else None
    eli = random_edges(N, 10, seed=3) if with_label_index else None
    assert_same(theirs, ours, ei, eli, ew)
    torch.testing.assert_close(ours.get_embedding(ei, ew), theirs.get_embedding(ei, ew), **TOL)
    torch.testing.assert_close(ours.predict_link(ei, eli, ew, prob=True),
                               theirs.predict_link(ei, eli, ew, prob=True), **TOL)
    assert torch.equal(ours.predict_link(ei, eli, ew), theirs.predict_link(ei, eli, ew))
    assert str(ours) == str(theirs) == f"LightGCN({N}, 6, num_layers=2)"


def test_sparse_edge_index_without_label_index():
    torch_sparse = pytest.importorskip("torch_sparse")
    theirs, ours = _pair()
    ei = random_edges(N, 25, seed=4)
    adj = torch_sparse.SparseTensor.from_edge_index(ei, sparse_sizes=(N, N))
    torch.testing.assert_close(ours(adj.t()), theirs(adj.t()), **TOL)
    coo = torch.sparse_coo_tensor(ei, torch.ones(25, dtype=torch.float64), (N, N)).coalesce()
    for layout in (coo, coo.to_sparse_csr()):
        torch.testing.assert_close(ours(layout), theirs(layout), **TOL)


@pytest.mark.parametrize("with_index", [True, False])
@pytest.mark.parametrize("sorted_", [True, False])
def test_recommend_matches_pyg(with_index, sorted_):
    theirs, ours = _pair()
    ei = random_edges(N, 25)
    src = torch.tensor([0, 2, 5]) if with_index else None
    dst = torch.tensor([1, 3, 4, 6, 8]) if with_index else None
    expected = theirs.recommend(ei, None, src, dst, k=2, sorted=sorted_)
    assert torch.equal(ours.recommend(ei, None, src, dst, k=2, sorted=sorted_), expected)


@pytest.mark.parametrize("lambda_reg", [0, 1e-2])
@pytest.mark.parametrize("with_node_id", [True, False])
def test_losses_match_pyg(lambda_reg, with_node_id):
    theirs, ours = _pair()
    ei = random_edges(N, 25)
    node_id = torch.tensor([0, 3, 4]) if with_node_id else None
    losses = []
    for model in (theirs, ours):
        pred = model(ei, random_edges(N, 10, seed=7))
        rec = model.recommendation_loss(pred[:5], pred[5:], node_id=node_id, lambda_reg=lambda_reg)
        link = model.link_pred_loss(pred, torch.tensor([0, 1] * 5))
        (rec + link).backward()
        losses.append((rec, link, model.embedding.weight.grad))
    for mine, reference in zip(losses[1], losses[0]):
        torch.testing.assert_close(mine, reference, **TOL)


def test_bpr_loss_matches_pyg():
    pos, neg, par = (torch.randn(5, dtype=torch.float64) for _ in range(3))
    for lam in (0, 0.1):
        torch.testing.assert_close(BPRLoss(lam)(pos, neg, par),
                                   pyg_lightgcn.BPRLoss(lam)(pos, neg, par), **TOL)
    with pytest.raises(ValueError, match="parameters"):
        BPRLoss(0.1)(pos, neg)


def test_bad_alpha():
    with pytest.raises(ValueError, match="num_layers \\+ 1"):
        LightGCN(N, 4, num_layers=2, alpha=torch.tensor([0.5, 0.5]))
