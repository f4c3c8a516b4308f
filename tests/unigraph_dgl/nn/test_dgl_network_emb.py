"""unigraph.dgl.nn's DeepWalk and MetaPath2Vec (unigraph/dgl/nn/pytorch/network_emb.py) against
DGL's: a DGL state_dict loads (strict); the loss and the gradients of both embedding tables equal
DGL's in float64 once both draw the same negatives (each library's draw replaced by the same fixed
one); the walks, positive pairs and negative-sampling distributions equal DGL's where the walks are
deterministic (one out-edge per node); DGL's initialisation; dead ends; errors."""
from __future__ import annotations

import random
import sys

import pytest
import torch
from torch.utils.data import DataLoader

import unigraph.dgl as udgl
import unigraph.dgl.nn as unn
from dgl_compare import TOL, assert_same_run
from unigraph.dgl.base import DGLError

SRC = torch.tensor([0, 0, 1, 2, 2, 3, 4, 1, 4, 5, 5])
DST = torch.tensor([1, 2, 2, 0, 3, 1, 0, 5, 5, 4, 2])
WALK = dict(emb_dim=8, walk_length=5, window_size=2, negative_size=3, neg_weight=0.5)


def _deepwalks(dgl, **kwargs):
    """``(ours, theirs)`` DeepWalk on the same 6-node graph, float64, ours holding DGL's state_dict
    (with large random vectors, so that every term of the loss counts and some scores pass the clip)."""
    theirs = dgl.nn.DeepWalk(dgl.graph((SRC, DST)), **kwargs).double()
    ours = unn.DeepWalk(udgl.graph((SRC, DST)), **kwargs).double()
    theirs.context_embed.weight.data.normal_(std=1.5)
    theirs.node_embed.weight.data.normal_(std=1.5)
    assert set(ours.state_dict()) == set(theirs.state_dict()) == {"node_embed.weight", "context_embed.weight"}
    ours.load_state_dict(theirs.state_dict(), strict=True)
    return ours, theirs


def _grads(module):
    return [p.grad.to_dense() if p.grad.is_sparse else p.grad for p in (module.node_embed.weight,
                                                                        module.context_embed.weight)]


def _same_negatives(monkeypatch, dgl) -> None:
    """Both libraries draw the same negatives: DGL's shuffle keeps its order and our permutation is
    the identity (fast_neg); DGL's ``choice`` and our ``torch.multinomial`` return the same ids."""
    fixed = torch.randint(0, 6, (10000,), generator=torch.Generator().manual_seed(5))
    their_module = sys.modules[dgl.nn.DeepWalk.__module__]
    monkeypatch.setattr(random, "shuffle", lambda values: None)
    monkeypatch.setattr(their_module, "choice", lambda n, size, prob: fixed[:size])
    monkeypatch.setattr(torch, "randperm", lambda n, **kw: torch.arange(n, device=kw.get("device")))
    monkeypatch.setattr(torch, "multinomial", lambda prob, count, replacement: fixed[:count])


# ---------------------------------------------------------------------- DeepWalk
@pytest.mark.parametrize("fast_neg", [True, False])
@pytest.mark.parametrize("sparse", [True, False])
def test_deepwalk_loss_and_gradients_equal_dgl(dgl, monkeypatch, fast_neg, sparse):
    torch.manual_seed(0)
    ours, theirs = _deepwalks(dgl, fast_neg=fast_neg, sparse=sparse, **WALK)
    walks = torch.randint(0, 6, (4, WALK["walk_length"]))
    _same_negatives(monkeypatch, dgl)
    loss_ours, loss_theirs = ours(walks), theirs(walks)
    torch.testing.assert_close(loss_ours, loss_theirs, **TOL)
    loss_ours.backward()
    loss_theirs.backward()
    for a, b in zip(_grads(ours), _grads(theirs)):
        torch.testing.assert_close(a, b, **TOL)


def test_deepwalk_pairs_and_negative_distribution_equal_dgl(dgl):
    ours, theirs = _deepwalks(dgl, fast_neg=False, **WALK)
    assert torch.equal(ours.idx_list_src, theirs.idx_list_src)
    assert torch.equal(ours.idx_list_dst, theirs.idx_list_dst)
    torch.testing.assert_close(ours.neg_prob, theirs.neg_prob.double(), rtol=1e-6, atol=0)


