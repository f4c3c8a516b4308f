"""dgl.sampling's walks (unigraph/dgl/sampling.py): random_walk, node2vec_random_walk and
pack_traces. The draws are torch's, so they are compared with DGL in distribution: the empirical
frequency of every edge taken from each node (many walkers, fixed seed) against the exact
probabilities (uniform, edge weights with parallel edges and zero weights, node2vec's p/q bias,
metapaths), with a chi-square bound; restart and dead ends; and exactly where nothing is random
(shapes, dtypes, node types, pack_traces, errors) against DGL itself."""
from __future__ import annotations

import math

import pytest
import torch

import unigraph.dgl as udgl
from unigraph.dgl.base import DGLError

sampling = udgl.sampling

# 0 has parallel edges (0 -> 1 twice), a self-loop and an edge of weight 0; 4 is a dead end
SRC = torch.tensor([0, 0, 0, 0, 0, 1, 1, 2, 3, 3, 3, 2])
DST = torch.tensor([1, 1, 2, 0, 3, 0, 2, 3, 0, 1, 2, 4])
WEIGHT = torch.tensor([1.0, 2.0, 3.0, 0.5, 0.0, 1.0, 4.0, 2.0, 1.0, 1.0, 2.0, 1.0], dtype=torch.float64)
WALKERS = 4000   # per start node


def _graph(lib=udgl, idtype=torch.int64):
    g = lib.graph((SRC, DST), num_nodes=5, idtype=idtype)
    g.edata["w"] = WEIGHT
    return g


def _hetero(lib=udgl, idtype=torch.int64):
    g = lib.heterograph({
        ("user", "follow", "user"): ([0, 1, 1, 2, 3], [1, 2, 3, 0, 0]),
        ("user", "view", "item"): ([0, 0, 1, 2, 3, 3, 0], [0, 1, 1, 2, 2, 1, 1]),
        ("item", "viewed-by", "user"): ([0, 1, 1, 2, 2, 1], [0, 0, 1, 2, 3, 3]),
    }, idtype=idtype)
    g.edges["view"].data["w"] = torch.tensor([1.0, 3.0, 1.0, 1.0, 2.0, 1.0, 6.0])
    return g


def _assert_frequencies(groups: torch.Tensor, eids: torch.Tensor, expected: dict) -> None:
    """For each group ``k`` of ``expected`` (``{k: {eid: probability}}``), the edges taken by the
    walkers of that group follow the probabilities: edges of probability 0 never, the others
    within a chi-square bound (about six standard deviations; the seed is fixed)."""
    for group, probs in expected.items():
        taken = eids[groups == group]
        assert taken.numel() > 200, f"too few walkers in group {group}"
        counts = torch.bincount(taken, minlength=max(probs) + 1).double()
        assert counts.sum() == sum(counts[e] for e in probs), f"group {group} took an edge it does not have"
        chi2 = dof = 0.0
        for e, p in probs.items():
            if p == 0:
                assert counts[e] == 0, f"group {group} took edge {e} of probability 0"
                continue
            want = p * taken.numel()
            chi2, dof = chi2 + float((counts[e] - want) ** 2 / want), dof + 1
        dof -= 1
        assert chi2 <= dof + 6 * math.sqrt(2 * max(dof, 1)) + 6, (group, chi2, dof, counts, probs)


def _out_probs(src: torch.Tensor, weight: torch.Tensor) -> dict:
    """``{node: {eid: weight / total}}`` for every node with out-edges of positive total weight."""
    out = {}
    for node in src.unique().tolist():
        eids = (src == node).nonzero().flatten().tolist()
        total = float(weight[eids].sum())
        if total > 0:
            out[node] = {e: float(weight[e]) / total for e in eids}
    return out


def _walk_steps(traces, eids):
    """Every step of every walk that took an edge: ``(from node, eid)``."""
    taken = eids >= 0
    return traces[:, :-1][taken].long(), eids[taken].long()


def _check_edges(g, traces, eids, metapath):
    """Each step goes along an edge of its relation, ``eids`` names it, and after a -1 all is -1."""
    for t, etype in enumerate(metapath):
        u, v, e = traces[:, t].long(), traces[:, t + 1].long(), eids[:, t].long()
        assert torch.equal(v < 0, e < 0)
        assert not (v[u < 0] >= 0).any(), "a walk went on after -1"
        src, dst = g.find_edges(e[e >= 0], etype=etype)
        assert torch.equal(src.long(), u[e >= 0]) and torch.equal(dst.long(), v[e >= 0])


