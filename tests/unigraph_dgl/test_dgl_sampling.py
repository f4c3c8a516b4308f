"""dgl.sampling (unigraph/dgl/sampling.py and the modules it re-exports). The draws are torch's, so
they are compared with DGL in distribution, and exactly where nothing is random.

Walks (random_walk, node2vec_random_walk, pack_traces): the empirical frequency of every edge
taken from each node (many walkers, fixed seed) against the exact probabilities (uniform, edge
weights with parallel edges and zero weights, node2vec's p/q bias, metapaths), with a chi-square
bound; restart and dead ends; shapes, dtypes, node types, pack_traces and errors against DGL.

Neighbour samplers (unigraph/dgl/neighbor_sampling.py, negative_sampling.py,
pinsage_sampling.py): the frequency of every sampled edge set per seed against the exact
successive-sampling probabilities (uniform, weights, masks; in and out edges; biased by tag; per
edge type), draws with replacement against w / sum(w), hetero relations by their own weights;
against DGL exactly: fanout -1, edge counts per seed, graph types / features / id dtypes,
select_topk's edges in order, sort_csr/csc_by_tag's offsets, fused blocks' edges and ids,
deterministic PinSAGE neighbourhoods, DGL's own negative-sampling scenario and redundancy; the
negative pairs' uniformity; the refused inputs."""
from __future__ import annotations

import collections
import itertools
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
        (NotImplementedError, "LABOR-i", lambda: sampling.sample_labors(g, [0], 2, importance_sampling=1)),
        (NotImplementedError, "seed2_contribution", lambda: sampling.sample_labors(g, [0], 2, seed2_contribution=0.5)),
        (DGLError, "random_seed", lambda: sampling.sample_labors(g, [0], 2, random_seed=1.5)),
        (AttributeError, "no attribute", lambda: sampling.not_a_dgl_function),
    ]
    for error, match, call in bad:
        with pytest.raises(error, match=match):
            call()


# ====================================================================== neighbour samplers
# In-edges of 0: eids 0..5 (0 -> 0 twice from 1: parallel edges; eid 4 weighs 0, eid 5 is a
# self-loop); of 1: eids 6, 7; of 2: eid 8; node 3 has none. "w" weights, "m" a bool mask.
N_SRC = torch.tensor([1, 1, 2, 3, 2, 0, 0, 2, 1])
N_DST = torch.tensor([0, 0, 0, 0, 0, 0, 1, 1, 2])
N_W = torch.tensor([1.0, 2.0, 3.0, 0.5, 0.0, 1.5, 2.0, 1.0, 4.0], dtype=torch.float64)
N_MASK = torch.tensor([True, True, False, True, True, True, True, False, True])
REPEATS = 3000   # occurrences of each seed in one call (each is sampled independently)


def _ngraph(lib=udgl, idtype=torch.int64, reverse=False):
    g = lib.graph((N_DST, N_SRC) if reverse else (N_SRC, N_DST), num_nodes=4, idtype=idtype)
    g.edata["w"] = N_W
    g.edata["m"] = N_MASK
    g.ndata["h"] = torch.arange(8.0).view(4, 2)
    return g


def _inclusion(weights: dict, k: int) -> dict:
    """``{sorted tuple of eids: probability}`` of successive sampling of ``k`` of ``weights``
    (each draw picks a remaining edge with probability weight / remaining total), by enumeration."""
    out = {}
    for order in itertools.permutations([e for e, w in weights.items() if w > 0], k):
        p, left = 1.0, sum(weights.values())
        for e in order:
            p, left = p * weights[e] / left, left - weights[e]
        key = tuple(sorted(order))
        out[key] = out.get(key, 0.0) + p
    return out


def _assert_distribution(observed: list, probs: dict, what) -> None:
    """The outcomes ``observed`` follow ``probs`` (chi-square within about six standard
    deviations; the seed is fixed); outcomes of probability 0 never occur."""
    counts = collections.Counter(observed)
    assert set(counts) <= set(probs), (what, set(counts) - set(probs))
    n, chi2 = len(observed), 0.0
    for outcome, p in probs.items():
        chi2 += (counts.get(outcome, 0) - p * n) ** 2 / (p * n)
    dof = max(len(probs) - 1, 1)
    assert chi2 <= dof + 6 * math.sqrt(2 * dof) + 6, (what, chi2, counts, probs)


