"""Node2Vec against PyG's where it is deterministic (PyG's walks need pyg-lib, absent here, so PyG's
own methods are run on our module): the windows cut from given walks, the negative walks for one
seed, the loss and its gradient, str, the state_dict; the walks by contract (every step an edge or a
stay at a dead end, the first step uniform, later steps in node2vec's p/q proportions); the errors."""
import pytest
import torch

from pyg_compare import TOL, random_edges
from unigraph.nn.models import Node2Vec

pyg_node2vec = pytest.importorskip("torch_geometric.nn.models.node2vec", reason="PyG is the reference")
PyGNode2Vec = pyg_node2vec.Node2Vec


def _model(**kwargs):
    args = dict(embedding_dim=6, walk_length=5, context_size=3, walks_per_node=2, num_negative_samples=2,
                num_nodes=14)
    args.update(kwargs)
    return Node2Vec(random_edges(12, 40, seed=3), **args)


def test_windows_negatives_and_loss_as_pyg():
    model = _model(p=0.5, q=2.0).double()
    batch = torch.arange(14)
    walks = model.random_walk(batch.repeat(model.walks_per_node))
    model.random_walk_fn = lambda *args: walks  # what PyG's pos_sample calls
    assert torch.equal(model._windows(walks), PyGNode2Vec.pos_sample(model, batch))
    torch.manual_seed(7)
    expected = PyGNode2Vec.neg_sample(model, batch)
    torch.manual_seed(7)
    assert torch.equal(model.neg_sample(batch), expected)
    pos, neg = model._windows(walks), expected
    reference = PyGNode2Vec.loss(model, pos, neg)
    (grad_ref,) = torch.autograd.grad(reference, model.embedding.weight)
    loss = model.loss(pos, neg)
    (grad,) = torch.autograd.grad(loss, model.embedding.weight)
    torch.testing.assert_close(loss, reference, **TOL)
    torch.testing.assert_close(grad, grad_ref, **TOL)


def test_forward_repr_state_dict():
    model = _model()
    assert str(model) == "Node2Vec(14, 6)"
    assert list(model.state_dict()) == ["embedding.weight"]
    assert torch.equal(model(), model.embedding.weight)
    assert torch.equal(model(torch.tensor([3, 1])), model.embedding.weight[[3, 1]])
    pos, neg = next(iter(model.loader(batch_size=4, shuffle=True)))
    assert pos.shape == (4 * 2 * 3, 3) and neg.shape == (4 * 2 * 2 * 3, 3)
    assert _model(sparse=True).embedding.sparse


def test_walks_follow_edges_and_stay_at_dead_ends():
    edge_index = random_edges(12, 40, seed=3)
    model = _model(p=0.25, q=4.0, walk_length=8)
    walks = model.random_walk(torch.arange(14).repeat(20))
    edges = set(map(tuple, edge_index.t().tolist()))
    dead = set(range(12, 14)) | (set(range(12)) - set(edge_index[0].tolist()))
    for walk in walks.tolist():
        for a, b in zip(walk, walk[1:]):
            assert (a, b) in edges or (a == b and a in dead)


@pytest.mark.parametrize("p,q", [(0.25, 1.0), (1.0, 0.25), (4.0, 2.0)])
def test_second_step_proportions(p, q):
    # undirected: 0-1, 1-2, 1-3, 2-3 ; walks 0 -> 1 -> x, x in {0 (return), 2, 3 (both not linked to 0)}
    # and 2 -> 1 -> x: x in {2 (return), 3 (linked to 2), 0 (away)}
    pairs = torch.tensor([[0, 1], [1, 2], [1, 3], [2, 3]])
    edge_index = torch.cat([pairs, pairs.flip(1)]).t()
    model = Node2Vec(edge_index, 2, walk_length=3, context_size=2, p=p, q=q)
    torch.manual_seed(0)
    n = 40000
    walks = model.random_walk(torch.full((n,), 2))
    walks = walks[walks[:, 1] == 1]
    counts = torch.bincount(walks[:, 2], minlength=4).double()
    expected = torch.tensor([1 / q, 0.0, 1 / p, 1.0], dtype=torch.float64)
    expected = expected / expected.sum() * walks.shape[0]
    assert ((counts - expected).abs() <= 5 * expected.sqrt() + 1).all(), (counts, expected)


def test_errors():
    edge_index = random_edges(6, 10)
    with pytest.raises(ValueError, match="walk_length"):
        Node2Vec(edge_index, 4, walk_length=2, context_size=3)
    with pytest.raises(ValueError, match="p must"):
        Node2Vec(edge_index, 4, walk_length=3, context_size=2, p=0.0)
    with pytest.raises(ValueError, match="edge_index"):
        Node2Vec(edge_index[0], 4, walk_length=3, context_size=2)
    with pytest.raises(ValueError, match="num_nodes"):
        Node2Vec(edge_index, 4, walk_length=3, context_size=2, num_nodes=2)
    model = Node2Vec(edge_index, 4, walk_length=3, context_size=2)
    with pytest.raises(ValueError, match="batch"):
        model.sample(torch.tensor([0, 99]))
    with pytest.raises(ValueError, match="windows"):
        model.loss(torch.zeros(3, dtype=torch.long), torch.zeros(3, 2, dtype=torch.long))
