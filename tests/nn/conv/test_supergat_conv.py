"""SuperGATConv against PyG's (float64): outputs, input and parameter gradients, the self-supervision
logits and loss (negatives given, positives drawn as PyG draws them); the negative sampler's
contract (PyG draws negatives with Python's random, so not the same ones); the refusals."""
from __future__ import annotations

import pytest
import torch

import unigraph
import unigraph.nn as U
from pyg_compare import TOL, assert_same, loaded, random_edges
from unigraph.nn.negative_edges import negative_edges

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, IN, E = 10, 5, 30


def data(seed=0):
    x = torch.randn(N, IN, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return x, random_edges(N, E, seed)


def pair(**kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.SuperGATConv(IN, 4, heads=3, **kwargs)
    return theirs, loaded(theirs, U.SuperGATConv(IN, 4, heads=3, **kwargs))


def pairs_of(edge_index: torch.Tensor) -> set:
    return set(map(tuple, edge_index.t().tolist()))


@pytest.mark.parametrize("attention_type", ["MX", "SD"])
@pytest.mark.parametrize("concat", [True, False])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_matches_pyg_with_self_supervision(attention_type, concat, add_self_loops):
    theirs, ours = pair(attention_type=attention_type, concat=concat, add_self_loops=add_self_loops)
    x, edge_index = data()
    neg = theirs.negative_sampling(edge_index, N)
    for training in (False, True):
        theirs.train(training)
        ours.train(training)
        assert_same(theirs, ours, x, edge_index, neg)
    torch.testing.assert_close(ours.att_x, theirs.att_x, **TOL)
    torch.testing.assert_close(ours.att_y, theirs.att_y, **TOL)
    torch.testing.assert_close(ours.get_attention_loss(), theirs.get_attention_loss(), **TOL)
    assert str(ours) == str(theirs) == f"SuperGATConv(5, 4, heads=3, type={attention_type})"


@pytest.mark.parametrize("kwargs", [dict(aggr="mean"), dict(flow="target_to_source"), dict(bias=False),
                                    dict(negative_slope=0.5)])
def test_message_passing_arguments_match_pyg(kwargs):
    theirs, ours = pair(**kwargs)
    x, edge_index = data(1)
    assert_same(theirs.eval(), ours.eval(), x, edge_index)


def test_positive_sample_draws_as_pyg():
    """edge_sample_ratio < 1 keeps the edges where torch.rand(E) >= 1 - ratio, PyG's draw."""
    theirs, ours = pair(edge_sample_ratio=0.6)
    x, edge_index = data()
    neg = theirs.negative_sampling(edge_index, N)
    torch.manual_seed(7)
    expected = theirs(x, edge_index, neg)
    torch.manual_seed(7)
    torch.testing.assert_close(ours(x, edge_index, neg), expected, **TOL)
    assert ours.att_x.shape[0] < E + N + neg.shape[1]
    torch.testing.assert_close(ours.att_x, theirs.att_x, **TOL)
    torch.testing.assert_close(ours.get_attention_loss(), theirs.get_attention_loss(), **TOL)


def test_sampled_negatives_train_the_loss():
    theirs, ours = pair(neg_sample_ratio=1.0)
    x, edge_index = data()
    out = ours(x, edge_index)
    torch.testing.assert_close(out, theirs(x, edge_index), **TOL)   # the output does not depend on them
    positives = E - int((edge_index[0] == edge_index[1]).sum()) + N
    assert ours.att_x.shape == (positives + positives, 3)         # ratio 1: one negative per edge (self-loops counted)
    loss = ours.get_attention_loss()
    loss.backward()
    assert loss > 0 and ours.lin.weight.grad.abs().sum() > 0
    assert torch.equal(ours.eval().get_attention_loss(), torch.tensor([0]))


def test_negative_sampler_contract():
    edge_index = random_edges(30, 60, 3)
    graph = pairs_of(edge_index)
    mirrored = graph | {(j, i) for i, j in graph}
    non_edges = 30 * 29 - len({p for p in mirrored if p[0] != p[1]})
    for wanted in (40, non_edges - 5, 10 ** 6):   # a few, most (the complement drawn), more than there are
        torch.manual_seed(0)
        neg = negative_edges(edge_index, 30, wanted)
        drawn = pairs_of(neg)
        assert neg.shape[1] == len(drawn) == min(wanted, non_edges)
        assert not drawn & mirrored and all(i != j for i, j in drawn)
        torch.manual_seed(0)
        assert torch.equal(negative_edges(edge_index, 30, wanted), neg)
    one_way = negative_edges(edge_index, 30, 10 ** 6, symmetric=False)
    assert not pairs_of(one_way) & graph and pairs_of(one_way) & mirrored   # reversed edges are drawn then


def test_negative_sampler_uniform():
    """Every non-edge is about equally likely: 4 nodes, edges 0-1 (both ways), 10 draws of 5 of the 10."""
    torch.manual_seed(0)
    edge_index = torch.tensor([[0, 1], [1, 0]])
    counts = torch.zeros(4, 4)
    for _ in range(400):
        neg = negative_edges(edge_index, 4, 5)
        counts.index_put_((neg[0], neg[1]), torch.ones(neg.shape[1]), accumulate=True)
    drawn = counts[counts > 0]
    assert drawn.numel() == 10 and counts[0, 1] == counts[1, 0] == 0
    assert float(drawn.min()) > 140 and float(drawn.max()) < 260   # 200 expected each


def test_batched_negatives_stay_in_their_graph():
    """Per graph of batch, min(int(ratio * E), its non-edges) of them (PyG's count: the same for every graph)."""
    torch.manual_seed(0)
    sizes = [5, 1, 6, 4]   # (a one-node graph has no pairs)
    batch = torch.arange(4).repeat_interleave(torch.tensor(sizes))
    first = [0, 5, 6, 12]
    edge_index = torch.cat([random_edges(n, 6, s) + f for s, (n, f) in enumerate(zip(sizes, first))], 1)
    conv = U.SuperGATConv(IN, 4)
    neg = conv.negative_sampling(edge_index, 16, batch)
    mirrored = {p for p in pairs_of(edge_index) | pairs_of(edge_index.flip(0)) if p[0] != p[1]}
    wanted = int(0.5 * edge_index.shape[1])
    expected = [min(wanted, n * (n - 1) - sum(1 for i, _ in mirrored if f <= i < f + n)) for n, f in zip(sizes, first)]
    assert torch.bincount(batch[neg[0]], minlength=4).tolist() == expected
    assert torch.equal(batch[neg[0]], batch[neg[1]]) and bool((neg[0] != neg[1]).all())
    assert not pairs_of(neg) & mirrored and len(pairs_of(neg)) == neg.shape[1]
    out = conv(torch.randn(16, IN), edge_index, batch=batch)
    assert out.shape == (16, 4) and conv.get_attention_loss() > 0


def test_get_attention_matches_pyg():
    theirs, ours = pair()
    x, edge_index = data()
    h = torch.randn(E, 3, 4, dtype=torch.float64)
    for logits in (False, True):
        torch.testing.assert_close(ours.get_attention(edge_index[1], h, h.flip(0), N, return_logits=logits),
                                   theirs.get_attention(edge_index[1], h, h.flip(0), N, return_logits=logits), **TOL)


def test_call_forms_match_pyg():
    torch_sparse = pytest.importorskip("torch_sparse")
    theirs, ours = pair()
    theirs.eval()
    ours.eval()
    x, edge_index = data()
    edge_index = torch.unique(edge_index, dim=1)
    expected = theirs(x, edge_index)
    adj = torch_sparse.SparseTensor.from_edge_index(edge_index, sparse_sizes=(N, N)).t()
    torch.testing.assert_close(ours(x, adj), expected, **TOL)
    torch.testing.assert_close(ours(unigraph.Graph(edge_index, num_nodes=N), x), expected, **TOL)
    ours.train()
    assert ours(x, adj).shape == expected.shape and ours.att_x is not None
    lazy = U.SuperGATConv(-1, 4, heads=3).double().eval()
    assert lazy(x, edge_index).shape == (N, 12)
    lazy.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(lazy(x, edge_index), expected, **TOL)


def test_refusals():
    x, edge_index = data()
    x = x.float()
    with pytest.raises(ValueError, match="attention_type"):
        U.SuperGATConv(IN, 4, attention_type="XX")
    with pytest.raises(ValueError, match="edge_sample_ratio"):
        U.SuperGATConv(IN, 4, edge_sample_ratio=0.0)
    with pytest.raises(ValueError, match="neg_sample_ratio"):
        U.SuperGATConv(IN, 4, neg_sample_ratio=0)
    with pytest.raises(ValueError, match="neg_edge_index holds node ids"):
        U.SuperGATConv(IN, 4)(x, edge_index, torch.tensor([[0], [N]]))
    with pytest.raises(ValueError, match="batch sorted"):
        U.SuperGATConv(IN, 4)(x, edge_index, batch=torch.arange(N).flip(0))
    with pytest.raises(ValueError, match="different graphs"):
        U.SuperGATConv(IN, 4)(x, torch.tensor([[0], [9]]), batch=torch.arange(N) // 5)
    with pytest.raises(ValueError, match="pair"):
        U.SuperGATConv(IN, 4)((x, x), edge_index)
    with pytest.raises(RuntimeError, match="training mode first"):
        U.SuperGATConv(IN, 4).get_attention_loss()