def _in_weights(node: int, weight: torch.Tensor) -> dict:
    return {e: float(weight[e]) for e in (N_DST == node).nonzero().flatten().tolist()}


@pytest.mark.parametrize("edge_dir", ["in", "out"])
@pytest.mark.parametrize("prob", [None, "w", "m"])
def test_sample_neighbors_without_replacement_frequencies(prob, edge_dir):
    torch.manual_seed(11)
    g, k = _ngraph(reverse=edge_dir == "out"), 2
    weight = {None: torch.ones(9, dtype=torch.float64), "w": N_W, "m": N_MASK.double()}[prob]
    for node in range(4):
        seeds = torch.full((REPEATS,), node)
        sub = sampling.sample_neighbors(g, seeds, k, edge_dir=edge_dir, prob=prob)
        row_weights = _in_weights(node, weight)
        take = min(k, sum(w > 0 for w in row_weights.values()))
        eids = sub.edata[udgl.EID].long()
        assert eids.numel() == take * REPEATS and sub.num_nodes() == 4
        if take == 0:
            continue
        ends = sub.edges()[1 if edge_dir == "in" else 0]
        assert (ends == node).all()
        picks = [tuple(sorted(p)) for p in eids.view(REPEATS, take).tolist()]
        assert all(len(set(p)) == take for p in picks), "a seed got an edge twice without replacement"
        _assert_distribution(picks, _inclusion(row_weights, take), (prob, edge_dir, node))


@pytest.mark.parametrize("prob", [None, "w", "m"])
def test_sample_neighbors_with_replacement_frequencies(prob):
    torch.manual_seed(12)
    g, k = _ngraph(), 3
    weight = {None: torch.ones(9, dtype=torch.float64), "w": N_W, "m": N_MASK.double()}[prob]
    seeds = torch.arange(4).repeat_interleave(REPEATS)
    sub = sampling.sample_neighbors(g, seeds, k, prob=prob, replace=True)
    eids, dst = sub.edata[udgl.EID].long(), sub.edges()[1].long()
    assert torch.equal(dst, torch.sort(dst).values), "the edges come seed after seed"
    for node in range(4):
        row_weights = _in_weights(node, weight)
        total = sum(row_weights.values())
        taken = eids[dst == node].tolist()
        assert len(taken) == (k * REPEATS if total > 0 else 0)
        if total > 0:
            _assert_distribution(taken, {e: w / total for e, w in row_weights.items() if w > 0}, (prob, node))


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("prob", [None, "w", "m"])
def test_sample_neighbors_structure_as_dgl(dgl, prob, replace):
    """Everything that is not random equals DGL's: fanout -1 (all candidates), the counts per
    seed, the graph's class, types, node count, features and id dtype."""
    for idtype in (torch.int32, torch.int64):
        ours, theirs = _ngraph(udgl, idtype), _ngraph(dgl, idtype)
        seeds = torch.tensor([0, 2, 1, 0], dtype=idtype)
        for fanout in (-1, 1, 2, 5):
            a = sampling.sample_neighbors(ours, seeds, fanout, prob=prob, replace=replace)
            b = dgl.sampling.sample_neighbors(theirs, seeds, fanout, prob=prob, replace=replace)
            assert a.num_nodes() == b.num_nodes() and a.num_edges() == b.num_edges() and a.idtype == b.idtype
            assert torch.equal(torch.bincount(a.edges()[1].long(), minlength=4),
                               torch.bincount(b.edges()[1].long(), minlength=4))
            assert a.edata[udgl.EID].dtype == idtype
            assert set(a.edata.keys()) == set(b.edata.keys()) and set(a.ndata.keys()) == set(b.ndata.keys())
            assert torch.equal(a.ndata["h"], b.ndata["h"]) and torch.equal(a.edata["w"], N_W[a.edata[udgl.EID].long()])
            if fanout == -1:
                assert torch.equal(torch.sort(a.edata[udgl.EID]).values, torch.sort(b.edata[udgl.EID]).values)
        a = sampling.sample_neighbors(ours, seeds, 2, copy_ndata=False, copy_edata=False)
        b = dgl.sampling.sample_neighbors(theirs, seeds, 2, copy_ndata=False, copy_edata=False)
        assert set(a.ndata.keys()) == set(b.ndata.keys()) == set() and set(a.edata.keys()) == set(b.edata.keys())