# ---------------------------------------------------------------------- distributions
@pytest.mark.parametrize("prob", [None, "w"])
def test_random_walk_transition_frequencies(prob):
    torch.manual_seed(0)
    g = _graph()
    seeds = torch.arange(4).repeat_interleave(WALKERS)
    traces, eids, types = sampling.random_walk(g, seeds, length=3, prob=prob, return_eids=True)
    _check_edges(g, traces, eids, ["_E"] * 3)
    weight = WEIGHT if prob else torch.ones_like(WEIGHT)
    _assert_frequencies(*_walk_steps(traces, eids), _out_probs(SRC, weight))
    assert (traces[:, 0] == seeds).all() and torch.equal(types, torch.zeros(4, dtype=torch.int64))


def test_weighted_walk_zero_weight_row_is_a_dead_end():
    g = _graph()
    g.edata["z"] = torch.where(SRC == 1, 0.0, WEIGHT)   # node 1's edges all weigh 0
    traces, eids, _ = sampling.random_walk(g, torch.tensor([1, 1, 3]), length=2, prob="z", return_eids=True)
    assert (traces[:2, 1:] == -1).all() and (eids[:2] == -1).all() and (traces[2] >= 0).all()


def test_metapath_transition_frequencies():
    torch.manual_seed(1)
    g = _hetero()
    metapath = ["view", "viewed-by", "follow"]
    seeds = torch.arange(4).repeat_interleave(WALKERS)
    traces, eids, types = sampling.random_walk(g, seeds, metapath=metapath, prob="w", return_eids=True)
    _check_edges(g, traces, eids, metapath)
    view_src, _ = g.edges(etype="view")
    weighted = _out_probs(view_src, g.edges["view"].data["w"])       # "view" by its weights
    _assert_frequencies(traces[:, 0].long(), eids[:, 0].long(), weighted)
    by_src, _ = g.edges(etype="viewed-by")                            # the others uniformly
    _assert_frequencies(traces[:, 1].long(), eids[:, 1].long(), _out_probs(by_src, torch.ones(6)))
    follow_src, _ = g.edges(etype="follow")
    _assert_frequencies(traces[:, 2].long(), eids[:, 2].long(), _out_probs(follow_src, torch.ones(5)))


def _node2vec_probs(g, weight, p, q) -> dict:
    """``{(previous, current): {eid: probability}}`` of node2vec's second step, by its definition."""
    src, dst = g.edges()
    out = {}
    for prev, cur in zip(src.tolist(), dst.tolist()):
        eids = (src == cur).nonzero().flatten().tolist()
        bias = [1 / p if dst[e] == prev else 1.0 if g.has_edges_between(dst[e], prev) else 1 / q for e in eids]
        total = sum(float(weight[e]) * b for e, b in zip(eids, bias))
        if total > 0:
            out[(prev, cur)] = {e: float(weight[e]) * b / total for e, b in zip(eids, bias)}
    return out


@pytest.mark.parametrize("p, q, prob", [(0.5, 2.0, None), (3.0, 0.25, "w")])
def test_node2vec_transition_frequencies(p, q, prob):
    torch.manual_seed(2)
    g = _graph()
    seeds = torch.arange(4).repeat_interleave(2 * WALKERS)
    traces, eids = sampling.node2vec_random_walk(g, seeds, p, q, 2, prob=prob, return_eids=True)
    _check_edges(g, traces, eids, ["_E"] * 2)
    weight = WEIGHT if prob else torch.ones_like(WEIGHT)
    _assert_frequencies(traces[:, 0], eids[:, 0], _out_probs(SRC, weight))   # first step: no bias
    expected = _node2vec_probs(g, weight, p, q)
    pair = traces[:, 0] * 5 + traces[:, 1]
    groups = {prev * 5 + cur: probs for (prev, cur), probs in expected.items() if (pair == prev * 5 + cur).sum() > 500}
    assert len(groups) >= 6
    _assert_frequencies(pair, eids[:, 1], groups)


