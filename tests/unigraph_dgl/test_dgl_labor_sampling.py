"""dgl.sampling.sample_labors (unigraph/dgl/labor_sampling.py), LABOR-0: each candidate kept with
probability min(1, c_s w) (k / d without weights; with weights the level where the expected count
is k), one variate per node shared by every seed (seeds with the same neighbours keep the same
ones), zero weights never kept, -1 / 0 / large fanouts, importances averaging 1 per seed, a fixed
random_seed repeating the sample, excluded edges, out-edges, heterographs."""
from __future__ import annotations

import pytest
import torch

import unigraph.dgl as udgl
from unigraph.dgl import sampling
from unigraph.dgl.labor_sampling import _inclusion


def two_stars(weights=None):
    """Seeds 0 and 1, each with in-edges from nodes 2..11 (edges 0-9 into 0, 10-19 into 1)."""
    src = torch.arange(2, 12).repeat(2)
    dst = torch.cat([torch.zeros(10, dtype=torch.long), torch.ones(10, dtype=torch.long)])
    g = udgl.graph((src, dst), num_nodes=12)
    if weights is not None:
        g.edata["w"] = weights
    return g


def test_each_candidate_is_kept_with_probability_k_over_d_and_seeds_share_their_variates():
    torch.manual_seed(0)
    g, kept = two_stars(), torch.zeros(20)
    runs = 3000
    for _ in range(runs):
        sub, importances = sampling.sample_labors(g, torch.tensor([0, 1]), 3)
        eids = sub.edata[udgl.EID]
        kept[eids] += 1
        src, dst = sub.edges()
        assert set(src[dst == 0].tolist()) == set(src[dst == 1].tolist())   # one r_t per node
        assert torch.equal(g.edge_ids(src, dst), eids)
        assert importances == [] or importances[0].numel() == 0
    frequency = kept / runs
    assert (frequency - 0.3).abs().max() < 0.04          # k / d = 3 / 10 (4 sigma: 0.034)


def test_weighted_levels_give_the_fanout_in_expectation_and_saturate_the_heaviest():
    gen = torch.Generator().manual_seed(1)
    row = torch.arange(6).repeat_interleave(torch.tensor([5, 8, 3, 12, 1, 7]))
    weight = torch.rand(row.numel(), generator=gen, dtype=torch.float64) ** 3
    weight[0] = 50.0            # dominant: saturates
    weight[14] = 0.0            # never kept
    for fanout in (1, 2, 4):
        pi = _inclusion(row, 6, weight, fanout)
        count = torch.bincount(row[weight > 0], minlength=6)
        expected = torch.minimum(count, torch.tensor(fanout)).to(torch.float64)
        torch.testing.assert_close(torch.zeros(6, dtype=torch.float64).index_add_(0, row, pi), expected)
        assert (pi[0] == 1.0 if fanout > 1 else pi[0] > 0.99) and pi[14] == 0.0 and (pi <= 1).all()


def test_zero_weights_never_kept_and_the_special_fanouts():
    weights = torch.rand(20, generator=torch.Generator().manual_seed(2)) + 0.1
    weights[[3, 15]] = 0.0
    g = two_stars(weights)
    positive = set((weights > 0).nonzero().flatten().tolist())
    for _ in range(50):
        sub, _ = sampling.sample_labors(g, torch.tensor([0, 1]), 2, prob="w")
        assert not {3, 15} & set(sub.edata[udgl.EID].tolist())
    assert set(sampling.sample_labors(g, torch.tensor([0, 1]), -1, prob="w")[0].edata[udgl.EID].tolist()) == positive
    assert set(sampling.sample_labors(g, torch.tensor([0, 1]), 9, prob="w")[0].edata[udgl.EID].tolist()) == positive
    assert sampling.sample_labors(g, torch.tensor([0, 1]), 0)[0].num_edges() == 0
    assert sampling.sample_labors(g, torch.tensor([0, 1]), 10)[0].num_edges() == 20


def test_importances_average_one_per_seed_and_follow_the_kept_edges():
    weights = torch.rand(20, generator=torch.Generator().manual_seed(3)) + 0.05
    g = two_stars(weights)
    torch.manual_seed(4)
    for _ in range(20):
        sub, (importance,) = sampling.sample_labors(g, torch.tensor([0, 1]), 3, prob="w")
        _, dst = sub.edges()
        assert importance.shape == (sub.num_edges(),) and (importance > 0).all()
        for seed in (0, 1):
            mine = importance[dst == seed]
            if mine.numel():
                torch.testing.assert_close(mine.mean(), torch.tensor(1.0, dtype=torch.float64))


def test_a_random_seed_repeats_the_sample():
    g = two_stars()
    seed = torch.tensor([1234])
    first = sampling.sample_labors(g, torch.tensor([0, 1]), 3, random_seed=seed)[0].edata[udgl.EID]
    for _ in range(3):
        torch.rand(5)   # torch's stream moves on; the seeded variates do not
        assert torch.equal(sampling.sample_labors(g, torch.tensor([0, 1]), 3, random_seed=seed)[0].edata[udgl.EID],
                           first)
    others = {tuple(sampling.sample_labors(g, torch.tensor([0, 1]), 3, random_seed=torch.tensor([s]))[0]
                    .edata[udgl.EID].tolist()) for s in range(10)}
    assert len(others) > 1


def test_excluded_edges_out_edges_and_heterographs():
    g = two_stars()
    for _ in range(20):
        sub, _ = sampling.sample_labors(g, torch.tensor([0, 1]), 5, exclude_edges=torch.tensor([0, 1, 2]))
        assert not {0, 1, 2} & set(sub.edata[udgl.EID].tolist())
    reverse = udgl.graph((g.edges()[1], g.edges()[0]), num_nodes=12)
    sub, _ = sampling.sample_labors(reverse, torch.tensor([0]), -1, edge_dir="out")
    assert sorted(sub.edata[udgl.EID].tolist()) == list(range(10))
    hg = udgl.heterograph({("user", "follows", "user"): ([0, 1, 2], [1, 2, 0]),
                           ("game", "played-by", "user"): ([0, 1, 1], [0, 0, 2])})
    sub, importances = sampling.sample_labors(hg, {"user": torch.tensor([0, 2])},
                                              {"follows": -1, "played-by": 0})
    assert sub.num_edges("follows") == 2 and sub.num_edges("played-by") == 0 and len(importances) == 2