def _hetero_sampling(lib):
    g = lib.heterograph({
        ("user", "follow", "user"): ([1, 2, 3, 0, 2, 3, 0], [0, 0, 0, 1, 1, 1, 2]),
        ("user", "play", "game"): ([0, 0, 1, 3], [0, 1, 2, 2]),
        ("game", "liked-by", "user"): ([2, 2, 2, 1, 1, 0], [0, 1, 2, 0, 3, 0]),
        ("user", "flips", "coin"): ([0, 1, 2, 3], [0, 0, 0, 0]),
    })
    g.edges["follow"].data["p"] = torch.tensor([0.5, 1.5, 0.0, 0.5, 0.5, 0.0, 1.0])
    g.edges["play"].data["p"] = torch.tensor([0.8, 0.5, 0.5, 0.5])
    g.nodes["user"].data["h"] = torch.arange(4.0)
    return g


def test_hetero_sample_neighbors_as_dgl_and_frequencies(dgl):
    ours, theirs = _hetero_sampling(udgl), _hetero_sampling(dgl)
    nodes = {"user": [0, 1], "game": [0, 2], "coin": [0]}
    for fanout in (-1, 1, {"follow": 1, "play": 2, "liked-by": 0, "flips": -1}):
        for replace in (False, True):
            a = sampling.sample_neighbors(ours, nodes, fanout, prob="p", replace=replace)
            b = dgl.sampling.sample_neighbors(theirs, nodes, fanout, prob="p", replace=replace)
            assert a.ntypes == b.ntypes and a.canonical_etypes == b.canonical_etypes
            for cet in b.canonical_etypes:
                assert a.num_edges(cet) == b.num_edges(cet), (fanout, replace, cet)
                ids = a.edges[cet].data[udgl.EID].long()
                assert torch.equal(torch.stack(ours.find_edges(ids, etype=cet)), torch.stack(a.edges(etype=cet)))
                if fanout == -1:
                    assert torch.equal(torch.sort(ids).values, torch.sort(b.edges[cet].data[dgl.EID].long()).values)
            assert torch.equal(a.nodes["user"].data["h"], ours.nodes["user"].data["h"])
    torch.manual_seed(13)   # 'follow' by its weights, 'liked-by' (no 'p') uniformly
    sub = sampling.sample_neighbors(ours, {"user": torch.zeros(REPEATS, dtype=torch.long)}, 1, prob="p")
    follow = sub.edges["follow"].data[udgl.EID].tolist()
    _assert_distribution(follow, {0: 0.25, 1: 0.75}, "follow")
    _assert_distribution(sub.edges["liked-by"].data[udgl.EID].tolist(), {0: 1 / 3, 3: 1 / 3, 5: 1 / 3}, "liked-by")


def test_exclude_edges_and_output_device():
    g = _ngraph()
    for replace in (False, True):
        sub = sampling.sample_neighbors(g, [0, 1, 2], -1, replace=replace, exclude_edges=torch.tensor([0, 6, 8]))
        assert sorted(sub.edata[udgl.EID].tolist()) == [1, 2, 3, 4, 5, 7]
    sub = sampling.sample_neighbors(g, [0], 5, exclude_edges=[1, 2], output_device="cpu")
    assert sorted(sub.edata[udgl.EID].tolist()) == [0, 3, 4, 5]
    hg = _hetero_sampling(udgl)
    sub = sampling.sample_neighbors(hg, {"user": [0, 1, 2]}, -1, exclude_edges={"follow": [0, 1, 3]})
    assert sorted(sub.edges["follow"].data[udgl.EID].tolist()) == [2, 4, 5, 6]


def test_empty_and_zero_degree_seeds(dgl):
    for lib in (udgl, dgl):
        g = lib.graph(([], []), num_nodes=5)
        for edge_dir in ("in", "out"):
            for replace in (False, True):
                assert lib.sampling.sample_neighbors(g, [1, 2], 2, edge_dir=edge_dir, replace=replace).num_edges() == 0
                assert lib.sampling.sample_neighbors_fused(g, torch.tensor([1, 2]), 2, edge_dir=edge_dir,
                                                           replace=replace).num_edges() == 0
    assert sampling.sample_neighbors(_ngraph(), [], 2).num_edges() == 0
    assert sampling.sample_neighbors(_ngraph(), [3, 0], 0).num_edges() == 0