# ---------------------------------------------------------------------- restart, dead ends
def test_restart_probability_per_step():
    torch.manual_seed(3)
    cycle = udgl.graph(([0, 1, 2], [1, 2, 0]))   # no dead end: only restarts end a walk
    n, r = 20000, 0.3
    traces, _ = sampling.random_walk(cycle, torch.zeros(n, dtype=torch.long), length=5, restart_prob=r)
    alive = (traces >= 0).double().mean(0)
    for t in range(6):
        want = (1 - r) ** t
        assert abs(float(alive[t]) - want) <= 5 * math.sqrt(want * (1 - want) / n) + 1e-12
    ended = traces < 0
    assert (ended[:, :-1] <= ended[:, 1:]).all(), "-1 is followed by -1 only"

    traces, eids, _ = sampling.random_walk(cycle, torch.arange(3).repeat(100), length=4, return_eids=True,
                                           restart_prob=torch.tensor([0.0, 0.0, 1.0, 0.0]))
    assert (traces[:, :3] >= 0).all() and (traces[:, 3:] == -1).all() and (eids[:, 2:] == -1).all()
    traces, _ = sampling.random_walk(cycle, torch.zeros(n, dtype=torch.long), length=2,
                                     restart_prob=torch.tensor([0.5, 0.0], dtype=torch.float64))
    assert abs(float((traces[:, 1] >= 0).double().mean()) - 0.5) < 5 * math.sqrt(0.25 / n)
    assert torch.equal(traces[:, 1] >= 0, traces[:, 2] >= 0)


def test_dead_ends_pad_with_minus_one_as_dgl(dgl):
    path = ([0, 1], [1, 2])
    for lib in (udgl, dgl):
        g = lib.graph(path, num_nodes=4)
        want = torch.tensor([[0, 1, 2, -1, -1], [1, 2, -1, -1, -1], [2, -1, -1, -1, -1], [3, -1, -1, -1, -1]])
        want_eids = torch.tensor([[0, 1, -1, -1], [1, -1, -1, -1], [-1, -1, -1, -1], [-1, -1, -1, -1]])
        traces, eids, _ = lib.sampling.random_walk(g, torch.arange(4), length=4, return_eids=True)
        assert torch.equal(traces, want) and torch.equal(eids, want_eids)
        traces, eids = lib.sampling.node2vec_random_walk(g, torch.arange(4), 1.0, 1.0, 4, return_eids=True)
        assert torch.equal(traces, want) and torch.equal(eids, want_eids)


# ---------------------------------------------------------------------- exact: shapes, dtypes, types
@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_shapes_dtypes_and_types_as_dgl(dgl, idtype):
    metapath = ["follow", "view", "viewed-by"] * 2
    for call in (
        lambda lib, g: lib.sampling.random_walk(g, torch.tensor([0, 1, 2, 0], dtype=idtype), metapath=metapath),
        lambda lib, g: lib.sampling.random_walk(g, torch.tensor([0, 3], dtype=idtype), metapath=metapath[1:3],
                                                prob="w", return_eids=True),
        lambda lib, g: lib.sampling.random_walk(g, torch.tensor([1, 2], dtype=idtype), metapath=metapath,
                                                restart_prob=torch.tensor([0, 0.5, 0, 0, 0.5, 0]), return_eids=True),
    ):
        ours, theirs = call(udgl, _hetero(udgl, idtype)), call(dgl, _hetero(dgl, idtype))
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert a.shape == b.shape and a.dtype == b.dtype
        assert torch.equal(ours[-1], theirs[-1])   # node type ids
        assert torch.equal(ours[0][:, 0], theirs[0][:, 0])
    for lib in (udgl, dgl):
        g = _graph(lib, idtype)
        traces, eids, types = lib.sampling.random_walk(g, torch.tensor([0, 1], dtype=idtype), length=3,
                                                       return_eids=True)
        assert traces.shape == (2, 4) and eids.shape == (2, 3) and types.shape == (4,)
        assert traces.dtype == eids.dtype == types.dtype == idtype
        traces, eids = lib.sampling.node2vec_random_walk(g, torch.tensor([0, 1], dtype=idtype), 1, 2, 3,
                                                         return_eids=True)
        assert traces.shape == (2, 4) and eids.shape == (2, 3) and traces.dtype == eids.dtype == idtype
        assert lib.sampling.node2vec_random_walk(g, torch.tensor([0], dtype=idtype), 1, 2, 3).shape == (1, 4)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_pack_traces_equals_dgl(dgl, dtype):
    traces = torch.tensor([[0, 1, -1, -1, -1, -1, -1], [0, 1, 1, 3, 0, 0, 0], [-1, -1, -1, -1, -1, -1, -1],
                           [2, -1, -1, -1, -1, -1, -1]], dtype=dtype)
    types = torch.tensor([0, 0, 1, 0, 0, 1, 0], dtype=dtype)
    for a, b in zip(sampling.pack_traces(traces, types), dgl.sampling.pack_traces(traces, types)):
        assert a.dtype == b.dtype and torch.equal(a, b)
    g = _hetero()
    traces, types = sampling.random_walk(g, torch.arange(4), metapath=["follow", "view", "viewed-by"],
                                         restart_prob=0.4)
    vids, vtypes, lengths, offsets = sampling.pack_traces(traces, types)
    assert torch.equal(vids, traces[traces >= 0]) and torch.equal(lengths, (traces >= 0).sum(1))
    assert torch.equal(vtypes, types.expand_as(traces)[traces >= 0])
    assert torch.equal(offsets, torch.cumsum(lengths, 0) - lengths)


