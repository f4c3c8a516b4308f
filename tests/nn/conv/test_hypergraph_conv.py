"""HypergraphConv against PyG's (float64): outputs and the gradients of the features, hyperedge
weights, hyperedge features and parameters, over its options (attention and its modes, heads,
concat, bias, aggregations, lazy widths, attention dropout) and inputs (weights, num_edges with
empty hyperedges, isolated nodes); the refusals."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import unigraph.nn as U
import unigraph.nn.hypergraph_conv as hypergraph_module
from pyg_compare import TOL, assert_same, loaded

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, M, IN, OUT = 9, 5, 4, 3


def data(seed=0, incidences=20):
    """A random hypergraph: node 8 in no hyperedge, hyperedge ids below M (in a random order)."""
    gen = torch.Generator().manual_seed(seed)
    index = torch.stack([torch.randint(0, N - 1, (incidences,), generator=gen),
                         torch.randint(0, M, (incidences,), generator=gen)])
    index[1, :M] = torch.arange(M)   # every hyperedge id appears (num_edges = M)
    index = torch.unique(index, dim=1)   # (an incidence matrix has no repeated entries)
    index = index[:, torch.randperm(index.shape[1], generator=gen)]
    x = torch.randn(N, IN, dtype=torch.float64, generator=gen)
    weight = torch.rand(M, dtype=torch.float64, generator=gen) + 0.5
    attr = torch.randn(M, IN, dtype=torch.float64, generator=gen)
    return x, index.contiguous(), weight, attr


def pair(in_channels=IN, **kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.HypergraphConv(in_channels, OUT, **kwargs)
    ours = U.HypergraphConv(in_channels, OUT, **kwargs)
    return theirs, (loaded(theirs, ours) if in_channels != -1 else ours)


@pytest.mark.parametrize("with_weight", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_matches_pyg(with_weight, bias):
    theirs, ours = pair(bias=bias)
    x, index, weight, _ = data()
    assert_same(theirs, ours, x, index, weight if with_weight else None)
    assert str(ours) == str(theirs) == f"HypergraphConv({IN}, {OUT})"


@pytest.mark.parametrize("mode", ["node", "edge"])
@pytest.mark.parametrize("heads,concat", [(1, True), (3, True), (3, False)])
def test_attention_matches_pyg(mode, heads, concat):
    theirs, ours = pair(use_attention=True, attention_mode=mode, heads=heads, concat=concat, negative_slope=0.1)
    x, index, weight, attr = data(1)
    out = assert_same(theirs, ours, x, index, weight, attr)
    assert out.shape == (N, heads * OUT if concat else OUT)


@pytest.mark.parametrize("aggr", ["mean", "max"])
def test_aggregations_match_pyg(aggr):
    theirs, ours = pair(use_attention=True, heads=2, aggr=aggr)
    x, index, weight, attr = data(2)
    assert_same(theirs, ours, x, index, weight, attr)


def test_num_edges_with_empty_hyperedges_matches_pyg():
    theirs, ours = pair(use_attention=True, heads=2)
    x, index, _, _ = data(3)
    weight = torch.rand(M + 2, dtype=torch.float64) + 0.5
    attr = torch.randn(M + 2, IN, dtype=torch.float64)
    assert_same(theirs, ours, x, index, weight, attr, num_edges=M + 2)
    theirs, ours = pair()
    assert_same(theirs, ours, x, index, None, None, M + 2)


def test_empty_hypergraph_is_the_bias():
    _, ours = pair()
    torch.nn.init.uniform_(ours.bias)
    x = torch.randn(N, IN, dtype=torch.float64)
    out = ours(x, torch.empty(2, 0, dtype=torch.long))
    torch.testing.assert_close(out, ours.bias.expand(N, OUT), **TOL)


def test_attention_dropout_matches_pyg_with_the_same_draws(monkeypatch):
    """Training with dropout: with unigraph's dropout replaced by ``F.dropout`` (PyG's, which draws
    from torch's generator), the same seed gives PyG's result: the same weights dropped, once,
    for both steps. Evaluation mode drops nothing."""
    monkeypatch.setattr(hypergraph_module, "dropout", lambda a, p, training: F.dropout(a, p, training))
    theirs, ours = pair(use_attention=True, heads=2, concat=False, dropout=0.5)
    x, index, weight, attr = data(4)
    results = []
    for conv in (theirs, ours):
        leaves = [t.clone().requires_grad_() for t in (x, attr)]
        torch.manual_seed(7)
        out = conv(leaves[0], index, weight, leaves[1])
        out.pow(2).sum().backward()
        results.append([out] + [t.grad for t in leaves] + [p.grad for p in conv.parameters()])
    for mine, reference in zip(results[1], results[0]):
        torch.testing.assert_close(mine, reference, **TOL)
    theirs.eval(), ours.eval()
    assert_same(theirs, ours, x, index, weight, attr)


def test_unigraph_dropout_drops_in_training_only():
    _, ours = pair(use_attention=True, dropout=0.5)
    x, index, weight, attr = data(5)
    ours.eval()
    evaluated = ours(x, index, weight, attr)
    ours.train()
    assert not torch.allclose(ours(x, index, weight, attr), evaluated)


def test_lazy_in_channels_match_pyg():
    theirs, ours = pair(-1, use_attention=True, heads=2)
    x, index, weight, attr = data(6)
    theirs.double()(x, index, weight, attr)
    ours.double()(x, index, weight, attr)
    assert ours.lin.weight.shape == (2 * OUT, IN)
    assert_same(theirs, loaded(theirs, ours), x, index, weight, attr)


def test_refusals():
    x, index, weight, attr = data(7)
    with pytest.raises(ValueError, match="attention_mode must be 'node' or 'edge'"):
        U.HypergraphConv(IN, OUT, use_attention=True, attention_mode="both")
    with pytest.raises(ValueError, match="heads=1 or use_attention=True"):   # PyG: a shape error in forward
        U.HypergraphConv(IN, OUT, heads=2)
    with pytest.raises(TypeError):   # flow is fixed, as in PyG
        U.HypergraphConv(IN, OUT, flow="target_to_source")
    conv = U.HypergraphConv(IN, OUT, use_attention=True).double()
    with pytest.raises(ValueError, match="needs hyperedge_attr"):
        conv(x, index, weight)
    with pytest.raises(ValueError, match=r"hyperedge_attr of shape \[5, F\]"):
        conv(x, index, weight, attr[:4])
    with pytest.raises(ValueError, match=r"hyperedge_weight of shape \[5\]"):
        conv(x, index, weight[:3], attr)
    with pytest.raises(ValueError, match="hyperedge_index as a \\[2, num_incidences\\]"):
        conv(x, index.t(), weight, attr)
    with pytest.raises(ValueError, match="index 9"):
        conv(x, torch.tensor([[0, 9], [0, 1]]), weight[:2], attr[:2])
    with pytest.raises(ValueError, match="num_edges=2"):
        conv(x, index, weight[:2], attr[:2], num_edges=2)
    with pytest.raises(ValueError, match=f"{IN} features"):
        conv(x[:, :2], index, weight, attr)