@pytest.mark.parametrize("edge_dir", ["in", "out"])
def test_sample_neighbors_fused_block_as_dgl(dgl, edge_dir):
    ours, theirs = _ngraph(reverse=edge_dir == "out"), _ngraph(dgl, reverse=edge_dir == "out")
    a = sampling.sample_neighbors_fused(ours, torch.tensor([0, 2]), -1, edge_dir=edge_dir)
    b = dgl.sampling.sample_neighbors_fused(theirs, torch.tensor([0, 2]), -1, edge_dir=edge_dir)
    assert a.is_block and a.num_src_nodes() == b.num_src_nodes() and a.num_edges() == b.num_edges()
    assert torch.equal(a.dstdata[udgl.NID][:2], torch.tensor([0, 2]))
    assert torch.equal(torch.sort(a.srcdata[udgl.NID]).values, torch.sort(b.srcdata[dgl.NID]).values)
    # DGL's out-edge block keeps only the seeds as destinations; here they are all the nodes
    assert a.num_dst_nodes() == (b.num_dst_nodes() if edge_dir == "in" else b.num_src_nodes())

    def global_edges(block, nid):
        u, v = block.edges()
        u, v = (block.srcdata[nid][u], block.dstdata[nid][v]) if edge_dir == "in" else \
            (block.dstdata[nid][u], block.srcdata[nid][v])
        return sorted(zip(u.tolist(), v.tolist(), block.edata[nid].tolist()))

    assert global_edges(a, udgl.NID) == global_edges(b, dgl.NID)
    assert torch.equal(a.srcdata["h"], ours.ndata["h"][a.srcdata[udgl.NID]])
    assert torch.equal(a.edata["w"], N_W[a.edata[udgl.EID]])
    hetero = sampling.sample_neighbors_fused(_hetero_sampling(udgl), {"user": [0, 1], "game": [0]}, 2)
    assert hetero.srctypes == ["coin", "game", "user"] and hetero.num_edges("follow") == 4
    assert torch.equal(hetero.dstnodes["user"].data[udgl.NID], torch.tensor([0, 1]))


def _topk_graphs(lib, reverse):
    src, dst = torch.tensor([1, 2, 3, 0, 2, 3, 0, 3]), torch.tensor([0, 0, 0, 1, 1, 1, 2, 2])
    g = lib.graph((dst, src) if reverse else (src, dst))
    g.edata["weight"] = torch.tensor([0.5, 0.3, 0.1, -5.0, 22.0, 0.2, 1.0, 7.0])
    hg = lib.heterograph({("user", "follow", "user"): (src, dst),
                          ("user", "play", "game"): ([0, 0, 1, 3], [0, 1, 2, 2]),
                          ("game", "liked-by", "user"): ([2, 2, 2, 1, 1, 0], [0, 1, 2, 0, 3, 0])})
    hg.edges["follow"].data["weight"] = g.edata["weight"]
    hg.edges["play"].data["weight"] = torch.tensor([8, 5, 4, 6])          # an integer weight
    hg.edges["liked-by"].data["weight"] = torch.tensor([0.3, 0.5, 0.2, 0.4, 0.1, 0.6], dtype=torch.float64)
    return g, hg