def test_deepwalk_fast_negatives_come_from_the_batch():
    torch.manual_seed(1)
    model = unn.DeepWalk(udgl.graph((SRC, DST)), **WALK)
    context = torch.arange(20.0)[:, None]   # 4 walks x 5 positions
    picked = model._negative_context(context, 200).flatten().long()
    counts = torch.bincount(picked, minlength=20)
    # without replacement from 2 * window * negative_size = 12 copies of each position
    assert counts.max() <= 12 and counts.sum() == 200 and (counts > 0).all()


def test_deepwalk_sample_equals_dgl(dgl):
    cycle = ([0, 1, 2, 3], [1, 2, 3, 0])   # one out-edge per node: the walks are fixed
    seeds = torch.tensor([0, 2, 3])
    ours = unn.DeepWalk(udgl.graph(cycle), **WALK).sample(seeds)
    theirs = dgl.nn.DeepWalk(dgl.graph(cycle), **WALK).sample(seeds)
    assert ours.dtype == theirs.dtype and torch.equal(ours, theirs)
    g = udgl.graph((SRC, DST))
    walks = unn.DeepWalk(g, **WALK).sample(torch.arange(6))
    assert walks.shape == (6, WALK["walk_length"])
    assert g.has_edges_between(walks[:, :-1].flatten(), walks[:, 1:].flatten()).all()


def test_deepwalk_default_initialisation_as_dgl(dgl):
    torch.manual_seed(2)
    for model in (unn.DeepWalk(udgl.graph((SRC, DST)), emb_dim=16), dgl.nn.DeepWalk(dgl.graph((SRC, DST)),
                                                                                      emb_dim=16)):
        weight = model.node_embed.weight
        assert weight.abs().max() <= 1 / 16 and weight.std() > 0.5 / 16 / 3 ** 0.5
        assert not model.context_embed.weight.any() and model.node_embed.sparse


def test_deepwalk_trains_with_a_dataloader():
    torch.manual_seed(3)
    model = unn.DeepWalk(udgl.graph((SRC, DST)), **WALK)
    loader = DataLoader(torch.arange(6), batch_size=4, shuffle=True, collate_fn=model.sample)
    optimizer = torch.optim.SparseAdam(model.parameters(), lr=0.01)
    before = model.node_embed.weight.detach().clone()
    for walks in loader:
        loss = model(walks)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert torch.isfinite(loss) and not torch.equal(before, model.node_embed.weight)


# ---------------------------------------------------------------------- MetaPath2Vec
def _hetero(lib, dead_end: bool = False, idtype=torch.int64):
    """Users, companies, products; every relation has one out-edge per node (fixed walks), except
    with ``dead_end``: then company 3 has no "cu" edge."""
    cu = ([1, 2, 0], [0, 2, 1]) if dead_end else ([1, 2, 0, 3], [0, 2, 1, 3])
    return lib.heterograph({
        ("user", "uc", "company"): ([0, 1, 2, 3], [1, 3, 0, 2]),
        ("company", "cu", "user"): cu,
        ("company", "cp", "product"): ([0, 1, 2, 3], [2, 1, 0, 1]),
        ("product", "pc", "company"): ([0, 2, 1], [0, 0, 3]),
    }, idtype=idtype)


@pytest.mark.parametrize("metapath, window", [(["uc", "cu"], 1), (["uc", "cu"] * 2, 2), (["uc", "cu"] * 2, 3),
                                              (["cp", "pc", "cu"], 2)])
def test_metapath2vec_walk_statistics_and_pairs_equal_dgl(dgl, metapath, window):
    ours = unn.MetaPath2Vec(_hetero(udgl), metapath, window, emb_dim=4)
    theirs = dgl.nn.MetaPath2Vec(_hetero(dgl), metapath, window, emb_dim=4)
    assert ours.local_to_global_nid == {k: [int(i) for i in v] for k, v in theirs.local_to_global_nid.items()}
    assert ours.node_metapath == theirs.node_metapath
    torch.testing.assert_close(ours.neg_prob, theirs.neg_prob, rtol=1e-6, atol=0)
    seeds = torch.tensor([0, 2, 3, 2])
    (u, v, neg), (tu, tv, tneg) = ours.sample(seeds), theirs.sample(seeds)
    assert torch.equal(u, tu) and torch.equal(v, tv)
    assert neg.shape == tneg.shape == (u.numel(), 5) and neg.dtype == tneg.dtype


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_metapath2vec_loss_and_gradients_equal_dgl(dgl, idtype):
    torch.manual_seed(4)
    theirs = dgl.nn.MetaPath2Vec(_hetero(dgl, idtype=idtype), ["uc", "cu"], 2, emb_dim=6, sparse=False).double()
    ours = unn.MetaPath2Vec(_hetero(udgl, idtype=idtype), ["uc", "cu"], 2, emb_dim=6, sparse=False).double()
    theirs.context_embed.weight.data.normal_(std=2.0)   # large: some scores pass the clip at 10
    theirs.node_embed.weight.data.normal_(std=2.0)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    u, v, neg = ours.sample(torch.arange(4).repeat(3))
    assert_same_run(ours.eval(), theirs.eval(), (u, v, neg), (u, v, neg), [])


