"""GravNetConv against PyG's (float64): outputs, input and parameter gradients, with and without
examples (``batch``), for one feature tensor and a (source, destination) pair, lazy widths and
PyG's aggregation arguments; the neighbours unigraph's knn finds against a brute-force search;
the refusals.

PyG's GravNetConv finds neighbours with pyg-lib's ``torch.ops.pyg.knn``, and pyg-lib is not
installed here (nor torch_cluster): its own test is skipped. These tests run PyG's layer with that
one call replaced by a brute-force search (:func:`brute_knn_op`, every query against every
candidate of its example, by full sort), so everything else, the linear maps, the distance
weights, PyG's mean and max aggregation and the output, is PyG's own code."""
from __future__ import annotations

import types

import pytest
import torch

import unigraph.nn as U
from unigraph.nn.knn import knn
from pyg_compare import assert_same, loaded

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="PyG is the reference for these tests (test extra)")

N, N_DST, IN, OUT, SPACE, PROP, K = 12, 7, 5, 6, 3, 4, 3


def brute_knn_op(x, y, ptr_x, ptr_y, k, cosine=False, num_workers=1):
    """pyg-lib's ``knn(x, y, ptr_x, ptr_y, k, cosine, num_workers)``: ``[2, M]``, row 0 the query
    (a row of ``y``), row 1 its neighbour (a row of ``x``), per example given by CSR pointers."""
    assert not cosine
    batch_x = _batch_of(ptr_x, x.shape[0])
    batch_y = _batch_of(ptr_y, y.shape[0])
    pairs = []
    for query in range(y.shape[0]):
        same = (batch_x == batch_y[query]).nonzero().flatten()
        distance = ((x[same] - y[query]) ** 2).sum(-1)
        pairs += [(query, j) for j in same[distance.argsort(stable=True)[:k]].tolist()]
    return torch.tensor(pairs, dtype=torch.long).t().reshape(2, -1)


def _batch_of(ptr, rows):
    if ptr is None:
        return torch.zeros(rows, dtype=torch.long)
    return torch.repeat_interleave(torch.arange(ptr.numel() - 1), ptr.diff())


class _TorchWithKnn(types.ModuleType):
    """``torch`` as PyG's gravnet_conv module sees it, with ``torch.ops.pyg.knn`` the search above."""

    def __init__(self):
        super().__init__("torch")
        self.ops = types.SimpleNamespace(pyg=types.SimpleNamespace(knn=brute_knn_op))

    def __getattr__(self, name):
        return getattr(torch, name)


@pytest.fixture(autouse=True)
def pyg_with_brute_knn(monkeypatch):
    import torch_geometric.typing
    module = pytest.importorskip("torch_geometric.nn.conv.gravnet_conv")
    monkeypatch.setattr(torch_geometric.typing, "WITH_KNN", True)
    monkeypatch.setattr(module, "torch", _TorchWithKnn())


def features(rows, seed):
    return torch.randn(rows, IN, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def pair(in_channels=IN, **kwargs):
    torch.manual_seed(0)
    theirs = pyg_nn.GravNetConv(in_channels, OUT, space_dimensions=SPACE, propagate_dimensions=PROP, k=K, **kwargs)
    ours = U.GravNetConv(in_channels, OUT, space_dimensions=SPACE, propagate_dimensions=PROP, k=K, **kwargs)
    return theirs, (loaded(theirs, ours) if in_channels != -1 else ours)


BATCH = torch.tensor([0] * 5 + [1] * 7)
BATCH_DST = torch.tensor([0] * 3 + [1] * 4)


@pytest.mark.parametrize("batch", [None, BATCH])
def test_matches_pyg(batch):
    theirs, ours = pair()
    assert_same(theirs, ours, features(N, 0), batch)
    assert str(ours) == str(theirs) == f"GravNetConv({IN}, {OUT}, k={K})"


@pytest.mark.parametrize("batch", [None, (BATCH, BATCH_DST)])
def test_pair_matches_pyg(batch):
    theirs, ours = pair()
    out = assert_same(theirs, ours, (features(N, 1), features(N_DST, 2)), batch)
    assert out.shape == (N_DST, OUT)


def test_fewer_candidates_than_k():
    """An example with fewer source rows than k: every one of them is a neighbour."""
    theirs, ours = pair()
    batch = torch.tensor([0, 0] + [1] * 10)
    assert_same(theirs, ours, features(N, 3), batch)


@pytest.mark.parametrize("aggr_kwargs", [dict(mode="cat"),
                                         dict(mode="proj", mode_kwargs=dict(in_channels=PROP, out_channels=2 * PROP))])
def test_aggregation_arguments_match_pyg(aggr_kwargs):
    """PyG's aggr_kwargs configure the [mean, max] aggregation module (messages materialized)."""
    theirs, ours = pair(aggr_kwargs=aggr_kwargs)
    assert_same(theirs, ours, features(N, 4), BATCH)


def test_lazy_in_channels_match_pyg():
    theirs, ours = pair(-1)
    x = features(N, 5)
    theirs.double()(x)
    ours.double()(x)
    assert ours.lin_s.weight.shape == (SPACE, IN)
    assert_same(theirs, loaded(theirs, ours), x)


def test_knn_finds_the_brute_force_neighbours():
    """unigraph's knn (which GravNetConv uses) against the brute-force search, in GravNet's
    learned space: one set, examples, and source/destination pairs with examples."""
    gen = torch.Generator().manual_seed(6)
    s, s_dst = torch.randn(N, SPACE, generator=gen), torch.randn(N_DST, SPACE, generator=gen)
    cases = [(s, s, None, None, None, None),
             (s, s, BATCH, BATCH, torch.tensor([0, 5, 12]), torch.tensor([0, 5, 12])),
             (s, s_dst, BATCH, BATCH_DST, torch.tensor([0, 5, 12]), torch.tensor([0, 3, 7]))]
    for x, y, batch_x, batch_y, ptr_x, ptr_y in cases:
        for k in (1, K, 6):
            found = knn(x, y, k, batch_x, batch_y)
            expected = brute_knn_op(x, y, ptr_x, ptr_y, k)
            assert sorted(map(tuple, found.t().tolist())) == sorted(map(tuple, expected.t().tolist()))


def test_refusals():
    _, ours = pair()
    with pytest.raises(ValueError, match="static graphs"):
        ours(torch.randn(2, N, IN, dtype=torch.float64))
    with pytest.raises(ValueError, match=f"{IN} features"):
        ours(torch.randn(N, IN + 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="k must be a positive int"):
        U.GravNetConv(IN, OUT, SPACE, PROP, k=0)
    with pytest.raises(ValueError, match="batch_x and batch_y together"):
        ours((features(N, 0), features(N_DST, 0)), (BATCH, None))
    with pytest.warns(UserWarning, match="num_workers"):
        U.GravNetConv(IN, OUT, SPACE, PROP, K, num_workers=2)