@pytest.mark.parametrize("edge_dir", ["in", "out"])
def test_select_topk_equals_dgl(dgl, edge_dir):
    (g, hg), (dg, dhg) = _topk_graphs(udgl, edge_dir == "out"), _topk_graphs(dgl, edge_dir == "out")
    for k in (-1, 1, 2, 5):
        for ascending in (False, True):
            for nodes in (None, [2, 0], torch.tensor([1, 1])):
                a = sampling.select_topk(g, k, "weight", nodes, edge_dir=edge_dir, ascending=ascending)
                b = dgl.sampling.select_topk(dg, k, "weight", nodes, edge_dir=edge_dir, ascending=ascending)
                for x, y in zip(a.edges() + (a.edata[udgl.EID], a.edata["weight"]),
                                b.edges() + (b.edata[dgl.EID], b.edata["weight"])):
                    assert torch.equal(x, y), (k, ascending, nodes)
    kinds = {"follow": 1, "play": 2, "liked-by": -1}
    for k, nodes in ((2, {"user": [0, 1], "game": [0, 2]}), (kinds, None)):
        a = sampling.select_topk(hg, k, "weight", nodes, edge_dir=edge_dir)
        b = dgl.sampling.select_topk(dhg, k, "weight", nodes, edge_dir=edge_dir)
        for cet in b.canonical_etypes:
            assert torch.equal(a.edges[cet].data[udgl.EID], b.edges[cet].data[dgl.EID]), cet


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
def test_sort_by_tag_offsets_equal_dgl(dgl, idtype):
    src, dst = torch.tensor([0, 0, 0, 1, 1, 1, 2, 3, 3]), torch.tensor([1, 2, 3, 0, 2, 3, 0, 0, 3])
    node_tag, edge_tag = torch.tensor([1, 0, 2, 0]), torch.tensor([1, 0, 1, 0, 2, 0, 0, 1, 3])
    for lib_sort, dgl_sort in ((udgl_sort_csr, dgl.sort_csr_by_tag), (udgl_sort_csc, dgl.sort_csc_by_tag)):
        for tag, tag_type in ((node_tag, "node"), (edge_tag, "edge")):
            a = lib_sort(udgl.graph((src, dst), idtype=idtype), tag, tag_type=tag_type)
            b = dgl_sort(dgl.graph((src, dst), idtype=idtype), tag, tag_type=tag_type)
            assert torch.equal(a.ndata["_TAG_OFFSET"], b.ndata["_TAG_OFFSET"])
            assert a.ndata["_TAG_OFFSET"].dtype == b.ndata["_TAG_OFFSET"].dtype
            assert torch.equal(torch.stack(a.edges()), torch.stack(b.edges()))   # edge ids unchanged
    bipartite = {("u", "e", "v"): ([0, 1, 1, 2], [1, 0, 2, 1])}
    a = udgl_sort_csr(udgl.heterograph(bipartite), torch.tensor([1, 0, 1]), tag_offset_name="t")
    b = dgl.sort_csr_by_tag(dgl.heterograph(bipartite), torch.tensor([1, 0, 1]), tag_offset_name="t")
    assert torch.equal(a.srcdata["t"], b.srcdata["t"]) and "t" not in a.dstdata


def udgl_sort_csr(*args, **kwargs):
    from unigraph.dgl.neighbor_sampling import sort_csr_by_tag
    return sort_csr_by_tag(*args, **kwargs)


def udgl_sort_csc(*args, **kwargs):
    from unigraph.dgl.neighbor_sampling import sort_csc_by_tag
    return sort_csc_by_tag(*args, **kwargs)


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("edge_dir", ["in", "out"])
def test_sample_neighbors_biased_frequencies(replace, edge_dir):
    torch.manual_seed(14)
    g = _ngraph(reverse=edge_dir == "out")
    tag = torch.tensor([0, 1, 2, 1])     # by the neighbour's tag
    bias = torch.tensor([1.0, 3.0, 0.0])
    sort = udgl_sort_csc if edge_dir == "in" else udgl_sort_csr
    sorted_g = sort(g, tag)
    node, k = 0, 2
    sub = sampling.sample_neighbors_biased(sorted_g, torch.full((REPEATS,), node), k, bias, edge_dir=edge_dir,
                                           replace=replace, copy_edata=False)
    assert list(sub.edata.keys()) == [udgl.EID]
    neighbour = N_SRC   # (with edge_dir='out' the graph is reversed: the neighbour is the destination)
    row_weights = {e: float(bias[tag[neighbour[e]]]) for e in (N_DST == node).nonzero().flatten().tolist()}
    eids = sub.edata[udgl.EID].long()
    if replace:
        total = sum(row_weights.values())
        _assert_distribution(eids.tolist(), {e: w / total for e, w in row_weights.items() if w > 0}, "biased")
    else:
        _assert_distribution([tuple(sorted(p)) for p in eids.view(REPEATS, k).tolist()],
                             _inclusion(row_weights, k), "biased")


def test_sample_neighbors_biased_refuses_an_unknown_or_stale_tag_order():
    """The tag order sort_csc_by_tag made is read, never the edge-id order in its place: offsets
    set by hand, a copy made by .to() and a mutation after the sort are refused (read against the
    edge-id order they would sample the wrong tags, silently); a clone keeps it."""
    g = udgl.graph(([1, 2, 3, 0], [0, 0, 0, 1]), num_nodes=4)
    bias = torch.tensor([0.0, 1.0])
    g.ndata["_TAG_OFFSET"] = torch.tensor([[0, 1, 3], [0, 0, 1], [0, 0, 0], [0, 0, 0]])
    with pytest.raises(DGLError, match="tag order is not known"):
        sampling.sample_neighbors_biased(g, [0], 1, bias)
    sorted_g = udgl_sort_csc(udgl.graph(([1, 2, 3, 0], [0, 0, 0, 1]), num_nodes=4), torch.tensor([1, 0, 1, 0]))
    sub = sampling.sample_neighbors_biased(sorted_g.clone(), torch.zeros(200, dtype=torch.long), 1, bias)
    assert set(sub.edata[udgl.EID].tolist()) == {1}   # the one source tagged 1 (node 2: edge 1)
    with pytest.raises(DGLError, match="lost by a copy"):
        sampling.sample_neighbors_biased(sorted_g.to("cpu"), [0], 1, bias)
    sorted_g.add_edges([2], [1])
    with pytest.raises(DGLError, match="tag order is not known"):
        sampling.sample_neighbors_biased(sorted_g, [0], 1, bias)