def test_metapath2vec_one_pair_one_negative():
    model = unn.MetaPath2Vec(_hetero(udgl), ["uc", "cu"], 1, emb_dim=3, negative_size=1).double()
    model.context_embed.weight.data.normal_()
    u, v, neg = torch.tensor([0]), torch.tensor([5]), torch.tensor([[7]])   # DGL's squeeze() fails here
    centre, ctx = model.node_embed.weight, model.context_embed.weight
    want = (-torch.nn.functional.logsigmoid((centre[0] * ctx[5]).sum().clamp(-10, 10))
            - torch.nn.functional.logsigmoid(-(centre[0] * ctx[7]).sum().clamp(-10, 10)))
    torch.testing.assert_close(model(u, v, neg), want, **TOL)


def test_metapath2vec_dead_ends_are_dropped():
    model = unn.MetaPath2Vec(_hetero(udgl, dead_end=True), ["uc", "cu", "uc"], 2, emb_dim=4)
    # user 1 -> company 3 -> (no "cu" edge): its walk is [u1, c3, -1, -1]; the others go on
    u, v, neg = model.sample(torch.arange(4))
    assert (u >= 0).all() and (v >= 0).all() and (neg >= 0).all()
    walks = model._global_walks(torch.arange(4))
    assert (walks[1, 2:] == -1).all() and (walks[[0, 2, 3]] >= 0).all()
    counts = torch.zeros(model.neg_prob.numel(), dtype=torch.float64)
    for walk in walks:   # each walk counts each node it visits once
        counts[walk[walk >= 0].unique()] += 1
    counts = counts.pow(0.75)
    torch.testing.assert_close(model.neg_prob.double(), counts / counts.sum(), rtol=1e-6, atol=0)


def test_metapath2vec_trains_with_a_dataloader():
    torch.manual_seed(5)
    model = unn.MetaPath2Vec(_hetero(udgl), ["uc", "cu"], 1, emb_dim=4)
    loader = DataLoader(torch.arange(4), batch_size=3, shuffle=True, collate_fn=model.sample)
    optimizer = torch.optim.SparseAdam(model.parameters(), lr=0.025)
    for pos_u, pos_v, neg_v in loader:
        loss = model(pos_u, pos_v, neg_v)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert torch.isfinite(loss) and model.context_embed.weight.any()


# ---------------------------------------------------------------------- errors
def test_errors():
    g, hg = udgl.graph((SRC, DST)), _hetero(udgl)
    deepwalk = unn.DeepWalk(g, **WALK)
    metapath2vec = unn.MetaPath2Vec(hg, ["uc", "cu"], 1, emb_dim=4)
    bad = [
        (ValueError, "walk_length >= window_size", lambda: unn.DeepWalk(g, walk_length=3, window_size=3)),
        (ValueError, "window_size >= 1", lambda: unn.DeepWalk(g, walk_length=3, window_size=0)),
        (DGLError, "no edges", lambda: unn.DeepWalk(udgl.graph(([], []), num_nodes=3), fast_neg=False)),
        (ValueError, "walk_length=5", lambda: deepwalk(torch.zeros(2, 4, dtype=torch.long))),
        (ValueError, "-1", lambda: deepwalk(torch.tensor([[0, 1, 2, -1, -1]]))),
        (TypeError, "integer", lambda: deepwalk(torch.zeros(1, 5))),
        (ValueError, "window_size <= len", lambda: unn.MetaPath2Vec(hg, ["uc", "cu"], 4)),
        (DGLError, "ends at", lambda: unn.MetaPath2Vec(hg, ["uc", "uc"], 1)),
        (ValueError, "outside", lambda: metapath2vec(torch.tensor([0]), torch.tensor([99]), torch.tensor([[1]]))),
        (ValueError, r"\[P, K\]", lambda: metapath2vec(torch.tensor([0]), torch.tensor([1]), torch.tensor([1]))),
    ]
    for error, match, call in bad:
        with pytest.raises(error, match=match):
            call()