def test_seeding_repeats_the_walks():
    g = _graph()
    walks = []
    for seed_with in (torch.manual_seed, udgl.seed, torch.manual_seed):
        seed_with(7)
        walks.append((sampling.random_walk(g, torch.arange(4).repeat(50), length=5, prob="w")[0],
                      sampling.node2vec_random_walk(g, torch.arange(4).repeat(50), 0.5, 2.0, 5)))
    for a, b in zip(walks[0], walks[1]):
        assert torch.equal(a, b)
    assert torch.equal(walks[0][0], walks[2][0])
    assert not torch.equal(walks[0][0], sampling.random_walk(g, torch.arange(4).repeat(50), length=5, prob="w")[0])


def test_length_zero_gives_the_seeds():
    traces, eids, types = sampling.random_walk(_graph(), [3, 1], length=0, return_eids=True)
    assert torch.equal(traces, torch.tensor([[3], [1]])) and eids.shape == (2, 0)
    assert torch.equal(types, torch.tensor([0]))


# ---------------------------------------------------------------------- errors
def test_errors():
    g, hg = _graph(), _hetero()
    g.edata["two_d"] = WEIGHT[:, None]
    g.edata["ints"] = torch.ones(12, dtype=torch.int64)
    g.edata["negative"] = -WEIGHT
    bad = [
        (DGLError, "outside", lambda: sampling.random_walk(g, [0, 5], length=2)),
        (DGLError, "metapath", lambda: sampling.random_walk(hg, [0], length=2)),
        (ValueError, "metapath or length", lambda: sampling.random_walk(g, [0])),
        (ValueError, "not both", lambda: sampling.random_walk(hg, [0], metapath=["follow"], length=2)),
        (DGLError, "non-empty", lambda: sampling.random_walk(hg, [0], metapath=[])),
        (DGLError, "ends at", lambda: sampling.random_walk(hg, [0], metapath=["follow", "viewed-by"])),
        (DGLError, "likes", lambda: sampling.random_walk(hg, [0], metapath=["likes"])),
        (DGLError, "1-D floating", lambda: sampling.random_walk(g, [0], length=2, prob="two_d")),
        (DGLError, "1-D floating", lambda: sampling.random_walk(g, [0], length=2, prob="ints")),
        (DGLError, "non-negative", lambda: sampling.random_walk(g, [0], length=2, prob="negative")),
        (DGLError, "any relation", lambda: sampling.random_walk(g, [0], length=2, prob="missing")),
        (TypeError, "float or a tensor", lambda: sampling.random_walk(g, [0], length=2, restart_prob=1)),
        (DGLError, r"\[0, 1\)", lambda: sampling.random_walk(g, [0], length=2, restart_prob=1.0)),
        (DGLError, "one entry per step", lambda: sampling.random_walk(g, [0], length=2,
                                                                      restart_prob=torch.tensor([0.5]))),
        (DGLError, r"\[0, 1\]", lambda: sampling.random_walk(g, [0], length=2, restart_prob=torch.tensor([0.5, 2.0]))),
        (DGLError, "homogeneous", lambda: sampling.node2vec_random_walk(hg, [0], 1, 1, 2)),
        (ValueError, "p must be", lambda: sampling.node2vec_random_walk(g, [0], 0, 1, 2)),
        (ValueError, "q must be", lambda: sampling.node2vec_random_walk(g, [0], 1, -1.0, 2)),
        (ValueError, "walk_length", lambda: sampling.node2vec_random_walk(g, [0], 1, 1, -1)),
        (DGLError, "not an edge feature", lambda: sampling.node2vec_random_walk(g, [0], 1, 1, 2, prob="missing")),
        (TypeError, "integers", lambda: sampling.random_walk(g, torch.tensor([0.0]), length=2)),
        (DGLError, "2-D integer", lambda: sampling.pack_traces(torch.zeros(3, dtype=torch.long),
                                                                torch.zeros(3, dtype=torch.long))),
        (DGLError, "entries for traces", lambda: sampling.pack_traces(torch.zeros(2, 3, dtype=torch.long),
                                                                       torch.zeros(2, dtype=torch.long))),
        (NotImplementedError, "sample_neighbors", lambda: sampling.sample_neighbors(g, [0], 2)),
        (AttributeError, "no attribute", lambda: sampling.not_a_dgl_function),
    ]
    for error, match, call in bad:
        with pytest.raises(error, match=match):
            call()