def _typed_homogeneous(lib):
    g = lib.heterograph({("v", "major", "u"): ([0, 1, 2, 3, 1, 2], [0, 0, 0, 0, 1, 1]),
                         ("v", "minor", "u"): ([0, 1, 3], [0, 0, 1]),
                         ("u", "back", "v"): ([0, 0, 1], [1, 2, 3])})
    h = lib.to_homogeneous(g)
    offsets = [0] + torch.cumsum(torch.bincount(h.edata[lib.ETYPE], minlength=3), 0).tolist()
    return g, h, offsets


def test_sample_etype_neighbors_per_type(dgl):
    torch.manual_seed(15)
    g, h, offsets = _typed_homogeneous(udgl)
    _, dh, _ = _typed_homogeneous(dgl)
    u_nodes = (h.ndata[udgl.NTYPE] == g.get_ntype_id("u")).nonzero().flatten()
    major = g.get_etype_id("major")
    fanouts = torch.tensor([-1, -1, -1])
    fanouts[major], fanouts[g.get_etype_id("minor")] = 2, 1
    for replace in (False, True):
        a = sampling.sample_etype_neighbors(h, u_nodes, offsets, fanouts, replace=replace)
        b = dgl.sampling.sample_etype_neighbors(dh, u_nodes, offsets, fanouts, replace=replace)
        assert a.num_edges() == b.num_edges() and a.num_nodes() == b.num_nodes()
        pairs_a = collections.Counter(zip(a.edges()[1].tolist(), a.edata[udgl.ETYPE].tolist()))
        pairs_b = collections.Counter(zip(b.edges()[1].tolist(), b.edata[dgl.ETYPE].tolist()))
        assert pairs_a == pairs_b, replace
    # the first u node's 4 'major' in-edges: 2 without replacement by that type's weights
    u0 = int(u_nodes[0])
    lo, hi = offsets[major], offsets[major + 1]
    in_major = [e for e in range(lo, hi) if int(h.edges()[1][e]) == u0]
    prob = [None, None, None]
    prob[major] = torch.tensor([1.0, 2.0, 0.0, 4.0, 1.0, 1.0], dtype=torch.float64)
    sub = sampling.sample_etype_neighbors(h, torch.full((REPEATS,), u0), offsets, fanouts, prob=prob)
    picked = sub.edata[udgl.EID].long()
    picked = picked[(picked >= lo) & (picked < hi)].view(REPEATS, 2)
    weights = {e: float(prob[major][e - lo]) for e in in_major}
    assert len(weights) == 4
    _assert_distribution([tuple(sorted(p)) for p in picked.tolist()], _inclusion(weights, 2), "etype")


def _negative_dgl_scenario(lib, idtype):
    """DGL's own test of global_uniform_negative_sampling (without its numpy-1 warning filter)."""
    g = lib.graph(([], []), num_nodes=1000, idtype=idtype)
    src, dst = lib.sampling.global_uniform_negative_sampling(g, 2000, False, True)
    assert len(src) == len(dst) == 2000 and src.dtype == idtype
    g = lib.graph((torch.randint(0, 20, (300,)), torch.randint(0, 20, (300,))), idtype=idtype)
    src, dst = lib.sampling.global_uniform_negative_sampling(g, 20, False, True)
    assert not g.has_edges_between(src, dst).any()
    src, dst = lib.sampling.global_uniform_negative_sampling(g, 20, False, False)
    assert not g.has_edges_between(src, dst).any()
    assert len(set(zip(src.tolist(), dst.tolist()))) == len(src)
    g = lib.graph(([0], [1]), idtype=idtype)
    src, dst = lib.sampling.global_uniform_negative_sampling(g, 20, True, False, redundancy=10)
    assert len(src) < 2 and (len(src) == 0 or (int(src[0]), int(dst[0])) == (1, 0))
    g = lib.heterograph({("A", "AB", "B"): (torch.randint(0, 20, (300,)), torch.randint(0, 40, (300,))),
                         ("B", "BA", "A"): (torch.randint(0, 40, (200,)), torch.randint(0, 20, (200,)))},
                        idtype=idtype)
    src, dst = lib.sampling.global_uniform_negative_sampling(g, 20, False, etype="AB")
    assert not g.has_edges_between(src, dst, etype="AB").any()


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
@pytest.mark.filterwarnings("ignore:Casting complex values")   # (DGL's own redundancy formula)
def test_global_uniform_negative_sampling_dgl_scenario(dgl, idtype):
    torch.manual_seed(16)
    for lib in (udgl, dgl):
        _negative_dgl_scenario(lib, idtype)


@pytest.mark.filterwarnings("ignore:Casting complex values")   # (DGL's own redundancy formula)
def test_global_uniform_negative_sampling_distribution_and_dgl_rules(dgl):
    torch.manual_seed(17)
    from dgl.sampling.negative import _calc_redundancy
    from unigraph.dgl.negative_sampling import _redundancy
    for args in ((20, 0, 100), (2000, 300, 400), (5, 9, 10), (1, 1, 2)):
        assert abs(_redundancy(*args) - float(_calc_redundancy(*args))) < 1e-9
    g = udgl.graph(([0, 1, 2, 2], [1, 2, 0, 2]), num_nodes=3)
    non_edges = [(u, v) for u in range(3) for v in range(3) if (u, v) not in {(0, 1), (1, 2), (2, 0), (2, 2)}]
    src, dst = sampling.global_uniform_negative_sampling(g, 20000, exclude_self_loops=False, replace=True)
    _assert_distribution(list(zip(src.tolist(), dst.tolist())), {p: 1 / len(non_edges) for p in non_edges}, "neg")
    src, dst = sampling.global_uniform_negative_sampling(g, 50, exclude_self_loops=True)
    pairs = list(zip(src.tolist(), dst.tolist()))
    assert pairs == [(0, 2), (1, 0), (2, 1)], pairs   # unique, sorted, no self-loop
    src, dst = sampling.global_uniform_negative_sampling(g, 2)
    assert list(zip(src.tolist(), dst.tolist())) == [(0, 2), (1, 0)]


# ---------------------------------------------------------------------- PinSAGE neighbourhoods
def test_random_walk_neighbors_exact_where_walks_are_deterministic(dgl):
    """On a cycle (and its item/user form) every walk is fixed: counts, ties (larger id first),
    order and types equal DGL's."""
    cycle = ([0, 1, 2, 3, 4], [1, 2, 3, 4, 0])
    items = {("item", "bought-by", "user"): ([0, 1, 2, 3, 4], [0, 1, 2, 3, 4]),
             ("user", "bought", "item"): ([0, 1, 2, 3, 4], [1, 2, 3, 4, 0])}
    seeds = torch.tensor([0, 3, 3])
    results = []
    for lib in (udgl, dgl):
        g, hg = lib.graph(cycle), lib.heterograph(items)
        samplers = (lib.sampling.RandomWalkNeighborSampler(g, 3, 0.0, 4, 2),
                    lib.sampling.RandomWalkNeighborSampler(g, 2, 0.0, 3, 5, weight_column="c"),
                    lib.sampling.PinSAGESampler(hg, "item", "user", 3, 0.0, 2, 2),
                    lib.sampling.RandomWalkNeighborSampler(hg, 2, 0.0, 1, 3, ["bought-by", "bought"]))
        results.append([s(seeds) for s in samplers])
    for a, b in zip(*results):
        assert a.canonical_etypes == b.canonical_etypes and a.num_nodes() == b.num_nodes()
        assert list(a.edata.keys()) == list(b.edata.keys())
        for x, y in zip(a.edges() + tuple(a.edata[k] for k in a.edata.keys()),
                        b.edges() + tuple(b.edata[k] for k in b.edata.keys())):
            assert x.dtype == y.dtype and torch.equal(x, y)


def test_random_walk_neighbors_frequencies():
    torch.manual_seed(18)
    star = udgl.graph(([0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 0]))   # 0's walks go to 1, 2 or 3 uniformly
    sub = sampling.RandomWalkNeighborSampler(star, 1, 0.0, 1, 5)(torch.zeros(REPEATS, dtype=torch.long))
    assert sub.num_edges() == REPEATS and (sub.edata["weights"] == 1).all()
    _assert_distribution(sub.edges()[0].tolist(), {1: 1 / 3, 2: 1 / 3, 3: 1 / 3}, "visits")
    triangle = udgl.graph(([0, 1, 2], [1, 2, 0]))     # walks fixed; a walk stops after its first traversal w.p. 0.3
    sub = sampling.RandomWalkNeighborSampler(triangle, 2, 0.3, 1, 5)(torch.zeros(REPEATS, dtype=torch.long))
    went_on = int((sub.edges()[0] == 2).sum())
    assert int((sub.edges()[0] == 1).sum()) == REPEATS
    assert abs(went_on / REPEATS - 0.7) < 6 * math.sqrt(0.21 / REPEATS)


def test_sampler_errors():
    g, hg = _ngraph(), _hetero_sampling(udgl)
    g.edata["ints"] = torch.ones(9, dtype=torch.int64)
    g.edata["nan"] = torch.full((9,), float("nan"))
    block = udgl.to_block(g, torch.tensor([0, 1]))
    from unigraph.dgl.neighbor_sampling import sort_csc_by_tag
    bad = [
        (DGLError, "fanout", lambda: sampling.sample_neighbors(g, [0], -2)),
        (DGLError, "fanout", lambda: sampling.sample_neighbors(g, [0], 1.5)),
        (DGLError, "each edge type", lambda: sampling.sample_neighbors(hg, {"user": [0]}, {"follow": 1})),
        (DGLError, "node type", lambda: sampling.sample_neighbors(hg, [0], 1)),
        (ValueError, "empty dictionary", lambda: sampling.sample_neighbors(hg, {}, 1)),
        (DGLError, "edge_dir", lambda: sampling.sample_neighbors(g, [0], 1, edge_dir="both")),
        (DGLError, "any relation", lambda: sampling.sample_neighbors(g, [0], 1, prob="missing")),
        (DGLError, "int8", lambda: sampling.sample_neighbors(g, [0], 1, prob="ints")),
        (DGLError, "finite", lambda: sampling.sample_neighbors(g, [0], 1, prob="nan")),
        (DGLError, "outside", lambda: sampling.sample_neighbors(g, [4], 1)),
        (DGLError, "block", lambda: sampling.sample_neighbors(block, [0], 1)),
        (DGLError, "etype", lambda: sampling.sample_neighbors(hg, {"user": [0]}, 1, exclude_edges=[0])),
        (DGLError, "mapping", lambda: sampling.sample_neighbors_fused(g, [0], 1, mapping={})),
        (DGLError, "do not exist", lambda: sampling.select_topk(hg, 1, "p", {"user": [0]})),
        (DGLError, "tag_type", lambda: sort_csc_by_tag(g, torch.zeros(4, dtype=torch.long), tag_type="x")),
        (DGLError, "entries", lambda: sort_csc_by_tag(g, torch.zeros(3, dtype=torch.long))),
        (DGLError, "sort_csc_by_tag", lambda: sampling.sample_neighbors_biased(g, [0], 1, torch.ones(2))),
        (DGLError, "one bias per tag", lambda: sampling.sample_neighbors_biased(
            sort_csc_by_tag(g, torch.tensor([0, 1, 0, 1])), [0], 1, torch.ones(3))),
        (DGLError, "etype_offset", lambda: sampling.sample_etype_neighbors(g, [0], [0, 4], torch.tensor([1]))),
        (DGLError, "fanout", lambda: sampling.sample_etype_neighbors(g, [0], [0, 4, 9], torch.tensor([1]))),
        (DGLError, "num_samples", lambda: sampling.global_uniform_negative_sampling(g, -1)),
        (ValueError, "Metapath", lambda: sampling.RandomWalkNeighborSampler(hg, 2, 0.5, 2, 2)),
        (ValueError, "start and end", lambda: sampling.RandomWalkNeighborSampler(hg, 2, 0.5, 2, 2, ["play"])),
        (ValueError, "termination_prob", lambda: sampling.RandomWalkNeighborSampler(g, 2, 1.0, 2, 2)),
        (DGLError, "PinSAGESampler", lambda: sampling.PinSAGESampler(hg, "user", "coin", 2, 0.5, 2, 2)),
    ]
    for error, match, call in bad:
        with pytest.raises(error, match=match):
            call()
